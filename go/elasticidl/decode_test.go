package elasticidl

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// Decode errors name the field as the reference's codec does; expected fields are
// what elastic_idl.decode reports for the same input (tests/test_go.py compares
// the two on many more, generated, inputs).
func TestDecodeErrors(t *testing.T) {
	const kf = "# proto-message: elastic_idl.plugins.kubeflow.v1.DistributedPyTorchTrainingTask\n"
	for _, tc := range []struct {
		name    string
		format  Format
		version int32
		in      string
		field   string
	}{
		// JSON: unknown keys, wrong types, ranges, Durations; proto paths with indices.
		{"wrong type", FormatJSON, 1, `{"elasticConfig": {"minReplicas": "x"}}`, "elastic_config.min_replicas"},
		{"NaN", FormatJSON, 1, `{"elasticConfig": {"minReplicas": NaN}}`, "elastic_config.min_replicas"},
		{"unknown key", FormatJSON, 1, `{"elasticConfig": {"minReplicas": 1, "x": 1, "maxReplicas": "a"}}`, "elastic_config.x"},
		{"first error in key order", FormatJSON, 1, `{"elasticConfig": {"maxReplicas": "a", "x": 1}}`, "elastic_config.max_replicas"},
		{"legacy key on kubeflow", FormatJSON, 1, `{"workers": 3}`, "workers"},
		{"list item", FormatJSON, 1, `{"elasticConfig": {"localRanksFilter": [1, "a"]}}`, "elastic_config.local_ranks_filter[1]"},
		{"null item", FormatJSON, 1, `{"elasticConfig": {"rdzvOptions": [null]}}`, "elastic_config.rdzv_options[0]"},
		{"nested item", FormatJSON, 1, `{"elasticConfig": {"rdzvOptions": [{"key": 1}]}}`, "elastic_config.rdzv_options[0].key"},
		{"not a list", FormatJSON, 1, `{"elasticConfig": {"localRanksFilter": 1}}`, "elastic_config.local_ranks_filter"},
		{"int32 range", FormatJSON, 1, `{"elasticConfig": {"maxReplicas": 2147483648}}`, "elastic_config.max_replicas"},
		{"fraction", FormatJSON, 1, `{"elasticConfig": {"minReplicas": 1.0000000000000002}}`, "elastic_config.min_replicas"},
		{"enum name", FormatJSON, 1, `{"elasticConfig": {"nprocPolicy": "NPROC_POLICY_XX"}}`, "elastic_config.nproc_policy"},
		{"enum number as text", FormatJSON, 1, `{"elasticConfig": {"nprocPolicy": "1"}}`, "elastic_config.nproc_policy"},
		{"bool", FormatJSON, 1, `{"elasticConfig": {"virtualLocalRank": 1}}`, "elastic_config.virtual_local_rank"},
		{"duration object", FormatJSON, 1, `{"elasticConfig": {"monitorInterval": {"seconds": 1}}}`, "elastic_config.monitor_interval"},
		{"duration digits", FormatJSON, 1, `{"elasticConfig": {"monitorInterval": "1.1234567891s"}}`, "elastic_config.monitor_interval"},
		{"top level", FormatJSON, 1, `[]`, ""},
		{"null task", FormatJSON, 1, `null`, ""},
		{"malformed", FormatJSON, 1, `{"a":`, ""},
		// JSON: a key given twice, under one name or both, and limits of the input as a whole.
		{"key twice", FormatJSON, 1, `{"elasticConfig": {"minReplicas": 1, "minReplicas": 2}}`, "minReplicas"},
		{"inner object ends first", FormatJSON, 1, `{"a": 1, "a": 2, "b": {"x": 1, "x": 2}}`, "x"},
		{"both names", FormatJSON, 1, `{"elasticConfig": {"minReplicas": 1, "min_replicas": 2}}`, "elastic_config.min_replicas"},
		{"both names of a message", FormatJSON, 1, `{"elastic_config": {}, "elasticConfig": {}}`, "elastic_config"},
		{"both names, one null", FormatJSON, 1, `{"elasticConfig": {"monitorInterval": "1s", "monitor_interval": null}}`, "elastic_config.monitor_interval"},
		{"101 levels", FormatJSON, 1, `{"x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, ""},
		{"nesting before duplicates", FormatJSON, 1, `{"a": {"x": 1, "x": 2}, "b": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, ""},
		{"100 levels", FormatJSON, 1, `{"x": ` + strings.Repeat("[", 99) + strings.Repeat("]", 99) + `}`, "x"},
		{"long key cut", FormatJSON, 1, `{"` + strings.Repeat("k", 200) + `": 1}`, strings.Repeat("k", 117) + "..."},
		{"integer of 4301 digits", FormatJSON, 1, `{"elasticConfig": {"minReplicas": ` + strings.Repeat("1", 4301) + `}}`, ""},
		{"integer of 4300 digits", FormatJSON, 1, `{"elasticConfig": {"minReplicas": ` + strings.Repeat("1", 4300) + `}}`, "elastic_config.min_replicas"},
		{"too large", FormatJSON, 1, `{"x": "` + strings.Repeat("a", maxTaskBytes) + `"}`, ""},
		{"too large before the version", FormatJSON, 7, strings.Repeat(" ", maxTaskBytes+1), ""},
		{"not UTF-8", FormatJSON, 1, "{\"x\": \"\xff\"}", ""},
		{"UTF-16", FormatJSON, 1, "{\x00}\x00", ""},
		{"UTF-16 BOM", FormatTextproto, 1, "\xff\xfee\x00", ""},
		// JSON, after the checks: the builder's errors name the fields, without list indices.
		{"duration range", FormatJSON, 1, `{"elasticConfig": {"monitor_interval": "315576000001s"}}`, "elastic_config.monitor_interval"},
		{"duration newline", FormatJSON, 1, `{"elasticConfig": {"monitorInterval": "5s\n"}}`, "elastic_config.monitor_interval"},
		// A lone surrogate is checked with the values, as the reference does: its path has the list index.
		{"lone surrogate", FormatJSON, 1, `{"elasticConfig": {"rdzvOptions": [{"key": "a"}, {"key": "\udc00"}]}}`, "elastic_config.rdzv_options[1].key"},
		// Binary: a known field number with another wire type is the other shape.
		{"legacy bytes as kubeflow", FormatBinary, 1, "\x08\x03", "worker_replicas"},
		{"kubeflow bytes as legacy", FormatBinary, 0, "\x0a\x02\x08\x03", "workers"},
		{"nested wire type", FormatBinary, 1, "\x22\x02\x10\x01" + "\x22\x02\x12\x00", "elastic_config.min_replicas"},
		{"truncated", FormatBinary, 1, "\x22\x05\x10", ""},
		{"tag of 6 bytes", FormatBinary, 1, "\xa2\x80\x80\x80\x80\x00\x00", ""},
		{"101 nested groups", FormatBinary, 1, strings.Repeat("\x2b", 101) + strings.Repeat("\x2c", 101), ""},
		// Textproto.
		{"unknown field", FormatTextproto, 1, kf + "elastic_config { min_replica: 1 }", "min_replica"},
		{"bad value", FormatTextproto, 1, kf + "elastic_config { min_replicas: x }", "min_replicas"},
		{"repeated message", FormatTextproto, 1, kf + "elastic_config {}\nelastic_config {}", "elastic_config"},
		{"end of input", FormatTextproto, 1, kf + "master_replicas { replicas: 1 ", "replicas"},
		{"other header", FormatTextproto, 0, kf + "elastic_config {}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in), tc.format, tc.version)
			de, ok := err.(*DecodeError)
			if !ok {
				t.Fatalf("got %v (%T), want a DecodeError", err, err)
			}
			if de.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", de.Field, tc.field, de)
			}
		})
	}
}

func TestDecodeAcceptsWhatTheReferenceAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, in, custom string
	}{
		{"integral float", `{"elasticConfig": {"maxReplicas": 2147483647.0}}`, `{"elasticConfig":{"maxReplicas":2147483647}}`},
		{"int as Python int() reads it", `{"elasticConfig": {"minReplicas": " 1_0 "}}`, `{"elasticConfig":{"minReplicas":10}}`},
		{"any decimal digits", `{"elasticConfig": {"monitorInterval": "\u0663s"}}`, `{"elasticConfig":{"monitorInterval":"3s"}}`},
		{"snake_case keys", `{"elastic_config": {"min_replicas": 2}}`, `{"elasticConfig":{"minReplicas":2}}`},
		{"null is unset", `{"elasticConfig": {"monitorInterval": null}}`, `{"elasticConfig":{}}`},
		{"open enum", `{"elasticConfig": {"nprocPolicy": 7}}`, `{"elasticConfig":{"nprocPolicy":7}}`},
		{"byte order mark", "\ufeff{}", `{}`},
		{"100 levels", `{"elasticConfig": {"rdzvOptions": [{"key": "` + strings.Repeat("[", 200) + `"}]}}`,
			`{"elasticConfig":{"rdzvOptions":[{"key":"` + strings.Repeat("[", 200) + `"}]}}`},
	} {
		task, err := Decode([]byte(tc.in), FormatJSON, 1)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got, _ := task.CustomJSON(); got != tc.custom {
			t.Errorf("%s: custom %s, want %s", tc.name, got, tc.custom)
		}
	}
	// upb keeps the bits of a varint's 10th byte it can hold, and unknown fields as written.
	raw, _ := hex.DecodeString("220b10ffffffffffffffffff7f" + "ea0003616263")
	task, err := Decode(raw, FormatBinary, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := task.Binary(); hex.EncodeToString(got) != "220b10ffffffffffffffffff01ea0003616263" {
		t.Errorf("binary %x", got)
	}
}

func TestUnsupportedVersionComesFirst(t *testing.T) {
	for _, f := range []Format{FormatBinary, FormatJSON, FormatTextproto} {
		if _, err := Decode([]byte("garbage {"), f, 2); err == nil {
			t.Errorf("%s: no error", f)
		} else if _, ok := err.(*UnsupportedVersionError); !ok {
			t.Errorf("%s: %T, want UnsupportedVersionError", f, err)
		}
	}
	if _, err := FromStruct(&structpb.Struct{}, -1); err == nil {
		t.Errorf("FromStruct: version -1 accepted")
	}
}

// exercise runs every step a backend runs on any input; it must not panic.
func exercise(data []byte, format Format, version int32) {
	task, err := Decode(data, format, version)
	if err != nil {
		return
	}
	_, _ = task.Binary()
	_, _ = task.CustomJSON()
	_ = task.ExtensionFields()
	_ = task.ReplicaCounts()
	job, err := task.RenderPyTorchJob(RenderOptions{Name: "job", Image: "example.com/train:1", Entrypoint: []string{"train.py"}})
	if err != nil {
		return
	}
	for rtype, spec := range job.Spec.PyTorchReplicaSpecs {
		for i := 0; i < 2 && i < int(spec.Replicas); i++ {
			_, _ = PodEnv(job, rtype, i)
		}
	}
}

// Random damage to every vector in every form: typed errors or working tasks, never a panic.
func TestNoPanicOnDamagedInput(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	vectors := loadVectors(t)
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	for i := 0; i < iterations; i++ {
		v := vectors[rng.Intn(len(vectors))]
		for _, in := range []struct {
			format Format
			data   []byte
		}{{FormatBinary, v.binary}, {FormatJSON, v.customText}, {FormatTextproto, v.textproto}} {
			if len(in.data) == 0 {
				continue
			}
			data := append([]byte(nil), in.data...)
			switch pos := rng.Intn(len(data)); rng.Intn(4) {
			case 0:
				data[pos] ^= byte(1 << uint(rng.Intn(8)))
			case 1:
				data = data[:pos]
			case 2:
				data[pos] = byte(rng.Intn(256))
			default:
				data = append(data[:pos], append([]byte{data[rng.Intn(len(data))]}, data[pos:]...)...)
			}
			exercise(data, in.format, int32(rng.Intn(3)))
		}
	}
}

// fuzzFormats are the formats FuzzDecode's format byte picks (modulo 3).
var fuzzFormats = []Format{FormatBinary, FormatJSON, FormatTextproto}

// FuzzDecode: any input is a typed error or a task that survives its round trips:
// decode -> Binary -> decode, and decode -> CustomJSON -> decode, give the same
// message (unknown fields, which JSON drops, left out of the second). Its seed
// corpus is testdata/fuzz/FuzzDecode (written by TestWriteFuzzSeeds), which
// tests/test_go.py also replays through both languages.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, format uint8, version int32) {
		exercise(data, fuzzFormats[format%3], version)
		roundTrip(t, data, fuzzFormats[format%3], version)
	})
}

// roundTrip checks that a task read from data reads back the same from its
// binary and its custom JSON.
func roundTrip(t *testing.T, data []byte, format Format, version int32) {
	task, err := Decode(data, format, version)
	if err != nil {
		if errorOf(err)["reason"] != nil {
			t.Fatalf("an error of no type of this package: %T %v", err, err)
		}
		return
	}
	binary, err := task.Binary()
	if err != nil {
		t.Fatalf("Binary of a decoded task: %v", err)
	}
	back, err := Decode(binary, FormatBinary, version)
	if err != nil {
		t.Fatalf("decode of Binary: %v", err)
	}
	if !proto.Equal(task.Message(), back.Message()) {
		t.Fatalf("decode -> Binary -> decode differs:\n%v\n%v", task.Message(), back.Message())
	}
	custom, err := task.CustomJSON()
	var ee *EncodeError
	if errors.As(err, &ee) {
		return // a Duration out of JSON's range: no custom form
	}
	if err != nil {
		t.Fatalf("CustomJSON: %v", err)
	}
	fromJSON, err := Decode([]byte(custom), FormatJSON, version)
	if err != nil {
		t.Fatalf("decode of CustomJSON %s: %v", custom, err)
	}
	want := proto.Clone(task.Message())
	dropUnknown(want.ProtoReflect())
	if !proto.Equal(want, fromJSON.Message()) {
		t.Fatalf("decode -> CustomJSON -> decode differs:\n%v\n%v", want, fromJSON.Message())
	}
}

// dropUnknown clears the unknown fields of m and its messages.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				dropUnknown(v.List().Get(i).Message())
			}
		default:
			dropUnknown(v.Message())
		}
		return true
	})
}

// TestWriteFuzzSeeds writes FuzzDecode's seed corpus (ELASTIC_IDL_WRITE_SEEDS=1):
// every contract vector in each of its forms, and damaged copies of them.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("ELASTIC_IDL_WRITE_SEEDS") == "" {
		t.Skip("set ELASTIC_IDL_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzDecode")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(17))
	n := 0
	write := func(data []byte, format uint8, version int32) {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint8(%d)\nint32(%d)\n", data, format, version)
		n++
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", n)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range loadVectors(t) {
		for format, data := range [][]byte{v.binary, v.customText, v.textproto} {
			if data == nil {
				continue
			}
			write(data, uint8(format), v.version)
			if len(data) == 0 {
				continue
			}
			damaged := append([]byte(nil), data...)
			switch pos := rng.Intn(len(damaged)); rng.Intn(3) {
			case 0:
				damaged[pos] ^= byte(1 << uint(rng.Intn(8)))
			case 1:
				damaged = damaged[:pos]
			default:
				damaged[pos] = byte(rng.Intn(256))
			}
			write(damaged, uint8(format), v.version)
		}
	}
}
