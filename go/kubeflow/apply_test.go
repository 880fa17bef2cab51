package kubeflow

import (
	"errors"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

func decode(t testing.TB, custom string) *elasticidl.Task {
	t.Helper()
	task, err := elasticidl.Decode([]byte(custom), elasticidl.FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// callerSpec is a spec as a propeller plugin builds it: pod templates with a
// "pytorch" container (and a sidecar), replica counts and policies of its own.
func callerSpec(types ...kubeflowv1.ReplicaType) *kubeflowv1.PyTorchJobSpec {
	spec := &kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}}
	suspend := true
	spec.RunPolicy.Suspend = &suspend
	for _, rt := range types {
		zero := int32(0)
		spec.PyTorchReplicaSpecs[rt] = &kubeflowv1.ReplicaSpec{
			Replicas:      &zero,
			RestartPolicy: kubeflowv1.RestartPolicyAlways,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "sidecar", Image: "side:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}},
				{Name: "pytorch", Image: "train:1", Env: []corev1.EnvVar{{Name: "FLYTE_X", Value: "1"}},
					Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}},
			}}},
		}
	}
	return spec
}

func TestApplyElasticSetsJobLevelFieldsOnly(t *testing.T) {
	task := decode(t, `{"workerReplicas":{"replicas":4},"elasticConfig":{"minReplicas":2,"maxReplicas":4,
		"nprocPerNode":8,"rdzvPort":29400,"maxRestarts":3},"runPolicy":{"cleanPodPolicy":"CLEANPOD_POLICY_ALL","backoffLimit":5}}`)
	spec := callerSpec(kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker)
	before := spec.DeepCopy()
	if err := Apply(task, spec, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]; ok {
		t.Error("an elastic job keeps no Master replica")
	}
	w := spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
	// The task states backoffLimit 5: OnFailure, which the operator counts against it (ExitCode would not).
	if *w.Replicas != 4 || w.RestartPolicy != kubeflowv1.RestartPolicyOnFailure {
		t.Errorf("Worker replicas %d restart %s, want 4 OnFailure", *w.Replicas, w.RestartPolicy)
	}
	e := spec.ElasticPolicy
	if e == nil || *e.MinReplicas != 2 || *e.MaxReplicas != 4 || *e.RDZVPort != 29400 || *e.MaxRestarts != 3 ||
		*e.RDZVBackend != kubeflowv1.BackendC10D {
		t.Errorf("elastic policy %+v", e)
	}
	if spec.NprocPerNode == nil || *spec.NprocPerNode != "8" {
		t.Errorf("nprocPerNode %v, want 8", spec.NprocPerNode)
	}
	if *spec.RunPolicy.CleanPodPolicy != kubeflowv1.CleanPodPolicyAll || *spec.RunPolicy.BackoffLimit != 5 {
		t.Errorf("run policy %+v", spec.RunPolicy)
	}
	if spec.RunPolicy.Suspend == nil || !*spec.RunPolicy.Suspend {
		t.Error("Apply changed runPolicy.suspend, which the task does not state")
	}
	// The pod template: only the pytorch container's port list changed.
	wantPod := before.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.DeepCopy()
	wantPod.Spec.Containers[1].Ports = append(wantPod.Spec.Containers[1].Ports,
		corev1.ContainerPort{Name: elasticidl.PortName, ContainerPort: 29400})
	if !equality.Semantic.DeepEqual(&w.Template, wantPod) {
		t.Errorf("pod template\n%+v\nwant\n%+v", w.Template, wantPod)
	}
}

func TestApplyNonElastic(t *testing.T) {
	task := decode(t, `{"workerReplicas":{"replicas":3},"masterReplicas":{"replicas":1,"restartPolicy":"RESTART_POLICY_ON_FAILURE"}}`)
	spec := callerSpec(kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker)
	// A port of the operator's name already there gets the task's number.
	c := &spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec.Containers[1]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: elasticidl.PortName, ContainerPort: 1})
	if err := Apply(task, spec, Options{}); err != nil {
		t.Fatal(err)
	}
	m, w := spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster], spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
	if *m.Replicas != 1 || m.RestartPolicy != kubeflowv1.RestartPolicyOnFailure {
		t.Errorf("Master %d %s", *m.Replicas, m.RestartPolicy)
	}
	if *w.Replicas != 3 || w.RestartPolicy != kubeflowv1.RestartPolicyNever {
		t.Errorf("Worker %d %s", *w.Replicas, w.RestartPolicy)
	}
	if spec.ElasticPolicy != nil || spec.NprocPerNode != nil {
		t.Errorf("a non-elastic job has no elastic policy or nprocPerNode: %+v %v", spec.ElasticPolicy, spec.NprocPerNode)
	}
	ports := m.Template.Spec.Containers[1].Ports
	if len(ports) != 2 || ports[1] != (corev1.ContainerPort{Name: elasticidl.PortName, ContainerPort: elasticidl.DefaultPort}) {
		t.Errorf("Master pytorch ports %+v", ports)
	}
}

func TestApplyRefusesMissingTemplates(t *testing.T) {
	nonElastic := decode(t, `{"workerReplicas":{"replicas":3}}`)
	for name, tc := range map[string]struct {
		spec  *kubeflowv1.PyTorchJobSpec
		field string
	}{
		"no Master template": {callerSpec(kubeflowv1.PyTorchJobReplicaTypeWorker), "pytorchReplicaSpecs.Master"},
		"no pytorch container": {func() *kubeflowv1.PyTorchJobSpec {
			s := callerSpec(kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker)
			s.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.Spec.Containers[1].Name = "main"
			return s
		}(), "pytorchReplicaSpecs.Worker.template.spec.containers"},
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.spec.DeepCopy()
			err := Apply(nonElastic, tc.spec, Options{})
			var rerr *elasticidl.RenderError
			if !errors.As(err, &rerr) || rerr.Field != tc.field {
				t.Fatalf("Apply: %v; want a *RenderError for %s", err, tc.field)
			}
			if !equality.Semantic.DeepEqual(before, tc.spec) {
				t.Error("Apply changed the spec although it failed")
			}
		})
	}
}

// Apply on Build's own pod templates with other job-level values gives Build's job back.
func TestApplyRestoresBuild(t *testing.T) {
	task := decode(t, `{"workerReplicas":{"replicas":2},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":2,"rdzvBackend":"etcd"}}`)
	job, err := Build(task, fieldsRender)
	if err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.DeepCopy()
	spec.ElasticPolicy, spec.NprocPerNode = nil, nil
	for _, r := range spec.PyTorchReplicaSpecs {
		r.Replicas, r.RestartPolicy = nil, ""
		r.Template.Spec.Containers[0].Ports = nil
	}
	if err := Apply(task, spec, Options{}); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(spec, &job.Spec) {
		t.Fatalf("Apply gave\n%+v\nBuild renders\n%+v", spec, job.Spec)
	}
}

func TestFieldsInvalidTask(t *testing.T) {
	task := decode(t, `{"elasticConfig":{"minReplicas":3,"maxReplicas":2}}`)
	spec := callerSpec(kubeflowv1.PyTorchJobReplicaTypeWorker)
	var verr *elasticidl.ValidationError
	if err := Apply(task, spec, Options{}); !errors.As(err, &verr) {
		t.Fatalf("Apply: %v; want a *elasticidl.ValidationError", err)
	}
}

// What Build never renders is a *RenderError naming the field, never a panic or a nil job.
func TestNilsAreRenderErrors(t *testing.T) {
	task := decode(t, `{"workerReplicas":{"replicas":2}}`)
	job, err := Build(task, fieldsRender)
	if err != nil {
		t.Fatal(err)
	}
	noCount := job.DeepCopy()
	noCount.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Replicas = nil
	noSpec := job.DeepCopy()
	noSpec.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster] = nil
	for name, tc := range map[string]struct {
		call  func() (any, error)
		field string
	}{
		"FieldsOf(nil)":      {func() (any, error) { return FieldsOf(nil) }, "job"},
		"FieldsOf(no count)": {func() (any, error) { return FieldsOf(noCount) }, "pytorchReplicaSpecs.Worker.replicas"},
		"FieldsOf(no spec)":  {func() (any, error) { return FieldsOf(noSpec) }, "pytorchReplicaSpecs.Master"},
		"FromCore(nil)":      {func() (any, error) { return FromCore(nil) }, "job"},
		"FromCore(nil replica)": {func() (any, error) {
			core, err := task.RenderPyTorchJob(fieldsRender)
			if err != nil {
				t.Fatal(err)
			}
			core.Spec.PyTorchReplicaSpecs["Worker"] = nil
			return FromCore(core)
		}, "pytorchReplicaSpecs.Worker"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.call()
			var rerr *elasticidl.RenderError
			if !errors.As(err, &rerr) || rerr.Field != tc.field {
				t.Fatalf("%s: %v, %v; want a *RenderError for %s", name, got, err, tc.field)
			}
		})
	}
}

// Fields keeps the render's warnings: a newer SDK's key is named, not dropped silently.
func TestFieldsCarryTheRendersWarnings(t *testing.T) {
	task, err := elasticidl.DecodeTolerant([]byte(`{"workerReplicas":{"replicas":2},"futureKnob":1}`), elasticidl.FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Fields(task, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || f.Warnings[0].Field != "futureKnob" {
		t.Fatalf("Warnings = %v; want one naming futureKnob", f.Warnings)
	}
	clean, err := Fields(decode(t, `{"workerReplicas":{"replicas":2}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if clean.Warnings != nil {
		t.Fatalf("Warnings of a task this version knows = %v; want none", clean.Warnings)
	}
}
