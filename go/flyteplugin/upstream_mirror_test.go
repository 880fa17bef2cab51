package flyteplugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/logs"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s"
	k8sConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s/config"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// The rest of flyteplugins v1.16.8's pytorch_test.go (upstream_test.go and
// plugin_test.go have the TaskTemplates and TestGetTaskPhase's conditions):
// its fixtures and configurations, each test's assertions on our plugin, and
// our output beside flyteplugins' plugin's on the same input.

// gpuOnly is the resource override of upstream's image and extended-resource
// fixtures: a limit of one nvidia.com/gpu and nothing else (lines 432-436, 522-526).
var gpuOnly = &corev1.ResourceRequirements{
	Limits: corev1.ResourceList{flytek8s.ResourceNvidiaGPU: resource.MustParse("1")},
}

// legacyCustoms are the two task customs upstream's image and extended-resource
// tests render: 100 workers, and 2 elastic workers (lines 453-464, 608-620).
var legacyCustoms = []struct{ name, custom string }{
	{"pytorch", `{"workers":100}`},
	{"elastic pytorch", elasticV0},
}

// kubeflowShapes are upstream's two spellings of a kubeflow-shape replica spec:
// the deprecated fields, and common.
var kubeflowShapes = []struct {
	name   string
	common bool
}{{"deprecated fields", false}, {"common", true}}

// bothBuilt is a task's job from our plugin (in mode) and from flyteplugins'
// plugin, each with a fresh context from newCtx.
func bothBuilt(t *testing.T, mode elasticidl.RenderMode, newCtx func() pluginsCore.TaskExecutionContext) (ours, theirs *kubeflowv1.PyTorchJob) {
	t.Helper()
	res, err := upstreamPlugin(t).BuildResource(context.Background(), newCtx())
	if err != nil {
		t.Fatalf("flyteplugins' plugin: %v", err)
	}
	theirs = res.(*kubeflowv1.PyTorchJob)
	res, err = Plugin{Options: kubeflow.Options{Mode: mode}}.BuildResource(context.Background(), newCtx())
	if err != nil {
		t.Fatalf("ours (mode %q): %v", mode, err)
	}
	return res.(*kubeflowv1.PyTorchJob), theirs
}

// samePods fails t unless every replica of ours has flyteplugins' pod template
// (but for our containerPort) and the two jobs have the same replica types.
func samePods(t *testing.T, ours, theirs *kubeflowv1.PyTorchJob) {
	t.Helper()
	if len(ours.Spec.PyTorchReplicaSpecs) != len(theirs.Spec.PyTorchReplicaSpecs) {
		t.Fatalf("replica types: ours %d, upstream %d", len(ours.Spec.PyTorchReplicaSpecs), len(theirs.Spec.PyTorchReplicaSpecs))
	}
	for rt, r := range ours.Spec.PyTorchReplicaSpecs {
		u, ok := theirs.Spec.PyTorchReplicaSpecs[rt]
		if !ok {
			t.Fatalf("ours has a %s, upstream has none", rt)
		}
		if !equality.Semantic.DeepEqual(withoutOurPort(&r.Template), &u.Template) {
			t.Errorf("%s pod template is not flyteplugins':\nours %+v\nupstream %+v", rt, r.Template, u.Template)
		}
	}
}

// sameJob fails t unless ours is flyteplugins' job: the same pods and every
// job-level field equal (the upstream mode).
func sameJob(t *testing.T, ours, theirs *kubeflowv1.PyTorchJob) {
	t.Helper()
	samePods(t, ours, theirs)
	if diff := jobLevelDiff(ours, theirs); len(diff) > 0 {
		t.Errorf("job-level fields that differ from flyteplugins': %v", diff)
	}
}

// TestBuildResourcePytorchContainerImage (lines 424-490): under an empty k8s
// plugin configuration and a GPU-only resource override, every replica's image
// is the node's image override when there is one, the task's otherwise.
func TestUpstreamBuildResourcePytorchContainerImage(t *testing.T) {
	withK8sConfig(t, &k8sConfig.K8sPluginConfig{})
	for _, c := range legacyCustoms {
		for _, f := range []struct{ name, override string }{
			{"without overrides", ""}, {"with overrides", "container-image-override"},
		} {
			t.Run(c.name+" "+f.name, func(t *testing.T) {
				tmpl := taskTemplate(t, "job", 0, c.custom)
				ours, theirs := bothBuilt(t, "", func() pluginsCore.TaskExecutionContext {
					return fixtureContext(tmpl, gpuOnly, nil, f.override, k8s.PluginState{})
				})
				want := fixtureImage
				if f.override != "" {
					want = f.override
				}
				if len(ours.Spec.PyTorchReplicaSpecs) == 0 {
					t.Fatal("no replicas")
				}
				for rt, r := range ours.Spec.PyTorchReplicaSpecs {
					if got := r.Template.Spec.Containers[0].Image; got != want {
						t.Errorf("%s image %q, want %q", rt, got, want)
					}
					if got := r.Template.Spec.Containers[0].Resources.Limits[flytek8s.ResourceNvidiaGPU]; got.Cmp(resource.MustParse("1")) != 0 {
						t.Errorf("%s GPU limit %v, want the override's 1", rt, got)
					}
				}
				sameJob(t, ours, theirs)
			})
		}
	}
}

// TestBuildResourcePytorchExtendedResources (lines 492-646): under upstream's
// GPU node label, partition-size label and extended-resource toleration, the
// task's accelerator (or the node's override of it) becomes each replica's
// required node affinity and tolerations. The pods are the same in both modes.
func TestUpstreamBuildResourcePytorchExtendedResources(t *testing.T) {
	withK8sConfig(t, &k8sConfig.K8sPluginConfig{
		GpuDeviceNodeLabel:                 "gpu-node-label",
		GpuPartitionSizeNodeLabel:          "gpu-partition-size",
		GpuResourceName:                    flytek8s.ResourceNvidiaGPU,
		AddTolerationsForExtendedResources: []string{"nvidia.com/gpu"},
	})
	in := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	equal := func(key, value string) corev1.Toleration {
		return corev1.Toleration{Key: key, Value: value, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}
	}
	gpuExists := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	t4 := &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-tesla-t4"}}
	a100 := &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{
		Device: "nvidia-tesla-a100", PartitionSizeValue: &core.GPUAccelerator_PartitionSize{PartitionSize: "1g.5gb"},
	}}
	fixtures := []struct {
		name            string
		base, override  *core.ExtendedResources
		wantMatch       []corev1.NodeSelectorRequirement
		wantTolerations []corev1.Toleration
	}{
		{
			name: "without overrides", base: t4,
			wantMatch:       []corev1.NodeSelectorRequirement{in("gpu-node-label", "nvidia-tesla-t4")},
			wantTolerations: []corev1.Toleration{equal("gpu-node-label", "nvidia-tesla-t4"), gpuExists},
		},
		{
			name: "with overrides", base: t4, override: a100,
			wantMatch: []corev1.NodeSelectorRequirement{
				in("gpu-node-label", "nvidia-tesla-a100"), in("gpu-partition-size", "1g.5gb"),
			},
			wantTolerations: []corev1.Toleration{
				equal("gpu-node-label", "nvidia-tesla-a100"), equal("gpu-partition-size", "1g.5gb"), gpuExists,
			},
		},
	}
	for _, mode := range []elasticidl.RenderMode{"", elasticidl.ModeStrict} {
		for _, c := range legacyCustoms {
			for _, f := range fixtures {
				t.Run(fmt.Sprintf("mode %q/%s %s", mode, c.name, f.name), func(t *testing.T) {
					tmpl := taskTemplate(t, "job", 0, c.custom)
					tmpl.ExtendedResources = f.base
					ours, theirs := bothBuilt(t, mode, func() pluginsCore.TaskExecutionContext {
						return fixtureContext(tmpl, gpuOnly, f.override, "", k8s.PluginState{})
					})
					want := []corev1.NodeSelectorTerm{{MatchExpressions: f.wantMatch}}
					for rt, r := range ours.Spec.PyTorchReplicaSpecs {
						spec := r.Template.Spec
						if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
							spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
							t.Fatalf("%s: no required node affinity: %+v", rt, spec.Affinity)
						}
						if got := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; !equality.Semantic.DeepEqual(got, want) {
							t.Errorf("%s node selector terms %+v, want %+v", rt, got, want)
						}
						if !equality.Semantic.DeepEqual(spec.Tolerations, f.wantTolerations) {
							t.Errorf("%s tolerations %+v, want %+v", rt, spec.Tolerations, f.wantTolerations)
						}
					}
					if mode == "" {
						sameJob(t, ours, theirs)
					} else {
						samePods(t, ours, theirs)
					}
				})
			}
		}
	}
}

// TestBuildResourcePytorchV1ResourceTolerations (lines 1124-1219) with its k8s
// plugin configuration (a toleration for the nvidia.com/gpu resource): the
// Worker, which requests a GPU, tolerates it; the Master, which does not, does
// not. The upstream mode only: the strict mode refuses the Master spec without
// replicas (TestUpstreamTaskTemplates).
func TestUpstreamBuildResourcePytorchV1ResourceTolerations(t *testing.T) {
	gpuToleration := corev1.Toleration{
		Key: "nvidia.com/gpu", Value: "present", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule,
	}
	withK8sConfig(t, &k8sConfig.K8sPluginConfig{
		GpuResourceName:     flytek8s.ResourceNvidiaGPU,
		ResourceTolerations: map[corev1.ResourceName][]corev1.Toleration{flytek8s.ResourceNvidiaGPU: {gpuToleration}},
	})
	for _, shape := range kubeflowShapes {
		t.Run(shape.name, func(t *testing.T) {
			tmpl := taskTemplate(t, "job4", 1, `{"masterReplicas":`+replica(shape.common, `"resources":`+masterResources)+
				`,"workerReplicas":`+replica(shape.common, `"replicas":100,"resources":`+workerGPUResources)+`}`)
			ours, theirs := bothBuilt(t, "", func() pluginsCore.TaskExecutionContext { return taskContext(tmpl) })
			master := ours.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec.Tolerations
			worker := ours.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.Spec.Tolerations
			if hasToleration(master, gpuToleration.Key, gpuToleration.Value) {
				t.Errorf("Master tolerations %+v: the GPU toleration on a pod without a GPU", master)
			}
			if !hasToleration(worker, gpuToleration.Key, gpuToleration.Value) {
				t.Errorf("Worker tolerations %+v: no GPU toleration", worker)
			}
			sameJob(t, ours, theirs)
		})
	}
}

// TestBuildResourcePytorchV1 (lines 841-983), with the distributed error
// aggregation it enables: the Master's image and resources are its override's,
// the Worker's the task's image and its override's resources, the restart
// policies Always and Never, no run policy, no elastic policy, and the Worker's
// container ends with the worker-name and error-strategy env. Without the
// aggregation the Worker's env ends with the worker name alone.
func TestUpstreamBuildResourcePytorchV1(t *testing.T) {
	workerName := corev1.EnvVar{
		Name:      flytek8s.FlyteInternalWorkerNameEnvVarKey,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
	}
	earliest := corev1.EnvVar{Name: flytek8s.FlyteInternalDistErrorStrategyEnvVarKey, Value: "Earliest"}
	masterWant := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("250Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("500Mi")},
	}
	workerWant := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1024m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2048m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	for _, aggregation := range []bool{true, false} {
		cfg := *k8sConfig.GetK8sPluginConfig()
		cfg.EnableDistributedErrorAggregation = aggregation
		wantTail := []corev1.EnvVar{workerName}
		if aggregation {
			wantTail = append(wantTail, earliest)
		}
		for _, shape := range kubeflowShapes {
			t.Run(fmt.Sprintf("aggregation %v/%s", aggregation, shape.name), func(t *testing.T) {
				withK8sConfig(t, &cfg)
				tmpl := taskTemplate(t, "job4", 1, `{"masterReplicas":`+replica(shape.common, `"image":"`+fixtureImageMaster+
					`","resources":`+masterResources+`,"restartPolicy":"RESTART_POLICY_ALWAYS"`)+
					`,"workerReplicas":`+replica(shape.common, `"replicas":100,"resources":`+workerResources)+`}`)
				ours, theirs := bothBuilt(t, "", func() pluginsCore.TaskExecutionContext { return taskContext(tmpl) })
				m := ours.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]
				w := ours.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
				if m == nil || w == nil {
					t.Fatalf("replicas %v, want a Master and a Worker", ours.Spec.PyTorchReplicaSpecs)
				}
				if *w.Replicas != 100 || *m.Replicas != 1 {
					t.Errorf("replicas: Master %d, Worker %d; want 1, 100", *m.Replicas, *w.Replicas)
				}
				mc, wc := m.Template.Spec.Containers[0], w.Template.Spec.Containers[0]
				if mc.Image != fixtureImageMaster || wc.Image != fixtureImage {
					t.Errorf("images: Master %q, Worker %q", mc.Image, wc.Image)
				}
				if !equality.Semantic.DeepEqual(mc.Resources, masterWant) || !equality.Semantic.DeepEqual(wc.Resources, workerWant) {
					t.Errorf("resources: Master %+v, Worker %+v", mc.Resources, wc.Resources)
				}
				if m.RestartPolicy != kubeflowv1.RestartPolicyAlways || w.RestartPolicy != kubeflowv1.RestartPolicyNever {
					t.Errorf("restart policies: Master %s, Worker %s; want Always, Never", m.RestartPolicy, w.RestartPolicy)
				}
				rp := ours.Spec.RunPolicy
				if rp.CleanPodPolicy != nil || rp.BackoffLimit != nil || rp.TTLSecondsAfterFinished != nil ||
					rp.ActiveDeadlineSeconds != nil || ours.Spec.ElasticPolicy != nil {
					t.Errorf("run policy %+v, elastic policy %+v; want neither set", rp, ours.Spec.ElasticPolicy)
				}
				if len(wc.Env) < len(wantTail) || !equality.Semantic.DeepEqual(wc.Env[len(wc.Env)-len(wantTail):], wantTail) {
					t.Errorf("Worker env %+v, want it to end with %+v", wc.Env, wantTail)
				}
				if !aggregation && hasEnv(wc.Env, earliest.Name) {
					t.Errorf("Worker env %+v: %s without the aggregation", wc.Env, earliest.Name)
				}
				if hasEnv(mc.Env, workerName.Name) || hasEnv(mc.Env, earliest.Name) {
					t.Errorf("Master env %+v: a Worker's env", mc.Env)
				}
				sameJob(t, ours, theirs)
			})
		}
	}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// TestGetProperties (lines 786-798): no aggregation strategy by default, the
// earliest error when the k8s plugin configuration enables distributed error
// aggregation; as flyteplugins' plugin answers.
func TestUpstreamGetProperties(t *testing.T) {
	upstream := upstreamPlugin(t)
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("EnableDistributedErrorAggregation %v", enabled), func(t *testing.T) {
			cfg := *k8sConfig.GetK8sPluginConfig()
			cfg.EnableDistributedErrorAggregation = enabled
			withK8sConfig(t, &cfg)
			want := k8s.PluginProperties{}
			if enabled {
				want.ErrorAggregationStrategy = k8s.EarliestErrorAggregationStrategy
			}
			if got := (Plugin{}).GetProperties(); got != want {
				t.Errorf("GetProperties %+v, want %+v", got, want)
			}
			if got := upstream.GetProperties(); got != want {
				t.Errorf("flyteplugins' GetProperties %+v, want %+v (the fixture is wrong)", got, want)
			}
		})
	}
}

// conditionAt is a true job condition of typ, updated and transitioned at.
func conditionAt(typ kubeflowv1.JobConditionType, reason, message string, at time.Time) kubeflowv1.JobCondition {
	return kubeflowv1.JobCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastUpdateTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at),
	}
}

// upstreamConditions are the job conditions of dummyPytorchJobResource (lines
// 199-320) for its last condition typ: the operator's reasons and messages, a
// minute apart, a Running condition turned false once the job ended.
func upstreamConditions(typ kubeflowv1.JobConditionType, now time.Time) []kubeflowv1.JobCondition {
	created := conditionAt(kubeflowv1.JobCreated, "PyTorchJobCreated", "PyTorchJob the-job is created.", now)
	running := conditionAt(kubeflowv1.JobRunning, "PyTorchJobRunning", "PyTorchJob the-job is running.", now.Add(time.Minute))
	ranOut := *running.DeepCopy()
	ranOut.Status = corev1.ConditionFalse
	succeeded := conditionAt(kubeflowv1.JobSucceeded, "PyTorchJobSucceeded", "PyTorchJob the-job is successfully completed.", now.Add(2*time.Minute))
	failed := conditionAt(kubeflowv1.JobFailed, "PyTorchJobFailed", "PyTorchJob the-job is failed.", now.Add(2*time.Minute))
	restarting := conditionAt(kubeflowv1.JobRestarting, "PyTorchJobRestarting",
		"PyTorchJob the-job is restarting because some replica(s) failed.", now.Add(3*time.Minute))
	suspended := conditionAt(kubeflowv1.JobSuspended, "PyTorchJobSuspended", "PyTorchJob the-job is suspended.", now.Add(time.Minute))
	return map[kubeflowv1.JobConditionType][]kubeflowv1.JobCondition{
		kubeflowv1.JobCreated:    {created},
		kubeflowv1.JobRunning:    {created, running},
		kubeflowv1.JobSucceeded:  {created, ranOut, succeeded},
		kubeflowv1.JobFailed:     {created, ranOut, failed},
		kubeflowv1.JobRestarting: {created, ranOut, failed, restarting},
		kubeflowv1.JobSuspended:  {created, suspended},
	}[typ]
}

// fixtureJob is the job our plugin builds for a task, as the operator would
// show it in its condition typ: dummyPytorchJobResource's name, namespace,
// creation now and no start time yet.
func fixtureJob(t *testing.T, version int32, custom string, typ kubeflowv1.JobConditionType) *kubeflowv1.PyTorchJob {
	t.Helper()
	res, err := build(t, Plugin{}, taskTemplate(t, "job1", version, custom))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Name: fixtureJobName, Namespace: fixtureJobNamespace, CreationTimestamp: metav1.NewTime(now)},
		Spec:       res.(*kubeflowv1.PyTorchJob).Spec,
		Status:     kubeflowv1.JobStatus{Conditions: upstreamConditions(typ, now)},
	}
}

// bothPhases is GetTaskPhase of our plugin and of flyteplugins' on one job and
// context; it fails t unless they answer alike (phase, version, reason, error,
// the log links).
func bothPhases(t *testing.T, pctx k8s.PluginContext, job *kubeflowv1.PyTorchJob) (pluginsCore.PhaseInfo, error) {
	t.Helper()
	ours, oursErr := Plugin{}.GetTaskPhase(context.Background(), pctx, job)
	theirs, theirsErr := upstreamPlugin(t).GetTaskPhase(context.Background(), pctx, job)
	if fmt.Sprint(oursErr) != fmt.Sprint(theirsErr) {
		t.Errorf("error: ours %v, upstream %v", oursErr, theirsErr)
	}
	if ours.Phase() != theirs.Phase() || ours.Version() != theirs.Version() || ours.Reason() != theirs.Reason() {
		t.Errorf("ours %v v%d %q, upstream %v v%d %q", ours.Phase(), ours.Version(), ours.Reason(),
			theirs.Phase(), theirs.Version(), theirs.Reason())
	}
	if (ours.Info() == nil) != (theirs.Info() == nil) {
		t.Fatalf("task info: ours %+v, upstream %+v", ours.Info(), theirs.Info())
	}
	if ours.Info() != nil {
		a, b := ours.Info().Logs, theirs.Info().Logs
		same := len(a) == len(b)
		for i := 0; same && i < len(a); i++ {
			same = proto.Equal(a[i], b[i])
		}
		if !same {
			t.Errorf("log links: ours %v, upstream %v", a, b)
		}
	}
	return ours, oursErr
}

// TestGetTaskPhase (lines 648-726) on upstream's job fixture: the phase of each
// condition, a suspended job resumed, and the operator's timeout: a job the
// operator has not started an hour after its creation is an error, unless the
// job is suspended (then it is queued).
func TestUpstreamGetTaskPhase(t *testing.T) {
	tmpl := taskTemplate(t, "", 0, `{"workers":2}`)
	pctx := taskContext(tmpl).(k8s.PluginContext)
	for _, tc := range []struct {
		typ    kubeflowv1.JobConditionType
		want   pluginsCore.Phase
		reason string
	}{
		{kubeflowv1.JobCreated, pluginsCore.PhaseQueued, ""},
		{kubeflowv1.JobRunning, pluginsCore.PhaseRunning, ""},
		{kubeflowv1.JobSucceeded, pluginsCore.PhaseSuccess, ""},
		{kubeflowv1.JobFailed, pluginsCore.PhaseRetryableFailure, ""},
		{kubeflowv1.JobRestarting, pluginsCore.PhaseRunning, ""},
		{kubeflowv1.JobSuspended, pluginsCore.PhaseQueued, "Suspended"},
	} {
		t.Run(string(tc.typ), func(t *testing.T) {
			phase, err := bothPhases(t, pctx, fixtureJob(t, 0, `{"workers":2}`, tc.typ))
			if err != nil {
				t.Fatal(err)
			}
			if phase.Phase() != tc.want || phase.Info() == nil {
				t.Errorf("phase %v, info %+v; want %v with info", phase.Phase(), phase.Info(), tc.want)
			}
			if tc.reason != "" && phase.Reason() != tc.reason {
				t.Errorf("reason %q, want %q", phase.Reason(), tc.reason)
			}
		})
	}
	t.Run("resumed after suspension", func(t *testing.T) {
		job := fixtureJob(t, 0, `{"workers":2}`, kubeflowv1.JobSuspended)
		resumed := conditionAt(kubeflowv1.JobRunning, "PyTorchJobRunning", "PyTorchJob the-job is running.", time.Now().Add(time.Minute))
		resumed.LastUpdateTime = metav1.Time{}
		job.Status.Conditions = append(job.Status.Conditions, resumed)
		phase, err := bothPhases(t, pctx, job)
		if err != nil || phase.Phase() != pluginsCore.PhaseRunning || phase.Info() == nil {
			t.Errorf("phase %v, info %+v, error %v; want running with info", phase.Phase(), phase.Info(), err)
		}
	})
	anHourOld := func(suspend bool) *kubeflowv1.PyTorchJob {
		job := fixtureJob(t, 0, `{"workers":2}`, kubeflowv1.JobCreated)
		job.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
		job.Status.StartTime = nil
		if suspend {
			job.Spec.RunPolicy.Suspend = &suspend
		}
		return job
	}
	t.Run("not started by the operator", func(t *testing.T) {
		phase, err := bothPhases(t, pctx, anHourOld(false))
		if err == nil || !strings.Contains(err.Error(), "kubeflow operator hasn't updated") {
			t.Errorf("error %v; want the operator's timeout", err)
		}
		if phase.Phase() != pluginsCore.PhaseUndefined || phase.Info() != nil {
			t.Errorf("phase %v, info %+v; want PhaseInfoUndefined", phase.Phase(), phase.Info())
		}
	})
	t.Run("not started because suspended", func(t *testing.T) {
		phase, err := bothPhases(t, pctx, anHourOld(true))
		if err != nil || phase.Phase() != pluginsCore.PhaseQueued {
			t.Errorf("phase %v, error %v; want queued", phase.Phase(), err)
		}
	})
}

// TestGetTaskPhaseIncreasePhaseVersion (lines 728-743): propeller last recorded
// the queued phase with another reason at the default version; a job still
// just created is reported one version up.
func TestUpstreamGetTaskPhaseIncreasePhaseVersion(t *testing.T) {
	state := k8s.PluginState{
		Phase: pluginsCore.PhaseQueued, PhaseVersion: pluginsCore.DefaultPhaseVersion, Reason: "task submitted to K8s",
	}
	tmpl := taskTemplate(t, "", 0, `{"workers":2}`)
	pctx := fixtureContext(tmpl, fixtureResources, nil, "", state).(k8s.PluginContext)
	phase, err := bothPhases(t, pctx, fixtureJob(t, 0, `{"workers":4}`, kubeflowv1.JobCreated))
	if err != nil {
		t.Fatal(err)
	}
	if phase.Phase() != pluginsCore.PhaseQueued || phase.Version() != pluginsCore.DefaultPhaseVersion+1 {
		t.Errorf("phase %v v%d, want %v v%d", phase.Phase(), phase.Version(), pluginsCore.PhaseQueued, pluginsCore.DefaultPhaseVersion+1)
	}
	// Unchanged when propeller's record has the same reason.
	state.Reason = phase.Reason()
	pctx = fixtureContext(tmpl, fixtureResources, nil, "", state).(k8s.PluginContext)
	if phase, _ = bothPhases(t, pctx, fixtureJob(t, 0, `{"workers":4}`, kubeflowv1.JobCreated)); phase.Version() != pluginsCore.DefaultPhaseVersion {
		t.Errorf("version %d for the recorded reason, want %d", phase.Version(), pluginsCore.DefaultPhaseVersion)
	}
}

// withKubernetesLogs runs the rest of the test with upstream's log
// configuration of TestGetLogs: Kubernetes dashboard links at k8s.com.
func withKubernetesLogs(t *testing.T) {
	t.Helper()
	old := *logs.GetLogConfig()
	//lint:ignore SA1019 upstream's test configures the deprecated KubernetesURL; the links are the same
	if err := logs.SetLogConfig(&logs.LogConfig{IsKubernetesEnabled: true, KubernetesURL: "k8s.com"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := logs.SetLogConfig(&old); err != nil {
			t.Error(err)
		}
	})
}

// podLogURI is the Kubernetes dashboard link of a pod of the fixture's job.
func podLogURI(pod string) string {
	return fmt.Sprintf("k8s.com/#!/log/%s/%s-%s/pod?namespace=%s", fixtureJobNamespace, fixtureJobName, pod, fixtureJobNamespace)
}

func logURIs(info *pluginsCore.TaskInfo) []string {
	if info == nil {
		return nil
	}
	var out []string
	for _, l := range info.Logs {
		out = append(out, l.GetUri())
	}
	return out
}

// TestGetLogs (lines 745-764), through GetTaskPhase (upstream's test calls
// common.GetLogs itself): a running job with a Master and 2 Workers links the
// three pods' logs, the Master's first.
func TestUpstreamGetLogs(t *testing.T) {
	withKubernetesLogs(t)
	tmpl := taskTemplate(t, "", 0, `{"workers":2}`)
	phase, err := bothPhases(t, taskContext(tmpl).(k8s.PluginContext), fixtureJob(t, 0, `{"workers":2}`, kubeflowv1.JobRunning))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{podLogURI("master-0"), podLogURI("worker-0"), podLogURI("worker-1")}
	if got := logURIs(phase.Info()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("log links %v, want %v", got, want)
	}
}

// TestGetLogsElastic (lines 766-784), through GetTaskPhase on the elastic jobs
// our plugin builds (upstream's test passes hasMaster false to common.GetLogs):
// an elastic job has no Master, and links its 2 Workers' logs only.
func TestUpstreamGetLogsElastic(t *testing.T) {
	withKubernetesLogs(t)
	for _, tc := range []struct {
		name    string
		version int32
		custom  string
	}{
		{"v0", 0, elasticV0},
		{"v1", 1, `{"workerReplicas":{"replicas":2},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := taskTemplate(t, "", tc.version, tc.custom)
			job := fixtureJob(t, tc.version, tc.custom, kubeflowv1.JobRunning)
			if _, ok := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]; ok {
				t.Fatal("the elastic job has a Master")
			}
			phase, err := bothPhases(t, taskContext(tmpl).(k8s.PluginContext), job)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{podLogURI("worker-0"), podLogURI("worker-1")}
			if got := logURIs(phase.Info()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("log links %v, want %v", got, want)
			}
		})
	}
}
