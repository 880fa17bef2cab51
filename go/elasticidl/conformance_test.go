package elasticidl

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/elastic-idl/elastic-idl/go/internal/conformance"
)

// The conformance entry point, in-process: every vector's textproto and binary
// give its bytes, custom dict and violations (tests/test_go.py runs the whole
// contract through the command).
func TestConformanceAnswersEveryVector(t *testing.T) {
	var cases []map[string]any
	want := map[string]vector{}
	for _, v := range loadVectors(t) {
		if v.textproto == nil || v.binary == nil {
			continue
		}
		for format, data := range map[string]string{"textproto": string(v.textproto), "binary_hex": hex.EncodeToString(v.binary)} {
			name := v.name + "/" + format
			want[name] = v
			cases = append(cases, map[string]any{
				"name": name, "task_type_version": v.version, "input": map[string]any{"format": format, "data": data},
			})
		}
	}
	request, _ := json.Marshal(map[string]any{"version": contractVersion, "cases": cases})
	response, err := conformance.Respond(request)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Outputs []string
		Results map[string]map[string]any
	}
	if err := json.Unmarshal(response, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Outputs, goOutputs()) || len(got.Results) != len(cases) || len(cases) < 100 {
		t.Fatalf("outputs %v, %d results of %d cases", got.Outputs, len(got.Results), len(cases))
	}
	for name, v := range want {
		r := got.Results[name]
		if r["binary_hex"] != hex.EncodeToString(v.binary) || !reflect.DeepEqual(r["custom"], v.custom) ||
			fmt.Sprint(r["violations"]) != fmt.Sprint(v.violations) {
			t.Errorf("%s: %v", name, r)
		}
	}
}

// An unusable request is an error (the command's exit 2); a case that is no task is an answer.
func TestConformanceRequests(t *testing.T) {
	for _, tc := range []struct{ request, err string }{
		{"\xff", "not UTF-8"},
		{"{", "malformed JSON"},
		{"[]", "must be a JSON object"},
		{`{"version": 2}`, "request version 2 is not 1"},
		{`{"version": 1, "cases": 3}`, "cases must be a list"},
		{`{"version": 1, "cases": [{"input": {"data": "", "format": "json"}}]}`, `cases[0]: missing key "task_type_version"`},
		{`{"version": 1, "cases": [{"name": "a", "task_type_version": 1, "input": {"data": "{}", "format": "json"}, ` +
			`"render": {"name": "j", "image": "i", "bogus": 1}}]}`, "cases[0]: bogus: not a render option"},
	} {
		_, err := conformance.Respond([]byte(tc.request))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.request, err, tc.err)
		}
	}
	response, err := conformance.Respond([]byte(`{"version": 1.0, "cases": [` +
		`{"name": "hex", "task_type_version": 1, "input": {"data": "0g", "format": "binary_hex"}},` +
		`{"name": "big", "task_type_version": 1, "input": {"data": "` + strings.Repeat(" ", MaxTaskBytes+1) + `", "format": "json"}},` +
		`{"name": "version", "task_type_version": 7, "input": {"data": "{}", "format": "json"}},` +
		`{"name": "surrogate", "task_type_version": 1, "input": {"format": "json", ` +
		`"data": "{\"elasticConfig\": {\"minReplicas\": 1, \"maxReplicas\": 1, \"nprocPerNode\": 1}}"}, ` +
		`"render": {"name": "j", "image": "i", "entrypoint": ["\ud800"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"hex":{"error":{"field":"","reason":"non-hexadecimal number found in fromhex() arg at position 0","type":"DecodeError"}}`,
		`"big":{"error":{"field":"","type":"DecodeError"}}`,
		`"version":{"error":{"type":"UnsupportedVersionError"}}`,
		`"pytorchjob":{"error":{"field":"entrypoint","type":"RenderError"}}`,
	} {
		if !strings.Contains(string(response), want) {
			t.Errorf("no %s in %s", want, response)
		}
	}
}
