package elasticidl

// One task, three render targets: PyTorchJob, Kubeflow Trainer v2.3 TrainJob,
// JobSet v0.12, as the reference's render_target (elastic_idl/_backend/targets.py),
// with the report of every task field a target cannot carry (TargetLoss). What
// the TrainJob and JobSet renderers share (the reference's nodes.py) is here too:
// one replicated job, "node", of identical node pods.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
)

// The render targets of RenderTarget.
const (
	// TargetPyTorchJob is a kubeflow.org/v1 PyTorchJob (RenderObjects), the default; it loses nothing.
	TargetPyTorchJob = "pytorchjob"
	// TargetTrainJob is a Kubeflow Trainer v2.3 TrainJob (trainer.kubeflow.org/v1alpha1) on the
	// torch-distributed ClusterTrainingRuntime.
	TargetTrainJob = "trainjob"
	// TargetJobSet is a JobSet v0.12 (jobset.x-k8s.io/v1alpha2) of one replicated job, "node".
	TargetJobSet = "jobset"
)

// Targets are the render targets, the default (TargetPyTorchJob) first.
func Targets() []string { return []string{TargetPyTorchJob, TargetTrainJob, TargetJobSet} }

// TargetLoss is a task field that a render target cannot carry.
type TargetLoss struct {
	// Field is the dotted path of the task field, e.g. "elastic_config.min_replicas".
	Field string `json:"field"`
	// Target is the render target: TargetTrainJob or TargetJobSet.
	Target string `json:"target"`
	// Why says what the target does instead, in words (one line, as the reference writes it).
	Why string `json:"why"`
}

// String is "field: why".
func (l TargetLoss) String() string { return l.Field + ": " + l.Why }

func newLoss(field, target, why string) TargetLoss {
	return TargetLoss{Field: field, Target: target, Why: oneLine(why, maxErrorChars)}
}

// TargetOptions are RenderTarget's options beyond the RenderOptions.
type TargetOptions struct {
	// Strict refuses a render that loses a task field (a *TargetLossError) instead of reporting it.
	Strict bool
	// TrainJobElasticPolicy renders, on TargetTrainJob only, KEP-2903's proposed
	// spec.trainer.elasticPolicy {minNodes, maxNodes}, which Trainer v2.3 does not read,
	// and the annotation "elastic-idl/proposal" saying so.
	TrainJobElasticPolicy bool
}

// RenderedTarget is what RenderTarget returns.
type RenderedTarget struct {
	// Target is the target rendered.
	Target string `json:"target"`
	// Objects are the Kubernetes objects to create, the job first: on TargetPyTorchJob a
	// *PyTorchJob and, with RenderOptions.NetworkPolicy, a *NetworkPolicy; on the other
	// targets one map[string]any (the TrainJob or the JobSet, as encoding/json writes it).
	Objects []any `json:"objects"`
	// Losses are every task field the target cannot carry, in task order (empty, never nil,
	// for a PyTorchJob).
	Losses []TargetLoss `json:"losses"`
}

// RenderTarget renders the task on one target (Targets), with the report of what
// that target cannot carry. Pure: it talks to nobody. Every target's pods run the
// pod entrypoint with the task in their env (TaskEnv), so what the launcher reads
// of the task takes effect on each; the losses are what the target's controller
// cannot do.
//
//   - TargetPyTorchJob: RenderObjects; no losses.
//   - TargetTrainJob: a TrainJob on the torch-distributed runtime: spec.trainer (image,
//     command, args, env, numNodes = max_replicas for an elastic task, numProcPerNode,
//     resourcesPerNode), activeDeadlineSeconds, and the labels and annotations on the
//     pods through runtimePatches. The env adds PET_RDZV_ENDPOINT (node 0, port 29500
//     unless the task sets rdzv_host/rdzv_port).
//   - TargetJobSet: a JobSet with one replicated job "node" (an Indexed Job of numNodes
//     pods), DNS host names, a rendezvous id per JobSet restart attempt, the ExitCode
//     restart rule as a pod failure policy and the elastic success rule as the Job's
//     success policy.
//
// On TargetTrainJob and TargetJobSet, o.Mode must be strict and o.NetworkPolicy
// false; a TrainJob takes no ElasticWorkerRestartPolicy but the default.
//
// Errors: *RenderError for an unknown target (Field "target"), TrainJobElasticPolicy
// on another target ("trainjob_elastic_policy"), an option the target does not take
// ("mode", "network_policy", "elastic_worker_restart_policy"), or what
// RenderPyTorchJob refuses; *ValidationError for a task that breaks a rule;
// *TargetLossError when opts.Strict and the target cannot carry a field the task sets.
func (t *Task) RenderTarget(o RenderOptions, target string, opts TargetOptions) (RenderedTarget, error) {
	return t.renderTarget(o.generic(), target, opts)
}

// renderTarget is RenderTarget of options as the reference's keyword arguments, in its order of checks.
func (t *Task) renderTarget(opts *jsonObject, target string, to TargetOptions) (RenderedTarget, error) {
	if err := checkTarget(opts, target, to); err != nil {
		return RenderedTarget{}, err
	}
	if target == TargetPyTorchJob {
		job, policy, _, err := t.renderObjects(opts)
		if err != nil {
			return RenderedTarget{}, err
		}
		objects := []any{job}
		if policy != nil {
			objects = append(objects, policy)
		}
		return RenderedTarget{Target: target, Objects: objects, Losses: []TargetLoss{}}, nil
	}
	if err := t.validateFor(ModeStrict); err != nil {
		return RenderedTarget{}, err
	}
	if err := checkOptionText(opts); err != nil {
		return RenderedTarget{}, err
	}
	v := t.view()
	nodes, err := nodeCount(v)
	if err != nil {
		return RenderedTarget{}, err
	}
	if err := checkRdzvHostReachable(v, nodes); err != nil {
		return RenderedTarget{}, err
	}
	name, _ := opts.get("name")
	if err := checkNodeName(name, nodes); err != nil {
		return RenderedTarget{}, err
	}
	namespace, err := namespaceOf(opts)
	if err != nil {
		return RenderedTarget{}, err
	}
	losses := jobSetLosses(v)
	if target == TargetTrainJob {
		losses = trainJobLosses(v, to.TrainJobElasticPolicy)
	}
	if to.Strict && len(losses) > 0 {
		return RenderedTarget{}, &TargetLossError{Target: target, Losses: losses}
	}
	custom, err := t.CustomJSON()
	if err != nil {
		return RenderedTarget{}, err
	}
	var obj map[string]any
	if target == TargetTrainJob {
		c, err := containerOf(v, custom, opts, reservedEnv, trainJobReservedEnvWhy, trainJobDefaultPort)
		if err != nil {
			return RenderedTarget{}, err
		}
		obj = renderTrainJob(v, name.(string), namespace, c, nodes, to.TrainJobElasticPolicy)
	} else {
		c, err := containerOf(v, custom, opts, append(slices.Clone(reservedEnv), restartAttemptEnv), nil, jobSetDefaultPort)
		if err != nil {
			return RenderedTarget{}, err
		}
		policy, _ := opts.get("elastic_worker_restart_policy")
		obj = renderJobSet(v, name.(string), namespace, c, nodes, policy == RestartPolicyNever)
	}
	return RenderedTarget{Target: target, Objects: []any{obj}, Losses: losses}, nil
}

// checkTarget is what renderTarget checks before it reads the task: the target, the
// options it takes (checkNodeOptions) and TrainJobElasticPolicy on a TrainJob only.
func checkTarget(opts *jsonObject, target string, to TargetOptions) error {
	if !contains(Targets(), target) {
		return renderErr("target", "%s is not one of %s", pyRepr(target), strings.Join(Targets(), ", "))
	}
	if to.TrainJobElasticPolicy && target != TargetTrainJob {
		return renderErr("trainjob_elastic_policy", "applies to the trainjob target only, not %s", target)
	}
	if target == TargetPyTorchJob {
		return nil
	}
	return checkNodeOptions(opts, target)
}

// checkNodeOptions refuses the PyTorchJob-only options on the other targets when they are not their defaults.
func checkNodeOptions(opts *jsonObject, target string) error {
	if mode, ok := opts.get("mode"); ok && mode != renderModeStrict {
		return renderErr("mode", "%s: the upstream mode is Flyte 1.x's PyTorchJob; a %s renders strict only",
			pyRepr(mode), target)
	}
	if np, ok := opts.get("network_policy"); ok && np != false {
		return renderErr("network_policy", "the NetworkPolicy is rendered for a PyTorchJob only, not a %s", target)
	}
	policy, ok := opts.get("elastic_worker_restart_policy")
	if !ok {
		policy = RestartPolicyExitCode
	}
	if target == TargetTrainJob && policy != RestartPolicyExitCode {
		return renderErr("elastic_worker_restart_policy",
			"%s: a TrainJob's node pods restart as its runtime's Job template says; it cannot be set", pyRepr(policy))
	}
	if target == TargetJobSet && policy != RestartPolicyExitCode && policy != RestartPolicyNever {
		return renderErr("elastic_worker_restart_policy", "%s is not one of %s", pyRepr(policy),
			strings.Join(elasticWorkerRestartPolicies, ", "))
	}
	return nil
}

// nodeJob is the replicated job of Trainer's torch runtime (and its container), and of the rendered JobSet.
const nodeJob = "node"

// nodePodName is pod index of the node replicated job of JobSet name (its host name too):
// JobSet names a pod "<jobset>-<replicated job>-<job index>-<pod index>".
func nodePodName(name string, index int32) string {
	return fmt.Sprintf("%s-%s-0-%d", name, nodeJob, index)
}

// nodeHost is node 0's DNS name: its pod host name under the JobSet's headless Service.
func nodeHost(name string) string { return nodePodName(name, 0) + "." + name }

// nodeCount is the pods of the job: max_replicas for an elastic task (what a
// PyTorchJob creates), else the Master and the Workers, all as nodes; a
// *RenderError when a non-elastic task has no worker.
func nodeCount(v *taskView) (int32, error) {
	counts, err := replicaCountsFor(v, ModeStrict)
	var nodes int32
	for _, c := range counts {
		nodes += c.count
	}
	return nodes, err
}

// checkNodeName is the job's name: a DNS-1035 label short enough for the last pod's host name.
func checkNodeName(name jsonValue, nodes int32) error {
	return checkJobName(name, func(s string) []string { return []string{nodePodName(s, max(nodes-1, 0))} },
		"", "JobSet names the last pod (and its host)")
}

// rdzvEnv is PET_RDZV_ENDPOINT for an elastic task: the task's rdzv_host, else node
// 0; the task's rdzv_port, else defaultPort. None for a task without an elastic
// config (the pod entrypoint refuses it).
func rdzvEnv(v *taskView, name string, defaultPort int32) []any {
	if v.elastic == nil {
		return nil
	}
	host, port := v.elastic.GetRdzvHost(), v.elastic.GetRdzvPort()
	if host == "" {
		host = nodeHost(name)
	}
	if port == 0 {
		port = defaultPort
	}
	return []any{EnvVar{Name: envRdzvEndpoint, Value: fmt.Sprintf("%s:%d", host, port)}}
}

// staticBackendLoss: the static backend needs each pod's node rank, which the pod entrypoint does not read.
func staticBackendLoss(v *taskView, target string) []TargetLoss {
	if v.elastic == nil || (v.elastic.GetRdzvBackend() != "static") {
		return nil
	}
	return []TargetLoss{newLoss("elastic_config.rdzv_backend", target, "the static backend needs each pod's own "+
		"node rank; the pod entrypoint passes none (it reads neither PET_NODE_RANK nor the Job's completion index), "+
		"so every pod would claim rank 0: use c10d")}
}

// workerSpec is the Worker's own settings, nil for the legacy shape (which has none).
func workerSpec(v *taskView) *replicaView {
	if v.worker.specPath == "" {
		return nil
	}
	return &v.worker
}

// masterLosses are a non-elastic task's Master settings that differ from the
// Workers': every node runs one template.
func masterLosses(v *taskView, target string) []TargetLoss {
	m := v.master
	if v.elastic != nil || m == nil || m.specPath == "" {
		return nil
	}
	var w replicaView // the Worker's settings, all unset for the legacy shape
	if ws := workerSpec(v); ws != nil {
		w = *ws
	}
	var out []TargetLoss
	for _, s := range []struct {
		setting      string
		set, differs bool
	}{
		{"image", m.image != "", m.image != w.image},
		{"resources", m.resources != nil, w.resources == nil || !proto.Equal(m.resources, w.resources)},
		{"restart_policy", m.restart != 0, m.restart != w.restart},
	} {
		if s.set && s.differs {
			out = append(out, newLoss(m.specPath+"."+s.setting, target, "every node runs the Workers' pod template "+
				"(the Master is node 0); the Master's own "+s.setting+" is not rendered"))
		}
	}
	return out
}

// nodeResources are a node's container resources: the Worker's own (STORAGE
// dropped, as the PyTorchJob drops it) when its spec sets them, else the resources
// option; nil when empty.
func nodeResources(v *taskView, c *podContainer) *ResourceRequirements {
	res := c.resources
	if w := workerSpec(v); w != nil && w.resources != nil {
		var dropped []SkewWarning // the reference warns; RenderTarget returns no warnings
		res = replicaResourcesWarn(w.resources, w.specPath+".resources", &dropped)
	}
	if res.empty() {
		return nil
	}
	return res
}

// nodeImage is the Worker's own image, else the image option.
func nodeImage(v *taskView, c *podContainer) string {
	if w := workerSpec(v); w != nil && w.image != "" {
		return w.image
	}
	return c.image
}

// metadataOf is the labels and annotations (each when there are any), as the job
// and every pod template carry them; a new map each call.
func metadataOf(c *podContainer) map[string]any {
	out := map[string]any{}
	if len(c.labels) > 0 {
		out["labels"] = maps.Clone(c.labels)
	}
	if len(c.annotations) > 0 {
		out["annotations"] = maps.Clone(c.annotations)
	}
	return out
}

// envOf is container env entries as a list of any (a JobSet's hold valueFrom entries too).
func envOf(env []EnvVar, more ...[]any) []any {
	out := make([]any, 0, len(env))
	for _, e := range env {
		out = append(out, e)
	}
	for _, m := range more {
		out = append(out, m...)
	}
	return out
}

// objectMeta is the metadata of a TrainJob or JobSet: its name and namespace, and the labels and annotations.
func objectMeta(name, namespace string, c *podContainer) map[string]any {
	meta := metadataOf(c)
	meta["name"] = name
	meta["namespace"] = namespace
	return meta
}
