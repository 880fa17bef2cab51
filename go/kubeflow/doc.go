// Package kubeflow is the Kubernetes-facing side of elastic-idl: the task's
// kubeflow.org/v1 PyTorchJob in the training operator's own types
// (github.com/kubeflow/training-operator's kubeflowv1, k8s.io/api's corev1), at
// the versions flyteplugins pins on the Flyte 1.x line. It lives in its own
// module so that the core (github.com/elastic-idl/elastic-idl/go, standard
// library and protobuf only) never pulls Kubernetes in.
//
// Two ways in:
//
//   - Apply sets the job-level fields of a task (elastic policy, nproc per node,
//     replica counts, restart policies, run policy, the rendezvous port) on a
//     PyTorchJobSpec whose pod templates the caller built, for example with
//     flyteplugins' pod machinery. Its one edit to a pod template is the
//     containerPort of the "pytorch" container.
//   - Build returns the whole *kubeflowv1.PyTorchJob the core renderer
//     (elasticidl.Task.RenderPyTorchJob) renders; it equals the Python
//     renderer's output for every contract vector under apimachinery's semantic
//     equality.
//
// Every value comes from the core renderer: this package converts its result
// into the operator's types and holds no rule of its own, so the Go and Python
// backends cannot drift apart here. Fields returns the job-level pieces one by
// one (ElasticPolicy, NprocPerNode, RunPolicy, each replica's count and
// RestartPolicy, ContainerPort).
package kubeflow
