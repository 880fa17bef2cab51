package elasticidl

import (
	"encoding/hex"
	"encoding/json"
	"google.golang.org/protobuf/proto"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
)

// The contract vectors, in-process: the outputs that need no render options
// (bytes, custom dict, violations) from every input form. The whole contract,
// PyTorchJob and pod env included, runs through the conformance command in
// tests/test_go.py.

const casesDir = "../../contract/cases"

type vector struct {
	name       string
	version    int32
	textproto  []byte // nil for flytekit cases
	binary     []byte
	custom     any    // decoded custom.json
	customText []byte // custom.json as written
	// sdkCustom is the custom an SDK wrote (sdk.json of a flytekit or flyte2 case: what
	// flytekitplugins-kfpytorch or Flyte 2's flyteplugins-pytorch emitted), nil elsewhere or when none.
	sdkCustom  []byte
	violations any
	render     *jsonObject // the render options: case.yaml's render over DEFAULT_RENDER
	targets    any         // decoded targets.json; nil when the case has none
}

var caseVersion = regexp.MustCompile(`(?m)^task_type_version:\s*(-?\d+)\s*$`)

func loadVectors(t testing.TB) []vector {
	t.Helper()
	dirs, err := os.ReadDir(casesDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []vector
	for _, d := range dirs {
		dir := filepath.Join(casesDir, d.Name())
		meta, err := os.ReadFile(filepath.Join(dir, "case.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		m := caseVersion.FindSubmatch(meta)
		if m == nil {
			t.Fatalf("%s: no task_type_version in case.yaml", d.Name())
		}
		v := vector{name: d.Name(), render: caseRender(t, d.Name(), meta)}
		version, _ := strconv.ParseInt(string(m[1]), 10, 32)
		v.version = int32(version)
		if b, err := os.ReadFile(filepath.Join(dir, "input.textproto")); err == nil {
			v.textproto = b
		}
		if b, err := os.ReadFile(filepath.Join(dir, "binary.hex")); err == nil {
			if v.binary, err = hex.DecodeString(string(regexp.MustCompile(`\s`).ReplaceAll(b, nil))); err != nil {
				t.Fatalf("%s: binary.hex: %v", d.Name(), err)
			}
		}
		for file, into := range map[string]*any{
			"custom.json": &v.custom, "violations.json": &v.violations, "targets.json": &v.targets,
		} {
			if b, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
				if err := json.Unmarshal(b, into); err != nil {
					t.Fatalf("%s/%s: %v", d.Name(), file, err)
				}
				if file == "custom.json" {
					v.customText = b
				}
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "sdk.json")); err == nil {
			var sdk struct {
				Custom json.RawMessage `json:"custom"`
			}
			if err := json.Unmarshal(b, &sdk); err != nil {
				t.Fatalf("%s/sdk.json: %v", d.Name(), err)
			}
			if len(sdk.Custom) > 0 && string(sdk.Custom) != "null" {
				v.sdkCustom = sdk.Custom
			}
		}
		out = append(out, v)
	}
	if len(out) < 50 {
		t.Fatalf("only %d contract cases under %s", len(out), casesDir)
	}
	return out
}

func asData(t *testing.T, text []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

func violationData(t *testing.T, task *Task) any {
	vs := []map[string]string{}
	for _, v := range task.Violations() {
		vs = append(vs, map[string]string{"field": v.Field, "rule": v.Rule})
	}
	b, _ := json.Marshal(vs)
	return asData(t, b)
}

func TestContractVectors(t *testing.T) {
	sdkCases := map[string]int{} // SDK customs read, by case-name prefix (fk_ flytekit, f2_ Flyte 2)
	targets := 0                 // inputs whose targets output was compared with targets.json
	defer func() {
		if !t.Failed() && (sdkCases["fk"] < 5 || sdkCases["f2"] < 5) {
			t.Errorf("SDK customs read: %v, want at least 5 of flytekit's (fk_) and of Flyte 2's (f2_)", sdkCases)
		}
		if !t.Failed() && targets < 200 {
			t.Errorf("targets compared for only %d inputs", targets)
		}
	}()
	for _, v := range loadVectors(t) {
		v := v
		t.Run(v.name, func(t *testing.T) {
			var inputs []struct {
				format Format
				data   []byte
			}
			if v.textproto != nil {
				inputs = append(inputs, struct {
					format Format
					data   []byte
				}{FormatTextproto, v.textproto})
			}
			if v.binary != nil {
				inputs = append(inputs, struct {
					format Format
					data   []byte
				}{FormatBinary, v.binary})
			}
			if m, ok := v.custom.(map[string]any); ok && m["error"] == nil {
				inputs = append(inputs, struct {
					format Format
					data   []byte
				}{FormatJSON, v.customText})
			}
			if v.sdkCustom != nil { // the SDK's own custom, read as the backend receives it
				sdkCases[regexp.MustCompile(`_.*`).ReplaceAllString(v.name, "")]++
				inputs = append(inputs, struct {
					format Format
					data   []byte
				}{FormatJSON, v.sdkCustom})
			}
			if len(inputs) == 0 {
				return // an SDK case without a task (flytekit's plain python-task)
			}
			for _, in := range inputs {
				task, err := Decode(in.data, in.format, v.version)
				if v.binary == nil { // an error case: no task of that version
					if _, ok := err.(*UnsupportedVersionError); !ok {
						t.Errorf("%s: got %v, want an UnsupportedVersionError", in.format, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", in.format, err)
				}
				got, _ := task.Binary()
				if hex.EncodeToString(got) != hex.EncodeToString(v.binary) {
					t.Errorf("%s: binary %x, want %x", in.format, got, v.binary)
				}
				if g := violationData(t, task); !reflect.DeepEqual(g, v.violations) {
					t.Errorf("%s: violations %v, want %v", in.format, g, v.violations)
				}
				if checkTargets(t, in.format, task, v) {
					targets++
				}
				custom, err := task.CustomJSON()
				if err != nil {
					if _, ok := err.(*EncodeError); !ok || v.custom.(map[string]any)["error"] == nil {
						t.Errorf("%s: custom: %v", in.format, err)
					}
					continue
				}
				if g := asData(t, []byte(custom)); !reflect.DeepEqual(g, v.custom) {
					t.Errorf("%s: custom %s, want %v", in.format, custom, v.custom)
				}
				// The custom dict is proto3 JSON: protojson writes the same data.
				pj, err := protojson.Marshal(task.Message())
				if err != nil {
					t.Fatalf("protojson: %v", err)
				}
				if g := asData(t, pj); !reflect.DeepEqual(g, v.custom) {
					t.Errorf("%s: protojson %s differs from the custom dict %s", in.format, pj, custom)
				}
			}
		})
	}
}

func TestStructRoundTrip(t *testing.T) {
	checked := 0
	for _, v := range loadVectors(t) {
		m, ok := v.custom.(map[string]any)
		if !ok || m["error"] != nil || v.binary == nil {
			continue
		}
		task, err := Decode(v.binary, FormatBinary, v.version)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		s, err := task.Struct()
		if err != nil {
			t.Fatalf("%s: Struct: %v", v.name, err)
		}
		back, err := FromStruct(s, v.version)
		if err != nil {
			t.Fatalf("%s: FromStruct: %v", v.name, err)
		}
		a, errA := task.CustomJSON()
		b, errB := back.CustomJSON()
		if errA != nil || errB != nil || a != b {
			t.Errorf("%s: through a Struct %s (%v), want %s (%v)", v.name, b, errB, a, errA)
		}
		if !proto.Equal(task.Message(), back.Message()) {
			t.Errorf("%s: through a Struct the message differs", v.name)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d vectors went through a Struct", checked)
	}
}
