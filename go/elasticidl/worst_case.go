package elasticidl

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
)

// The worst case from a fault to the job's end, computed from the task's own values
// (the reference's elastic_idl._backend.worst_case; both pass contract/worst_case.json).
// The derivation, term by term: docs/guide/when-pods-die.md, "The worst case, computed".
// Every operation is done in the reference's order, and every product is rounded
// before it is added (float64(...)), so that no fused multiply-add changes a figure.

// WorstCase is the worst-case time from a fault to the job's end and every term it is made of.
type WorstCase struct {
	// Seconds is the bound; nil when unbounded.
	Seconds *float64 `json:"seconds"`
	// Bounded is Seconds != nil.
	Bounded bool `json:"bounded"`
	// PerIncarnationS is P, the bound within one pod incarnation: R x (D + S + Z).
	PerIncarnationS float64 `json:"per_incarnation_s"`
	// RestartPolicy is the Worker's restartPolicy it was computed for.
	RestartPolicy string `json:"restart_policy"`
	// Terms are the inputs and the intermediate terms.
	Terms WorstCaseTerms `json:"terms"`
}

// WorstCaseTerms are the terms of a WorstCase, in seconds unless the name says otherwise.
type WorstCaseTerms struct {
	Rounds              int64   `json:"rounds"`      // R = max_restarts + 1
	DetectS             float64 `json:"detect_s"`    // D = max(DetectStuckS, DetectPeerS, DetectStoreS)
	DetectedBy          string  `json:"detected_by"` // "stuck", "peer" or "store": the first that is D
	DetectStuckS        float64 `json:"detect_stuck_s"`
	DetectPeerS         float64 `json:"detect_peer_s"`
	DetectStoreS        float64 `json:"detect_store_s"`
	StopS               float64 `json:"stop_s"`       // S = shutdown_timeout
	RendezvousS         float64 `json:"rendezvous_s"` // Z = JoinTimeoutS + CasBackoffMaxS
	JoinTimeoutS        float64 `json:"join_timeout_s"`
	CasBackoffMaxS      float64 `json:"cas_backoff_max_s"` // the delay after a failed rendezvous write (torch 2.15); 0 unset
	LeaveS              float64 `json:"leave_s"`           // L = 1 s + monitor_interval + shutdown_timeout
	CollectiveTimeoutS  float64 `json:"collective_timeout_s"`
	MonitorIntervalS    float64 `json:"monitor_interval_s"`
	KeepAliveIntervalS  float64 `json:"keep_alive_interval_s"`
	KeepAliveMaxAttempt int64   `json:"keep_alive_max_attempt"`
	ReadTimeoutS        float64 `json:"read_timeout_s"`
	StuckMarginS        float64 `json:"stuck_margin_s"`
	// PodIncarnations is 1 under Never, backoff_limit + 1 under OnFailure or Always with a
	// backoff_limit; nil when the incarnations are not bounded.
	PodIncarnations  *int64 `json:"pod_incarnations"`
	BackoffLimit     *int32 `json:"backoff_limit"` // nil: unset (0)
	CrashLoopBackoff int64  `json:"crash_loop_backoff_s"`
	ActiveDeadlineS  *int32 `json:"active_deadline_s"` // nil: unset (0)
	CappedByDeadline bool   `json:"capped_by_deadline"`
}

// WorkerRestartPolicy is the restartPolicy the renderer writes for the task's Worker
// replicas: its own, with the enum's zero value read as elasticDefault for an elastic
// task ("" is RestartPolicyExitCode, the renderer's default; the legacy shape has no
// replica settings).
func (t *Task) WorkerRestartPolicy(elasticDefault string) string {
	v := t.view()
	restart := int32(0)
	if v.worker.specPath != "" {
		restart = v.worker.restart
	}
	if v.elastic != nil && restart == 0 {
		return t.elasticWorkerDefault(elasticDefault)
	}
	policy, _ := enumTextOf(restartPolicies, restart)
	return policy
}

// RestartPolicyOnFailure is what an elastic Worker that would get ExitCode gets when the
// task states a budget (run_policy.backoff_limit): the operator counts no ExitCode
// re-creation against backoffLimit (those pods run with the pod policy Never, so their
// restart count stays 0); under OnFailure the kubelet restarts the container in place and
// the operator fails the job once the restarts reach backoffLimit.
const RestartPolicyOnFailure = "OnFailure"

// budgetedCleanPodPolicy is the cleanPodPolicy of a job whose Worker is OnFailure by its
// budget when the task's is the enum's zero value (None): under None the operator leaves a
// failed job's pods running and the kubelet would restart their containers forever;
// Running deletes those still running when the job ends (the reference's
// BUDGETED_CLEAN_POD_POLICY).
const budgetedCleanPodPolicy = "Running"

// budgeted says whether the Worker's OnFailure comes from the task's backoff_limit: an
// elastic task whose Worker leaves its policy unset, under elasticDefault.
func (t *Task) budgeted(elasticDefault string, worker *replicaView) bool {
	unset := worker == nil || worker.restart == 0
	return t.view().elastic != nil && unset && t.elasticWorkerDefault(elasticDefault) == RestartPolicyOnFailure
}

// elasticWorkerDefault is the policy an elastic Worker that leaves its own unset gets:
// elasticDefault ("" is RestartPolicyExitCode), or RestartPolicyOnFailure when that is
// ExitCode and the task states run_policy.backoff_limit (the reference's
// elastic_worker_default).
func (t *Task) elasticWorkerDefault(elasticDefault string) string {
	if elasticDefault == "" {
		elasticDefault = RestartPolicyExitCode
	}
	if elasticDefault == RestartPolicyExitCode && t.view().runPolicy.GetBackoffLimit() > 0 {
		return RestartPolicyOnFailure
	}
	return elasticDefault
}

// CrashLoopBackoffS is the kubelet's back-off delays before the given number of in-place
// restarts: 10 s, doubled each time, at most 300 s.
func CrashLoopBackoffS(restarts int64) int64 {
	total, delay, n := int64(0), int64(crashLoopBaseS), int64(0)
	for n < restarts && delay < crashLoopCapS {
		total, delay, n = total+delay, delay*2, n+1
	}
	return total + crashLoopCapS*(restarts-n)
}

func durationS(d *durationpb.Duration, unset float64) float64 {
	if d == nil {
		return unset
	}
	return float64(d.GetSeconds()) + float64(d.GetNanos())/1e9
}

// keepAlive is a keep-alive rendezvous option as torch reads it (an integer), >= 1.
func (t *Task) keepAlive(key string, unset int64) (int64, error) {
	value, found := "", false
	for _, o := range t.view().elastic.GetRdzvOptions() {
		if o.GetKey() == key {
			value, found = o.GetValue(), true // the last wins, as in the reference's dict
		}
	}
	if !found {
		return unset, nil
	}
	digits := strings.TrimPrefix(strings.Trim(value, " \t\n\r\v\f"), "+")
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || len(digits) > 9 || strings.TrimLeft(digits, "0123456789") != "" || n < 1 {
		return 0, &ValidationError{Violations: []Violation{{
			Field: "elastic_config.rdzv_options[" + key + "]",
			Rule:  keepAliveRule,
			Message: fmt.Sprintf("%q is not a whole number from 1 to 999999999 (torch reads %s as an integer; "+
				"the worst case is computed for one it can read)", value, key),
		}}}
	}
	return n, nil
}

// WorstCase is the worst case from a fault to the job's end of an elastic task whose
// Worker has restartPolicy (what the renderer writes: WorkerRestartPolicy); nil for a
// task without an elastic config. The values are the ones the launcher uses, defaults
// filled in. A keep-alive rendezvous option that is not a whole number >= 1 is a
// *ValidationError (rule worst_case.keep_alive); a restartPolicy other than Never,
// OnFailure, Always and ExitCode is an error.
func (t *Task) WorstCase(restartPolicy string) (*WorstCase, error) {
	switch restartPolicy {
	case "Never", "OnFailure", "Always", RestartPolicyExitCode:
	default:
		return nil, fmt.Errorf("restart policy %q is not one of Never, OnFailure, Always, ExitCode", restartPolicy)
	}
	v := t.view()
	e := v.elastic
	if e == nil {
		return nil, nil
	}
	ivl, err := t.keepAlive(keepAliveIntervalKey, defaultKeepAliveIntervalS)
	if err != nil {
		return nil, err
	}
	att, err := t.keepAlive(keepAliveMaxAttemptKey, defaultKeepAliveMaxAttempt)
	if err != nil {
		return nil, err
	}
	monitor := durationS(e.GetMonitorInterval(), defaultMonitorIntervalS)
	collective := durationS(e.GetCollectiveTimeout(), defaultCollectiveTimeoutS)
	interval, attempts := float64(ivl), float64(att)
	read := durationS(e.GetReadTimeout(), defaultReadTimeoutS)
	join := durationS(e.GetJoinTimeout(), defaultJoinTimeoutS)
	cas := durationS(e.GetCasBackoffMaxSeconds(), 0)
	stop := durationS(e.GetShutdownTimeout(), defaultShutdownTimeoutS)

	stuck := collective + monitor + stuckMarginS
	peer := float64(interval*(attempts+1.0)) + monitor
	store := read + float64(interval*attempts) + stateCacheS + monitor
	detect, by := stuck, "stuck"
	if peer > detect {
		detect, by = peer, "peer"
	}
	if store > detect {
		detect, by = store, "store"
	}
	rounds := int64(e.GetMaxRestarts()) + 1
	leave := stateCacheS + monitor + stop
	rendezvous := join + cas
	per := float64(float64(rounds)*(detect+stop+rendezvous)) + leave

	backoff, deadline := v.runPolicy.GetBackoffLimit(), v.runPolicy.GetActiveDeadlineSeconds()
	terms := WorstCaseTerms{
		Rounds: rounds, DetectS: detect, DetectedBy: by,
		DetectStuckS: stuck, DetectPeerS: peer, DetectStoreS: store,
		StopS: stop, RendezvousS: rendezvous, JoinTimeoutS: join, CasBackoffMaxS: cas, LeaveS: leave, CollectiveTimeoutS: collective, MonitorIntervalS: monitor,
		KeepAliveIntervalS: interval, KeepAliveMaxAttempt: att, ReadTimeoutS: read, StuckMarginS: stuckMarginS,
	}
	var total *float64
	switch {
	case restartPolicy == "Never":
		one, p := int64(1), per
		terms.PodIncarnations, total = &one, &p
	case (restartPolicy == "OnFailure" || restartPolicy == "Always") && backoff > 0:
		inc := int64(backoff) + 1
		terms.PodIncarnations, terms.CrashLoopBackoff = &inc, CrashLoopBackoffS(int64(backoff))
		x := float64(float64(inc)*per) + float64(terms.CrashLoopBackoff)
		total = &x
	}
	// else: OnFailure/Always without a backoff_limit; ExitCode (its re-creations are never counted)
	if backoff > 0 {
		terms.BackoffLimit = &backoff
	}
	if deadline > 0 {
		terms.ActiveDeadlineS = &deadline
		if total == nil || float64(deadline) < *total {
			d := float64(deadline)
			total, terms.CappedByDeadline = &d, true
		}
	}
	return &WorstCase{
		Seconds: total, Bounded: total != nil, PerIncarnationS: per, RestartPolicy: restartPolicy, Terms: terms,
	}, nil
}
