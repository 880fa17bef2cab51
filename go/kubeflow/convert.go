package kubeflow

import (
	"fmt"
	"maps"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

// FromCore converts the core renderer's PyTorchJob into the training operator's
// type, field by field. It fails on a nil job, a nil replica spec, and on a
// resource quantity that apimachinery cannot parse (which the core's rule
// resources.quantity already refuses), each an *elasticidl.RenderError.
func FromCore(job *elasticidl.PyTorchJob) (*kubeflowv1.PyTorchJob, error) {
	if job == nil {
		return nil, &elasticidl.RenderError{Field: "job", Reason: "no PyTorchJob (nil)"}
	}
	specs := make(map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, len(job.Spec.PyTorchReplicaSpecs))
	for name, r := range job.Spec.PyTorchReplicaSpecs {
		spec, err := replicaSpecOf(name, r)
		if err != nil {
			return nil, err
		}
		specs[kubeflowv1.ReplicaType(name)] = spec
	}
	return &kubeflowv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: job.APIVersion, Kind: job.Kind},
		ObjectMeta: objectMetaOf(&job.Metadata),
		Spec: kubeflowv1.PyTorchJobSpec{
			RunPolicy:           RunPolicyOf(job.Spec.RunPolicy),
			ElasticPolicy:       ElasticPolicyOf(job.Spec.ElasticPolicy),
			PyTorchReplicaSpecs: specs,
			NprocPerNode:        copyPtr(job.Spec.NprocPerNode),
		},
	}, nil
}

// ElasticPolicyOf is the operator's spec.elasticPolicy for the core's; nil for nil.
func ElasticPolicyOf(p *elasticidl.ElasticPolicy) *kubeflowv1.ElasticPolicy {
	if p == nil {
		return nil
	}
	out := &kubeflowv1.ElasticPolicy{
		MinReplicas:  copyPtr(p.MinReplicas),
		MaxReplicas:  copyPtr(p.MaxReplicas),
		RDZVPort:     copyPtr(p.RdzvPort),
		RDZVHost:     copyPtr(p.RdzvHost),
		RDZVID:       copyPtr(p.RdzvID),
		MaxRestarts:  copyPtr(p.MaxRestarts),
		NProcPerNode: copyPtr(p.NProcPerNode),
	}
	if p.RdzvBackend != nil {
		backend := kubeflowv1.RDZVBackend(*p.RdzvBackend)
		out.RDZVBackend = &backend
	}
	for _, c := range p.RdzvConf {
		out.RDZVConf = append(out.RDZVConf, kubeflowv1.RDZVConf{Key: c.Key, Value: c.Value})
	}
	return out
}

// RunPolicyOf is the operator's spec.runPolicy for the core's.
func RunPolicyOf(p elasticidl.RunPolicy) kubeflowv1.RunPolicy {
	out := kubeflowv1.RunPolicy{
		TTLSecondsAfterFinished: copyPtr(p.TTLSecondsAfterFinished),
		BackoffLimit:            copyPtr(p.BackoffLimit),
	}
	if p.CleanPodPolicy != nil {
		clean := kubeflowv1.CleanPodPolicy(*p.CleanPodPolicy)
		out.CleanPodPolicy = &clean
	}
	if p.ActiveDeadlineSeconds != nil {
		deadline := int64(*p.ActiveDeadlineSeconds)
		out.ActiveDeadlineSeconds = &deadline
	}
	return out
}

// ContainerPortOf is the operator's container port for the core's.
func ContainerPortOf(p elasticidl.ContainerPort) corev1.ContainerPort {
	return corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort}
}

func replicaSpecOf(name string, r *elasticidl.ReplicaSpec) (*kubeflowv1.ReplicaSpec, error) {
	if r == nil {
		return nil, &elasticidl.RenderError{Field: "pytorchReplicaSpecs." + name, Reason: "the replica type has no spec (nil)"}
	}
	replicas := r.Replicas
	out := &kubeflowv1.ReplicaSpec{
		Replicas:      &replicas,
		RestartPolicy: kubeflowv1.RestartPolicy(r.RestartPolicy),
	}
	if m := r.Template.Metadata; m != nil {
		out.Template.ObjectMeta = objectMetaOf(m)
	}
	for _, c := range r.Template.Spec.Containers {
		container := corev1.Container{
			Name:    c.Name,
			Image:   c.Image,
			Command: append([]string(nil), c.Command...),
			Args:    append([]string(nil), c.Args...),
		}
		for _, e := range c.Env {
			container.Env = append(container.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
		for _, p := range c.Ports {
			container.Ports = append(container.Ports, ContainerPortOf(p))
		}
		if c.Resources != nil {
			var err error
			field := fmt.Sprintf("pytorchReplicaSpecs.%s.template.spec.containers[%s].resources", name, c.Name)
			if container.Resources.Requests, err = resourceList(field+".requests", c.Resources.Requests); err != nil {
				return nil, err
			}
			if container.Resources.Limits, err = resourceList(field+".limits", c.Resources.Limits); err != nil {
				return nil, err
			}
		}
		out.Template.Spec.Containers = append(out.Template.Spec.Containers, container)
	}
	return out, nil
}

func resourceList(field string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(corev1.ResourceList, len(m))
	for name, text := range m {
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return nil, &elasticidl.RenderError{Field: field + "." + name, Reason: err.Error()}
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

func objectMetaOf(m *elasticidl.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations),
	}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
