package flyteplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	flyteerr "github.com/flyteorg/flyte/flyteplugins/go/tasks/errors"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core/mocks"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s"
	k8sConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s/config"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/utils/secrets"
	stdErrors "github.com/flyteorg/flyte/flytestdlib/errors"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// propellerContext is a TaskExecutionContext for tmpl that answers as propeller
// v1.16.8 does for the template fields these tests are about:
//   - IsInterruptible is the template's metadata.interruptible (a node's flag
//     when the workflow does not override it);
//   - the node's resources are the template container's (propeller's compiler
//     copies them into the node), none for a k8s_pod template;
//   - the annotations and the label are the ones propeller's k8s plugin manager
//     adds for the template's secrets (its newTaskExecutionMetadata, through
//     flyteplugins' own secrets.MarshalSecretsToMapStrings), and nothing else.
func propellerContext(t testing.TB, tmpl *core.TaskTemplate) pluginsCore.TaskExecutionContext {
	t.Helper()
	id := executionID()

	resources := &corev1.ResourceRequirements{}
	if c := tmpl.GetContainer(); c != nil {
		var err error
		if resources, err = flytek8s.ToK8sResourceRequirements(c.GetResources()); err != nil {
			t.Fatalf("container resources: %v", err)
		}
	}
	overrides := &mocks.TaskOverrides{}
	overrides.EXPECT().GetResources().Return(resources)
	overrides.EXPECT().GetExtendedResources().Return(nil)
	overrides.EXPECT().GetContainerImage().Return("")
	overrides.EXPECT().GetPodTemplate().Return(nil)

	annotations, labels := map[string]string{}, map[string]string{}
	if s := tmpl.GetSecurityContext().GetSecrets(); len(s) > 0 {
		var err error
		if annotations, err = secrets.MarshalSecretsToMapStrings(s); err != nil {
			t.Fatalf("secrets: %v", err)
		}
		labels[secrets.PodLabel] = secrets.PodLabelValue
	}

	meta := &mocks.TaskExecutionMetadata{}
	meta.EXPECT().GetTaskExecutionID().Return(id)
	meta.EXPECT().GetNamespace().Return("test-namespace")
	meta.EXPECT().GetAnnotations().Return(annotations)
	meta.EXPECT().GetLabels().Return(labels)
	meta.EXPECT().GetOwnerReference().Return(metav1.OwnerReference{Kind: "node", Name: "blah"})
	meta.EXPECT().IsInterruptible().Return(tmpl.GetMetadata().GetInterruptible())
	meta.EXPECT().GetOverrides().Return(overrides)
	meta.EXPECT().GetK8sServiceAccount().Return("")
	meta.EXPECT().GetSecurityContext().Return(core.SecurityContext{})
	meta.EXPECT().GetPlatformResources().Return(&corev1.ResourceRequirements{})
	meta.EXPECT().GetEnvironmentVariables().Return(nil)
	meta.EXPECT().GetConsoleURL().Return("")

	return mockedContext(tmpl, meta)
}

// withK8sConfig runs the rest of the test under flyteplugins' k8s plugin
// configuration cfg, restoring the one before.
func withK8sConfig(t *testing.T, cfg *k8sConfig.K8sPluginConfig) {
	t.Helper()
	old := *k8sConfig.GetK8sPluginConfig()
	if err := k8sConfig.SetK8sPluginConfig(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8sConfig.SetK8sPluginConfig(&old); err != nil {
			t.Error(err)
		}
	})
}

// droppedCase is a task template with one field flyteplugins' pod machinery drops.
type droppedCase struct {
	field string
	edit  func(*core.TaskTemplate)
}

func droppedCases() []droppedCase {
	return []droppedCase{
		{"container.config", func(t *core.TaskTemplate) {
			//lint:ignore SA1019 a template that still sets the deprecated field
			t.GetContainer().Config = []*core.KeyValuePair{{Key: "k", Value: "v"}}
		}},
		{"container.ports", func(t *core.TaskTemplate) {
			t.GetContainer().Ports = []*core.ContainerPort{{ContainerPort: 8080, Name: "http"}}
		}},
		{"container.architecture", func(t *core.TaskTemplate) { t.GetContainer().Architecture = core.Container_ARM64 }},
		{"config.my_plugin", func(t *core.TaskTemplate) { t.Config = map[string]string{"my_plugin": "x"} }},
		{"security_context.run_as.k8s_service_account", func(t *core.TaskTemplate) {
			t.SecurityContext = &core.SecurityContext{RunAs: &core.Identity{K8SServiceAccount: "trainer"}}
		}},
		{"security_context.run_as.iam_role", func(t *core.TaskTemplate) {
			t.SecurityContext = &core.SecurityContext{RunAs: &core.Identity{IamRole: "arn:aws:iam::1:role/r"}}
		}},
		{"security_context.run_as.oauth2_client", func(t *core.TaskTemplate) {
			t.SecurityContext = &core.SecurityContext{RunAs: &core.Identity{Oauth2Client: &core.OAuth2Client{ClientId: "c"}}}
		}},
		{"security_context.run_as.execution_identity", func(t *core.TaskTemplate) {
			t.SecurityContext = &core.SecurityContext{RunAs: &core.Identity{ExecutionIdentity: "me"}}
		}},
		{"security_context.tokens", func(t *core.TaskTemplate) {
			t.SecurityContext = &core.SecurityContext{Tokens: []*core.OAuth2TokenRequest{{Name: "tok"}}}
		}},
		{"101", func(t *core.TaskTemplate) {
			t.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 101, protowire.VarintType), 1))
		}},
		{"metadata.102", func(t *core.TaskTemplate) {
			t.Metadata = &core.TaskMetadata{}
			t.Metadata.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 102, protowire.VarintType), 1))
		}},
		{"extended_resources.gpu_accelerator", func(t *core.TaskTemplate) {
			t.GetContainer().Resources = &core.Resources{Limits: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "1"}}}
			t.ExtendedResources = &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-tesla-t4"}}
		}},
		{"k8s_pod.primary_container_name", func(t *core.TaskTemplate) {
			spec, err := structpb.NewStruct(map[string]any{"containers": []any{map[string]any{"name": "main", "image": "x"}}})
			if err != nil {
				panic(err)
			}
			t.Target = &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: spec, PrimaryContainerName: "other"}}
			t.Config = map[string]string{"primary_container_name": "main"}
		}},
	}
}

// What flyteplugins' pod machinery drops: the strict mode refuses it naming the
// field; the upstream mode (the plugin's default) renders what flyteplugins
// renders, and says what it dropped in propeller's log.
func TestDroppedTemplateFields(t *testing.T) {
	upstream := upstreamPlugin(t)
	var warned []string
	old := warnf
	warnf = func(_ context.Context, format string, args ...interface{}) {
		warned = append(warned, fmt.Sprintf(format, args...))
	}
	t.Cleanup(func() { warnf = old })
	for _, c := range droppedCases() {
		t.Run(c.field, func(t *testing.T) {
			tmpl := taskTemplate(t, "job", 1, `{"workerReplicas":{"replicas":2}}`)
			c.edit(tmpl)
			if got := droppedFields(tmpl); c.field != "extended_resources.gpu_accelerator" &&
				(len(got) != 1 || got[0].Field != c.field) {
				t.Fatalf("droppedFields %v, want %s alone", got, c.field)
			}
			strict := Plugin{Options: kubeflow.Options{Mode: elasticidl.ModeStrict}}
			_, err := strict.BuildResource(context.Background(), propellerContext(t, tmpl))
			if code, _ := stdErrors.GetErrorCode(err); code != flyteerr.BadTaskSpecification ||
				!strings.Contains(err.Error(), c.field+": ") {
				t.Fatalf("strict: %v; want a BadTaskSpecification naming %s", err, c.field)
			}
			warned = nil
			res, err := Plugin{}.BuildResource(context.Background(), propellerContext(t, tmpl))
			if err != nil {
				t.Fatalf("upstream mode: %v", err)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], c.field+": ") {
				t.Errorf("upstream mode warned %q, want one line naming %s", warned, c.field)
			}
			theirs, err := upstream.BuildResource(context.Background(), propellerContext(t, tmpl))
			if err != nil {
				t.Fatalf("flyteplugins' plugin: %v", err)
			}
			for rt, r := range res.(*kubeflowv1.PyTorchJob).Spec.PyTorchReplicaSpecs {
				u := theirs.(*kubeflowv1.PyTorchJob).Spec.PyTorchReplicaSpecs[rt]
				if !equality.Semantic.DeepEqual(withoutOurPort(&r.Template), &u.Template) {
					t.Errorf("%s pod template is not flyteplugins':\nours %+v\nupstream %+v", rt, r.Template, u.Template)
				}
			}
		})
	}
}

// What flyteplugins carries, or nobody reads for the pods, is no problem: a
// template with the console's config keys, secrets, an accelerator on a GPU
// pod, shared memory and TaskMetadata fields renders in the strict mode, and
// the accelerator reaches the pods.
func TestCarriedTemplateFieldsAreNoProblem(t *testing.T) {
	tmpl := taskTemplate(t, "job", 1, `{"workerReplicas":{"replicas":2}}`)
	tmpl.Config = map[string]string{"link_type": "vscode", "port": "8080"}
	gpu := []*core.Resources_ResourceEntry{{Name: core.Resources_GPU, Value: "1"}}
	tmpl.GetContainer().Resources = &core.Resources{Requests: gpu, Limits: gpu}
	tmpl.ExtendedResources = &core.ExtendedResources{
		GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-tesla-t4"},
		SharedMemory:   &core.SharedMemory{MountName: "shm", MountPath: "/dev/shm"},
	}
	tmpl.SecurityContext = &core.SecurityContext{Secrets: []*core.Secret{{Group: "g", Key: "k"}}}
	tmpl.Metadata = &core.TaskMetadata{
		Retries: &core.RetryStrategy{Retries: 3}, Discoverable: true, Tags: map[string]string{"a": "b"},
		InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true},
	}
	if got := droppedFields(tmpl); len(got) != 0 {
		t.Fatalf("droppedFields %v, want none", got)
	}
	strict := Plugin{Options: kubeflow.Options{Mode: elasticidl.ModeStrict}}
	res, err := strict.BuildResource(context.Background(), propellerContext(t, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	pod := res.(*kubeflowv1.PyTorchJob).Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template
	label := k8sConfig.GetK8sPluginConfig().GpuDeviceNodeLabel
	if !hasToleration(pod.Spec.Tolerations, label, "nvidia-tesla-t4") {
		t.Errorf("tolerations %+v: no toleration of %s=nvidia-tesla-t4", pod.Spec.Tolerations, label)
	}
	if pod.Labels[secrets.PodLabel] != secrets.PodLabelValue || pod.Annotations["flyte.secrets/s0"] == "" {
		t.Errorf("pod metadata %+v: the secrets webhook's label and annotation are missing", pod.ObjectMeta)
	}
}

func hasToleration(tolerations []corev1.Toleration, key, value string) bool {
	for _, tol := range tolerations {
		if tol.Key == key && tol.Value == value {
			return true
		}
	}
	return false
}

// templateJobsDirEnv names a folder of task templates for
// TestTemplateJobsForPython; tests/test_flytekit_template.py fills it.
const templateJobsDirEnv = "ELASTIC_IDL_TEMPLATE_JOBS_DIR"

// TestTemplateJobsForPython builds, for every <case>.pb in $ELASTIC_IDL_TEMPLATE_JOBS_DIR
// (a serialized TaskTemplate, beside <case>.config.json: the keys of propeller's k8s
// plugin configuration to set over flyteplugins' defaults, and <case>.plugin.json: this
// plugin's section, Config), the PyTorchJob this plugin
// builds in propeller (propellerContext) and writes it to <case>.job.json.
// tests/test_flytekit_template.py compares its pods with the Python renderer's for the
// same template. Skipped without the env.
func TestTemplateJobsForPython(t *testing.T) {
	dir := os.Getenv(templateJobsDirEnv)
	if dir == "" {
		t.Skip(templateJobsDirEnv + " is not set")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.pb"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no task templates in %s (%v)", dir, err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pb")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := &core.TaskTemplate{}
			if err := proto.Unmarshal(raw, tmpl); err != nil {
				t.Fatal(err)
			}
			cfg := *k8sConfig.GetK8sPluginConfig()
			if text, err := os.ReadFile(filepath.Join(dir, name+".config.json")); err == nil {
				if err := json.Unmarshal(text, &cfg); err != nil {
					t.Fatalf("config: %v", err)
				}
			}
			withK8sConfig(t, &cfg)
			plugin := Config{}
			if text, err := os.ReadFile(filepath.Join(dir, name+".plugin.json")); err == nil {
				if err := json.Unmarshal(text, &plugin); err != nil {
					t.Fatalf("plugin config: %v", err)
				}
			}
			withConfig(t, &plugin)
			res, err := Plugin{}.BuildResource(context.Background(), propellerContext(t, tmpl))
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name+".job.json"), out, 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}
