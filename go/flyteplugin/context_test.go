package flyteplugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core/mocks"
	pluginIOMocks "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/io/mocks"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/common"

	// flyteplugins' own pytorch plugin, registered under the id "pytorch": the
	// tests and benchmarks run it beside ours on the same TaskTemplates.
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/pytorch"
)

// The test fixtures of flyteplugins v1.16.8's pytorch plugin tests
// (go/tasks/plugins/k8s/kfoperators/pytorch/pytorch_test.go), rebuilt here:
// that file's package cannot be imported. The values are its constants (lines
// 36-71: the container images, args, env, annotations, labels, the override
// resources, the service account, the job's name and namespace); the
// TaskExecutionContext answers what its dummyPytorchTaskContext (lines 129-197)
// answers, through flyteplugins' exported mocks (fixtureContext takes the same
// four inputs: resources, extended resources, image override, plugin state).

const (
	fixtureImage          = "image://"
	fixtureImageMaster    = "image://master"
	fixtureServiceAccount = "pytorch_sa"
	// The name and namespace of the job dummyPytorchJobResource returns (lines 69-70).
	fixtureJobName      = "the-job"
	fixtureJobNamespace = "pytorch-namespace"
)

var (
	fixtureArgs        = []string{"test-args"}
	fixtureAnnotations = map[string]string{"annotation-key": "annotation-value"}
	fixtureLabels      = map[string]string{"label-key": "label-value"}
	// The task's resource overrides (pytorch_test.go lines 55-67).
	fixtureResources = &corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			"nvidia.com/gpu": resource.MustParse("1"),
		},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
			"nvidia.com/gpu": resource.MustParse("1"),
		},
	}
)

// taskTemplate is a container TaskTemplate whose custom is the given JSON, as
// pytorch_test.go's dummyPytorchTaskTemplate (lines 86-127) builds it from a
// flyteidl message.
func taskTemplate(t testing.TB, name string, version int32, custom string) *core.TaskTemplate {
	t.Helper()
	var s structpb.Struct
	if err := s.UnmarshalJSON([]byte(custom)); err != nil {
		t.Fatalf("custom %s: %v", custom, err)
	}
	return &core.TaskTemplate{
		Id:              &core.Identifier{Name: name},
		Type:            "container",
		TaskTypeVersion: version,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: fixtureImage, Args: fixtureArgs, Env: []*core.KeyValuePair{{Key: "Env_Var", Value: "Env_Val"}},
		}},
		Custom: &s,
	}
}

// executionID is the mocked id of the task execution every context carries.
func executionID() *mocks.TaskExecutionID {
	id := &mocks.TaskExecutionID{}
	id.EXPECT().GetID().Return(core.TaskExecutionIdentifier{NodeExecutionId: &core.NodeExecutionIdentifier{
		ExecutionId: &core.WorkflowExecutionIdentifier{Name: "my_name", Project: "my_project", Domain: "my_domain"},
	}})
	id.EXPECT().GetGeneratedName().Return("some-acceptable-name")
	id.EXPECT().GetUniqueNodeID().Return("an-unique-id")
	return id
}

// mockedContext is a TaskExecutionContext reading tmpl, with fixed input and
// output locations, a zero plugin state and the metadata meta.
func mockedContext(tmpl *core.TaskTemplate, meta *mocks.TaskExecutionMetadata) pluginsCore.TaskExecutionContext {
	return mockedContextWithState(tmpl, meta, k8s.PluginState{})
}

// mockedContextWithState is mockedContext whose plugin state reader reads state
// (propeller's record of the phase it last reported).
func mockedContextWithState(tmpl *core.TaskTemplate, meta *mocks.TaskExecutionMetadata, pluginState k8s.PluginState) pluginsCore.TaskExecutionContext {
	inputs := &pluginIOMocks.InputReader{}
	inputs.EXPECT().GetInputPrefixPath().Return("/input/prefix")
	inputs.EXPECT().GetInputPath().Return("/input")
	inputs.EXPECT().Get(mock.Anything).Return(&core.LiteralMap{}, nil)

	outputs := &pluginIOMocks.OutputWriter{}
	outputs.EXPECT().GetOutputPath().Return("/data/outputs.pb")
	outputs.EXPECT().GetOutputPrefixPath().Return("/data/")
	outputs.EXPECT().GetRawOutputPrefix().Return("")
	outputs.EXPECT().GetCheckpointPrefix().Return("/checkpoint")
	outputs.EXPECT().GetPreviousCheckpointsPrefix().Return("/prev")

	reader := &mocks.TaskReader{}
	reader.EXPECT().Read(mock.Anything).Return(tmpl, nil)

	state := &mocks.PluginStateReader{}
	state.On("Get", mock.Anything).Run(func(args mock.Arguments) {
		if into, ok := args.Get(0).(*k8s.PluginState); ok {
			*into = pluginState
		}
	}).Return(uint8(0), nil)

	ctx := &mocks.TaskExecutionContext{}
	ctx.EXPECT().InputReader().Return(inputs)
	ctx.EXPECT().OutputWriter().Return(outputs)
	ctx.EXPECT().TaskReader().Return(reader)
	ctx.EXPECT().TaskExecutionMetadata().Return(meta)
	ctx.EXPECT().PluginStateReader().Return(state)
	return ctx
}

// taskContext is a mocked TaskExecutionContext for a template, with the
// fixture's resource overrides, no extended resources or image override, and a
// zero plugin state (what most of upstream's tests pass).
func taskContext(tmpl *core.TaskTemplate) pluginsCore.TaskExecutionContext {
	return fixtureContext(tmpl, fixtureResources, nil, "", k8s.PluginState{})
}

// fixtureContext is a mocked TaskExecutionContext for a template whose node
// overrides the resources, the extended resources and the container image, and
// whose plugin state is pluginState.
func fixtureContext(tmpl *core.TaskTemplate, resources *corev1.ResourceRequirements, extended *core.ExtendedResources,
	image string, pluginState k8s.PluginState,
) pluginsCore.TaskExecutionContext {
	id := executionID()

	overrides := &mocks.TaskOverrides{}
	overrides.EXPECT().GetResources().Return(resources)
	overrides.EXPECT().GetExtendedResources().Return(extended)
	overrides.EXPECT().GetContainerImage().Return(image)
	overrides.EXPECT().GetPodTemplate().Return(nil)

	meta := &mocks.TaskExecutionMetadata{}
	meta.EXPECT().GetTaskExecutionID().Return(id)
	meta.EXPECT().GetNamespace().Return("test-namespace")
	meta.EXPECT().GetAnnotations().Return(fixtureAnnotations)
	meta.EXPECT().GetLabels().Return(fixtureLabels)
	meta.EXPECT().GetOwnerReference().Return(metav1.OwnerReference{Kind: "node", Name: "blah"})
	meta.EXPECT().IsInterruptible().Return(true)
	meta.EXPECT().GetOverrides().Return(overrides)
	meta.EXPECT().GetK8sServiceAccount().Return(fixtureServiceAccount)
	meta.EXPECT().GetPlatformResources().Return(&corev1.ResourceRequirements{})
	meta.EXPECT().GetEnvironmentVariables().Return(nil)
	meta.EXPECT().GetConsoleURL().Return("")

	return mockedContextWithState(tmpl, meta, pluginState)
}

// upstreamPlugin is flyteplugins' own pytorch plugin, from the registry its init filled.
func upstreamPlugin(t testing.TB) k8s.Plugin {
	t.Helper()
	for _, e := range pluginmachinery.PluginRegistry().GetK8sPlugins() {
		if e.ID == common.PytorchTaskType {
			return e.Plugin
		}
	}
	t.Fatal("flyteplugins' pytorch plugin is not registered")
	return nil
}

func build(t testing.TB, p k8s.Plugin, tmpl *core.TaskTemplate) (client.Object, error) {
	t.Helper()
	return p.BuildResource(context.Background(), taskContext(tmpl))
}
