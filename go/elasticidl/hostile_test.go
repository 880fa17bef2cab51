package elasticidl

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// Hostile inputs near the 1 MiB limit, one per input shape, each beside a normal
// input of about the same size. The tests bound what they allocate strictly and
// their time loosely (a ratio to the normal input, never an absolute time).

const hostileSize = maxTaskBytes - 4096

const kfHeader = "# proto-message: elastic_idl.plugins.kubeflow.v1.DistributedPyTorchTrainingTask\n"

// fill repeats unit to about size bytes.
func fill(unit string, size int) string { return strings.Repeat(unit, size/len(unit)) }

// rdzvOptionsJSON is a valid kubeflow task of about size bytes with distinct rendezvous options, as custom JSON.
func rdzvOptionsJSON(size int) string {
	var b strings.Builder
	b.WriteString(`{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1, "rdzvOptions": [`)
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key": "k%d", "value": "v"}`, i)
	}
	b.WriteString("]}}")
	return b.String()
}

// The field numbers of kubeflow task.elastic_config and ElasticConfig.rdzv_options.
var (
	elasticConfigNumber = (&eidlkubeflowv1.DistributedPyTorchTrainingTask{}).ProtoReflect().Descriptor().
				Fields().ByName("elastic_config").Number()
	rdzvOptionsNumber = (&eidlpluginsv1.ElasticConfig{}).ProtoReflect().Descriptor().
				Fields().ByName("rdzv_options").Number()
)

// quantityJSON is a kubeflow task whose worker CPU request and limit are the quantity q.
func quantityJSON(q string) string {
	return `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1}, "workerReplicas": {"common": ` +
		`{"resources": {"requests": [{"name": "CPU", "value": "` + q + `"}], "limits": [{"name": "CPU", "value": "` +
		q + `"}]}}}}`
}

// longValueJSON is a valid kubeflow task of about size bytes: one long rendezvous option value.
func longValueJSON(size int) string {
	return `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1, "rdzvOptions": [` +
		`{"key": "k", "value": "` + fill("v", size) + `"}]}}`
}

type hostileCase struct {
	name    string
	hostile func(size int) func() // builds the input of about size bytes, returns the work on it
	normal  func(size int) func()
}

func mustDecodeJSON(tb testing.TB, text string) *Task {
	task, err := Decode([]byte(text), FormatJSON, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return task
}

var hostileCases = []hostileCase{
	{
		// A bad \xff escape, then string tokens that continue it, all on one line.
		name: "textproto/bad escape then string tokens",
		hostile: func(size int) func() {
			in := []byte(kfHeader + `elastic_config { rdzv_backend: "\xff"` + fill(` "a"`, size) + " }\n")
			return func() { _, _ = Decode(in, FormatTextproto, 1) }
		},
		normal: func(size int) func() {
			in := []byte(kfHeader + `elastic_config { rdzv_backend: "` + fill("a", size) + `" }` + "\n")
			return func() { _, _ = Decode(in, FormatTextproto, 1) }
		},
	},
	{
		// An integer given as a string of digits.
		name: "json/integer of digits",
		hostile: func(size int) func() {
			in := []byte(`{"elasticConfig": {"minReplicas": "` + fill("1", size) + `"}}`)
			return func() { _, _ = Decode(in, FormatJSON, 1) }
		},
		normal: func(size int) func() {
			in := []byte(`{"elasticConfig": {"rdzvBackend": "` + fill("1", size) + `"}}`)
			return func() { _, _ = Decode(in, FormatJSON, 1) }
		},
	},
	{
		// A CPU request and limit of as many digits as fit: parsed, compared, rounded.
		name: "json/quantity of digits",
		hostile: func(size int) func() {
			in := []byte(quantityJSON(fill("1", size/2-200)))
			return func() {
				if task, err := Decode(in, FormatJSON, 1); err == nil {
					_ = task.Violations()
				}
			}
		},
		normal: func(size int) func() {
			in := []byte(longValueJSON(size))
			return func() {
				if task, err := Decode(in, FormatJSON, 1); err == nil {
					_ = task.Violations()
				}
			}
		},
	},
	{
		// Many rendezvous options, rendered into rdzvConf.
		name: "json/render many rendezvous options",
		hostile: func(size int) func() {
			in := []byte(rdzvOptionsJSON(size))
			opts := RenderOptions{Name: "job", Image: "img:1", Entrypoint: []string{"train.py"}}
			return func() {
				if task, err := Decode(in, FormatJSON, 1); err == nil {
					_, _ = task.RenderPyTorchJob(opts)
				}
			}
		},
		normal: func(size int) func() {
			in := []byte(longValueJSON(size))
			opts := RenderOptions{Name: "job", Image: "img:1", Entrypoint: []string{"train.py"}}
			return func() {
				if task, err := Decode(in, FormatJSON, 1); err == nil {
					_, _ = task.RenderPyTorchJob(opts)
				}
			}
		},
	},
	{
		// Many rendezvous options, each with an unknown field (kept per message).
		name: "binary/options with unknown fields",
		hostile: func(size int) func() {
			var elastic []byte
			for len(elastic) < size-64 {
				var opt []byte
				opt = protowire.AppendTag(opt, 1, protowire.BytesType)
				opt = protowire.AppendString(opt, "k")
				opt = protowire.AppendTag(opt, 99, protowire.VarintType)
				opt = protowire.AppendVarint(opt, 1)
				elastic = protowire.AppendTag(elastic, rdzvOptionsNumber, protowire.BytesType)
				elastic = protowire.AppendBytes(elastic, opt)
			}
			in := protowire.AppendTag(nil, elasticConfigNumber, protowire.BytesType)
			in = protowire.AppendBytes(in, elastic)
			return func() { _, _ = Decode(in, FormatBinary, 1) }
		},
		normal: func(size int) func() {
			task := mustDecodeJSON(nil, longValueJSON(size))
			in, _ := task.Binary()
			return func() { _, _ = Decode(in, FormatBinary, 1) }
		},
	},
	{
		// Numbers under an unknown key of a Struct: refused before they are read.
		name: "struct/numbers under an unknown key",
		hostile: func(size int) func() {
			values := make([]*structpb.Value, size/9) // a double is 9 bytes on the wire
			for i := range values {
				values[i] = structpb.NewNumberValue(float64(i))
			}
			s := &structpb.Struct{Fields: map[string]*structpb.Value{
				"unknownKey":    structpb.NewListValue(&structpb.ListValue{Values: values}),
				"elasticConfig": structpb.NewStructValue(&structpb.Struct{}),
			}}
			return func() { _, _ = FromStruct(s, 1) }
		},
		normal: func(size int) func() {
			s, err := mustDecodeJSON(nil, longValueJSON(size)).Struct()
			if err != nil {
				panic(err)
			}
			return func() { _, _ = FromStruct(s, 1) }
		},
	},
	{
		// Render options whose CPU request and limit have as many digits as fit.
		name: "render options/quantity of digits",
		hostile: func(size int) func() {
			q := fill("1", size/2-100)
			in := []byte(`{"name": "job", "image": "img:1", "entrypoint": ["t.py"], "resources": ` +
				`{"requests": {"cpu": "` + q + `"}, "limits": {"cpu": "` + q + `"}}}`)
			task := mustDecodeJSON(nil, rdzvOptionsJSON(0))
			return func() {
				if opts, err := RenderOptionsFromJSON(in); err == nil {
					_, _ = task.RenderPyTorchJob(opts)
				}
			}
		},
		normal: func(size int) func() {
			in := []byte(`{"name": "job", "image": "img:1", "entrypoint": ["` + fill("t", size) + `"]}`)
			task := mustDecodeJSON(nil, rdzvOptionsJSON(0))
			return func() {
				if opts, err := RenderOptionsFromJSON(in); err == nil {
					_, _ = task.RenderPyTorchJob(opts)
				}
			}
		},
	},
}

// costOf is the fastest of runs runs of f, and the allocations and bytes of one.
func costOf(f func(), runs int) (time.Duration, uint64, uint64) {
	f() // warm up: regexps, descriptors
	allocs, bytes := allocsOf(f)
	best := time.Duration(1<<63 - 1)
	// The collector off while a run is timed (and run between runs): it starts
	// only once the heap has grown, which a small input may not reach.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for i := 0; i < runs; i++ {
		runtime.GC()
		start := time.Now()
		f()
		if d := time.Since(start); d < best {
			best = d
		}
	}
	runtime.GC()
	return best, allocs, bytes
}

// allocsOf is the allocations and bytes of one run of f (warmed up by an earlier run of its kind).
func allocsOf(f func()) (uint64, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc
}

// BenchmarkHostile reports each hostile input and its normal input of the same size.
func BenchmarkHostile(b *testing.B) {
	for _, c := range hostileCases {
		for _, kind := range []struct {
			name  string
			build func(int) func()
		}{{"hostile", c.hostile}, {"normal", c.normal}} {
			b.Run(c.name+"/"+kind.name, func(b *testing.B) {
				f := kind.build(hostileSize)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					f()
				}
			})
		}
	}
}

// hostileBounds are the most each hostile input near the 1 MiB limit may allocate
// (about twice what it does; the inputs before the fix took from 15,000 to
// 1,000,000 allocations and up to 4 GB).
var hostileBounds = map[string]struct{ allocs, bytes uint64 }{
	"textproto/bad escape then string tokens": {400, 90 << 20},
	"json/integer of digits":                  {200, 25 << 20},
	"json/quantity of digits":                 {600, 35 << 20},
	"json/render many rendezvous options":     {2_000_000, 160 << 20},
	"binary/options with unknown fields":      {700_000, 50 << 20},
	"struct/numbers under an unknown key":     {100, 64 << 10},
	"render options/quantity of digits":       {500, 25 << 20},
}

// TestHostileInputsAreBounded: near the 1 MiB limit, each hostile input allocates
// at most its bound; four times the input at most about quadruples its time and
// allocations (a quadratic cost multiplies them by 16; the time bound is 8x, loose
// for a shared machine).
func TestHostileInputsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("hostile inputs take seconds under -race")
	}
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			bound, ok := hostileBounds[c.name]
			if !ok {
				t.Fatal("no bound")
			}
			// Four times the input: a linear cost is 4x, a quadratic one 16x.
			small := 64 << 10
			if raceEnabled {
				small = 16 << 10
			}
			smallTime, smallAllocs, smallBytes := costOf(c.hostile(small), 5)
			bigTime, bigAllocs, bigBytes := costOf(c.hostile(4*small), 5)
			if bigAllocs > 4*smallAllocs+64 || bigBytes > 5*smallBytes+1<<20 {
				t.Errorf("x4: %d -> %d allocations, %d -> %d bytes", smallAllocs, bigAllocs, smallBytes, bigBytes)
			}
			// Near the limit (a quarter of it under -race, with a quarter of the bound).
			size, share := hostileSize, uint64(1)
			if raceEnabled {
				size, share = hostileSize/4, 4
			}
			allocs, bytes := allocsOf(c.hostile(size))
			if allocs > bound.allocs || bytes > bound.bytes/share {
				t.Errorf("%d bytes: %d allocations, %d bytes; at most %d, %d", size, allocs, bytes,
					bound.allocs, bound.bytes/share)
			}
			// Time on a shared machine is noisy: a quadratic cost is 16x every time, so the
			// best of three tries is the one kept.
			for try := 1; bigTime > 8*smallTime+5*time.Millisecond; try++ {
				if try == 3 {
					t.Errorf("x4: %v -> %v", smallTime, bigTime)
					break
				}
				smallTime, _, _ = costOf(c.hostile(small), 5)
				bigTime, _, _ = costOf(c.hostile(4*small), 5)
			}
		})
	}
}
