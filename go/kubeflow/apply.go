package kubeflow

import (
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

// Options are the options of Apply and Fields (Build takes the core's
// RenderOptions, which carry the same two and the rest of a render). The zero value renders as the core
// renderer's default: strict mode, and ExitCode for an elastic Worker whose task
// leaves its restart policy unset. (go/flyteplugin's Plugin reads its zero
// Options as the upstream mode with Never, flyteplugins' rendering.)
type Options struct {
	// Mode is the render mode: elasticidl.ModeStrict ("" means it too) or
	// elasticidl.ModeUpstream (Flyte 1.x's rendering where it is defensible;
	// docs/guide/rendering.md).
	Mode elasticidl.RenderMode
	// ElasticWorkerRestartPolicy is the restart policy of an elastic Worker whose
	// task leaves it unset: elasticidl.RestartPolicyExitCode ("" means it too) or
	// elasticidl.RestartPolicyNever (upstream's).
	ElasticWorkerRestartPolicy string
}

// Build renders the task's whole PyTorchJob with the core renderer and returns
// it in the operator's types: the job the Python renderer renders for the same
// task and options. Errors are the core's (*elasticidl.ValidationError,
// *elasticidl.RenderError naming the option or task field at fault).
func Build(task *elasticidl.Task, render elasticidl.RenderOptions) (*kubeflowv1.PyTorchJob, error) {
	job, err := task.RenderPyTorchJob(render)
	if err != nil {
		return nil, err
	}
	return FromCore(job)
}

// Replica is what a task decides for one replica type of its job.
type Replica struct {
	// Replicas is the pod count (spec.pytorchReplicaSpecs.<type>.replicas).
	Replicas int32
	// RestartPolicy is the replica's restartPolicy: the task's, or for an elastic
	// Worker whose task leaves it unset Options.ElasticWorkerRestartPolicy: ExitCode
	// by default (the operator then restarts a pod whose exit code says the
	// failure is retryable), or Never.
	RestartPolicy kubeflowv1.RestartPolicy
}

// JobFields are the job-level fields of a task's PyTorchJob, as Build renders them.
type JobFields struct {
	// ElasticPolicy is spec.elasticPolicy (nil for a non-elastic task): min and
	// max replicas, the rendezvous backend, host, port and id, max restarts and
	// the rendezvous options.
	ElasticPolicy *kubeflowv1.ElasticPolicy
	// NprocPerNode is spec.nprocPerNode (nil for a non-elastic task).
	NprocPerNode *string
	// RunPolicy is spec.runPolicy: clean pod policy, TTL, active deadline, backoff limit.
	RunPolicy kubeflowv1.RunPolicy
	// Replicas holds every replica type the job has, and only those: an elastic
	// job is Worker-only, a non-elastic job has one Master and its Workers.
	Replicas map[kubeflowv1.ReplicaType]Replica
	// ContainerPort is the port of the "pytorch" container that the operator
	// reads (the rendezvous port of an elastic task that sets one, else 23456).
	ContainerPort corev1.ContainerPort
	// Warnings name what of the task the job does not carry: each field this
	// version does not know (a newer SDK's, Task.UnknownFields) and each task
	// resource dropped (Task.RenderJob's warnings). Fields sets them; FieldsOf,
	// which reads a job, cannot know them and leaves them nil.
	Warnings []elasticidl.SkewWarning
}

// fieldsRender are render options that every valid task renders with: Fields
// reads only the job-level fields of the result, which no option changes.
var fieldsRender = elasticidl.RenderOptions{
	Name: "job", Image: "elastic-idl.invalid/fields:0", Entrypoint: []string{"fields"},
}

// Fields are the job-level fields of the task's PyTorchJob, with the render's
// warnings. Errors are Build's: a task that breaks a rule is an
// *elasticidl.ValidationError.
func Fields(task *elasticidl.Task, o Options) (*JobFields, error) {
	render := fieldsRender
	render.Mode, render.ElasticWorkerRestartPolicy = o.Mode, o.ElasticWorkerRestartPolicy
	core, warnings, err := task.RenderJob(render)
	if err != nil {
		return nil, err
	}
	job, err := FromCore(core)
	if err != nil {
		return nil, err
	}
	f, err := FieldsOf(job)
	if err != nil {
		return nil, err
	}
	f.Warnings = warnings
	return f, nil
}

// FieldsOf reads the job-level fields of a job Build rendered. A job that Build
// would not render (nil, a replica type without a spec, a replica count or a
// "pytorch" container port missing) is an *elasticidl.RenderError naming the field.
func FieldsOf(job *kubeflowv1.PyTorchJob) (*JobFields, error) {
	if job == nil {
		return nil, &elasticidl.RenderError{Field: "job", Reason: "no PyTorchJob (nil)"}
	}
	f := &JobFields{
		ElasticPolicy: job.Spec.ElasticPolicy,
		NprocPerNode:  job.Spec.NprocPerNode,
		RunPolicy:     job.Spec.RunPolicy,
		Replicas:      map[kubeflowv1.ReplicaType]Replica{},
	}
	for rt, r := range job.Spec.PyTorchReplicaSpecs {
		field := "pytorchReplicaSpecs." + string(rt)
		if r == nil {
			return nil, &elasticidl.RenderError{Field: field, Reason: "the replica type has no spec (nil)"}
		}
		if r.Replicas == nil {
			return nil, &elasticidl.RenderError{Field: field + ".replicas", Reason: "no replica count (Build always sets one)"}
		}
		f.Replicas[rt] = Replica{Replicas: *r.Replicas, RestartPolicy: r.RestartPolicy}
		port, ok := pytorchPort(&r.Template.Spec)
		if !ok {
			return nil, &elasticidl.RenderError{
				Field:  field,
				Reason: "the rendered template has no " + elasticidl.ContainerName + " container port " + elasticidl.PortName,
			}
		}
		f.ContainerPort = port
	}
	return f, nil
}

func pytorchPort(pod *corev1.PodSpec) (corev1.ContainerPort, bool) {
	for _, c := range pod.Containers {
		if c.Name != elasticidl.ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == elasticidl.PortName {
				return p, true
			}
		}
	}
	return corev1.ContainerPort{}, false
}

// Apply sets the task's job-level fields on spec, whose pod templates the caller
// built (one ReplicaSpec per replica type the job needs, each with a container
// named "pytorch"). It sets spec.elasticPolicy, spec.nprocPerNode, the four
// fields of spec.runPolicy the task states (clean pod policy, TTL, active
// deadline, backoff limit; scheduling policy and suspend are left as they are),
// each replica's count and restart policy, and the containerPort named
// "pytorchjob-port" of each "pytorch" container (added, or its number replaced):
// its one edit to a pod template. A replica type the job does not have (the
// Master of an elastic job) is removed from spec.pytorchReplicaSpecs.
//
// Errors: Fields' errors; an *elasticidl.RenderError naming
// "pytorchReplicaSpecs.<type>" when the job needs a replica type spec has no
// template for, or a template has no "pytorch" container. spec is unchanged
// on error.
func Apply(task *elasticidl.Task, spec *kubeflowv1.PyTorchJobSpec, o Options) error {
	f, err := Fields(task, o)
	if err != nil {
		return err
	}
	return f.ApplyTo(spec)
}

// ApplyTo is Apply with fields already computed (one Fields call can serve many specs).
func (f *JobFields) ApplyTo(spec *kubeflowv1.PyTorchJobSpec) error {
	for rt := range f.Replicas {
		r := spec.PyTorchReplicaSpecs[rt]
		if r == nil {
			return &elasticidl.RenderError{
				Field:  "pytorchReplicaSpecs." + string(rt),
				Reason: "the job has a " + string(rt) + " replica but the spec has no template for it",
			}
		}
		if pytorchContainer(&r.Template.Spec) < 0 {
			return &elasticidl.RenderError{
				Field:  "pytorchReplicaSpecs." + string(rt) + ".template.spec.containers",
				Reason: "no container is named " + elasticidl.ContainerName + " (the operator requires one)",
			}
		}
	}
	for rt := range spec.PyTorchReplicaSpecs {
		if _, ok := f.Replicas[rt]; !ok {
			delete(spec.PyTorchReplicaSpecs, rt)
		}
	}
	for rt, want := range f.Replicas {
		r := spec.PyTorchReplicaSpecs[rt]
		count := want.Replicas
		r.Replicas = &count
		r.RestartPolicy = want.RestartPolicy
		setPort(&r.Template.Spec.Containers[pytorchContainer(&r.Template.Spec)], f.ContainerPort)
	}
	spec.ElasticPolicy = f.ElasticPolicy.DeepCopy()
	spec.NprocPerNode = copyPtr(f.NprocPerNode)
	spec.RunPolicy.CleanPodPolicy = copyPtr(f.RunPolicy.CleanPodPolicy)
	spec.RunPolicy.TTLSecondsAfterFinished = copyPtr(f.RunPolicy.TTLSecondsAfterFinished)
	spec.RunPolicy.ActiveDeadlineSeconds = copyPtr(f.RunPolicy.ActiveDeadlineSeconds)
	spec.RunPolicy.BackoffLimit = copyPtr(f.RunPolicy.BackoffLimit)
	return nil
}

func pytorchContainer(pod *corev1.PodSpec) int {
	for i, c := range pod.Containers {
		if c.Name == elasticidl.ContainerName {
			return i
		}
	}
	return -1
}

// setPort sets the named port's number, or adds the port.
func setPort(c *corev1.Container, port corev1.ContainerPort) {
	for i := range c.Ports {
		if c.Ports[i].Name == port.Name {
			c.Ports[i].ContainerPort = port.ContainerPort
			return
		}
	}
	c.Ports = append(c.Ports, port)
}
