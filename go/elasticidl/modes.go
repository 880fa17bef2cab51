package elasticidl

// Render modes (strict, upstream), the elastic Worker's restart policy option, and
// the warnings a render returns: the reference's JobOptions.mode,
// elastic_worker_restart_policy and its SkewWarnings (elastic_idl/_backend/pytorchjob.py).

import (
	"fmt"
	"strings"

	eidlcorev1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/core/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// RenderMode says how a task is rendered: ModeStrict (the default) or ModeUpstream.
type RenderMode string

const (
	// ModeStrict renders by this project's rules (the zero value "" means it too).
	ModeStrict RenderMode = RenderMode(renderModeStrict)
	// ModeUpstream renders as Flyte 1.x's pytorch plugin where its behaviour is
	// defensible: a Master without replicas is 1, a non-elastic task without workers is
	// a Master-only job, an elastic worker count other than 0 or max_replicas is kept,
	// the process count goes to elasticPolicy.nProcPerNode (and then not to
	// spec.nprocPerNode), an empty rdzvBackend stays "". Extension fields render in both.
	ModeUpstream RenderMode = RenderMode(renderModeUpstream)
)

// Restart policies an elastic task's Worker may get for the enum's zero value
// (RenderOptions.ElasticWorkerRestartPolicy).
const (
	// RestartPolicyExitCode is the default in every mode.
	RestartPolicyExitCode = elasticWorkerRestartPolicy
	// RestartPolicyNever is upstream's.
	RestartPolicyNever = "Never"
)

// SkewWarning names something of the task that was not used: a field this version does
// not know (a newer SDK's), or a task resource the API server would refuse (STORAGE).
type SkewWarning struct {
	// Field is the field path, as the reference's SkewWarning.fields names it.
	Field string
	// Reason says what happened to it.
	Reason string
}

func (w SkewWarning) String() string { return w.Field + ": " + w.Reason }

// RenderJob is RenderPyTorchJob with the warnings of the render: each field of the
// task this version does not know (Task.UnknownFields) and each task resource it
// dropped (STORAGE, which the API server refuses in a pod; upstream drops it too).
func (t *Task) RenderJob(o RenderOptions) (*PyTorchJob, []SkewWarning, error) {
	return t.renderJob(o.generic())
}

// renderModeOf reads the mode, elastic_worker_restart_policy and network_policy
// options (checked first, as the reference's _check_mode does).
func renderModeOf(opts *jsonObject) (RenderMode, string, error) {
	mode := ModeStrict
	if v, ok := opts.get("mode"); ok {
		s, isStr := v.(string)
		switch {
		case isStr && s == renderModeStrict, isStr && s == renderModeUpstream:
			mode = RenderMode(s)
		default:
			return "", "", renderErr("mode", "%s is not one of %s", pyRepr(v), strings.Join(renderModes, ", "))
		}
	}
	restart := RestartPolicyExitCode
	if v, ok := opts.get("elastic_worker_restart_policy"); ok {
		s, isStr := v.(string)
		if !isStr || !contains(elasticWorkerRestartPolicies, s) {
			return "", "", renderErr("elastic_worker_restart_policy", "%s is not one of %s", pyRepr(v),
				strings.Join(elasticWorkerRestartPolicies, ", "))
		}
		restart = s
	}
	if v, ok := opts.get("network_policy"); ok {
		if _, isBool := v.(bool); !isBool {
			return "", "", renderErr("network_policy", "expected true or false, got %s", pyRepr(v))
		}
	}
	return mode, restart, nil
}

// ToleratedInUpstreamMode says whether ModeUpstream renders the task despite
// violation v: replicas.workers_required (a Master-only job),
// replicas.worker_matches_max (the count is kept) and replicas.master_count for a
// Master of 0 replicas (rendered as 1) or of an elastic task (not rendered).
func (t *Task) ToleratedInUpstreamMode(v Violation) bool {
	if !contains(upstreamToleratedRules, v.Rule) {
		return false
	}
	if v.Rule == "replicas.master_count" {
		tv := t.view()
		return tv.elastic != nil || (tv.master != nil && tv.master.replicas == 0)
	}
	return true
}

// validateFor is Validate, less the violations the mode renders anyway.
func (t *Task) validateFor(mode RenderMode) error {
	found := t.Violations()
	if mode == ModeUpstream {
		kept := found[:0:0]
		for _, v := range found {
			if !t.ToleratedInUpstreamMode(v) {
				kept = append(kept, v)
			}
		}
		found = kept
	}
	if len(found) > 0 {
		return &ValidationError{Violations: found}
	}
	return nil
}

// replicaCountsFor are the pods per replica type in a mode (see the reference's _replica_counts).
func replicaCountsFor(v *taskView, mode RenderMode) ([]replicaCount, error) {
	workers := v.workerCount()
	if mode == ModeUpstream {
		if v.elastic != nil && v.worker.replicas > 0 {
			workers = v.worker.replicas
		} else if v.elastic == nil && workers == 0 {
			return []replicaCount{{ReplicaMaster, 1}}, nil
		}
	}
	if workers <= 0 {
		// Upstream: "number of workers must be greater than 0"; the webhook agrees.
		return nil, renderErr(v.worker.replicasPath, "a non-elastic job needs at least 1 worker, got %d", workers)
	}
	if v.elastic != nil {
		return []replicaCount{{ReplicaWorker, workers}}, nil
	}
	return []replicaCount{{ReplicaMaster, 1}, {ReplicaWorker, workers}}, nil
}

func countOf(counts []replicaCount, replicaType string) (int32, bool) {
	for _, c := range counts {
		if c.replicaType == replicaType {
			return c.count, true
		}
	}
	return 0, false
}

// elasticSpecFor sets spec.elasticPolicy and spec.nprocPerNode as the mode says: the
// upstream mode copies the backend as written and writes a process count into the
// deprecated elasticPolicy.nProcPerNode instead of spec.nprocPerNode (never both: the
// operator's webhook refuses that); auto/cpu/gpu only fit spec.nprocPerNode.
func elasticSpecFor(spec *PyTorchJobSpec, e *eidlpluginsv1.ElasticConfig, mode RenderMode) {
	spec.ElasticPolicy = ElasticPolicyOf(e)
	_, isPolicy := enumTextOf(nprocPolicies, int32(e.GetNprocPolicy()))
	if mode == ModeUpstream {
		backend := e.GetRdzvBackend()
		spec.ElasticPolicy.RdzvBackend = &backend
		if !isPolicy {
			n := e.GetNprocPerNode()
			spec.ElasticPolicy.NProcPerNode = &n
			return
		}
	}
	nproc := nprocOf(e)
	spec.NprocPerNode = &nproc
}

// replicaResourcesWarn is replicaResources without STORAGE, each dropped entry a warning.
func replicaResourcesWarn(res *eidlcorev1.Resources, path string, warn *[]SkewWarning) *ResourceRequirements {
	kept := &eidlcorev1.Resources{}
	for _, kind := range []string{keyRequests, keyLimits} {
		entries := res.GetRequests()
		if kind == keyLimits {
			entries = res.GetLimits()
		}
		var out []*eidlcorev1.Resources_ResourceEntry
		for i, e := range entries {
			if e.GetName() == eidlcorev1.Resources_STORAGE {
				*warn = append(*warn, SkewWarning{Field: fmt.Sprintf("%s.%s[%d]", path, kind, i), Reason: storageDropped})
				continue
			}
			out = append(out, e)
		}
		if kind == keyRequests {
			kept.Requests = out
		} else {
			kept.Limits = out
		}
	}
	return replicaResources(kept)
}

// ValidateIn is Validate in a render mode: ModeUpstream leaves out the violations it
// renders anyway (ToleratedInUpstreamMode); the *ValidationError lists the rest.
func (t *Task) ValidateIn(mode RenderMode) error {
	if mode == "" {
		mode = ModeStrict
	}
	return t.validateFor(mode)
}

// ReplicaCountsIn are the replicas of each replica type (keys ReplicaMaster,
// ReplicaWorker) of the task's job in a render mode: ReplicaCounts in ModeStrict; in
// ModeUpstream an elastic worker count that is set is kept and a non-elastic task
// without workers is a Master-only job. A *RenderError when the mode renders no job
// (no workers in ModeStrict). The task should pass ValidateIn(mode).
func (t *Task) ReplicaCountsIn(mode RenderMode) (map[string]int32, error) {
	counts, err := replicaCountsFor(t.view(), mode)
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, c := range counts {
		out[c.replicaType] = c.count
	}
	return out, nil
}

// ElasticSpecIn is spec.elasticPolicy and spec.nprocPerNode ("" when the mode leaves it
// unset) for an elastic config in a render mode: ElasticPolicyOf and NprocPerNode in
// ModeStrict; in ModeUpstream the backend as written and a process count in the
// deprecated elasticPolicy.nProcPerNode instead of spec.nprocPerNode (an auto, cpu or
// gpu policy stays in spec.nprocPerNode). Nil and "" for nil.
func ElasticSpecIn(e *eidlpluginsv1.ElasticConfig, mode RenderMode) (*ElasticPolicy, string) {
	if e == nil {
		return nil, ""
	}
	var spec PyTorchJobSpec
	elasticSpecFor(&spec, e, mode)
	if spec.NprocPerNode == nil {
		return spec.ElasticPolicy, ""
	}
	return spec.ElasticPolicy, *spec.NprocPerNode
}
