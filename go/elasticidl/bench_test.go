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
	version int64
	opts    RenderOptions
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
			opts, err := renderOptionsFromObject(render.(*jsonObject))
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, benchCase{[]byte(data.(string)), numberOf(version), opts})
		}
		return out
	}
	for _, v := range loadVectors(b) {
		if m, ok := v.custom.(map[string]any); ok && m["error"] == nil && v.binary != nil {
			out = append(out, benchCase{v.customText, v.version, RenderOptions{
				Name: "job", Image: "example.com/train:1", Entrypoint: []string{"train.py"},
			}})
		}
	}
	return out
}

// BenchmarkContract: decode (custom JSON) + validate + render, per contract vector.
// Reported as ns/vector; bench/bench_go.py runs it beside the Python reference.
func BenchmarkContract(b *testing.B) {
	cases := benchCases(b)
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
			_, _ = task.RenderPyTorchJob(c.opts)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*len(cases)), "ns/vector")
	b.ReportMetric(float64(len(cases)), "vectors")
}
