package flyteplugin

import (
	"context"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
)

func TestRegisteredUnderItsOwnID(t *testing.T) {
	ids := map[string][]string{}
	for _, e := range pluginmachinery.PluginRegistry().GetK8sPlugins() {
		ids[e.ID] = append(ids[e.ID], e.RegisteredTaskTypes...)
		if e.ID == PluginID {
			if _, ok := e.Plugin.(Plugin); !ok || e.IsDefault {
				t.Errorf("entry %+v: want our Plugin, not the default plugin", e)
			}
			if _, ok := e.ResourceToWatch.(*kubeflowv1.PyTorchJob); !ok {
				t.Errorf("ResourceToWatch %T, want *kubeflowv1.PyTorchJob", e.ResourceToWatch)
			}
		}
	}
	if got := ids[PluginID]; len(got) != 1 || got[0] != "pytorch" {
		t.Fatalf("%s registers task types %v, want [pytorch]", PluginID, got)
	}
	if len(ids["pytorch"]) != 1 {
		t.Fatalf("flyteplugins' own pytorch plugin is registered beside ours: %v", ids)
	}
}

func TestBuildIdentityResource(t *testing.T) {
	res, err := Plugin{}.BuildIdentityResource(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kind := res.GetObjectKind().GroupVersionKind()
	if kind.Kind != "PyTorchJob" || kind.GroupVersion().String() != "kubeflow.org/v1" {
		t.Fatalf("identity %v", kind)
	}
}

func TestBuildResourceRefusesABadTask(t *testing.T) {
	tmpl := taskTemplate(t, "job", 1, `{"elasticConfig":{"minReplicas":3,"maxReplicas":2,"nprocPerNode":1}}`)
	_, err := build(t, Plugin{}, tmpl)
	if err == nil || !strings.Contains(err.Error(), "elastic_config.max_replicas: elastic.min_le_max") {
		t.Fatalf("BuildResource: %v; want the violated rule named", err)
	}
	tmpl = taskTemplate(t, "job", 2, `{"workers":1}`)
	if _, err := build(t, Plugin{}, tmpl); err == nil {
		t.Fatal("task_type_version 2 was accepted")
	}
}

// GetTaskPhase answers as flyteplugins' plugin does for each job condition
// (pytorch_test.go's TestGetTaskPhase, lines 648-726, on the job of its
// dummyPytorchJobResource, lines 199-337).
func TestGetTaskPhaseAsUpstream(t *testing.T) {
	upstream := upstreamPlugin(t)
	tmpl := taskTemplate(t, "job", 0, `{"workers":2}`)
	res, err := build(t, Plugin{}, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	condition := func(typ kubeflowv1.JobConditionType, at int) kubeflowv1.JobCondition {
		ts := metav1.NewTime(start.Add(time.Duration(at) * time.Second))
		return kubeflowv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, LastUpdateTime: ts, LastTransitionTime: ts}
	}
	for _, tc := range []struct {
		conditions []kubeflowv1.JobCondition
		want       pluginsCore.Phase
	}{
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0)}, pluginsCore.PhaseQueued},
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0), condition(kubeflowv1.JobRunning, 1)}, pluginsCore.PhaseRunning},
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0), condition(kubeflowv1.JobSucceeded, 2)}, pluginsCore.PhaseSuccess},
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0), condition(kubeflowv1.JobFailed, 2)}, pluginsCore.PhaseRetryableFailure},
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0), condition(kubeflowv1.JobRestarting, 3)}, pluginsCore.PhaseRunning},
		{[]kubeflowv1.JobCondition{condition(kubeflowv1.JobCreated, 0), condition(kubeflowv1.JobSuspended, 1)}, pluginsCore.PhaseQueued},
	} {
		last := tc.conditions[len(tc.conditions)-1].Type
		t.Run(string(last), func(t *testing.T) {
			job := res.(*kubeflowv1.PyTorchJob).DeepCopy()
			job.ObjectMeta = metav1.ObjectMeta{Name: "the-job", Namespace: "ns", CreationTimestamp: metav1.NewTime(start)}
			job.Status = kubeflowv1.JobStatus{Conditions: tc.conditions, StartTime: &job.ObjectMeta.CreationTimestamp}
			var pctx k8s.PluginContext = taskContext(tmpl).(k8s.PluginContext)
			ours, err := Plugin{}.GetTaskPhase(context.Background(), pctx, job)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := upstream.GetTaskPhase(context.Background(), pctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if ours.Phase() != tc.want || ours.Phase() != theirs.Phase() || ours.Reason() != theirs.Reason() ||
				ours.Version() != theirs.Version() {
				t.Errorf("ours %v %q v%d, upstream %v %q v%d, want %v", ours.Phase(), ours.Reason(), ours.Version(),
					theirs.Phase(), theirs.Reason(), theirs.Version(), tc.want)
			}
		})
	}
	if _, err := (Plugin{}).GetTaskPhase(context.Background(), taskContext(tmpl).(k8s.PluginContext), &corev1.Pod{}); err == nil {
		t.Error("GetTaskPhase accepted a Pod")
	}
}
