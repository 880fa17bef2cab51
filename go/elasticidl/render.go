package elasticidl

// Backend side: task -> kubeflow.org/v1 PyTorchJob, as the reference's
// render_pytorchjob (elastic_idl/_backend/pytorchjob.py): what flytepropeller's pytorch
// plugin renders, plus spec.nprocPerNode, the rendezvous host/port/id/conf, and
// the task itself in the container env. Same options, same checks in the same
// order, same RenderError fields.

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	eidlcorev1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/core/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// RenderOptions are the options of RenderPyTorchJob (render_pytorchjob's keyword arguments).
type RenderOptions struct {
	// Name is the job name: a DNS-1035 label, short enough that "<name>-worker-<N-1>"
	// (the operator's pod and Service names) has at most 63 characters. Required.
	Name string
	// Namespace is a DNS-1123 label; "" means "default".
	Namespace string
	// Image is the task's container image; a replica spec's image wins over it. Required.
	Image string
	// Entrypoint is what the pod entrypoint launches: a script (or a module with
	// PodArgs ["--module"]) and its arguments. Required unless Args is given.
	Entrypoint []string
	// PodArgs are flags of the pod entrypoint itself, before "--".
	PodArgs []string
	// Command is the container command; nil means ["python", "-m", "elastic_idl.pod"].
	Command []string
	// Args are the container args; nil means [PodArgs..., "--", Entrypoint...].
	Args []string
	// Resources are task-level Kubernetes resources, for every replica whose spec sets none.
	Resources *ResourceRequirements
	// Labels and Annotations go on the job and on every pod template.
	Labels      map[string]string
	Annotations map[string]string
	// Env is extra container env; names the operator or the renderer sets are refused.
	Env map[string]string
	// Mode is ModeStrict (default, also "") or ModeUpstream.
	Mode RenderMode
	// ElasticWorkerRestartPolicy is what an elastic task's Worker gets for the restart
	// policy's zero value: RestartPolicyExitCode (default, also "") or RestartPolicyNever.
	ElasticWorkerRestartPolicy string
	// NetworkPolicy asks for a NetworkPolicy beside the job (RenderObjects); RenderPyTorchJob ignores it.
	NetworkPolicy bool
}

// renderOptionKeys are the options the reference's render_pytorchjob takes, in the order it checks them.
var renderOptionKeys = []string{
	"name", "image", "namespace", "entrypoint", "pod_args", "command", "args", "resources", "labels",
	"annotations", "env", "mode", "elastic_worker_restart_policy", "network_policy",
}

// RenderOptionsFromJSON reads render options as a JSON object with the reference's
// keyword names (name, image, namespace, entrypoint, pod_args, command, args,
// resources, labels, annotations, env, mode, elastic_worker_restart_policy,
// network_policy); a list or mapping given as null is left out.
// The result is plain data: change any field before rendering.
//
// Errors: *RenderError, with an empty Field for text larger than MaxTaskBytes
// (wrapping ErrTooLarge) or that is no JSON object (wrapping the parser's error),
// else naming the option that is unknown, missing (name and image are required)
// or of the wrong type, e.g. "entrypoint[1]" or "labels.app". The values
// themselves are checked by RenderPyTorchJob.
func RenderOptionsFromJSON(data []byte) (RenderOptions, error) {
	if len(data) > maxTaskBytes {
		return RenderOptions{}, &RenderError{Reason: "render options: " + ErrTooLarge.Error(), Err: ErrTooLarge}
	}
	v, err := parsePyJSON(string(data))
	if err != nil {
		return RenderOptions{}, &RenderError{Reason: "render options: malformed JSON: " + err.Error(), Err: err}
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return RenderOptions{}, &RenderError{Reason: "render options: expected an object, got " + pyTypeName(v)}
	}
	if err := checkOptionKeys(obj); err != nil {
		return RenderOptions{}, err
	}
	return optionsOf(obj)
}

// checkOptionKeys refuses an option render_pytorchjob does not take, and a missing required one.
func checkOptionKeys(obj *jsonObject) error {
	for _, k := range obj.keys {
		if !contains(renderOptionKeys, k) {
			return &RenderError{Field: oneLine(k, maxFieldChars), Reason: "not a render option (one of " +
				strings.Join(renderOptionKeys, ", ") + ")"}
		}
	}
	for _, k := range []string{"name", "image"} {
		if _, ok := obj.get(k); !ok {
			return &RenderError{Field: k, Reason: "a required render option is missing"}
		}
	}
	return nil
}

// optionsOf is the typed options of a JSON object of checked keys.
func optionsOf(obj *jsonObject) (RenderOptions, error) {
	var o RenderOptions
	text := func(key string, dst *string) error {
		v, ok := obj.get(key)
		switch x := v.(type) {
		case nil:
			if ok {
				return renderErr(key, "expected a string, got None")
			}
		case string:
			*dst = x
		default:
			return renderErr(key, "expected a string, got %s", pyTypeName(v))
		}
		return nil
	}
	list := func(key string, dst *[]string) (err error) {
		v, _ := obj.get(key)
		*dst, err = optStrings(key, v)
		return err
	}
	mapping := func(key string, v jsonValue) (map[string]string, error) {
		if v == nil {
			return nil, nil
		}
		m, ok := v.(*jsonObject)
		if !ok {
			return nil, renderErr(key, "expected a mapping of strings, got %s", pyTypeName(v))
		}
		out := make(map[string]string, len(m.keys))
		for _, k := range m.keys {
			s, ok := m.value(k).(string)
			if strings.HasPrefix(key, "resources.") { // a quantity may be a number
				s, ok = quantityText(m.value(k))
			}
			if !ok {
				return nil, renderErr(key+"."+k, "expected a string, got %s", pyTypeName(m.value(k)))
			}
			out[k] = s
		}
		return out, nil
	}
	for _, step := range []error{
		text("name", &o.Name), text("image", &o.Image), text("namespace", &o.Namespace),
		list("entrypoint", &o.Entrypoint), list("pod_args", &o.PodArgs), list("command", &o.Command),
		list("args", &o.Args), text("mode", (*string)(&o.Mode)),
		text("elastic_worker_restart_policy", &o.ElasticWorkerRestartPolicy),
	} {
		if step != nil {
			return RenderOptions{}, step
		}
	}
	if v, ok := obj.get("network_policy"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return RenderOptions{}, renderErr("network_policy", "expected true or false, got %s", pyRepr(v))
		}
		o.NetworkPolicy = b
	}
	if v, _ := obj.get("resources"); v != nil {
		res, ok := v.(*jsonObject)
		if !ok {
			return RenderOptions{}, renderErr("resources", "expected {'requests': {...}, 'limits': {...}}, got %s",
				pyTypeName(v))
		}
		o.Resources = &ResourceRequirements{}
		for _, k := range res.keys {
			m, err := mapping("resources."+k, res.value(k))
			switch {
			case k != keyRequests && k != keyLimits:
				return RenderOptions{}, renderErr("resources."+k, "only 'requests' and 'limits' are allowed")
			case err != nil:
				return RenderOptions{}, err
			case k == keyRequests:
				o.Resources.Requests = m
			default:
				o.Resources.Limits = m
			}
		}
	}
	for _, m := range []struct {
		key string
		dst *map[string]string
	}{{"labels", &o.Labels}, {"annotations", &o.Annotations}, {"env", &o.Env}} {
		v, _ := obj.get(m.key)
		values, err := mapping(m.key, v)
		if err != nil {
			return RenderOptions{}, err
		}
		*m.dst = values
	}
	return o, nil
}

// generic is the options as the reference's keyword arguments (absent = None).
func (o RenderOptions) generic() *jsonObject {
	obj := newObject()
	obj.set("name", o.Name)
	obj.set("image", o.Image)
	if o.Namespace != "" {
		obj.set("namespace", o.Namespace)
	}
	strs := func(key string, s []string) {
		if s != nil {
			list := make([]jsonValue, len(s))
			for i, x := range s {
				list[i] = x
			}
			obj.set(key, list)
		}
	}
	strs("entrypoint", o.Entrypoint)
	strs("pod_args", o.PodArgs)
	strs("command", o.Command)
	strs("args", o.Args)
	if o.Resources != nil {
		res := newObject()
		if o.Resources.Requests != nil {
			res.set(keyRequests, stringMap(o.Resources.Requests))
		}
		if o.Resources.Limits != nil {
			res.set(keyLimits, stringMap(o.Resources.Limits))
		}
		obj.set("resources", res)
	}
	for _, m := range []struct {
		key    string
		values map[string]string
	}{{"labels", o.Labels}, {"annotations", o.Annotations}, {"env", o.Env}} {
		if m.values != nil {
			obj.set(m.key, stringMap(m.values))
		}
	}
	if o.Mode != "" {
		obj.set("mode", string(o.Mode))
	}
	if o.ElasticWorkerRestartPolicy != "" {
		obj.set("elastic_worker_restart_policy", o.ElasticWorkerRestartPolicy)
	}
	if o.NetworkPolicy {
		obj.set("network_policy", true)
	}
	return obj
}

func stringMap(m map[string]string) *jsonObject {
	out := newObject()
	for _, k := range sortedKeys(m) {
		out.set(k, m[k])
	}
	return out
}

// checkOptionText refuses an option holding text that is not valid UTF-8 (a lone
// surrogate from JSON, which no Kubernetes object can carry), naming the option.
func checkOptionText(opts *jsonObject) error {
	var valid func(v jsonValue) bool
	valid = func(v jsonValue) bool {
		switch x := v.(type) {
		case string:
			return utf8.ValidString(x)
		case []jsonValue:
			for _, item := range x {
				if !valid(item) {
					return false
				}
			}
		case *jsonObject:
			for _, k := range x.keys {
				if !utf8.ValidString(k) || !valid(x.value(k)) {
					return false
				}
			}
		}
		return true
	}
	for _, key := range renderOptionKeys {
		if v, ok := opts.get(key); ok && !valid(v) {
			return renderErr(key, "holds text that is not valid UTF-8 (a lone surrogate such as \\ud800?)")
		}
	}
	return nil
}

// Kubernetes name patterns, as the reference writes them.
var (
	dns1035Re          = pyRegexp(dns1035Pattern)
	dns1123LabelRe     = pyRegexp(dns1123LabelPattern)
	dns1123SubdomainRe = pyRegexp(dns1123SubdomainPattern)
	qualifiedNameRe    = pyRegexp(qualifiedNamePattern)
	labelValueRe       = pyRegexp(labelValuePattern)
	envNameRe          = pyRegexp(envNamePattern)
)

func renderErr(field, format string, args ...any) error {
	return &RenderError{Field: field, Reason: oneLine(fmt.Sprintf(format, args...), maxErrorChars)}
}

func pyLen(s string) int { return utf8.RuneCountInString(s) }

// ReplicaName is the operator's name for pod index of a replica type (also its Service and host name).
func ReplicaName(jobName, replicaType string, index int) string {
	return fmt.Sprintf("%s-%s-%d", jobName, strings.ToLower(replicaType), index)
}

// checkJobName is the reference's check_job_name: the job's name is a DNS-1035
// label (requirer says who requires one, e.g. " (the operator's webhook requires
// one)"), short enough that every name lastPods(name) gives fits in a label too
// (namer says whose names they are, e.g. "the operator names pods and Services").
func checkJobName(name jsonValue, lastPods func(string) []string, requirer, namer string) error {
	s, ok := name.(string)
	if !ok || s == "" {
		return renderErr("name", "the job name is required (a DNS-1035 label)")
	}
	if pyLen(s) > maxNameLen || !dns1035Re.MatchString(s) {
		return renderErr("name", "%q is not a DNS-1035 label%s: at most %d characters, lower-case letters, digits "+
			"and '-', starting with a letter and ending with a letter or digit", s, requirer, maxNameLen)
	}
	for _, longest := range lastPods(s) {
		if pyLen(longest) > maxNameLen {
			return renderErr("name", "%q is too long: %s %q, which exceeds %d characters (use at most %d characters)",
				s, namer, longest, maxNameLen, maxNameLen-pyLen(longest)+pyLen(s))
		}
	}
	return nil
}

// checkName is the PyTorchJob's name check: the operator names the last pod of each replica type.
func checkName(name jsonValue, counts []replicaCount) error {
	return checkJobName(name, func(s string) []string {
		var out []string
		for _, c := range counts {
			out = append(out, ReplicaName(s, c.replicaType, max(int(c.count)-1, 0)))
		}
		return out
	}, " (the operator's webhook requires one)", "the operator names pods and Services")
}

func checkNamespace(ns jsonValue) error {
	s, ok := ns.(string)
	if !ok || pyLen(s) > maxNameLen || !dns1123LabelRe.MatchString(s) {
		return renderErr("namespace", "%s is not a DNS-1123 label (at most %d characters)", pyRepr(ns), maxNameLen)
	}
	return nil
}

// namespaceOf is the namespace option ("default" when absent), checked.
func namespaceOf(opts *jsonObject) (string, error) {
	ns, ok := opts.get("namespace")
	if !ok {
		ns = "default"
	}
	if err := checkNamespace(ns); err != nil {
		return "", err
	}
	return ns.(string), nil
}

func checkImage(field string, image jsonValue) error {
	s, ok := image.(string)
	if !ok || s == "" {
		return renderErr(field, "a container image is required")
	}
	if strings.IndexFunc(s, isPySpace) >= 0 {
		return renderErr(field, "%q is not an image reference (no whitespace)", s)
	}
	return nil
}

// optStrings is a list-of-strings option: nil when absent (None).
func optStrings(field string, v jsonValue) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]jsonValue)
	if !ok {
		return nil, renderErr(field, "expected a list of strings")
	}
	out := make([]string, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, renderErr(fmt.Sprintf("%s[%d]", field, i), "expected a string, got %s", pyTypeName(item))
		}
		out[i] = s
	}
	return out, nil
}

func qualifiedKey(field, key string) error {
	if key == "" {
		return renderErr(field, "key %q must be a non-empty string", key)
	}
	prefix, name := "", key
	if i := strings.LastIndex(key, "/"); i >= 0 {
		prefix, name = key[:i], key[i+1:]
		if pyLen(prefix) > 253 || !dns1123SubdomainRe.MatchString(prefix) {
			return renderErr(field+"."+key, "prefix %q is not a DNS-1123 subdomain", prefix)
		}
	}
	if pyLen(name) > 63 || !qualifiedNameRe.MatchString(name) {
		return renderErr(field+"."+key, "name part must be at most 63 characters of letters, digits, '-', '_' "+
			"or '.', starting and ending with a letter or digit")
	}
	return nil
}

func optLabels(field string, v jsonValue, isLabel bool) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, renderErr(field, "expected a mapping of strings, got %s", pyTypeName(v))
	}
	out := map[string]string{}
	for _, key := range sortedStrings(obj.keys) {
		if err := qualifiedKey(field, key); err != nil {
			return nil, err
		}
		value, ok := obj.value(key).(string)
		if !ok {
			return nil, renderErr(field+"."+key, "value must be a string, got %s", pyTypeName(obj.value(key)))
		}
		if isLabel && (pyLen(value) > 63 || !labelValueRe.MatchString(value)) {
			return nil, renderErr(field+"."+key, "%q is not a valid label value (at most 63 characters)", value)
		}
		out[key] = value
	}
	return out, nil
}

// userEnv is the env option as container env entries, in name order; a name in reserved is refused.
func userEnv(v jsonValue, reserved []string, why map[string]string) ([]EnvVar, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, renderErr("env", "expected a mapping of strings, got %s", pyTypeName(v))
	}
	var out []EnvVar
	for _, key := range sortedStrings(obj.keys) {
		if !envNameRe.MatchString(key) {
			return nil, renderErr("env."+key, "not a valid environment variable name")
		}
		if contains(reserved, key) {
			reason, ok := why[key]
			if !ok {
				reason = "is set by the operator or the renderer; it cannot be given"
			}
			return nil, renderErr("env."+key, "%s", reason)
		}
		value, ok := obj.value(key).(string)
		if !ok {
			return nil, renderErr("env."+key, "value must be a string, got %s", pyTypeName(obj.value(key)))
		}
		out = append(out, EnvVar{Name: key, Value: value})
	}
	return out, nil
}

// checkRdzvHostReachable refuses a loopback rdzv_host on a job of more than one pod:
// each pod is its own machine, so each would rendezvous with itself only and wait
// for the others until the join timeout.
func checkRdzvHostReachable(v *taskView, pods int32) error {
	if v.elastic == nil || pods <= 1 {
		return nil
	}
	host := v.elastic.GetRdzvHost()
	if host == "" || !isLoopback(host) {
		return nil
	}
	return renderErr("elastic_config.rdzv_host", "%s is a loopback address on a job of %d pods: each pod would "+
		"reach only itself and the rendezvous would never form; leave rdzv_host unset (node 0 hosts the "+
		"rendezvous) or name a host every pod reaches", pyRepr(host), pods)
}

// isLoopback is whether host names this machine's loopback interface: "localhost" (any
// case), or an address of 127.0.0.0/8 or ::1, IPv4-mapped too (the reference's is_loopback).
func isLoopback(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// k8sResources normalises the resources option: {"requests": {...}, "limits": {...}}.
func k8sResources(field string, v jsonValue) (*ResourceRequirements, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, renderErr(field, "expected {'requests': {...}, 'limits': {...}}, got %s", pyTypeName(v))
	}
	out := &ResourceRequirements{}
	for _, kind := range []string{keyRequests, keyLimits} {
		entries, _ := obj.get(kind)
		if entries == nil {
			continue
		}
		m, ok := entries.(*jsonObject)
		if !ok {
			return nil, renderErr(field+"."+kind, "expected a mapping of resource name to quantity")
		}
		block := map[string]string{}
		for _, name := range sortedStrings(m.keys) {
			if err := qualifiedKey(field+"."+kind, name); err != nil { // a resource name is a qualified name
				return nil, err
			}
			qty, ok := quantityText(m.value(name))
			if !ok {
				return nil, renderErr(field+"."+kind+"."+name, "expected a quantity such as '2' or '4Gi', got %s",
					pyRepr(m.value(name)))
			}
			block[name] = qty
		}
		if len(block) > 0 {
			if kind == keyRequests {
				out.Requests = block
			} else {
				out.Limits = block
			}
		}
	}
	for _, key := range sortedStrings(obj.keys) {
		if key != keyRequests && key != keyLimits {
			return nil, renderErr(field+"."+key, "only 'requests' and 'limits' are allowed")
		}
	}
	// The quantities, as the rule resources.quantity checks a replica's: the first problem is the error.
	named := func(block map[string]string) []namedQuantity {
		var list []namedQuantity
		for _, name := range sortedKeys(block) {
			list = append(list, namedQuantity{name, block[name]})
		}
		return list
	}
	requests, limits := named(out.Requests), named(out.Limits)
	if problems := quantityProblems(requests, limits); len(problems) > 0 {
		p := problems[0]
		entries := requests
		if p.kind == keyLimits {
			entries = limits
		}
		return nil, renderErr(field+"."+p.kind+"."+entries[p.entry].name, "%s", p.message)
	}
	return out, nil
}

// quantityText is str(qty) of a str, int or float quantity (as Elastic(requests=...)
// writes a number); bools, other types and "" are refused. The quantity rules
// then check the text.
func quantityText(v jsonValue) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, x != ""
	case jsonNumber:
		if x.isFloat {
			return pyFloatRepr(x.f), true
		}
		if x.lit == "-0" {
			return "0", true
		}
		return x.lit, true
	}
	return "", false
}

type replicaCount struct {
	replicaType string
	count       int32
}

// RenderPyTorchJob renders the kubeflow.org/v1 PyTorchJob the backend creates for
// a task. Pure: it talks to nobody, and two renders of the same input are equal.
//
// Errors, checked in this order: *ValidationError (the task breaks a rule; an
// empty task and a non-elastic job without workers are violations too),
// *RenderError naming the option or task field at fault (name, namespace, image,
// command, args, entrypoint, pod_args, labels, annotations, resources with the
// quantity rules of resources.quantity, env, a replica's image).
//
// A string option that is not valid UTF-8 (in JSON, a lone surrogate such as
// "\ud800") is refused first, as a *RenderError naming the option.
//
// RenderJob returns the same job and also the warnings (fields left out).
func (t *Task) RenderPyTorchJob(o RenderOptions) (*PyTorchJob, error) {
	job, _, err := t.renderJob(o.generic())
	return job, err
}

// renderJob is RenderJob of options as the reference's keyword arguments
// (any JSON values, checked here in the reference's order).
func (t *Task) renderJob(opts *jsonObject) (*PyTorchJob, []SkewWarning, error) {
	var warnings []SkewWarning
	for _, path := range t.UnknownFields() {
		warnings = append(warnings, SkewWarning{Field: path, Reason: unknownFieldReason})
	}
	job, err := t.render(opts, &warnings)
	if err != nil {
		return nil, nil, err
	}
	return job, warnings, nil
}

func (t *Task) render(opts *jsonObject, warn *[]SkewWarning) (*PyTorchJob, error) {
	mode, restart, err := renderModeOf(opts)
	if err != nil {
		return nil, err
	}
	if err := t.validateFor(mode); err != nil {
		return nil, err
	}
	if err := checkOptionText(opts); err != nil {
		return nil, err
	}
	v := t.view()
	opt := func(key string) jsonValue { x, _ := opts.get(key); return x }
	counts, err := replicaCountsFor(v, mode)
	if err != nil {
		return nil, err
	}
	if mode == ModeStrict { // the upstream mode renders what Flyte 1.x's propeller does, which takes it
		pods := int32(0)
		for _, c := range counts {
			pods += c.count
		}
		if err := checkRdzvHostReachable(v, pods); err != nil {
			return nil, err
		}
	}
	if err := checkName(opt("name"), counts); err != nil {
		return nil, err
	}
	namespace, err := namespaceOf(opts)
	if err != nil {
		return nil, err
	}
	custom, err := t.CustomJSON()
	if err != nil {
		return nil, err
	}
	c, err := containerOf(v, custom, opts, reservedEnv, nil, DefaultPort)
	if err != nil {
		return nil, err
	}
	var podMeta *ObjectMeta
	if len(c.labels) > 0 || len(c.annotations) > 0 {
		podMeta = &ObjectMeta{Labels: c.labels, Annotations: c.annotations}
	}
	replica := func(count int32, r *replicaView, elasticWorker bool) (*ReplicaSpec, error) {
		spec, err := replicaSpec(count, r, elasticWorker, c.image, c.command, c.args, c.env, c.port, c.resources, podMeta)
		if err == nil && r != nil && r.resources != nil {
			spec.Template.Spec.Containers[0].Resources = nil
			if res := replicaResourcesWarn(r.resources, r.specPath+".resources", warn); !res.empty() {
				spec.Template.Spec.Containers[0].Resources = res
			}
		}
		if err == nil && elasticWorker && spec.RestartPolicy == elasticWorkerRestartPolicy {
			spec.RestartPolicy = t.elasticWorkerDefault(restart)
		}
		return spec, err
	}

	spec := PyTorchJobSpec{PyTorchReplicaSpecs: map[string]*ReplicaSpec{}}
	// The legacy shape has no per-replica settings.
	var workerReplica *replicaView
	if v.worker.specPath != "" {
		workerReplica = &v.worker
	}
	if v.elastic != nil {
		elasticSpecFor(&spec, v.elastic, mode)
	} else {
		master, err := replica(1, v.master, false)
		if err != nil {
			return nil, err
		}
		spec.PyTorchReplicaSpecs[ReplicaMaster] = master
	}
	if workers, ok := countOf(counts, ReplicaWorker); ok {
		worker, err := replica(workers, workerReplica, v.elastic != nil)
		if err != nil {
			return nil, err
		}
		spec.PyTorchReplicaSpecs[ReplicaWorker] = worker
	}
	spec.RunPolicy = runPolicyOf(v)
	if w := spec.PyTorchReplicaSpecs[ReplicaWorker]; w != nil && v.elastic != nil && t.budgeted(restart, workerReplica) &&
		v.runPolicy != nil && v.runPolicy.GetCleanPodPolicy() == 0 {
		clean := budgetedCleanPodPolicy
		spec.RunPolicy.CleanPodPolicy = &clean
	}

	return &PyTorchJob{
		APIVersion: apiVersion,
		Kind:       kind,
		Metadata: ObjectMeta{
			Name: opt("name").(string), Namespace: namespace, Labels: c.labels, Annotations: c.annotations,
		},
		Spec: spec,
	}, nil
}

// podContainer is the container every pod of a job runs, from the checked options
// (the reference's Container): a replica's own image and resources replace the task's.
type podContainer struct {
	image         string
	command, args []string
	env           []EnvVar
	port          int32
	resources     *ResourceRequirements // the resources option; nil when not given
	labels        map[string]string
	annotations   map[string]string
}

// containerOf is the reference's container(): the checked options as one container,
// carrying the task (custom) in its env. reserved are the env names the target's
// controller or the renderer sets; defaultPort is the rendezvous port when the task
// sets none. Checked in the reference's order: image, command/args/entrypoint/pod_args,
// labels, annotations, resources, env (then an env name the task's NCCL fields set).
func containerOf(v *taskView, custom string, opts *jsonObject, reserved []string, reservedWhy map[string]string, defaultPort int32) (*podContainer, error) {
	opt := func(key string) jsonValue { x, _ := opts.get(key); return x }
	if err := checkImage("image", opt("image")); err != nil {
		return nil, err
	}
	cmd, err := optStrings("command", opt("command"))
	if err != nil {
		return nil, err
	}
	args, err := optStrings("args", opt("args"))
	if err != nil {
		return nil, err
	}
	entry, err := optStrings("entrypoint", opt("entrypoint"))
	if err != nil {
		return nil, err
	}
	flags, err := optStrings("pod_args", opt("pod_args"))
	if err != nil {
		return nil, err
	}
	if contains(flags, "--") {
		return nil, renderErr("pod_args", "'--' separates the pod flags from the entrypoint; it cannot be a flag")
	}
	switch {
	case args == nil:
		if cmd == nil && len(entry) == 0 {
			return nil, renderErr("entrypoint", "what the pod runs is required (a script or module and its args)")
		}
		if cmd == nil {
			if problem := entrypointProblem(entry); problem != "" {
				return nil, renderErr("entrypoint", problem) // the pod entrypoint would refuse it
			}
		}
		args = append([]string{}, flags...)
		if len(entry) > 0 {
			args = append(append(args, "--"), entry...)
		}
	case len(entry) > 0:
		return nil, renderErr("entrypoint", "give either entrypoint/pod_args or args, not both")
	case len(flags) > 0:
		return nil, renderErr("pod_args", "give either entrypoint/pod_args or args, not both")
	}
	if cmd == nil {
		cmd = append([]string{}, podEntrypoint...)
	}
	labels, err := optLabels("labels", opt("labels"), true)
	if err != nil {
		return nil, err
	}
	annotations, err := optLabels("annotations", opt("annotations"), false)
	if err != nil {
		return nil, err
	}
	resources, err := k8sResources("resources", opt("resources"))
	if err != nil {
		return nil, err
	}
	extra, err := userEnv(opt("env"), reserved, reservedWhy)
	if err != nil {
		return nil, err
	}
	nccl := v.ncclEnv()
	for _, e := range extra {
		for _, n := range nccl {
			if n.Name == e.Name {
				return nil, renderErr("env."+e.Name, "is set by the task's elastic_config.%s; give it there, not in env",
					ncclFieldOf(n.Name))
			}
		}
	}
	env := append([]EnvVar{
		{Name: TaskEnv, Value: custom},
		{Name: TaskTypeVersionEnv, Value: strconv.Itoa(int(v.version))},
	}, nccl...)
	env = append(env, extra...)
	port := defaultPort
	if v.elastic != nil && v.elastic.GetRdzvPort() != 0 {
		port = v.elastic.GetRdzvPort()
	}
	return &podContainer{
		image: opt("image").(string), command: cmd, args: args, env: env, port: port, resources: resources,
		labels: labels, annotations: annotations,
	}, nil
}

func replicaSpec(count int32, r *replicaView, elasticWorker bool, image string, cmd, args []string, env []EnvVar, port int32,
	resources *ResourceRequirements, podMeta *ObjectMeta,
) (*ReplicaSpec, error) {
	restart := int32(0) // RESTART_POLICY_NEVER
	if r != nil {
		if r.image != "" {
			if err := checkImage(r.specPath+".image", r.image); err != nil {
				return nil, err
			}
			image = r.image
		}
		if r.resources != nil {
			// Upstream: the replica's resources replace the task's for this replica.
			resources = replicaResources(r.resources)
		}
		restart = r.restart
	}
	c := Container{
		Name:    ContainerName,
		Image:   image,
		Command: append([]string{}, cmd...),
		Env:     append([]EnvVar{}, env...),
		Ports:   []ContainerPort{{ContainerPort: port, Name: PortName}},
	}
	if len(args) > 0 {
		c.Args = append([]string{}, args...)
	}
	if !resources.empty() {
		c.Resources = &ResourceRequirements{Requests: maps.Clone(resources.Requests), Limits: maps.Clone(resources.Limits)}
	}
	policy, _ := enumTextOf(restartPolicies, restart) // validated: a known value
	if elasticWorker && restart == 0 {
		// The enum's zero value for an elastic Worker (the reference's ELASTIC_WORKER_RESTART_POLICY).
		policy = elasticWorkerRestartPolicy
	}
	tmpl := PodTemplateSpec{Spec: PodSpec{Containers: []Container{c}}}
	if podMeta != nil {
		tmpl.Metadata = &ObjectMeta{Labels: maps.Clone(podMeta.Labels), Annotations: maps.Clone(podMeta.Annotations)}
	}
	return &ReplicaSpec{Replicas: count, RestartPolicy: policy, Template: tmpl}, nil
}

func replicaResources(res *eidlcorev1.Resources) *ResourceRequirements {
	out := &ResourceRequirements{}
	block := func(entries []*eidlcorev1.Resources_ResourceEntry) map[string]string {
		m := map[string]string{}
		for _, e := range entries {
			name, _ := enumTextOf(resourceNames, int32(e.GetName())) // validated: a known name
			m[name] = e.GetValue()
		}
		if len(m) == 0 {
			return nil
		}
		return m
	}
	out.Requests = block(res.GetRequests())
	out.Limits = block(res.GetLimits())
	return out
}

func runPolicyOf(v *taskView) RunPolicy {
	rp := v.runPolicy
	if rp == nil {
		// Upstream always sends a RunPolicy, empty when the task has none.
		return RunPolicy{}
	}
	clean, _ := enumTextOf(cleanPodPolicies, int32(rp.GetCleanPodPolicy())) // validated
	out := RunPolicy{CleanPodPolicy: &clean}
	// Zero means unset in the message (proto3), so it is left out like upstream's ParseRunPolicy.
	nonZero := func(n int32) *int32 {
		if n == 0 {
			return nil
		}
		return &n
	}
	out.TTLSecondsAfterFinished = nonZero(rp.GetTtlSecondsAfterFinished())
	out.ActiveDeadlineSeconds = nonZero(rp.GetActiveDeadlineSeconds())
	out.BackoffLimit = nonZero(rp.GetBackoffLimit())
	return out
}

// ElasticPolicyOf is spec.elasticPolicy for an elastic config: minReplicas,
// maxReplicas, rdzvBackend ("" read as c10d), rdzvHost/rdzvPort/rdzvId when set,
// maxRestarts, and rdzvConf from the typed timeouts (whole seconds) then the
// free-form options.
// Never the deprecated nProcPerNode (see NprocPerNode) and never standalone.
// Nil for nil. The config should be valid (Task.Validate).
func ElasticPolicyOf(e *eidlpluginsv1.ElasticConfig) *ElasticPolicy {
	if e == nil {
		return nil
	}
	minR, maxR, restarts := e.GetMinReplicas(), e.GetMaxReplicas(), e.GetMaxRestarts()
	backend := e.GetRdzvBackend()
	if backend == "" {
		backend = defaultRdzvBackend
	}
	p := &ElasticPolicy{MinReplicas: &minR, MaxReplicas: &maxR, RdzvBackend: &backend, MaxRestarts: &restarts}
	if h := e.GetRdzvHost(); h != "" {
		p.RdzvHost = &h
	}
	if port := e.GetRdzvPort(); port != 0 {
		p.RdzvPort = &port
	}
	if id := e.GetRdzvId(); id != "" {
		p.RdzvID = &id
	}
	p.RdzvConf = rdzvConf(e)
	return p
}

// rdzvConf is the rendezvous options a config states: typed timeouts as whole
// seconds ("900", an integer as torch reads it; a fraction is invalid, rule
// elastic.duration.whole_seconds, so only its seconds are written) and
// cas_backoff_max_seconds, which torch reads as a float (a fraction as Python's
// repr writes it: "0.5"), then the free-form options in order (a repeated key
// keeps its first place).
func rdzvConf(e *eidlpluginsv1.ElasticConfig) []RdzvConf {
	var out []RdzvConf
	index := map[string]int{} // key -> its place in out
	put := func(key, value string) {
		if i, ok := index[key]; ok {
			out[i].Value = value
			return
		}
		index[key] = len(out)
		out = append(out, RdzvConf{Key: key, Value: value})
	}
	m := e.ProtoReflect()
	for _, name := range rdzvTimeoutFields {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if m.Has(fd) {
			s, n := durationOf(m.Get(fd).Message())
			put(name, secondsText(s, n))
		}
	}
	for _, opt := range e.GetRdzvOptions() {
		put(opt.GetKey(), opt.GetValue())
	}
	return out
}

// NprocPerNode is spec.nprocPerNode for an elastic config: "auto", "cpu" or "gpu"
// for an nproc policy, else nproc_per_node as a decimal string. "" for nil.
func NprocPerNode(e *eidlpluginsv1.ElasticConfig) string {
	if e == nil {
		return ""
	}
	return nprocOf(e)
}

func nprocOf(e *eidlpluginsv1.ElasticConfig) string {
	if text, ok := enumTextOf(nprocPolicies, int32(e.GetNprocPolicy())); ok {
		return text
	}
	return strconv.Itoa(int(e.GetNprocPerNode()))
}

// ReplicaCounts are the replicas of each replica type of the task's job: an
// elastic task is Worker-only with max_replicas workers; a non-elastic task has
// one Master and its Worker count. Keys are ReplicaMaster and ReplicaWorker.
func (t *Task) ReplicaCounts() map[string]int32 {
	v := t.view()
	if v.elastic != nil {
		return map[string]int32{ReplicaWorker: v.workerCount()}
	}
	return map[string]int32{ReplicaMaster: 1, ReplicaWorker: v.workerCount()}
}

// entrypointProblem says why what the workers run can never start, or "": the
// reference's entrypoint_problem. The first word (after "-m", the module name)
// may not be empty nor look like an option.
func entrypointProblem(words []string) string {
	first, what := words[0], "the script"
	if first == "-m" {
		if len(words) < 2 {
			return "-m needs the module name after it"
		}
		first, what = words[1], "the module name"
	}
	switch {
	case first == "":
		return what + " is an empty string"
	case strings.HasPrefix(first, "-"):
		return fmt.Sprintf("%s %q looks like an option: give the script first (a file of that name: ./%s)", what, first, first)
	}
	return ""
}

// secondsText is a valid Duration's seconds as the reference's rdzv_configs
// writes them: the integer when there are no nanos, else the float's repr
// (Python's str of seconds + nanos / 1e9, an integer again when that float is one).
func secondsText(s int64, n int32) string {
	if n == 0 {
		return strconv.FormatInt(s, 10)
	}
	f := float64(s) + float64(n)/1e9
	if f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return pyFloatRepr(f)
}
