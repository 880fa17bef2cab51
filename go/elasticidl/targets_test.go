package elasticidl

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// checkTargets compares the targets output of a decoded vector (the conformance
// entry point's outputsOf, with the case's render options) with its targets.json;
// false when the case has none.
func checkTargets(t *testing.T, format Format, task *Task, v vector) bool {
	t.Helper()
	if v.targets == nil {
		return false
	}
	out, err := outputsOf(task, v.render)
	if err != nil {
		t.Fatalf("%s: outputsOf: %v", format, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out["targets"]); err != nil {
		t.Fatalf("%s: targets: %v", format, err)
	}
	if got := asData(t, b.Bytes()); !reflect.DeepEqual(got, v.targets) {
		want, _ := json.Marshal(v.targets)
		t.Errorf("%s: targets\n got %s\nwant %s", format, b.Bytes(), want)
	}
	return true
}

// caseRender is a case's render options as the reference's request_for builds them:
// case.yaml's render mapping over DEFAULT_RENDER. The case files write it in a
// small YAML subset (a flow mapping of plain scalars, or block mappings and
// sequences of scalars), read here; anything else fails the test, naming the case.
func caseRender(t testing.TB, name string, meta []byte) *jsonObject {
	t.Helper()
	def, _ := parsePyJSON(defaultRender)
	out := def.(*jsonObject)
	lines := strings.Split(string(meta), "\n")
	start := -1
	for i, line := range lines {
		if strings.HasPrefix(line, "render:") {
			start = i
		}
	}
	if start < 0 {
		return out
	}
	var text string
	if flow := strings.TrimSpace(strings.TrimPrefix(lines[start], "render:")); flow != "" {
		if !strings.HasPrefix(flow, "{") || !strings.HasSuffix(flow, "}") {
			t.Fatalf("%s: render: %q is not a flow mapping", name, flow)
		}
		var items []string
		for _, item := range strings.Split(flow[1:len(flow)-1], ",") {
			items = append(items, yamlEntry(t, name, strings.TrimSpace(item)))
		}
		text = "{" + strings.Join(items, ",") + "}"
	} else {
		var block []string
		for _, line := range lines[start+1:] {
			if line != "" && !strings.HasPrefix(line, " ") {
				break
			}
			if strings.TrimSpace(line) != "" {
				block = append(block, line)
			}
		}
		text, _ = yamlBlock(t, name, block)
	}
	render, err := parsePyJSON(text)
	obj, ok := render.(*jsonObject)
	if err != nil || !ok {
		t.Fatalf("%s: render read as %s: %v", name, text, err)
	}
	for _, k := range obj.keys {
		out.set(k, obj.value(k))
	}
	return out
}

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// yamlBlock is the block mapping or sequence that starts at lines[0], as JSON text, and the lines it took.
func yamlBlock(t testing.TB, name string, lines []string) (string, int) {
	indent := indentOf(lines[0])
	if strings.HasPrefix(strings.TrimSpace(lines[0]), "- ") {
		var items []string
		n := 0
		for n < len(lines) && indentOf(lines[n]) == indent && strings.HasPrefix(strings.TrimSpace(lines[n]), "- ") {
			items = append(items, yamlScalar(t, name, strings.TrimSpace(lines[n])[2:]))
			n++
		}
		return "[" + strings.Join(items, ",") + "]", n
	}
	var items []string
	n := 0
	for n < len(lines) && indentOf(lines[n]) == indent {
		line := strings.TrimSpace(lines[n])
		n++
		if !strings.HasSuffix(line, ":") {
			items = append(items, yamlEntry(t, name, line))
			continue
		}
		// A nested block: more indented, or a sequence at the key's own indent.
		if n == len(lines) || indentOf(lines[n]) < indent ||
			(indentOf(lines[n]) == indent && !strings.HasPrefix(strings.TrimSpace(lines[n]), "- ")) {
			t.Fatalf("%s: render: %q has no value", name, line)
		}
		value, took := yamlBlock(t, name, lines[n:])
		n += took
		items = append(items, yamlScalar(t, name, strings.TrimSuffix(line, ":"))+":"+value)
	}
	return "{" + strings.Join(items, ",") + "}", n
}

// yamlEntry is "key: scalar" as JSON text.
func yamlEntry(t testing.TB, name, entry string) string {
	cut := strings.Index(entry, ": ")
	if strings.HasPrefix(entry, `"`) || strings.HasPrefix(entry, "'") {
		end := strings.IndexByte(entry[1:], entry[0]) + 1
		cut = strings.Index(entry[end:], ": ") + end
	}
	if cut <= 0 {
		t.Fatalf("%s: render: %q is no key: value", name, entry)
	}
	return yamlScalar(t, name, entry[:cut]) + ":" + yamlScalar(t, name, strings.TrimSpace(entry[cut+2:]))
}

var (
	yamlInteger = regexp.MustCompile(`^-?[0-9]+$`)
	// A double-quoted scalar whose escapes are JSON's too.
	yamlJSONQuoted = regexp.MustCompile(`^"([^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"$`)
)

// yamlScalar is a scalar as JSON text: quoted text, null, true, false, an integer, or plain text.
func yamlScalar(t testing.TB, name, s string) string {
	switch {
	case strings.HasPrefix(s, `"`):
		if !yamlJSONQuoted.MatchString(s) {
			t.Fatalf("%s: render: %s has escapes this reader does not know", name, s)
		}
		return s
	case strings.HasPrefix(s, "'") && strings.HasSuffix(s, "'") && len(s) > 1:
		b, _ := json.Marshal(strings.ReplaceAll(s[1:len(s)-1], "''", "'"))
		return string(b)
	case s == "null" || s == "~" || s == "true" || s == "false" || yamlInteger.MatchString(s):
		return s
	case s == "" || strings.ContainsAny(s[:1], "[{&*!|>%@`#"):
		t.Fatalf("%s: render: %q is a scalar this reader does not know", name, s)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCaseRenderReadsTheYAMLSubset(t *testing.T) {
	meta := []byte("kind: task\nrender:\n  name: train-abc\n  labels:\n    \"team\\u00e9\": ml\n" +
		"  resources:\n    limits:\n      nvidia.com/gpu: 1\n      cpu: '2'\n  command:\n  - python\n  - -m\n" +
		"  entrypoint: null\n  network_policy: true\ntags: [a]\n")
	got := pyJSONText(caseRender(t, "t", meta))
	want := `{"entrypoint": null, "image": "example.com/train:1", "name": "train-abc", "labels": {"teamé": "ml"}, ` +
		`"resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2"}}, "command": ["python", "-m"], "network_policy": true}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := pyJSONText(caseRender(t, "t", []byte("render: {mode: upstream, elastic_worker_restart_policy: Never}\n"))); !strings.Contains(got, `"mode": "upstream", "elastic_worker_restart_policy": "Never"`) {
		t.Errorf("flow mapping: %s", got)
	}
}

// pyJSONText is a JSON value as text, keys in their order (for the reader's test).
func pyJSONText(v jsonValue) string {
	switch x := v.(type) {
	case *jsonObject:
		var items []string
		for _, k := range x.keys {
			key, _ := json.Marshal(k)
			items = append(items, string(key)+": "+pyJSONText(x.value(k)))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case []jsonValue:
		var items []string
		for _, item := range x {
			items = append(items, pyJSONText(item))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case nil:
		return "null"
	case jsonNumber:
		return x.lit
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ---------------------------------------------------------------- RenderTarget

func targetTask(t *testing.T, custom string) *Task {
	t.Helper()
	task, err := Decode([]byte(custom), FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

var targetOptions = RenderOptions{Name: "train", Image: "example.com/train:1", Entrypoint: []string{"train.py"}}

// An elastic task of min < max on a static backend, a Worker that is Always, a clean-pod
// policy, a TTL and a backoff limit: every loss but the Master's, in task order.
const lossyTask = `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 2},
	"workerReplicas": {"common": {"replicas": 3, "restartPolicy": "RESTART_POLICY_ALWAYS"}},
	"runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL", "ttlSecondsAfterFinished": 60, "backoffLimit": 2}}`

func lossFields(losses []TargetLoss) []string {
	out := []string{}
	for _, l := range losses {
		out = append(out, l.Target+":"+l.Field)
	}
	return out
}

func TestRenderTargetLosses(t *testing.T) {
	task := targetTask(t, lossyTask)
	for _, tc := range []struct {
		target string
		to     TargetOptions
		want   []string
	}{
		{TargetTrainJob, TargetOptions{}, []string{
			"trainjob:elastic_config.min_replicas", "trainjob:worker_replicas.common.restart_policy",
			"trainjob:run_policy.clean_pod_policy", "trainjob:run_policy.ttl_seconds_after_finished",
			"trainjob:run_policy.backoff_limit",
		}},
		{TargetJobSet, TargetOptions{}, []string{
			"jobset:worker_replicas.common.restart_policy", "jobset:run_policy.clean_pod_policy",
		}},
		{TargetPyTorchJob, TargetOptions{}, []string{}},
	} {
		got, err := task.RenderTarget(targetOptions, tc.target, tc.to)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		if got.Target != tc.target || len(got.Objects) != 1 || !reflect.DeepEqual(lossFields(got.Losses), tc.want) {
			t.Errorf("%s: target %s, %d objects, losses %v, want %v", tc.target, got.Target, len(got.Objects),
				lossFields(got.Losses), tc.want)
		}
		// Strict refuses exactly when there are losses, and lists them.
		_, err = task.RenderTarget(targetOptions, tc.target, TargetOptions{Strict: true})
		var le *TargetLossError
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s strict: %v", tc.target, err)
			}
			continue
		}
		if !errors.As(err, &le) || le.Target != tc.target || !reflect.DeepEqual(le.Losses, got.Losses) {
			t.Fatalf("%s strict: %v, want a TargetLossError of %v", tc.target, err, tc.want)
		}
		want := "a " + tc.target + " cannot carry " + strings.Join(lossFieldNames(got.Losses), ", ") +
			" (render without strict to accept the losses)"
		if err.Error() != want {
			t.Errorf("%s strict: %q, want %q", tc.target, err, want)
		}
		if errorOf(err)["type"] != "TargetLossError" {
			t.Errorf("errorOf: %v", errorOf(err))
		}
	}
	// The proposed elasticPolicy says so in the min_replicas loss, and renders min:max.
	got, err := task.RenderTarget(targetOptions, TargetTrainJob, TargetOptions{TrainJobElasticPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	if why := got.Losses[0].Why; !strings.HasSuffix(why, "states min:max, Trainer v2.3 does not read it") ||
		!strings.HasPrefix(why, "a TrainJob has a fixed numNodes: rendered at max_replicas (3)") {
		t.Errorf("why: %s", why)
	}
	trainer := got.Objects[0].(map[string]any)["spec"].(map[string]any)["trainer"].(map[string]any)
	meta := got.Objects[0].(map[string]any)["metadata"].(map[string]any)
	if p := trainer["elasticPolicy"].(map[string]any); p["minNodes"] != int32(1) || p["maxNodes"] != int32(3) ||
		meta["annotations"].(map[string]string)[ProposalAnnotation] == "" {
		t.Errorf("elasticPolicy %v, metadata %v", p, meta)
	}
}

func lossFieldNames(losses []TargetLoss) []string {
	var out []string
	for _, l := range losses {
		out = append(out, l.Field)
	}
	return out
}

// A non-elastic task's Master settings that differ from the Workers' are losses; the
// static backend is one; a loss's why is one line.
func TestRenderTargetMasterAndStaticLosses(t *testing.T) {
	task := targetTask(t, `{"masterReplicas": {"common": {"replicas": 1, "image": "m:1", "restartPolicy": "RESTART_POLICY_ON_FAILURE",
		"resources": {"requests": [{"name": "CPU", "value": "1"}]}}},
		"workerReplicas": {"common": {"replicas": 2, "image": "w:1", "restartPolicy": "RESTART_POLICY_ON_FAILURE",
		"resources": {"requests": [{"name": "CPU", "value": "1"}]}}}}`)
	got, err := task.RenderTarget(targetOptions, TargetJobSet, TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the image differs: the same resources and restart policy are no loss.
	if want := []string{"jobset:master_replicas.common.image"}; !reflect.DeepEqual(lossFields(got.Losses), want) {
		t.Errorf("losses %v, want %v", lossFields(got.Losses), want)
	}
	spec := got.Objects[0].(map[string]any)["spec"].(map[string]any)
	job := spec["replicatedJobs"].([]any)[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	if job["parallelism"] != int32(3) || job["podFailurePolicy"] != nil || job["successPolicy"] != nil {
		t.Errorf("a Master and 2 Workers, OnFailure, not elastic: %v", job)
	}
	static := targetTask(t, `{"elasticConfig": {"minReplicas": 2, "maxReplicas": 2, "nprocPerNode": 1, "rdzvBackend": "static"}}`)
	for _, target := range []string{TargetTrainJob, TargetJobSet} {
		got, err := static.RenderTarget(targetOptions, target, TargetOptions{})
		if err != nil || len(got.Losses) != 1 || got.Losses[0].Field != "elastic_config.rdzv_backend" ||
			strings.ContainsAny(got.Losses[0].Why, "\n") || got.Losses[0].String() != "elastic_config.rdzv_backend: "+got.Losses[0].Why {
			t.Errorf("%s: %v %v", target, got.Losses, err)
		}
	}
}

// The options a target does not take, and the refusals of RenderTarget's own
// options, name the reference's fields.
func TestRenderTargetRefusals(t *testing.T) {
	task := targetTask(t, `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1}}`)
	with := func(change func(*RenderOptions)) RenderOptions {
		o := targetOptions
		change(&o)
		return o
	}
	for _, tc := range []struct {
		options RenderOptions
		target  string
		to      TargetOptions
		field   string
	}{
		{with(func(o *RenderOptions) { o.Mode = ModeUpstream }), TargetTrainJob, TargetOptions{}, "mode"},
		{with(func(o *RenderOptions) { o.Mode = ModeUpstream }), TargetJobSet, TargetOptions{}, "mode"},
		{with(func(o *RenderOptions) { o.NetworkPolicy = true }), TargetTrainJob, TargetOptions{}, "network_policy"},
		{with(func(o *RenderOptions) { o.NetworkPolicy = true }), TargetJobSet, TargetOptions{}, "network_policy"},
		{with(func(o *RenderOptions) { o.ElasticWorkerRestartPolicy = RestartPolicyNever }), TargetTrainJob,
			TargetOptions{}, "elastic_worker_restart_policy"},
		{with(func(o *RenderOptions) { o.ElasticWorkerRestartPolicy = "OnFailure" }), TargetJobSet, TargetOptions{},
			"elastic_worker_restart_policy"},
		{targetOptions, "tfjob", TargetOptions{}, "target"},
		{targetOptions, TargetJobSet, TargetOptions{TrainJobElasticPolicy: true}, "trainjob_elastic_policy"},
		{targetOptions, TargetPyTorchJob, TargetOptions{TrainJobElasticPolicy: true}, "trainjob_elastic_policy"},
		// The target checks come before the task's and the other options'.
		{with(func(o *RenderOptions) { o.Mode = ModeUpstream; o.Name = "Bad" }), TargetJobSet, TargetOptions{}, "mode"},
		// JobSet names the last pod "<name>-node-0-1": 55 characters leave no room.
		{with(func(o *RenderOptions) { o.Name = strings.Repeat("a", 55) }), TargetJobSet, TargetOptions{}, "name"},
		{with(func(o *RenderOptions) { o.Namespace = "Bad" }), TargetTrainJob, TargetOptions{}, "namespace"},
		{with(func(o *RenderOptions) { o.Env = map[string]string{restartAttemptEnv: "1"} }), TargetJobSet,
			TargetOptions{}, "env." + restartAttemptEnv},
		{with(func(o *RenderOptions) { o.Env = map[string]string{"PET_NNODES": "1:3"} }), TargetTrainJob,
			TargetOptions{}, "env.PET_NNODES"},
		{with(func(o *RenderOptions) { o.Image = "" }), TargetTrainJob, TargetOptions{}, "image"},
	} {
		_, err := task.RenderTarget(tc.options, tc.target, tc.to)
		var re *RenderError
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Errorf("%s %+v %+v: %v, want a RenderError of %s", tc.target, tc.options, tc.to, err, tc.field)
		}
	}
	// What a target does take: Never on a JobSet (no retries), the restart-attempt env on a TrainJob,
	// 54 characters of name on a JobSet of 2 pods.
	got, err := task.RenderTarget(with(func(o *RenderOptions) { o.ElasticWorkerRestartPolicy = RestartPolicyNever }),
		TargetJobSet, TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Objects[0].(map[string]any)["spec"].(map[string]any)
	job := spec["replicatedJobs"].([]any)[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	if job["backoffLimit"] != 0 {
		t.Errorf("Never: backoffLimit %v", job["backoffLimit"])
	}
	for _, o := range []RenderOptions{
		with(func(o *RenderOptions) { o.Env = map[string]string{restartAttemptEnv: "1"} }),
		with(func(o *RenderOptions) { o.Name = strings.Repeat("a", 54) }),
	} {
		if _, err := task.RenderTarget(o, TargetTrainJob, TargetOptions{}); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// An invalid task is a ValidationError on every target.
	bad := targetTask(t, `{"elasticConfig": {"minReplicas": 3, "maxReplicas": 2, "nprocPerNode": 1}}`)
	for _, target := range Targets() {
		var ve *ValidationError
		if _, err := bad.RenderTarget(targetOptions, target, TargetOptions{}); !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a ValidationError", target, err)
		}
	}
}

// The pytorchjob target is RenderObjects: the job, and the NetworkPolicy when asked for.
func TestRenderTargetPyTorchJob(t *testing.T) {
	task := targetTask(t, `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1}}`)
	o := targetOptions
	o.NetworkPolicy = true
	got, err := task.RenderTarget(o, TargetPyTorchJob, TargetOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	job, policy, _, _ := task.RenderObjects(o)
	if !reflect.DeepEqual(got.Objects, []any{job, policy}) || got.Losses == nil || len(got.Losses) != 0 {
		t.Errorf("%+v", got)
	}
	if b, _ := json.Marshal(got); !bytes.Contains(b, []byte(`"losses":[]`)) {
		t.Errorf("losses are written as []: %s", b)
	}
}
