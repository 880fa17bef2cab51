package elasticidl

import (
	"os"
	"testing"
	"time"
)

// benchCase is one contract vector as the backend gets it: the custom dict as
// JSON, its task_type_version and its render options.
type benchCase struct {
	data    []byte
	version int32
	opts    *jsonObject // the render options as the reference's keyword arguments
	refused bool        // the render is refused (an invalid task, a bad option): a typed error, every time
}

// withRefusals renders each case once: a refusal must be one of the package's
// error types, and the benchmark then checks each render refuses or not as here.
func withRefusals(b *testing.B, cases []benchCase) []benchCase {
	for i, c := range cases {
		task, err := Decode(c.data, FormatJSON, c.version)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := task.renderJob(c.opts); err != nil {
			if kind := errorOf(err)["type"]; kind != "ValidationError" && kind != "RenderError" {
				b.Fatalf("render: %T %v", err, err)
			}
			cases[i].refused = true
		}
	}
	return cases
}

// benchCases reads the request bench/bench_go.py writes (ELASTIC_IDL_BENCH_REQUEST:
// every vector with a JSON form and its case's render options), else every vector's
// custom.json with the default options.
func benchCases(b *testing.B) []benchCase {
	var out []benchCase
	if path := os.Getenv("ELASTIC_IDL_BENCH_REQUEST"); path != "" {
		text, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		req, err := parsePyJSON(string(text))
		if err != nil {
			b.Fatal(err)
		}
		cases, _ := req.(*jsonObject).get("cases")
		for _, c := range cases.([]jsonValue) {
			entry := c.(*jsonObject)
			input, _ := entry.get("input")
			data, _ := input.(*jsonObject).get("data")
			version, _ := entry.get("task_type_version")
			render, _ := entry.get("render")
			if err := checkOptionKeys(render.(*jsonObject)); err != nil {
				b.Fatal(err)
			}
			out = append(out, benchCase{data: []byte(data.(string)), version: int32(numberOf(version)), opts: render.(*jsonObject)})
		}
		return out
	}
	for _, v := range loadVectors(b) {
		if m, ok := v.custom.(map[string]any); ok && m["error"] == nil && v.binary != nil {
			out = append(out, benchCase{data: v.customText, version: v.version, opts: RenderOptions{
				Name: "job", Image: "example.com/train:1", Entrypoint: []string{"train.py"},
			}.generic()})
		}
	}
	return out
}

// BenchmarkContract: decode (custom JSON) + validate + render, per contract vector.
// Reported as ns/vector; bench/bench_go.py runs it beside the Python reference.
func BenchmarkContract(b *testing.B) {
	cases := withRefusals(b, benchCases(b))
	refused := 0
	for _, c := range cases {
		if c.refused {
			refused++
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, c := range cases {
			task, err := Decode(c.data, FormatJSON, c.version)
			if err != nil {
				b.Fatal(err)
			}
			_ = task.Violations()
			if _, _, err := task.renderJob(c.opts); (err != nil) != c.refused {
				b.Fatalf("render: %v; refused before: %v", err, c.refused)
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*len(cases)), "ns/vector")
	b.ReportMetric(float64(len(cases)), "vectors")
	b.ReportMetric(float64(refused), "refused")
}
