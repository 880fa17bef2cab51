package elasticidl

// Validation: every rule of the reference (elastic_idl/_task/validate.py), with the
// same rule ids and field paths, reported all at once in the same order.
//
// The rule ids, limits, backends and signal names come from tables_gen.go, which
// is generated from the Python reference. The checks below are an ordered table:
// each names the rules it may report, and tests check that together they cover
// every rule of Rules except the launch-only ones. To follow a new Python rule,
// regenerate the tables (scripts/gen.sh) and add its check at the same position.

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	eidlcorev1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/core/v1"
	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// Rule is one rule of the contract: its stable id and what it requires.
type Rule struct {
	ID       string
	Requires string
}

// Rules lists every rule id of the reference (elastic_idl.RULES) with what it
// requires, in the reference's order: a new slice on each call.
func Rules() []Rule { return append([]Rule(nil), rules...) }

// Rule ids the Go code names directly.
const (
	ruleDurationValid = "elastic.duration.valid"
	ruleEnumKnown     = "enum.known"
)

// launchRules are rules of the reference that only building a LaunchSpec checks
// (never Violations): the Go backend builds no LaunchSpec.
var launchRules = []string{"launch.elastic_required", "env.rdzv_conf"}

// check is one step of validation, in the reference's order.
type check struct {
	// rules are the rule ids this step may report.
	rules []string
	run   func(v *taskView, r *report)
}

type report struct{ out []Violation }

// add reports a violation; its message is one bounded line, as the reference's.
func (r *report) add(field, rule, format string, args ...any) {
	r.out = append(r.out, Violation{Field: field, Rule: rule, Message: oneLine(fmt.Sprintf(format, args...), maxErrorChars)})
}

// onElastic runs a step only for an elastic task, on its config.
func onElastic(f func(e *eidlpluginsv1.ElasticConfig, r *report)) func(*taskView, *report) {
	return func(v *taskView, r *report) {
		if v.elastic != nil {
			f(v.elastic, r)
		}
	}
}

const ec = "elastic_config"

// checks is the validation table. Order matters: it is the order of the violations.
var checks = []check{
	{[]string{"task.not_empty"}, func(v *taskView, r *report) {
		if proto.Size(v.message) == 0 {
			r.add("", "task.not_empty", "the task is empty (no field is set: an empty file, {} or null?); "+
				"a task needs an elastic_config or worker replicas")
		}
	}},
	{[]string{"elastic.min_replicas.min"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if e.GetMinReplicas() < 1 {
			r.add(ec+".min_replicas", "elastic.min_replicas.min", "must be >= 1, got %d", e.GetMinReplicas())
		}
	})},
	{[]string{"elastic.min_le_max"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if e.GetMinReplicas() > e.GetMaxReplicas() {
			r.add(ec+".max_replicas", "elastic.min_le_max", "max_replicas %d is below min_replicas %d",
				e.GetMaxReplicas(), e.GetMinReplicas())
		}
	})},
	{[]string{ruleEnumKnown}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		enumFields(r, ec, e, "nproc_policy")
	})},
	{[]string{"elastic.nproc.conflict", "elastic.nproc.min"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if e.GetNprocPolicy() != 0 {
			if e.GetNprocPerNode() != 0 {
				r.add(ec+".nproc_per_node", "elastic.nproc.conflict",
					"is %d but nproc_policy is set; use one of the two", e.GetNprocPerNode())
			}
		} else if e.GetNprocPerNode() < 1 {
			r.add(ec+".nproc_per_node", "elastic.nproc.min",
				"must be >= 1 (or set nproc_policy auto/cpu/gpu), got %d", e.GetNprocPerNode())
		}
	})},
	{[]string{"elastic.max_restarts.min"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if e.GetMaxRestarts() < 0 {
			r.add(ec+".max_restarts", "elastic.max_restarts.min", "must be >= 0, got %d", e.GetMaxRestarts())
		}
	})},
	{[]string{"elastic.rdzv_backend.known", "elastic.static.fixed_size"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		backend := e.GetRdzvBackend()
		if backend == "" {
			backend = defaultRdzvBackend
		}
		switch {
		case !contains(knownBackends, backend):
			r.add(ec+".rdzv_backend", "elastic.rdzv_backend.known", "%s is not one of %s",
				brief(e.GetRdzvBackend()), strings.Join(knownBackends, ", "))
		case backend == "static" && e.GetMinReplicas() != e.GetMaxReplicas():
			r.add(ec+".rdzv_backend", "elastic.static.fixed_size",
				"static needs min_replicas == max_replicas, got %d:%d", e.GetMinReplicas(), e.GetMaxReplicas())
		}
	})},
	{[]string{ruleDurationValid, "elastic.duration.positive", "elastic.duration.non_negative", "elastic.duration.whole_seconds"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		m := e.ProtoReflect()
		for _, name := range durationFields {
			fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
			if !m.Has(fd) {
				continue
			}
			s, n := durationOf(m.Get(fd).Message())
			switch {
			case n <= -1e9 || n >= 1e9 || s > maxDurationS || s < -maxDurationS || (s > 0 && n < 0) || (s < 0 && n > 0):
				r.add(ec+"."+name, ruleDurationValid, "invalid Duration seconds=%d nanos=%d", s, n)
			case contains(nonNegativeDurationFields, name) && (s < 0 || n < 0):
				r.add(ec+"."+name, "elastic.duration.non_negative", "must be >= 0, got %ds %dns", s, n)
			case !contains(nonNegativeDurationFields, name) && (s < 0 || (s == 0 && n <= 0)):
				r.add(ec+"."+name, "elastic.duration.positive", "must be > 0, got %ds %dns", s, n)
			case n != 0 && contains(wholeSecondsFields, name):
				r.add(ec+"."+name, "elastic.duration.whole_seconds",
					"must be whole seconds (torch reads it as an integer), got %ds %dns", s, n)
			}
		}
	})},
	{[]string{"elastic.failure_timeout.max"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		m := e.ProtoReflect()
		for _, name := range failureTimeoutFields {
			fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
			if !m.Has(fd) {
				continue
			}
			s, n := durationOf(m.Get(fd).Message())
			valid := n > -1e9 && n < 1e9 && s <= maxDurationS && s >= 0 && !(s > 0 && n < 0) && !(s == 0 && n <= 0)
			if valid && n != 0 && contains(wholeSecondsFields, name) {
				valid = false // reported as elastic.duration.whole_seconds
			}
			if valid && (s > maxFailureTimeoutS || (s == maxFailureTimeoutS && n > 0)) {
				r.add(ec+"."+name, "elastic.failure_timeout.max", "must be <= %d s (24 h)", maxFailureTimeoutS)
			}
		}
	})},
	{[]string{"elastic.monitor_interval.max"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if d := e.GetMonitorInterval(); d != nil && d.GetSeconds() >= maxMonitorIntervalS &&
			(d.GetSeconds() > maxMonitorIntervalS || d.GetNanos() > 0) {
			r.add(ec+".monitor_interval", "elastic.monitor_interval.max", "must be <= %d s", maxMonitorIntervalS)
		}
	})},
	{[]string{ruleEnumKnown}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		enumFields(r, ec, e, "start_method", "redirects", "tee", "numa_binding",
			"nccl_async_error_handling", "nccl_enable_monitoring")
	})},
	{[]string{"elastic.rdzv_options.key", "elastic.rdzv_options.typed", "elastic.rdzv_options.unique",
		"elastic.rdzv_options.value"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		seen := map[string]bool{}
		for i, opt := range e.GetRdzvOptions() {
			f := func(leaf string) string { return fmt.Sprintf("%s.rdzv_options[%d].%s", ec, i, leaf) } // for a violation only
			key := opt.GetKey()
			switch {
			case key == "" || strings.ContainsAny(key, ",="):
				r.add(f("key"), "elastic.rdzv_options.key", "bad key %s: non-empty, no ',' or '='", brief(key))
			case lookup(typedRdzvKeys, key) != "":
				r.add(f("key"), "elastic.rdzv_options.typed",
					"%s has a typed field: set elastic_config.%s instead", brief(key), lookup(typedRdzvKeys, key))
			case seen[key]:
				r.add(f("key"), "elastic.rdzv_options.unique", "duplicate key %s", brief(key))
			}
			seen[key] = true
			if strings.Contains(opt.GetValue(), ",") {
				r.add(f("value"), "elastic.rdzv_options.value", "value %s contains ','", brief(opt.GetValue()))
			}
		}
	})},
	{[]string{"elastic.rdzv_id.format"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		id := e.GetRdzvId()
		if id == "" {
			return
		}
		bad := len(id) > maxRdzvIDLen || strings.Contains(id, ",")
		for _, c := range id {
			bad = bad || c < 33 || c >= 127
		}
		if bad {
			r.add(ec+".rdzv_id", "elastic.rdzv_id.format", "bad rdzv_id %s: %s", brief(id), ruleText("elastic.rdzv_id.format"))
		}
	})},
	{[]string{"elastic.rdzv_host.format"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		host := e.GetRdzvHost()
		if host != "" && (utf8.RuneCountInString(host) > 253 ||
			strings.IndexFunc(host, func(c rune) bool { return isPySpace(c) || c == ',' || c == '/' }) >= 0) {
			r.add(ec+".rdzv_host", "elastic.rdzv_host.format", "bad rdzv_host %s", brief(host))
		}
	})},
	{[]string{"elastic.rdzv_port.range"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		if p := e.GetRdzvPort(); p < 0 || p > 65535 {
			r.add(ec+".rdzv_port", "elastic.rdzv_port.range", "must be in 0..65535, got %d", p)
		}
	})},
	{[]string{"elastic.local_ranks_filter.range"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		ranks := e.GetLocalRanksFilter()
		seen := map[int32]bool{}
		bad := false
		for _, rank := range ranks {
			bad = bad || rank < 0 || (e.GetNprocPerNode() > 0 && rank >= e.GetNprocPerNode()) || seen[rank]
			seen[rank] = true
		}
		if bad {
			r.add(ec+".local_ranks_filter", "elastic.local_ranks_filter.range",
				"%s: entries must be unique, >= 0 and < nproc_per_node", briefList(ranks, func(n int32) string { return briefInt(int64(n)) }))
		}
	})},
	{[]string{"elastic.signals.known"}, onElastic(func(e *eidlpluginsv1.ElasticConfig, r *report) {
		names := e.GetSignalsToHandle()
		seen := map[string]bool{}
		unknown := []string{}
		bad := false
		for _, n := range names {
			if !contains(signalNames, n) {
				unknown = append(unknown, n)
			}
			bad = bad || seen[n]
			seen[n] = true
		}
		if bad || len(unknown) > 0 {
			r.add(ec+".signals_to_handle", "elastic.signals.known",
				"%s: names must be unique signal names such as SIGTERM (unknown: %s)",
				briefList(names, brief), briefList(unknown, brief))
		}
	})},
	{replicaRules, func(v *taskView, r *report) { replicaChecks(v, &v.worker, false, r) }},
	{replicaRules, func(v *taskView, r *report) {
		if v.master != nil {
			replicaChecks(v, v.master, true, r)
		}
	}},
	{[]string{"replicas.deprecated_conflict"}, func(v *taskView, r *report) {
		if v.kf == nil {
			return
		}
		for _, path := range []string{"worker_replicas", "master_replicas"} {
			spec := v.kf.GetWorkerReplicas()
			if path == "master_replicas" {
				spec = v.kf.GetMasterReplicas()
			}
			c := spec.GetCommon()
			if c == nil {
				continue
			}
			//lint:ignore SA1019 the deprecated fields are read on purpose: a conflict with common is a violation
			if old := spec.GetReplicas(); old != 0 && old != c.GetReplicas() {
				r.add(path+".replicas", "replicas.deprecated_conflict",
					"deprecated replicas=%d differs from common.replicas=%d; common wins, so drop one", old, c.GetReplicas())
			}
			//lint:ignore SA1019 the deprecated fields are read on purpose: a conflict with common is a violation
			if old := spec.GetImage(); old != "" && old != c.GetImage() {
				r.add(path+".image", "replicas.deprecated_conflict",
					"deprecated image=%s differs from common.image=%s; common wins, so drop one", brief(old), brief(c.GetImage()))
			}
			//lint:ignore SA1019 the deprecated fields are read on purpose: a conflict with common is a violation
			if old := spec.GetRestartPolicy(); old != 0 && old != c.GetRestartPolicy() {
				r.add(path+".restart_policy", "replicas.deprecated_conflict",
					"deprecated restart_policy=%d differs from common.restart_policy=%d; common wins, so drop one",
					old, c.GetRestartPolicy())
			}
			//lint:ignore SA1019 the deprecated fields are read on purpose: a conflict with common is a violation
			if spec.GetResources() != nil && !proto.Equal(spec.GetResources(), orEmpty(c.GetResources())) {
				r.add(path+".resources", "replicas.deprecated_conflict",
					"deprecated resources differ from common.resources; common wins, so drop one")
			}
		}
	}},
	{[]string{ruleEnumKnown, "run_policy.non_negative"}, func(v *taskView, r *report) {
		rp := v.runPolicy
		if rp == nil {
			return
		}
		enumFields(r, "run_policy", rp, "clean_pod_policy")
		for _, f := range []struct {
			name  string
			value int32
		}{
			{"ttl_seconds_after_finished", rp.GetTtlSecondsAfterFinished()},
			{"active_deadline_seconds", rp.GetActiveDeadlineSeconds()},
			{"backoff_limit", rp.GetBackoffLimit()},
		} {
			if f.value < 0 {
				r.add("run_policy."+f.name, "run_policy.non_negative", "must be >= 0, got %d", f.value)
			}
		}
	}},
}

var replicaRules = []string{
	"replicas.non_negative", "replicas.workers_required", "replicas.image.format", ruleEnumKnown, "resources.entry",
	"resources.quantity", "replicas.master_count", "replicas.worker_matches_max",
}

func replicaChecks(v *taskView, rv *replicaView, isMaster bool, r *report) {
	if rv.replicas < 0 {
		r.add(rv.replicasPath, "replicas.non_negative", "must be >= 0, got %d", rv.replicas)
	}
	if !isMaster && v.elastic == nil && rv.replicas == 0 {
		// The backend refuses such a job (upstream: "number of workers must be greater than 0").
		r.add(rv.replicasPath, "replicas.workers_required",
			"a task without an elastic config runs as Master + Workers and needs at least 1 worker; "+
				"set the worker replicas, or an elastic_config")
	}
	if rv.specPath != "" {
		if strings.IndexFunc(rv.image, isPySpace) >= 0 {
			r.add(rv.specPath+".image", "replicas.image.format", "%s is not an image reference", brief(rv.image))
		}
		enumValue(r, rv.specPath, "restart_policy", restartPolicyEnum, rv.restart)
		resourceChecks(rv.specPath+".resources", rv.resources, r)
	}
	switch {
	case isMaster:
		if rv.replicas != 1 {
			r.add(rv.replicasPath, "replicas.master_count",
				"must be exactly 1 when the master is set, got %d", rv.replicas)
		}
	case v.elastic != nil && rv.replicas != 0 && rv.replicas != v.elastic.GetMaxReplicas():
		r.add(rv.replicasPath, "replicas.worker_matches_max",
			"%d worker replicas but elastic_config.max_replicas is %d", rv.replicas, v.elastic.GetMaxReplicas())
	}
}

func resourceChecks(path string, res *eidlcorev1.Resources, r *report) {
	if res == nil {
		return
	}
	for _, kind := range []struct {
		name    string
		entries []*eidlcorev1.Resources_ResourceEntry
	}{{"requests", res.GetRequests()}, {"limits", res.GetLimits()}} {
		for i, entry := range kind.entries {
			f := fmt.Sprintf("%s.%s[%d]", path, kind.name, i)
			name := entry.GetName()
			if name == 0 || name.Descriptor().Values().ByNumber(name.Number()) == nil {
				r.add(f+".name", "resources.entry", "unknown resource name %d", name)
			}
			if entry.GetValue() == "" {
				r.add(f+".value", "resources.entry", "empty quantity")
			}
		}
	}
	// As the API server checks them once the backend has rendered the pod (GPU -> nvidia.com/gpu).
	named := func(entries []*eidlcorev1.Resources_ResourceEntry) []namedQuantity {
		out := make([]namedQuantity, len(entries))
		for i, e := range entries {
			name, _ := enumTextOf(resourceNames, int32(e.GetName()))
			out[i] = namedQuantity{name, e.GetValue()}
		}
		return out
	}
	for _, p := range quantityProblems(named(res.GetRequests()), named(res.GetLimits())) {
		r.add(fmt.Sprintf("%s.%s[%d].value", path, p.kind, p.entry), "resources.quantity", "%s", p.message)
	}
}

var restartPolicyEnum = eidlkubeflowv1.RestartPolicy(0).Descriptor()

// enumFields reports enum.known for each named enum field of msg holding an undefined number.
func enumFields(r *report, path string, msg proto.Message, names ...string) {
	m := msg.ProtoReflect()
	for _, name := range names {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		enumValue(r, path, name, fd.Enum(), int32(m.Get(fd).Enum()))
	}
}

// enumValue reports an enum number the schema does not define, at path.leaf
// (the path joined only then: validation of a valid task allocates little).
func enumValue(r *report, path, leaf string, ed protoreflect.EnumDescriptor, n int32) {
	if ed.Values().ByNumber(protoreflect.EnumNumber(n)) == nil {
		r.add(path+"."+leaf, ruleEnumKnown, "%d is not a value of %s", n, ed.Name())
	}
}

func durationOf(m protoreflect.Message) (int64, int32) {
	f := m.Descriptor().Fields()
	return m.Get(f.ByName("seconds")).Int(), int32(m.Get(f.ByName("nanos")).Int())
}

func orEmpty(r *eidlcorev1.Resources) *eidlcorev1.Resources {
	if r == nil {
		return &eidlcorev1.Resources{}
	}
	return r
}

// Violations is every rule the task breaks, in a stable order; empty when it is valid.
func (t *Task) Violations() []Violation {
	v := t.view()
	r := &report{}
	for _, c := range checks {
		c.run(v, r)
	}
	return r.out
}

// Validate returns a *ValidationError listing every broken rule, or nil.
func (t *Task) Validate() error {
	if found := t.Violations(); len(found) > 0 {
		return &ValidationError{Violations: found}
	}
	return nil
}

func ruleText(id string) string {
	for _, r := range rules {
		if r.ID == id {
			return r.Requires
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
