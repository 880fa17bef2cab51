package elasticidl

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

func elasticTask(t *testing.T) *Task {
	t.Helper()
	task, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{
		ElasticConfig: &eidlpluginsv1.ElasticConfig{MinReplicas: 1, MaxReplicas: 2, NprocPerNode: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func okOptions() RenderOptions {
	return RenderOptions{Name: "job", Image: "example.com/train:1", Entrypoint: []string{"train.py"}}
}

// RenderError names the option at fault, checked in the reference's order.
func TestRenderOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(o *RenderOptions)
		field string
	}{
		{"no name", func(o *RenderOptions) { o.Name = "" }, "name"},
		{"not DNS-1035", func(o *RenderOptions) { o.Name = "1job" }, "name"},
		{"pod names too long", func(o *RenderOptions) { o.Name = strings.Repeat("j", 55) }, "name"},
		{"namespace", func(o *RenderOptions) { o.Namespace = "Default" }, "namespace"},
		{"image", func(o *RenderOptions) { o.Image = "a b" }, "image"},
		{"nothing to run", func(o *RenderOptions) { o.Entrypoint = nil }, "entrypoint"},
		{"both args and entrypoint", func(o *RenderOptions) { o.Args = []string{"x"} }, "entrypoint"},
		{"both args and pod args", func(o *RenderOptions) { o.Entrypoint, o.Args, o.PodArgs = nil, []string{"x"}, []string{"--module"} }, "pod_args"},
		{"-- as a pod flag", func(o *RenderOptions) { o.PodArgs = []string{"--"} }, "pod_args"},
		{"label key", func(o *RenderOptions) { o.Labels = map[string]string{"-a": "b"} }, "labels.-a"},
		{"label prefix", func(o *RenderOptions) { o.Labels = map[string]string{"A_B/c": "b"} }, "labels.A_B/c"},
		{"empty label key", func(o *RenderOptions) { o.Labels = map[string]string{"": "b"} }, "labels"},
		{"label value", func(o *RenderOptions) { o.Labels = map[string]string{"a": "b c"} }, "labels.a"},
		{"annotation key", func(o *RenderOptions) { o.Annotations = map[string]string{"a b": "anything goes"} }, "annotations.a b"},
		{"first bad label in order", func(o *RenderOptions) { o.Labels = map[string]string{"z": "-", "b": "-"} }, "labels.b"},
		{"quantity", func(o *RenderOptions) { o.Resources = &ResourceRequirements{Limits: map[string]string{"cpu": ""}} }, "resources.limits.cpu"},
		{"reserved env", func(o *RenderOptions) { o.Env = map[string]string{"PET_NNODES": "1"} }, "env.PET_NNODES"},
		{"env name", func(o *RenderOptions) { o.Env = map[string]string{"1X": "1"} }, "env.1X"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := okOptions()
			tc.edit(&o)
			_, err := elasticTask(t).RenderPyTorchJob(o)
			re, ok := err.(*RenderError)
			if !ok {
				t.Fatalf("got %v (%T), want a RenderError", err, err)
			}
			if re.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", re.Field, tc.field, re)
			}
		})
	}
}

func TestRenderChecksTheTaskFirst(t *testing.T) {
	task, _ := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{
		ElasticConfig: &eidlpluginsv1.ElasticConfig{MinReplicas: 3, MaxReplicas: 2, NprocPerNode: 1},
	})
	_, err := task.RenderPyTorchJob(RenderOptions{}) // bad options too: the task's violations come first
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Violations) != 1 || ve.Violations[0].Rule != "elastic.min_le_max" ||
		ve.Violations[0].Field != "elastic_config.max_replicas" {
		t.Fatalf("got %v, want the min_le_max violation", err)
	}
	// What the renderer cannot render is invalid: the empty task, a job without workers.
	task, _ = NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{})
	_, err = task.RenderPyTorchJob(okOptions())
	ve, ok = err.(*ValidationError)
	if !ok || len(ve.Violations) != 2 || ve.Violations[0].Rule != "task.not_empty" ||
		ve.Violations[1].Field != "worker_replicas.replicas" || ve.Violations[1].Rule != "replicas.workers_required" {
		t.Fatalf("the empty task: got %v", err)
	}
}

func TestRenderOptionsFromJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		field string // the RenderError, or "" when reading the options fails
	}{
		{`{"name": "job", "image": "i", "entrypoint": ["t.py"], "namespace": null}`, "namespace"},
		{`{"name": "job", "image": "i", "entrypoint": "t.py"}`, "entrypoint"},
		{`{"name": "job", "image": "i", "entrypoint": ["t.py", 1]}`, "entrypoint[1]"},
		{`{"name": 5, "image": "i"}`, "name"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "resources": {"requests": {"cpu": true}}}`, "resources.requests.cpu"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "resources": {"requests": {"cpu": NaN}}}`, "resources.requests.cpu"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "resources": {"requests": {"cpu": -0.5}}}`, "resources.requests.cpu"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "resources": {"gpus": {}}}`, "resources.gpus"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "labels": {"a": 1}}`, "labels.a"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "env": []}`, "env"},
		{`{"name": "job", "image": "i", "extra": 1}`, "extra"},
		{`{"image": "i"}`, "name"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "labels": {"a": "\ud800"}}`, "labels"},
		{`{"name": "job", "image": "i", "entrypoint": ["\udc00"]}`, "entrypoint"},
		{`{"name": "job", "image": "i\ud800"}`, "image"},
		{`{"name": "job", "image": "i", "entrypoint": ["t"], "env": {"\ud800": "x"}}`, "env"},
		{`[]`, ""},
		{`{"name": `, ""},
	} {
		// Read or rendered, a bad option is a RenderError naming it.
		o, err := RenderOptionsFromJSON([]byte(tc.in))
		if err == nil {
			_, err = elasticTask(t).RenderPyTorchJob(o)
		}
		var re *RenderError
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Errorf("%s: got %v, want a RenderError on %q", tc.in, err, tc.field)
		}
	}
	_, err := RenderOptionsFromJSON([]byte(`{"name": "` + strings.Repeat("a", MaxTaskBytes) + `"}`))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("options larger than MaxTaskBytes: %v", err)
	}
	// A number is written as Python's str() writes it (as Elastic(requests=...) does).
	o, err := RenderOptionsFromJSON([]byte(`{"name": "job", "image": "i", "command": [], ` +
		`"resources": {"limits": {"cpu": 2, "memory": 1e-7}, "requests": {"cpu": 2.0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	job, err := elasticTask(t).RenderPyTorchJob(o)
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.PyTorchReplicaSpecs[ReplicaWorker].Template.Spec.Containers[0]
	if c.Command == nil || len(c.Command) != 0 || c.Args != nil || c.Resources.Limits["cpu"] != "2" ||
		c.Resources.Limits["memory"] != "1e-07" || c.Resources.Requests["cpu"] != "2.0" {
		t.Errorf("container %+v", c)
	}
}

func TestPodEnvErrors(t *testing.T) {
	job, err := elasticTask(t).RenderPyTorchJob(okOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rtype string
		index int
		field string
	}{
		{"Master", 0, "replica_type"},
		{"Worker", 2, "index"},
		{"Worker", -1, "index"},
	} {
		_, err := PodEnv(job, tc.rtype, tc.index)
		if re, ok := err.(*RenderError); !ok || re.Field != tc.field {
			t.Errorf("%s-%d: got %v, want a RenderError on %q", tc.rtype, tc.index, err, tc.field)
		}
	}
	if _, err := PodEnv(&PyTorchJob{}, "Worker", 0); err == nil {
		t.Errorf("a job without replicas has a pod env")
	}
	env, err := PodEnv(job, "Worker", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PYTHONUNBUFFERED": "1", "PET_RDZV_ENDPOINT": "job-worker-0:23456", "PET_RDZV_BACKEND": "c10d",
		"PET_NNODES": "1:2", "PET_MAX_RESTARTS": "0", "PET_NPROC_PER_NODE": "4",
	}
	if len(env) != len(want) {
		t.Errorf("env %v, want %v", env, want)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
}

func TestNprocPerNodeAndReplicaCounts(t *testing.T) {
	for _, tc := range []struct {
		e    *eidlpluginsv1.ElasticConfig
		want string
	}{
		{&eidlpluginsv1.ElasticConfig{NprocPerNode: 8}, "8"},
		{&eidlpluginsv1.ElasticConfig{NprocPolicy: eidlpluginsv1.NprocPolicy_NPROC_POLICY_GPU}, "gpu"},
		{nil, ""},
	} {
		if got := NprocPerNode(tc.e); got != tc.want {
			t.Errorf("NprocPerNode(%v) = %q, want %q", tc.e, got, tc.want)
		}
	}
	if got := elasticTask(t).ReplicaCounts(); len(got) != 1 || got[ReplicaWorker] != 2 {
		t.Errorf("elastic: %v", got)
	}
	task, _ := NewTask(&eidlpluginsv1.DistributedPyTorchTrainingTask{Workers: 3})
	if got := task.ReplicaCounts(); len(got) != 2 || got[ReplicaMaster] != 1 || got[ReplicaWorker] != 3 {
		t.Errorf("legacy, not elastic: %v", got)
	}
	if ElasticPolicyOf(nil) != nil {
		t.Errorf("ElasticPolicyOf(nil) is not nil")
	}
	if _, err := NewTask(nil); err == nil {
		t.Errorf("NewTask(nil) is a task")
	}
}

// The typed timeouts are rendered as whole seconds, the integers torch reads; a
// fraction is a violation (elastic.duration.whole_seconds), so it never renders.
func TestRdzvConfTimeoutsAreWholeSeconds(t *testing.T) {
	e := &eidlpluginsv1.ElasticConfig{MinReplicas: 1, MaxReplicas: 2, NprocPerNode: 1,
		JoinTimeout: &durationpb.Duration{Seconds: 900}, ReadTimeout: &durationpb.Duration{Seconds: 1},
		CloseTimeout: &durationpb.Duration{Seconds: maxDurationS},
		RdzvOptions:  []*eidlpluginsv1.RendezvousOption{{Key: "timeout", Value: "30"}}}
	task, _ := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: e})
	job, err := task.RenderPyTorchJob(okOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range job.Spec.ElasticPolicy.RdzvConf {
		got = append(got, kv.Key+"="+kv.Value)
	}
	if want := "join_timeout=900 close_timeout=315576000000 read_timeout=1 timeout=30"; strings.Join(got, " ") != want {
		t.Errorf("rdzvConf %v, want %s", got, want)
	}
	e.JoinTimeout = &durationpb.Duration{Nanos: 250000000}
	task, _ = NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: e})
	_, err = task.RenderPyTorchJob(okOptions())
	if ve, ok := err.(*ValidationError); !ok || len(ve.Violations) != 1 ||
		ve.Violations[0].Rule != "elastic.duration.whole_seconds" || ve.Violations[0].Field != "elastic_config.join_timeout" {
		t.Errorf("a 0.25 s join_timeout renders: %v", err)
	}
}

// The task's NCCL knobs are the task's: env may not give one the task sets, as in the reference.
func TestEnvMayNotGiveAnNcclVariableTheTaskSets(t *testing.T) {
	task, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{
		ElasticConfig: &eidlpluginsv1.ElasticConfig{
			MinReplicas: 1, MaxReplicas: 2, NprocPerNode: 4,
			NcclHeartbeatTimeout: durationpb.New(300e9), NcclEnableMonitoring: eidlpluginsv1.Toggle_TOGGLE_OFF,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := okOptions()
	o.Env = map[string]string{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "60"}
	_, err = task.RenderPyTorchJob(o)
	re, ok := err.(*RenderError)
	if !ok || re.Field != "env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" || !strings.Contains(re.Error(), "elastic_config.nccl_heartbeat_timeout") {
		t.Fatalf("got %v, want a RenderError for env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC naming the field", err)
	}
	o.Env = map[string]string{"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"} // left unset by the task: the user's
	job, err := task.RenderPyTorchJob(o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range job.Spec.PyTorchReplicaSpecs[ReplicaWorker].Template.Spec.Containers[0].Env {
		names = append(names, e.Name+"="+e.Value)
	}
	want := "ELASTIC_IDL_TASK_TYPE_VERSION=1 TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=300 TORCH_NCCL_ENABLE_MONITORING=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=1"
	if got := strings.Join(names[1:], " "); got != want {
		t.Errorf("env %s, want %s", got, want)
	}
}

// TestSecondsText: a typed rendezvous option as the reference's rdzv_configs writes it into
// rdzvConf (str() of the seconds: an int, else the float's repr). The wants are the reference's
// output for the same Durations.
func TestSecondsText(t *testing.T) {
	for _, c := range []struct {
		s    int64
		n    int32
		want string
	}{
		{0, 1, "1e-09"},
		{0, 10000, "1e-05"},
		{0, 100000, "0.0001"},
		{1, 500000000, "1.5"},
		{0, 250000000, "0.25"},
		{315576000000, 999999999, "315576000001"},
		{12345, 6, "12345.000000006"},
		{2, 0, "2"},
		{0, 0, "0"},
	} {
		if got := secondsText(c.s, c.n); got != c.want {
			t.Errorf("secondsText(%d, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
