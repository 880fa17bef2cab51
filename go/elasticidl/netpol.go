package elasticidl

// The NetworkPolicy beside a PyTorchJob, as the reference's render_network_policy
// (elastic_idl/_backend/networkpolicy.py): ingress to the job's pods only from the job's
// own pods, on every port (NCCL picks its own).

import "maps"

// NetworkPolicy is a networking.k8s.io/v1 NetworkPolicy (the part the renderer sets).
type NetworkPolicy struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ObjectMeta        `json:"metadata"`
	Spec       NetworkPolicySpec `json:"spec"`
}

// NetworkPolicySpec selects the pods it isolates and the ingress they admit.
type NetworkPolicySpec struct {
	PodSelector LabelSelector              `json:"podSelector"`
	PolicyTypes []string                   `json:"policyTypes"`
	Ingress     []NetworkPolicyIngressRule `json:"ingress"`
}

// LabelSelector matches pods by labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// NetworkPolicyIngressRule admits traffic from its peers, on every port when it names none.
type NetworkPolicyIngressRule struct {
	From []NetworkPolicyPeer `json:"from"`
}

// NetworkPolicyPeer is a set of pods (of the policy's namespace).
type NetworkPolicyPeer struct {
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
}

// JobPodSelector is the labels the training operator puts on every pod of the job
// named jobName: PodLabelJobName and PodLabelOperatorName.
func JobPodSelector(jobName string) map[string]string {
	return map[string]string{PodLabelJobName: jobName, PodLabelOperatorName: OperatorName}
}

// NetworkPolicyOf is the NetworkPolicy for a rendered job: named and namespaced as
// the job, with its labels; it selects the job's pods (JobPodSelector) and admits
// ingress only from the same pods, on every port and protocol. Egress is not
// restricted. A *RenderError names metadata.name or metadata.namespace when unset.
func NetworkPolicyOf(job *PyTorchJob) (*NetworkPolicy, error) {
	if job == nil || job.Metadata.Name == "" {
		return nil, renderErr("metadata.name", "the job has no name")
	}
	if job.Metadata.Namespace == "" {
		return nil, renderErr("metadata.namespace", "the job has no namespace")
	}
	return &NetworkPolicy{
		APIVersion: networkPolicyAPIVersion,
		Kind:       networkPolicyKind,
		Metadata: ObjectMeta{
			Name: job.Metadata.Name, Namespace: job.Metadata.Namespace, Labels: maps.Clone(job.Metadata.Labels),
		},
		Spec: NetworkPolicySpec{
			PodSelector: LabelSelector{MatchLabels: JobPodSelector(job.Metadata.Name)},
			PolicyTypes: []string{"Ingress"},
			Ingress: []NetworkPolicyIngressRule{{
				From: []NetworkPolicyPeer{{PodSelector: &LabelSelector{MatchLabels: JobPodSelector(job.Metadata.Name)}}},
			}},
		},
	}, nil
}

// RenderObjects is what to apply for a task: the job (RenderJob) and, when
// o.NetworkPolicy is set, its NetworkPolicy (else nil), with the render's warnings.
func (t *Task) RenderObjects(o RenderOptions) (*PyTorchJob, *NetworkPolicy, []SkewWarning, error) {
	return t.renderObjects(o.generic())
}

// renderObjects is RenderObjects of options as the reference's keyword arguments.
func (t *Task) renderObjects(opts *jsonObject) (*PyTorchJob, *NetworkPolicy, []SkewWarning, error) {
	job, warnings, err := t.renderJob(opts)
	if wanted, _ := opts.get("network_policy"); err != nil || wanted != true { // checked by renderJob: a bool
		return job, nil, warnings, err
	}
	policy, err := NetworkPolicyOf(job)
	if err != nil {
		return nil, nil, nil, err
	}
	return job, policy, warnings, nil
}
