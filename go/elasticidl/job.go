package elasticidl

// The kubeflow.org/v1 PyTorchJob, as small own types: k8s.io/api and the training
// operator's module are not needed to build or read it. JSON keys are the CRD's
// (a test checks each is a key of the reference's table K). A propeller plugin
// that has the operator's types copies the pieces it needs (ElasticPolicyOf,
// NprocPerNode, ReplicaCounts) or converts the whole object through JSON.

// PyTorchJob is a kubeflow.org/v1 PyTorchJob.
type PyTorchJob struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       PyTorchJobSpec `json:"spec"`
}

// ObjectMeta is the part of Kubernetes object metadata the renderer sets.
type ObjectMeta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PyTorchJobSpec is spec of a PyTorchJob.
type PyTorchJobSpec struct {
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`
	// NprocPerNode is "auto", "cpu", "gpu" or a number; nil means the operator's default (auto).
	NprocPerNode        *string                 `json:"nprocPerNode,omitempty"`
	PyTorchReplicaSpecs map[string]*ReplicaSpec `json:"pytorchReplicaSpecs"`
	RunPolicy           RunPolicy               `json:"runPolicy"`
}

// ElasticPolicy is spec.elasticPolicy. A nil pointer is an unset key.
type ElasticPolicy struct {
	MinReplicas *int32     `json:"minReplicas,omitempty"`
	MaxReplicas *int32     `json:"maxReplicas,omitempty"`
	RdzvBackend *string    `json:"rdzvBackend,omitempty"`
	RdzvHost    *string    `json:"rdzvHost,omitempty"`
	RdzvPort    *int32     `json:"rdzvPort,omitempty"`
	RdzvID      *string    `json:"rdzvId,omitempty"`
	MaxRestarts *int32     `json:"maxRestarts,omitempty"`
	RdzvConf    []RdzvConf `json:"rdzvConf,omitempty"`
	// NProcPerNode is the deprecated process count: set by ModeUpstream only, never with spec.nprocPerNode.
	NProcPerNode *int32 `json:"nProcPerNode,omitempty"`
}

// RdzvConf is one rendezvous option.
type RdzvConf struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// RunPolicy is spec.runPolicy; every key is optional.
type RunPolicy struct {
	CleanPodPolicy          *string `json:"cleanPodPolicy,omitempty"`
	TTLSecondsAfterFinished *int32  `json:"ttlSecondsAfterFinished,omitempty"`
	ActiveDeadlineSeconds   *int32  `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit            *int32  `json:"backoffLimit,omitempty"`
}

// ReplicaSpec is one entry of spec.pytorchReplicaSpecs.
type ReplicaSpec struct {
	Replicas      int32           `json:"replicas"`
	RestartPolicy string          `json:"restartPolicy"`
	Template      PodTemplateSpec `json:"template"`
}

// PodTemplateSpec is a replica's pod template.
type PodTemplateSpec struct {
	Metadata *ObjectMeta `json:"metadata,omitempty"`
	Spec     PodSpec     `json:"spec"`
}

// PodSpec holds the pod's containers.
type PodSpec struct {
	Containers []Container `json:"containers"`
}

// Container is the training container.
type Container struct {
	Name      string                `json:"name"`
	Image     string                `json:"image"`
	Command   []string              `json:"command"`
	Args      []string              `json:"args,omitempty"`
	Env       []EnvVar              `json:"env"`
	Ports     []ContainerPort       `json:"ports"`
	Resources *ResourceRequirements `json:"resources,omitempty"`
}

// EnvVar is one container env entry.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ContainerPort is one container port.
type ContainerPort struct {
	ContainerPort int32  `json:"containerPort"`
	Name          string `json:"name"`
}

// ResourceRequirements are Kubernetes container resources: resource name -> quantity.
type ResourceRequirements struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

func (r *ResourceRequirements) empty() bool {
	return r == nil || (len(r.Requests) == 0 && len(r.Limits) == 0)
}
