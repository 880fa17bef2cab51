package elasticidl

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// The forward-compatibility vectors (contract/forward): a newer SDK's task through this
// version, as the Python reference's expected.json pins it.

const forwardDir = "../../contract/forward"

type forwardExpected struct {
	Unknown   []string       `json:"unknown"`
	Custom    map[string]any `json:"custom"`
	BinaryHex string         `json:"binary_hex"`
	Error     map[string]any `json:"error"`
}

var (
	vectorVersion = regexp.MustCompile(`(?m)^task_type_version:\s*(\d+)\s*$`)
	vectorFormat  = regexp.MustCompile(`(?m)^format:\s*(\w+)\s*$`)
	vectorHex     = regexp.MustCompile(`(?m)^input:\s*([0-9a-f]+)\s*$`)
)

// vectorInput reads vector.yaml without a YAML parser: the core module has none. A JSON
// input is a single-quoted YAML scalar, folded over lines (” is a quote).
func vectorInput(t *testing.T, text string, format string) []byte {
	t.Helper()
	if format == "binary_hex" {
		m := vectorHex.FindStringSubmatch(text)
		if m == nil {
			t.Fatal("no hex input")
		}
		raw, err := hex.DecodeString(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	start := strings.Index(text, "\ninput: '")
	if start < 0 {
		t.Fatal("no quoted input")
	}
	body := text[start+len("\ninput: '"):]
	end := strings.LastIndex(body, "'")
	lines := strings.Split(body[:end], "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return []byte(strings.ReplaceAll(strings.Join(lines, " "), "''", "'"))
}

func TestForwardVectors(t *testing.T) {
	dirs, err := os.ReadDir(forwardDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 4 {
		t.Fatalf("only %d forward vectors", len(dirs))
	}
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			meta, err := os.ReadFile(filepath.Join(forwardDir, d.Name(), "vector.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			text := string(meta)
			version64, _ := strconv.ParseInt(vectorVersion.FindStringSubmatch(text)[1], 10, 32)
			version := int32(version64)
			format := vectorFormat.FindStringSubmatch(text)[1]
			input := vectorInput(t, text, format)
			raw, err := os.ReadFile(filepath.Join(forwardDir, d.Name(), "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]forwardExpected
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			goFormat := FormatJSON
			if format == "binary_hex" {
				goFormat = FormatBinary
			}
			tolerant, err := DecodeTolerant(input, goFormat, version)
			checkForward(t, "tolerant", tolerant, err, want["tolerant"])
			strict, err := Decode(input, goFormat, version)
			checkForward(t, "strict", strict, err, want["strict"])
			if goFormat != FormatJSON {
				return
			}
			// The backend's entry point: the custom as a Struct (keys in no order), then the render.
			var custom map[string]any
			if err := json.Unmarshal(input, &custom); err != nil {
				t.Fatal(err)
			}
			s, err := structpb.NewStruct(custom)
			if err != nil {
				t.Fatal(err)
			}
			task, err := FromStruct(s, version)
			if want["tolerant"].Error != nil {
				if err == nil || errorOf(err)["field"] != want["tolerant"].Error["field"] {
					t.Fatalf("FromStruct: %v, want the error %v", err, want["tolerant"].Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, wantSorted := append([]string{}, task.UnknownFields()...), append([]string{}, want["tolerant"].Unknown...)
			sort.Strings(got)
			sort.Strings(wantSorted)
			if !reflect.DeepEqual(got, wantSorted) {
				t.Errorf("FromStruct unknown fields %q, want %q", got, wantSorted)
			}
			if _, err := FromStructStrict(s, version); err == nil {
				t.Error("FromStructStrict accepted unknown fields")
			}
			_, warnings, err := task.RenderJob(RenderOptions{Name: "job", Image: "i:1", Entrypoint: []string{"t.py"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != len(want["tolerant"].Unknown) {
				t.Errorf("RenderJob warnings %v, want one per unknown field %q", warnings, want["tolerant"].Unknown)
			}
		})
	}
}

func checkForward(t *testing.T, label string, task *Task, err error, want forwardExpected) {
	t.Helper()
	if want.Error != nil {
		if err == nil {
			t.Fatalf("%s: decoded, want %v", label, want.Error)
		}
		got := errorOf(err)
		if got["type"] != want.Error["type"] || got["field"] != want.Error["field"] {
			t.Fatalf("%s: %v, want %v", label, got, want.Error)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	if got := task.UnknownFields(); !reflect.DeepEqual(got, want.Unknown) {
		t.Errorf("%s: unknown fields %q, want %q", label, got, want.Unknown)
	}
	checkCustom(t, label, task, want.Custom)
	binary, _ := task.Binary()
	if hex.EncodeToString(binary) != want.BinaryHex {
		t.Errorf("%s: binary %x, want %s", label, binary, want.BinaryHex)
	}
}
