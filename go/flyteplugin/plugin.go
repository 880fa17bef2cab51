// Package flyteplugin is a flytepropeller k8s plugin for the task type
// "pytorch" (task_type_version 0 and 1) built on elastic-idl: the pods come from
// flyteplugins' own pod machinery (flytek8s.ToK8sPodSpec through kfoperators'
// common.ToReplicaSpec and common.ToReplicaSpecWithOverrides: pod templates,
// overrides, platform defaults, Flyte's labels, annotations and env), the
// job-level fields from elastic-idl (kubeflow.Apply: elastic policy, nproc per
// node, replica counts, restart and run policy, the rendezvous port), and phase,
// logs and identity from flyteplugins' kfoperators common code.
//
// Importing the package registers the plugin under the id PluginID for the task
// type "pytorch"; a deployment chooses it in propeller's configuration
// (tasks.task-plugins.enabled-plugins and default-for-task-types), instead of
// flyteplugins' own "pytorch" plugin.
package flyteplugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"google.golang.org/protobuf/proto"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	kfplugins "github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/plugins/kubeflow"
	flyteerr "github.com/flyteorg/flyte/flyteplugins/go/tasks/errors"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s"
	k8sConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s/config"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/common"
	"github.com/flyteorg/flyte/flytestdlib/logger"
	"github.com/flyteorg/flyte/flytestdlib/utils"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// PluginID is the id the plugin registers under; flyteplugins' own pytorch
// plugin registers as "pytorch", so both can be compiled into one propeller.
const PluginID = "elastic-idl-pytorch"

// TaskType is the task type the plugin handles (flytekit's PyTorch and Elastic tasks).
const TaskType = common.PytorchTaskType

// Plugin is the k8s.Plugin. The zero value is the plugin that init registers:
// it renders with the options of its section of propeller's configuration
// (Config, under plugins.elastic-idl-pytorch), and refuses a task above the
// section's max-worst-case whatever its Options.
type Plugin struct {
	// Options, when not the zero value, are used instead of the configuration
	// (a program that builds the plugin itself). Their zero values are filled in
	// as the configuration's: an unset Mode is elasticidl.ModeUpstream, and in
	// that mode an unset ElasticWorkerRestartPolicy is elasticidl.RestartPolicyNever
	// (upstream's), so a propeller that swaps this plugin in for flyteplugins'
	// keeps rendering every task it renders today, with the same restart policy
	// (docs/guide/propeller.md). Set elasticidl.ModeStrict to refuse what the
	// strict rules refuse; an unset ElasticWorkerRestartPolicy is then
	// elasticidl.RestartPolicyExitCode, the renderer's default. A set
	// ElasticWorkerRestartPolicy applies in either mode, and a task that sets its
	// Worker's restart policy keeps its own.
	Options kubeflow.Options
}

var _ k8s.Plugin = Plugin{}

// GetProperties asks for the earliest error across pods when the k8s plugin
// configuration enables distributed error aggregation, as flyteplugins' pytorch
// plugin does.
func (Plugin) GetProperties() k8s.PluginProperties {
	if k8sConfig.GetK8sPluginConfig().EnableDistributedErrorAggregation {
		return k8s.PluginProperties{ErrorAggregationStrategy: k8s.EarliestErrorAggregationStrategy}
	}
	return k8s.PluginProperties{}
}

// BuildIdentityResource is an empty PyTorchJob of the operator's kind.
func (Plugin) BuildIdentityResource(context.Context, pluginsCore.TaskExecutionMetadata) (client.Object, error) {
	return &kubeflowv1.PyTorchJob{TypeMeta: typeMeta()}, nil
}

func typeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kubeflowv1.PyTorchJobKind, APIVersion: kubeflowv1.SchemeGroupVersion.String()}
}

// BuildResource builds the PyTorchJob of a task: its custom is decoded and
// validated by elastic-idl (a bad task is a BadTaskSpecification naming the
// field and the rule), the pod templates come from flyteplugins' pod machinery,
// and kubeflow.Apply sets the job-level fields on them.
//
// A task template field that flyteplugins' pod machinery drops (Container
// ports, config and architecture; a security context's run_as and tokens; a
// config key nothing reads; a k8s_pod primary_container_name the config
// contradicts; an accelerator no replica's pods can use; a field unknown to
// this flyteidl) is a BadTaskSpecification naming it in the strict mode, and a
// warning in propeller's log naming it in the upstream mode, which renders what
// flyteplugins renders.
func (p Plugin) BuildResource(ctx context.Context, taskCtx pluginsCore.TaskExecutionContext) (client.Object, error) {
	tmpl, err := taskCtx.TaskReader().Read(ctx)
	if err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "unable to fetch task specification [%v]", err.Error())
	}
	if tmpl == nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "nil task specification")
	}
	task, err := elasticidl.FromStruct(tmpl.GetCustom(), tmpl.GetTaskTypeVersion())
	if err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "invalid task custom: %v", err)
	}
	opts, err := p.effectiveOptions()
	if err != nil {
		return nil, flyteerr.Errorf(flyteerr.RuntimeFailure, "%s configuration: %v", PluginID, err)
	}
	dropped := droppedFields(tmpl)
	if opts.Mode == elasticidl.ModeStrict && len(dropped) > 0 {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "%v", dropped[0])
	}
	fields, err := kubeflow.Fields(task, opts)
	if err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "invalid task custom: %v", err)
	}
	if err := GetConfig().checkWorstCase(task, fields); err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "invalid task custom: %v", err)
	}
	specs, err := p.podTemplates(ctx, taskCtx, task, fields)
	if err != nil {
		return nil, err
	}
	if problem := acceleratorDropped(tmpl, specs); problem != nil {
		if opts.Mode == elasticidl.ModeStrict {
			return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "%v", *problem)
		}
		dropped = append(dropped, *problem)
	}
	for _, w := range warnings(fields, dropped) {
		warnf(ctx, "%s: %s", PluginID, w)
	}
	spec := kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: specs}
	if err := fields.ApplyTo(&spec); err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "%v", err)
	}
	return &kubeflowv1.PyTorchJob{TypeMeta: typeMeta(), Spec: spec}, nil
}

// effectiveOptions are the plugin's Options, or when they are the zero value
// the configuration's, with their zero values filled in: the upstream mode, and
// in it upstream's Never for an elastic Worker whose task leaves its restart
// policy unset. An invalid configuration is an error naming its key.
func (p Plugin) effectiveOptions() (kubeflow.Options, error) {
	opts := p.Options
	if opts == (kubeflow.Options{}) {
		var err error
		if opts, err = GetConfig().Options(); err != nil {
			return opts, err
		}
	}
	if opts.Mode == "" {
		opts.Mode = elasticidl.ModeUpstream
	}
	if opts.Mode == elasticidl.ModeUpstream && opts.ElasticWorkerRestartPolicy == "" {
		opts.ElasticWorkerRestartPolicy = elasticidl.RestartPolicyNever
	}
	return opts, nil
}

// warnings are what a user should hear about a task the plugin renders: each
// field of the custom this version does not know (a newer SDK's) and each task
// resource the render dropped, then each task template field flyteplugins' pod
// machinery drops (the strict mode refuses those).
func warnings(fields *kubeflow.JobFields, dropped []fieldProblem) []string {
	var out []string
	for _, w := range fields.Warnings {
		out = append(out, "task custom field not used: "+w.String())
	}
	for _, problem := range dropped {
		out = append(out, "task template field dropped as flyteplugins drops it (the strict mode refuses it): "+problem.String())
	}
	return out
}

// podTemplates builds one ReplicaSpec per replica type of the job with
// flyteplugins' pod machinery: the task's container for the legacy shape, with
// each replica spec's image, resources and command overrides for the kubeflow
// shape.
func (p Plugin) podTemplates(ctx context.Context, taskCtx pluginsCore.TaskExecutionContext, task *elasticidl.Task,
	fields *kubeflow.JobFields,
) (map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, error) {
	out := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	if task.Legacy() != nil {
		spec, err := common.ToReplicaSpec(ctx, taskCtx, kubeflowv1.PyTorchJobDefaultContainerName)
		if err != nil {
			return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "unable to create replica spec: [%v]", err.Error())
		}
		for rt := range fields.Replicas {
			out[rt] = spec.DeepCopy()
		}
		return out, nil
	}
	// flyteplugins reads replica overrides from flyteidl's message, which is
	// wire-identical to elastic-idl's for every field it knows.
	b, err := task.Binary()
	if err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "%v", err)
	}
	var kf kfplugins.DistributedPyTorchTrainingTask
	if err := proto.Unmarshal(b, &kf); err != nil {
		return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "task as flyteidl's message: %v", err)
	}
	for rt := range fields.Replicas {
		isMaster := rt == kubeflowv1.PyTorchJobReplicaTypeMaster
		rs := kf.GetWorkerReplicas()
		if isMaster {
			rs = kf.GetMasterReplicas()
		}
		spec, err := common.ToReplicaSpecWithOverrides(ctx, taskCtx, rs, kubeflowv1.PyTorchJobDefaultContainerName, isMaster)
		if err != nil {
			return nil, flyteerr.Errorf(flyteerr.BadTaskSpecification, "unable to create %s replica spec: [%v]", rt, err.Error())
		}
		if !isMaster {
			p.workerEnv(&spec.Template.Spec.Containers[0])
		}
		out[rt] = spec
	}
	return out, nil
}

// workerEnv is the env flyteplugins' pytorch plugin gives a kubeflow-shape
// Worker: the pod's name, and the error aggregation strategy when enabled.
func (p Plugin) workerEnv(c *corev1.Container) {
	c.Env = append(c.Env, corev1.EnvVar{
		Name:      flytek8s.FlyteInternalWorkerNameEnvVarKey,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
	})
	if p.GetProperties().ErrorAggregationStrategy == k8s.EarliestErrorAggregationStrategy {
		c.Env = append(c.Env, corev1.EnvVar{
			Name: flytek8s.FlyteInternalDistErrorStrategyEnvVarKey, Value: k8s.EarliestErrorAggregationStrategy.String(),
		})
	}
}

// GetTaskPhase is the phase of the job from its current condition, with the
// replicas' log links, through flyteplugins' kfoperators common code. It reads
// the job's condition only: a failed pod that the operator recreates (an
// elastic Worker under the ExitCode restart policy: the strict mode's default,
// or the upstream mode's when its options say so) does not fail the task.
func (p Plugin) GetTaskPhase(ctx context.Context, pluginContext k8s.PluginContext, resource client.Object) (pluginsCore.PhaseInfo, error) {
	job, ok := resource.(*kubeflowv1.PyTorchJob)
	if !ok {
		return pluginsCore.PhaseInfoUndefined, fmt.Errorf("expected a *kubeflowv1.PyTorchJob, got %T", resource)
	}
	_, hasMaster := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]
	workers := common.GetReplicaCount(job.Spec.PyTorchReplicaSpecs, kubeflowv1.PyTorchJobReplicaTypeWorker)
	tmpl, err := pluginContext.TaskReader().Read(ctx)
	if err != nil {
		return pluginsCore.PhaseInfoUndefined, err
	}
	logs, err := common.GetLogs(pluginContext, common.PytorchTaskType, job.ObjectMeta, tmpl, hasMaster, *workers, 0, 0, 0,
		kubeflowv1.PyTorchJobDefaultContainerName)
	if err != nil {
		return pluginsCore.PhaseInfoUndefined, err
	}
	suspended := job.Spec.RunPolicy.Suspend != nil && *job.Spec.RunPolicy.Suspend
	if !suspended && job.Status.StartTime == nil &&
		job.CreationTimestamp.Add(common.GetConfig().Timeout.Duration).Before(time.Now()) {
		return pluginsCore.PhaseInfoUndefined, fmt.Errorf(
			"kubeflow operator hasn't updated the pytorch custom resource since creation time %v", job.CreationTimestamp)
	}
	condition, err := common.ExtractCurrentCondition(job.Status.Conditions)
	if err != nil {
		return pluginsCore.PhaseInfoUndefined, err
	}
	now := time.Now()
	status, _ := utils.MarshalObjToStruct(job.Status)
	phase, err := common.GetPhaseInfo(condition, now, pluginsCore.TaskInfo{Logs: logs, OccurredAt: &now, CustomInfo: status})
	if err == nil {
		phase = p.withWarnings(ctx, pluginContext, tmpl, job, phase)
	}
	if verr := k8s.MaybeUpdatePhaseVersionFromPluginContext(&phase, &pluginContext); verr != nil {
		return phase, verr
	}
	return phase, err
}

// withWarnings gives the user the task's warnings (see warnings) in the task
// events flyteadmin shows, until the job runs: while the job is queued they
// follow the phase's reason ("JobCreated; warnings: ..."); the first phase past
// that (the task was never seen queued) carries them as additional reasons,
// timed at the job's creation. Later phases carry none, so each warning reaches
// the user once or twice, not with every event.
func (p Plugin) withWarnings(ctx context.Context, pluginContext k8s.PluginContext, tmpl *core.TaskTemplate,
	job *kubeflowv1.PyTorchJob, phase pluginsCore.PhaseInfo,
) pluginsCore.PhaseInfo {
	prev := k8s.PluginState{}
	if _, err := pluginContext.PluginStateReader().Get(&prev); err != nil || prev.Phase >= pluginsCore.PhaseRunning {
		return phase
	}
	ws, err := p.taskWarnings(tmpl, job)
	if err != nil {
		warnf(ctx, "%s: the task's warnings could not be computed: %v", PluginID, err)
		return phase
	}
	if len(ws) == 0 {
		return phase
	}
	text := "warnings: " + strings.Join(ws, "; ")
	if phase.Phase() == pluginsCore.PhaseQueued {
		return pluginsCore.PhaseInfoQueuedWithTaskInfo(phase.Version(), phase.Reason()+"; "+text, phase.Info())
	}
	if info := phase.Info(); info != nil && !strings.Contains(prev.Reason, text) {
		at := job.CreationTimestamp.Time
		for _, w := range ws {
			info.AdditionalReasons = append(info.AdditionalReasons, pluginsCore.ReasonInfo{Reason: PluginID + ": " + w, OccurredAt: &at})
		}
	}
	return phase
}

// taskWarnings are the warnings of the task as BuildResource rendered it into job.
func (p Plugin) taskWarnings(tmpl *core.TaskTemplate, job *kubeflowv1.PyTorchJob) ([]string, error) {
	opts, err := p.effectiveOptions()
	if err != nil {
		return nil, err
	}
	task, err := elasticidl.FromStruct(tmpl.GetCustom(), tmpl.GetTaskTypeVersion())
	if err != nil {
		return nil, err
	}
	fields, err := kubeflow.Fields(task, opts)
	if err != nil {
		return nil, err
	}
	dropped := droppedFields(tmpl)
	if problem := acceleratorDropped(tmpl, job.Spec.PyTorchReplicaSpecs); problem != nil {
		dropped = append(dropped, *problem)
	}
	return warnings(fields, dropped), nil
}

// warnf logs a warning in propeller's log (a variable: the tests read what it says).
var warnf = logger.Warnf

// Entry is the plugin's registry entry.
func Entry() k8s.PluginEntry {
	return k8s.PluginEntry{
		ID:                  PluginID,
		RegisteredTaskTypes: []pluginsCore.TaskType{TaskType},
		ResourceToWatch:     &kubeflowv1.PyTorchJob{},
		Plugin:              Plugin{},
	}
}

func init() {
	if err := kubeflowv1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	pluginmachinery.PluginRegistry().RegisterK8sPlugin(Entry())
}
