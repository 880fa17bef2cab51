package elasticidl

import (
	"reflect"
	"strings"
	"testing"
)

var opts = RenderOptions{Name: "job", Image: "i:1", Entrypoint: []string{"t.py"}}

func TestModeDefaultIsStrict(t *testing.T) {
	task := mustTask(t, `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 4}}`)
	def, err := task.RenderPyTorchJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	strict := opts
	strict.Mode = ModeStrict
	if got, _ := task.RenderPyTorchJob(strict); !reflect.DeepEqual(got, def) {
		t.Error("the zero Mode is not ModeStrict")
	}
	if *def.Spec.NprocPerNode != "4" || def.Spec.ElasticPolicy.NProcPerNode != nil || *def.Spec.ElasticPolicy.RdzvBackend != "c10d" {
		t.Errorf("strict: %+v", def.Spec)
	}
	up := opts
	up.Mode = ModeUpstream
	job, err := task.RenderPyTorchJob(up)
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.NprocPerNode != nil || *job.Spec.ElasticPolicy.NProcPerNode != 4 || *job.Spec.ElasticPolicy.RdzvBackend != "" {
		t.Errorf("upstream: %+v %+v", job.Spec, job.Spec.ElasticPolicy)
	}
	env, err := PodEnv(job, ReplicaWorker, 0)
	if err != nil || env[envNprocPerNode] != "4" || env[envRdzvBackend] != "" {
		t.Errorf("upstream pod env %v %v", env, err)
	}
}

func TestUpstreamModeRendersWhatFlyte1xRenders(t *testing.T) {
	up := opts
	up.Mode = ModeUpstream
	for _, c := range []struct {
		custom, rule string
		check        func(*PyTorchJob) bool
	}{
		{`{"masterReplicas": {"replicas": 1}}`, "replicas.workers_required", func(j *PyTorchJob) bool {
			_, worker := j.Spec.PyTorchReplicaSpecs[ReplicaWorker]
			return !worker && j.Spec.PyTorchReplicaSpecs[ReplicaMaster].Replicas == 1
		}},
		{`{"workerReplicas": {"replicas": 2}, "masterReplicas": {"image": "m:1"}}`, "replicas.master_count",
			func(j *PyTorchJob) bool { return j.Spec.PyTorchReplicaSpecs[ReplicaMaster].Replicas == 1 }},
		{`{"workerReplicas": {"replicas": 2}, "elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 1}}`,
			"replicas.worker_matches_max",
			func(j *PyTorchJob) bool { return j.Spec.PyTorchReplicaSpecs[ReplicaWorker].Replicas == 2 }},
	} {
		task := mustTask(t, c.custom)
		if _, err := task.RenderPyTorchJob(opts); err == nil || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("%s strict: %v, want %s", c.custom, err, c.rule)
		}
		job, err := task.RenderPyTorchJob(up)
		if err != nil || !c.check(job) {
			t.Errorf("%s upstream: %+v %v", c.custom, job, err)
		}
	}
	two := mustTask(t, `{"workerReplicas": {"replicas": 2}, "masterReplicas": {"replicas": 2}}`)
	if _, err := two.RenderPyTorchJob(up); err == nil || !strings.Contains(err.Error(), "replicas.master_count") {
		t.Errorf("two masters in upstream mode: %v", err)
	}
}

func TestElasticWorkerRestartPolicyOption(t *testing.T) {
	task := mustTask(t, `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1}}`)
	for _, mode := range []RenderMode{ModeStrict, ModeUpstream} {
		o := opts
		o.Mode = mode
		job, _ := task.RenderPyTorchJob(o)
		if got := job.Spec.PyTorchReplicaSpecs[ReplicaWorker].RestartPolicy; got != RestartPolicyExitCode {
			t.Errorf("%s: %s", mode, got)
		}
		o.ElasticWorkerRestartPolicy = RestartPolicyNever
		job, _ = task.RenderPyTorchJob(o)
		if got := job.Spec.PyTorchReplicaSpecs[ReplicaWorker].RestartPolicy; got != RestartPolicyNever {
			t.Errorf("%s with Never: %s", mode, got)
		}
	}
	for field, o := range map[string]RenderOptions{
		"mode":                          {Name: "job", Image: "i:1", Entrypoint: []string{"t.py"}, Mode: "lenient"},
		"elastic_worker_restart_policy": {Name: "job", Image: "i:1", Entrypoint: []string{"t.py"}, ElasticWorkerRestartPolicy: "OnFailure"},
	} {
		if _, err := task.RenderPyTorchJob(o); err == nil || errorOf(err)["field"] != field {
			t.Errorf("bad %s: %v", field, err)
		}
	}
}

func TestStorageIsDroppedWithAWarning(t *testing.T) {
	task := mustTask(t, `{"workerReplicas": {"common": {"resources": {"requests": [{"name": "CPU", "value": "1"},
		{"name": "STORAGE", "value": "1Gi"}]}}}, "elasticConfig": {"minReplicas": 1, "maxReplicas": 1, "nprocPerNode": 1}}`)
	job, warnings, err := task.RenderJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []SkewWarning{{Field: "worker_replicas.common.resources.requests[1]", Reason: storageDropped}}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %v", warnings)
	}
	res := job.Spec.PyTorchReplicaSpecs[ReplicaWorker].Template.Spec.Containers[0].Resources
	if !reflect.DeepEqual(res, &ResourceRequirements{Requests: map[string]string{"cpu": "1"}}) {
		t.Errorf("resources %+v", res)
	}
}

func TestSpacedMinusIsRefusedInTextproto(t *testing.T) {
	_, err := Decode([]byte("elastic_config { min_replicas: - 5 }"), FormatTextproto, 1)
	if err == nil || errorOf(err)["field"] != "min_replicas" {
		t.Errorf("'- 5': %v", err)
	}
	for _, ok := range []string{`elastic_config { min_replicas: -5 }`, `elastic_config { role: "a - b" } # x - y`} {
		if _, err := Decode([]byte(ok), FormatTextproto, 1); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestModeHelpersAgreeWithTheRender(t *testing.T) {
	for _, custom := range []string{
		`{"elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 4}, "workerReplicas": {"replicas": 2}}`,
		`{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPolicy": "NPROC_POLICY_AUTO"}}`,
		`{"masterReplicas": {"replicas": 1}}`,
		`{"workerReplicas": {"replicas": 3}}`,
	} {
		task := mustTask(t, custom)
		for _, mode := range []RenderMode{ModeStrict, ModeUpstream} {
			o := opts
			o.Mode = mode
			job, err := task.RenderPyTorchJob(o)
			if (err == nil) != (task.ValidateIn(mode) == nil) {
				t.Fatalf("%s %s: render %v, ValidateIn %v", custom, mode, err, task.ValidateIn(mode))
			}
			if err != nil {
				continue
			}
			counts, err := task.ReplicaCountsIn(mode)
			if err != nil {
				t.Fatal(err)
			}
			for rtype, spec := range job.Spec.PyTorchReplicaSpecs {
				if counts[rtype] != spec.Replicas {
					t.Errorf("%s %s: %s count %d, rendered %d", custom, mode, rtype, counts[rtype], spec.Replicas)
				}
			}
			if len(counts) != len(job.Spec.PyTorchReplicaSpecs) {
				t.Errorf("%s %s: counts %v", custom, mode, counts)
			}
			policy, nproc := ElasticSpecIn(task.Kubeflow().GetElasticConfig(), mode)
			if !reflect.DeepEqual(policy, job.Spec.ElasticPolicy) {
				t.Errorf("%s %s: policy %+v, rendered %+v", custom, mode, policy, job.Spec.ElasticPolicy)
			}
			if got := job.Spec.NprocPerNode; (got == nil && nproc != "") || (got != nil && *got != nproc) {
				t.Errorf("%s %s: nproc %q, rendered %v", custom, mode, nproc, got)
			}
		}
	}
}
