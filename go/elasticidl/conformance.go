package elasticidl

// The conformance entry point (contract/README.md, "The conformance entry
// point"): a request names cases, each an input task and its render options; the
// response holds this implementation's outputs per case. It is registered with
// go/internal/conformance, which go/cmd/elastic-conformance runs: not API.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/elastic-idl/elastic-idl/go/internal/conformance"
)

func init() { conformance.Register(respondConformance) }

// goOutputs are the outputs the Go backend produces (launch_spec is the Python
// runtime's: the Go backend builds no LaunchSpec). "error" is the answer for an
// input that is no task.
func goOutputs() []string {
	return []string{"binary_hex", "custom", "violations", "pytorchjob", "pod_env", "skew", "targets", "error"}
}

// respondConformance answers a conformance request (conformance.Respond).
func respondConformance(request []byte) ([]byte, error) {
	if !utf8.Valid(request) {
		return nil, errors.New("the request is not UTF-8")
	}
	v, err := parsePyJSON(string(request))
	if err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	req, ok := v.(*jsonObject)
	if !ok {
		return nil, errors.New("the request must be a JSON object")
	}
	if version, _ := req.get("version"); !pyEqualsInt(version, contractVersion) {
		return nil, fmt.Errorf("request version %s is not %d", pyRepr(version), contractVersion)
	}
	results := map[string]any{}
	cases, ok := req.get("cases")
	if s, isStr := cases.(string); !ok || (isStr && s == "") || (isObject(cases) && !pyTruthy(cases)) {
		cases = []jsonValue{} // the reference iterates request.get("cases", []): these hold no case
	}
	list, ok := cases.([]jsonValue)
	if !ok {
		return nil, errors.New("cases must be a list")
	}
	for i, c := range list {
		name, result, err := answerCase(c)
		if err != nil {
			return nil, fmt.Errorf("cases[%d]: %w", i, err)
		}
		results[name] = result
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	err = enc.Encode(map[string]any{
		"version":        contractVersion,
		"implementation": "elastic-idl-go " + referenceVersion,
		"outputs":        goOutputs(),
		"results":        results,
	})
	return out.Bytes(), err
}

// pyEqualsInt is Python's v == want for a JSON value (1.0 == 1 and True == 1 too).
func pyEqualsInt(v jsonValue, want int) bool {
	switch x := v.(type) {
	case bool:
		return (x && want == 1) || (!x && want == 0)
	case jsonNumber:
		if x.isFloat {
			return x.f == float64(want)
		}
		return x.lit == fmt.Sprint(want) || (want == 0 && x.lit == "-0")
	}
	return false
}

func isObject(v jsonValue) bool {
	_, ok := v.(*jsonObject)
	return ok
}

// pyTruthy is Python's bool() of a JSON value.
func pyTruthy(v jsonValue) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case jsonNumber:
		return x.f != 0 || (!x.isFloat && x.lit != "0" && x.lit != "-0")
	case string:
		return x != ""
	case []jsonValue:
		return len(x) > 0
	case *jsonObject:
		return len(x.keys) > 0
	}
	return true
}

// field reads a required key of a request object.
func field(obj jsonValue, key string) (jsonValue, error) {
	o, ok := obj.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("expected an object, got %s", pyTypeName(obj))
	}
	v, ok := o.get(key)
	if !ok {
		return nil, fmt.Errorf("missing key %q", key)
	}
	return v, nil
}

func answerCase(entry jsonValue) (string, map[string]any, error) {
	input, err := field(entry, "input")
	if err != nil {
		return "", nil, err
	}
	data, err := field(input, "data")
	if err != nil {
		return "", nil, err
	}
	format, err := field(input, "format")
	if err != nil {
		return "", nil, err
	}
	versionV, err := field(entry, "task_type_version")
	if err != nil {
		return "", nil, err
	}
	render, _ := entry.(*jsonObject).get("render")
	if !pyTruthy(render) { // the reference: entry.get("render") or DEFAULT_RENDER
		render, _ = parsePyJSON(defaultRender)
	}
	version := int32(-1) // not an integer (or beyond int32): no version this schema has
	if n, ok := versionV.(jsonNumber); ok && !n.isFloat {
		if _, err := fmt.Sscan(n.lit, &version); err != nil {
			version = -1
		}
	}
	fmtText, _ := format.(string)
	result, err := evaluate(data, fmtText, version, render)
	if err != nil {
		return "", nil, err
	}
	nameV, err := field(entry, "name")
	if err != nil {
		return "", nil, err
	}
	name, ok := nameV.(string)
	if !ok {
		return "", nil, fmt.Errorf("name must be a string")
	}
	return name, result, nil
}

// evaluate is every output for one serialized input (the reference's evaluate).
// The data of the text formats is a str for the reference; binary_hex is read by
// bytes.fromhex(str(data)).
func evaluate(data jsonValue, format string, version int32, render jsonValue) (map[string]any, error) {
	var (
		task *Task
		err  error
	)
	switch format {
	case "binary_hex":
		raw, herr := pyFromHex(pyStr(data))
		if herr != nil {
			return map[string]any{"error": map[string]any{"type": "DecodeError", "field": "", "reason": herr.Error()}}, nil
		}
		task, err = decode(raw, FormatBinary, version, false)
	default:
		text, ok := data.(string)
		if !ok {
			return nil, fmt.Errorf("input.data must be a string, got %s", pyTypeName(data))
		}
		if len(text) > maxTaskBytes { // refused before a copy
			err = tooLarge()
			break
		}
		task, err = decode([]byte(text), Format(format), version, true)
	}
	if err != nil {
		return map[string]any{"error": errorOf(bounded(err))}, nil
	}
	return outputsOf(task, render)
}

// pyStr is Python's str() of a JSON value that bytes.fromhex may read: a str or
// an int; anything else gets text that is no hex.
func pyStr(v jsonValue) string {
	switch x := v.(type) {
	case string:
		return x
	case jsonNumber:
		if !x.isFloat && x.lit != "-0" {
			return x.lit
		}
	}
	return "not hex"
}

// outputsOf renders from the custom dict, as the backend does: custom -> task -> PyTorchJob -> pod env.
func outputsOf(task *Task, render jsonValue) (map[string]any, error) {
	// The reference passes the options as keyword arguments: options that are none fail the request.
	renderObj, ok := render.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("render must be an object")
	}
	if err := checkOptionKeys(renderObj); err != nil {
		return nil, err
	}
	out := map[string]any{}
	binary, _ := task.Binary() // a decoded task always marshals (valid UTF-8)
	out["binary_hex"] = hex.EncodeToString(binary)
	backendInput := task
	var decodeErr error // the backend input's: the custom dict that is no task
	if custom, err := task.CustomJSON(); err != nil {
		var ee *EncodeError
		errors.As(err, &ee) // custom's one error type
		out["custom"] = map[string]any{"error": map[string]any{"type": "EncodeError", "field": ee.Field}}
	} else {
		out["custom"] = json.RawMessage(custom)
		if backendInput, decodeErr = Decode([]byte(custom), FormatJSON, task.TaskTypeVersion()); decodeErr != nil {
			out["pytorchjob"] = map[string]any{"error": errorOf(decodeErr)}
		}
	}
	out["targets"] = targetsOf(backendInput, decodeErr, renderObj)
	violations := []map[string]string{}
	for _, v := range task.Violations() {
		violations = append(violations, map[string]string{"field": v.Field, "rule": v.Rule})
	}
	out["violations"] = violations
	podEnvs := map[string]any{}
	out["pod_env"] = podEnvs
	out["skew"] = []string{}
	if _, failed := out["pytorchjob"]; failed {
		return out, nil
	}
	job, warnings, err := backendInput.renderJob(renderObj)
	if err != nil {
		out["pytorchjob"] = map[string]any{"error": errorOf(err)}
		return out, nil
	}
	out["pytorchjob"] = job
	for _, w := range warnings {
		out["skew"] = append(out["skew"].([]string), w.Field)
	}
	for _, rtype := range replicaOrder {
		spec, ok := job.Spec.PyTorchReplicaSpecs[rtype]
		if !ok {
			continue
		}
		for _, i := range pinnedIndices {
			if i >= int(spec.Replicas) {
				continue
			}
			env, err := PodEnv(job, rtype, i)
			if err != nil {
				podEnvs[fmt.Sprintf("%s-%d", rtype, i)] = map[string]any{"error": errorOf(err)}
				continue
			}
			podEnvs[fmt.Sprintf("%s-%d", rtype, i)] = env
		}
	}
	return out, nil
}

// targetOutputs are the targets output's entries: name, render target, TrainJobElasticPolicy.
var targetOutputs = []struct {
	name          string
	target        string
	elasticPolicy bool
}{
	{"trainjob", TargetTrainJob, false},
	{"trainjob_elastic_policy", TargetTrainJob, true},
	{"jobset", TargetJobSet, false},
}

// targetsOf is the targets output (the reference's targets_of): the backend input on
// each of targetOutputs, {"objects", "losses"} or {"error"}; the same input and
// options as pytorchjob, never strict. A backend input that is no task (decodeErr)
// is that error after the checks renderTarget makes before it reads the task.
func targetsOf(backendInput *Task, decodeErr error, opts *jsonObject) map[string]any {
	out := map[string]any{}
	for _, o := range targetOutputs {
		to := TargetOptions{TrainJobElasticPolicy: o.elasticPolicy}
		var (
			rendered RenderedTarget
			err      = decodeErr
		)
		if err != nil {
			if checkErr := checkTarget(opts, o.target, to); checkErr != nil {
				err = checkErr
			}
		} else {
			rendered, err = backendInput.renderTarget(opts, o.target, to)
		}
		if err != nil {
			out[o.name] = map[string]any{"error": errorOf(err)}
			continue
		}
		out[o.name] = map[string]any{"objects": rendered.Objects, "losses": rendered.Losses}
	}
	return out
}

// errorOf is the contract form of an error of this package (found with
// errors.As, also wrapped): its type name, plus the violations or the field at fault.
func errorOf(err error) map[string]any {
	var (
		ve *ValidationError
		re *RenderError
		de *DecodeError
		ue *UnsupportedVersionError
		ee *EncodeError
		te *TargetLossError
	)
	switch {
	case errors.As(err, &ve):
		vs := make([]map[string]string, len(ve.Violations))
		for i, v := range ve.Violations {
			vs[i] = map[string]string{"field": v.Field, "rule": v.Rule}
		}
		return map[string]any{"type": "ValidationError", "violations": vs}
	case errors.As(err, &re):
		return map[string]any{"type": "RenderError", "field": re.Field}
	case errors.As(err, &de):
		return map[string]any{"type": "DecodeError", "field": de.Field}
	case errors.As(err, &ue):
		return map[string]any{"type": "UnsupportedVersionError"}
	case errors.As(err, &ee):
		return map[string]any{"type": "EncodeError"}
	case errors.As(err, &te):
		return map[string]any{"type": "TargetLossError"}
	}
	return map[string]any{"type": fmt.Sprintf("%T", err), "reason": err.Error()}
}

// pyFromHex is Python's bytes.fromhex: pairs of hex digits, ASCII whitespace allowed between pairs.
func pyFromHex(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); {
		if strings.IndexByte(" \t\n\r\v\f", s[i]) >= 0 {
			i++
			continue
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("non-hexadecimal number found in fromhex() arg at position %d", i+1)
		}
		b, err := hex.DecodeString(s[i : i+2])
		if err != nil {
			return nil, fmt.Errorf("non-hexadecimal number found in fromhex() arg at position %d", i)
		}
		out = append(out, b[0])
		i += 2
	}
	return out, nil
}
