package flyteplugin

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	flyteerr "github.com/flyteorg/flyte/flyteplugins/go/tasks/errors"
	stdErrors "github.com/flyteorg/flyte/flytestdlib/errors"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// upstreamCase is a TaskTemplate of flyteplugins v1.16.8's pytorch_test.go and
// what our plugin does with it beside flyteplugins' plugin.
type upstreamCase struct {
	name    string // the upstream test function (and sub-case)
	lines   string // where its TaskTemplate is, in pytorch_test.go
	version int32
	custom  string
	// differs lists the job-level fields on which the strict mode differs on
	// purpose (docs/guide/propeller.md); nil: every job-level field is equal.
	differs []string
	// refusedRule is the rule the strict mode refuses the task with, where
	// flyteplugins renders it; the upstream mode (the plugin's default) renders it.
	refusedRule string
	// refusedInEveryMode: the upstream mode refuses it too (refusedRule names why).
	refusedInEveryMode bool
}

// The job-level fields that differ for an elastic task, on purpose:
//   - nproc per node (strict mode only): upstream writes the deprecated
//     spec.elasticPolicy.nProcPerNode; the strict mode writes spec.nprocPerNode
//     (the operator's webhook refuses a job that sets both); the upstream mode
//     writes upstream's.
//   - the elastic Worker's restart policy (strict mode only): ExitCode, the
//     renderer's default and the fault matrix's choice, where upstream's is
//     Never; the upstream mode writes upstream's.
var elasticDiffers = []string{"elasticPolicy.nProcPerNode", "nprocPerNode", "Worker.restartPolicy"}

const elasticV0 = `{"workers":2,"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}}`

var (
	masterResources = `{"requests":[{"name":"CPU","value":"250m"},{"name":"MEMORY","value":"250Mi"}],` +
		`"limits":[{"name":"CPU","value":"500m"},{"name":"MEMORY","value":"500Mi"}]}`
	workerResources = `{"requests":[{"name":"CPU","value":"1024m"},{"name":"MEMORY","value":"1Gi"}],` +
		`"limits":[{"name":"CPU","value":"2048m"},{"name":"MEMORY","value":"2Gi"}]}`
	workerGPUResources = `{"requests":[{"name":"CPU","value":"1024m"},{"name":"MEMORY","value":"1Gi"},{"name":"GPU","value":"1"}],` +
		`"limits":[{"name":"CPU","value":"2048m"},{"name":"MEMORY","value":"2Gi"},{"name":"GPU","value":"1"}]}`
	runPolicy = `{"cleanPodPolicy":"CLEANPOD_POLICY_ALL","backoffLimit":100,"activeDeadlineSeconds":1000,"ttlSecondsAfterFinished":10000}`
)

// replica is a replica spec in the deprecated fields or in common.
func replica(common bool, fields string) string {
	if common {
		return `{"common":{` + fields + `}}`
	}
	return `{` + fields + `}`
}

func upstreamCases() []upstreamCase {
	cases := []upstreamCase{
		{name: "TestBuildResourcePytorchElastic", lines: "339-345", version: 0, custom: elasticV0, differs: elasticDiffers},
		{name: "TestBuildResourcePytorch", lines: "382-388", version: 0, custom: `{"workers":100}`},
		{name: "TestBuildResourcePytorchContainerImage/elastic", lines: "457-464", version: 0, custom: elasticV0, differs: elasticDiffers},
		// Differs on purpose in every mode: {"workers":0} is the empty legacy message
		// (proto3 writes no 0), and an empty custom is refused as a task with nothing
		// set instead of becoming a Master-only job nobody asked for.
		{name: "TestReplicaCounts/NoWorkers", lines: "809-815", version: 0, custom: `{"workers":0}`, refusedRule: "task.not_empty", refusedInEveryMode: true},
		{name: "TestReplicaCounts/Works", lines: "810-815", version: 0, custom: `{"workers":1}`},
	}
	for _, common := range []bool{false, true} {
		shape := map[bool]string{false: "deprecated fields", true: "common"}[common]
		cases = append(cases,
			upstreamCase{
				name: "TestBuildResourcePytorchV1/" + shape, lines: "842-897", version: 1,
				custom: `{"masterReplicas":` + replica(common, `"image":"`+fixtureImageMaster+`","resources":`+masterResources+
					`,"restartPolicy":"RESTART_POLICY_ALWAYS"`) +
					`,"workerReplicas":` + replica(common, `"replicas":100,"resources":`+workerResources) + `}`,
				refusedRule: "replicas.master_count",
			},
			upstreamCase{
				name: "TestBuildResourcePytorchV1WithRunPolicy/" + shape, lines: "986-1013", version: 1,
				custom: `{"workerReplicas":` + replica(common, `"replicas":100`) + `,"runPolicy":` + runPolicy + `}`,
			},
			upstreamCase{
				name: "TestBuildResourcePytorchV1WithOnlyWorkerSpec/" + shape, lines: "1035-1068", version: 1,
				custom: `{"workerReplicas":` + replica(common, `"replicas":100,"resources":`+workerResources) + `}`,
			},
			upstreamCase{
				name: "TestBuildResourcePytorchV1ResourceTolerations/" + shape, lines: "1139-1203", version: 1,
				custom: `{"masterReplicas":` + replica(common, `"resources":`+masterResources) +
					`,"workerReplicas":` + replica(common, `"replicas":100,"resources":`+workerGPUResources) + `}`,
				refusedRule: "replicas.master_count",
			},
			upstreamCase{
				name: "TestBuildResourcePytorchV1WithElastic/" + shape, lines: "1222-1237", version: 1,
				custom: `{"workerReplicas":` + replica(common, `"replicas":2`) +
					`,"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}}`,
				differs: elasticDiffers,
			},
		)
	}
	cases = append(cases,
		upstreamCase{
			name: "TestBuildResourcePytorchV1WithDifferentWorkersNumber/Case 1", lines: "1273-1291", version: 1,
			custom:      `{"workerReplicas":{},"masterReplicas":{"image":"` + fixtureImageMaster + `","resources":` + masterResources + `}}`,
			refusedRule: "replicas.master_count",
		},
		upstreamCase{
			name: "TestBuildResourcePytorchV1WithDifferentWorkersNumber/Case 2", lines: "1292-1310", version: 1,
			custom: `{"workerReplicas":{"replicas":1},"masterReplicas":{"image":"` + fixtureImageMaster + `","resources":` +
				masterResources + `}}`,
			refusedRule: "replicas.master_count",
		},
	)
	return cases
}

// jobLevelDiff lists the job-level fields on which two jobs differ.
func jobLevelDiff(ours, theirs *kubeflowv1.PyTorchJob) []string {
	var out []string
	diff := func(path string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			out = append(out, path)
		}
	}
	for _, rt := range []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker} {
		a, b := ours.Spec.PyTorchReplicaSpecs[rt], theirs.Spec.PyTorchReplicaSpecs[rt]
		if (a == nil) != (b == nil) {
			out = append(out, string(rt))
			continue
		}
		if a != nil {
			diff(string(rt)+".replicas", a.Replicas, b.Replicas)
			diff(string(rt)+".restartPolicy", a.RestartPolicy, b.RestartPolicy)
		}
	}
	a, b := ours.Spec.ElasticPolicy, theirs.Spec.ElasticPolicy
	if (a == nil) != (b == nil) {
		out = append(out, "elasticPolicy")
	} else if a != nil {
		diff("elasticPolicy.minReplicas", a.MinReplicas, b.MinReplicas)
		diff("elasticPolicy.maxReplicas", a.MaxReplicas, b.MaxReplicas)
		diff("elasticPolicy.rdzvBackend", a.RDZVBackend, b.RDZVBackend)
		diff("elasticPolicy.rdzvPort", a.RDZVPort, b.RDZVPort)
		diff("elasticPolicy.rdzvHost", a.RDZVHost, b.RDZVHost)
		diff("elasticPolicy.rdzvId", a.RDZVID, b.RDZVID)
		diff("elasticPolicy.rdzvConf", a.RDZVConf, b.RDZVConf)
		diff("elasticPolicy.nProcPerNode", a.NProcPerNode, b.NProcPerNode)
		diff("elasticPolicy.maxRestarts", a.MaxRestarts, b.MaxRestarts)
	}
	diff("nprocPerNode", ours.Spec.NprocPerNode, theirs.Spec.NprocPerNode)
	diff("runPolicy", ours.Spec.RunPolicy, theirs.Spec.RunPolicy)
	return out
}

// withoutOurPort is a pod template without the port Apply adds to the pytorch container.
func withoutOurPort(tmpl *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	out := tmpl.DeepCopy()
	for i := range out.Spec.Containers {
		c := &out.Spec.Containers[i]
		var ports []corev1.ContainerPort
		for _, p := range c.Ports {
			if !(c.Name == elasticidl.ContainerName && p.Name == elasticidl.PortName) {
				ports = append(ports, p)
			}
		}
		c.Ports = ports
	}
	return out
}

// Every TaskTemplate of upstream's pytorch plugin tests, through both plugins:
// the job-level fields are equal except where a case names the difference, and
// the pod templates are flyteplugins' own (equal but for the containerPort).
func TestUpstreamTaskTemplates(t *testing.T) {
	upstream := upstreamPlugin(t)
	for _, mode := range []elasticidl.RenderMode{"", elasticidl.ModeStrict} {
		ours := Plugin{Options: kubeflow.Options{Mode: mode}}
		name := map[elasticidl.RenderMode]string{"": "default (upstream mode)", elasticidl.ModeStrict: "strict"}[mode]
		for _, c := range upstreamCases() {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				tmpl := taskTemplate(t, "job", c.version, c.custom)
				res, err := build(t, upstream, tmpl)
				if err != nil {
					t.Fatalf("flyteplugins' plugin (pytorch_test.go lines %s): %v", c.lines, err)
				}
				theirs := res.(*kubeflowv1.PyTorchJob)
				res, err = build(t, ours, tmpl)
				// The upstream mode differs in nothing: its elastic Worker whose task
				// leaves the restart policy unset is Never, as upstream's.
				var want []string
				if mode == elasticidl.ModeStrict || c.refusedInEveryMode {
					want = append([]string(nil), c.differs...)
					if c.refusedRule != "" {
						if code, _ := stdErrors.GetErrorCode(err); code != flyteerr.BadTaskSpecification ||
							!strings.Contains(err.Error(), c.refusedRule) {
							t.Fatalf("ours: %v; want a BadTaskSpecification naming %s (strict mode; upstream renders it)", err, c.refusedRule)
						}
						return
					}
				}
				if err != nil {
					t.Fatalf("ours: %v", err)
				}
				job := res.(*kubeflowv1.PyTorchJob)
				got := jobLevelDiff(job, theirs)
				sort.Strings(got)
				sort.Strings(want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("job-level fields that differ from flyteplugins': %v, want %v", got, want)
				}
				if !equality.Semantic.DeepEqual(job.TypeMeta, theirs.TypeMeta) {
					t.Errorf("type meta %+v, upstream %+v", job.TypeMeta, theirs.TypeMeta)
				}
				for rt, r := range job.Spec.PyTorchReplicaSpecs {
					u := theirs.Spec.PyTorchReplicaSpecs[rt]
					if u == nil {
						continue // named above
					}
					if !equality.Semantic.DeepEqual(withoutOurPort(&r.Template), &u.Template) {
						t.Errorf("%s pod template is not flyteplugins':\nours %+v\nupstream %+v", rt, r.Template, u.Template)
					}
				}
			})
		}
	}
}

// The values upstream's tests assert, on our jobs (pytorch_test.go lines cited).
func TestUpstreamAssertions(t *testing.T) {
	ours := Plugin{}
	buildOurs := func(t *testing.T, version int32, custom string) *kubeflowv1.PyTorchJob {
		res, err := build(t, ours, taskTemplate(t, "job", version, custom))
		if err != nil {
			t.Fatal(err)
		}
		return res.(*kubeflowv1.PyTorchJob)
	}
	t.Run("elastic (lines 351-359, 1250-1258)", func(t *testing.T) {
		job := buildOurs(t, 0, elasticV0)
		e := job.Spec.ElasticPolicy
		if *job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Replicas != 2 || *e.MinReplicas != 1 ||
			*e.MaxReplicas != 2 || *e.RDZVBackend != "c10d" || len(job.Spec.PyTorchReplicaSpecs) != 1 {
			t.Errorf("elastic job %+v", job.Spec)
		}
		// Equal in the upstream mode (the plugin's default): elasticPolicy.nProcPerNode == 4 (line 355),
		// and not spec.nprocPerNode too (the operator's webhook refuses both).
		if e.NProcPerNode == nil || *e.NProcPerNode != 4 || job.Spec.NprocPerNode != nil {
			t.Errorf("nproc per node: elasticPolicy %v, spec %v; want elasticPolicy.nProcPerNode 4 only", e.NProcPerNode, job.Spec.NprocPerNode)
		}
		// Equal in the upstream mode: upstream's Worker is Never (ParseRestartPolicy's default).
		if p := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].RestartPolicy; p != kubeflowv1.RestartPolicyNever {
			t.Errorf("elastic Worker restart policy %s, want Never (upstream's)", p)
		}
	})
	t.Run("run policy (lines 1025-1030)", func(t *testing.T) {
		job := buildOurs(t, 1, `{"workerReplicas":{"replicas":100},"runPolicy":`+runPolicy+`}`)
		rp := job.Spec.RunPolicy
		if *job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Replicas != 100 ||
			*job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Replicas != 1 ||
			*rp.CleanPodPolicy != kubeflowv1.CleanPodPolicyAll || *rp.BackoffLimit != 100 ||
			*rp.ActiveDeadlineSeconds != 1000 || *rp.TTLSecondsAfterFinished != 10000 {
			t.Errorf("run policy job %+v", job.Spec)
		}
	})
	t.Run("only a worker spec (lines 1108-1120)", func(t *testing.T) {
		job := buildOurs(t, 1, `{"workerReplicas":{"replicas":100,"resources":`+workerResources+`}}`)
		m := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]
		w := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
		if *m.Replicas != 1 || *w.Replicas != 100 || m.RestartPolicy != kubeflowv1.RestartPolicyNever ||
			w.RestartPolicy != kubeflowv1.RestartPolicyNever || job.Spec.ElasticPolicy != nil {
			t.Errorf("job %+v", job.Spec)
		}
		if m.Template.Spec.Containers[0].Image != fixtureImage || w.Template.Spec.Containers[0].Image != fixtureImage {
			t.Error("images are not the task's")
		}
		if !equality.Semantic.DeepEqual(m.Template.Spec.Containers[0].Resources, *fixtureResources) {
			t.Errorf("Master resources %+v, want the task override's", m.Template.Spec.Containers[0].Resources)
		}
	})
}

// The elastic Worker's restart policy by mode and option: the upstream mode's
// unset option is upstream's Never, the strict mode's the renderer's ExitCode,
// a set option wins in either mode, and a task's own policy wins over both.
func TestElasticWorkerRestartPolicy(t *testing.T) {
	const elasticV1 = `"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}`
	unset := `{"workerReplicas":{"common":{"replicas":2}},` + elasticV1 + `}`
	onFailure := `{"workerReplicas":{"common":{"replicas":2,"restartPolicy":"RESTART_POLICY_ON_FAILURE"}},` + elasticV1 + `}`
	never, exitCode := kubeflowv1.RestartPolicyNever, kubeflowv1.RestartPolicyExitCode
	upstream := upstreamPlugin(t)
	for _, tc := range []struct {
		mode   elasticidl.RenderMode
		option string
		want   kubeflowv1.RestartPolicy // for a task that leaves the policy unset
	}{
		{mode: "", option: "", want: never},
		{mode: elasticidl.ModeUpstream, option: "", want: never},
		{mode: elasticidl.ModeUpstream, option: elasticidl.RestartPolicyExitCode, want: exitCode},
		{mode: elasticidl.ModeUpstream, option: elasticidl.RestartPolicyNever, want: never},
		{mode: elasticidl.ModeStrict, option: "", want: exitCode},
		{mode: elasticidl.ModeStrict, option: elasticidl.RestartPolicyNever, want: never},
		{mode: elasticidl.ModeStrict, option: elasticidl.RestartPolicyExitCode, want: exitCode},
	} {
		ours := Plugin{Options: kubeflow.Options{Mode: tc.mode, ElasticWorkerRestartPolicy: tc.option}}
		t.Run(fmt.Sprintf("mode %q option %q", tc.mode, tc.option), func(t *testing.T) {
			for _, task := range []struct {
				custom string
				want   kubeflowv1.RestartPolicy
			}{{unset, tc.want}, {onFailure, kubeflowv1.RestartPolicyOnFailure}} {
				tmpl := taskTemplate(t, "job", 1, task.custom)
				res, err := build(t, ours, tmpl)
				if err != nil {
					t.Fatalf("%s: %v", task.custom, err)
				}
				job := res.(*kubeflowv1.PyTorchJob)
				if got := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].RestartPolicy; got != task.want {
					t.Errorf("%s: Worker restartPolicy %s, want %s", task.custom, got, task.want)
				}
				res, err = build(t, upstream, tmpl)
				if err != nil {
					t.Fatalf("flyteplugins' plugin: %v", err)
				}
				theirs := res.(*kubeflowv1.PyTorchJob)
				diff := jobLevelDiff(job, theirs)
				hasRestart := strings.Contains(fmt.Sprint(diff), "Worker.restartPolicy")
				// flyteplugins writes the task's own policy, else Never: the Worker's
				// restartPolicy differs from it exactly when ours is another.
				if wantDiff := task.want != theirs.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].RestartPolicy; hasRestart != wantDiff {
					t.Errorf("%s: differs from flyteplugins' in %v; Worker.restartPolicy there: %v", task.custom, diff, wantDiff)
				}
			}
		})
	}
	t.Run("an option the renderer does not know", func(t *testing.T) {
		ours := Plugin{Options: kubeflow.Options{ElasticWorkerRestartPolicy: "Always"}}
		_, err := build(t, ours, taskTemplate(t, "job", 1, unset))
		if code, _ := stdErrors.GetErrorCode(err); code != flyteerr.BadTaskSpecification ||
			!strings.Contains(err.Error(), "elastic_worker_restart_policy") {
			t.Fatalf("BuildResource: %v; want a BadTaskSpecification naming elastic_worker_restart_policy", err)
		}
	})
}
