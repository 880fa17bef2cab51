package elasticidl

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// contract/spelling.json, which the Python reference passes too (tests/test_codec.py): enum
// values by their short names, and the "did you mean" a typo gets, with the same algorithm.

type spellingVectors struct {
	Decode []struct {
		Name            string         `json:"name"`
		TaskTypeVersion int32          `json:"task_type_version"`
		Format          string         `json:"format"`
		Input           string         `json:"input"`
		Custom          map[string]any `json:"custom"`
		Error           *struct {
			Field      string  `json:"field"`
			Suggestion *string `json:"suggestion"`
		} `json:"error"`
	} `json:"decode"`
	CloseMatch []struct {
		Description string   `json:"description"`
		Word        string   `json:"word"`
		Known       []string `json:"known"`
		Match       *string  `json:"match"`
	} `json:"close_match"`
}

var suggested = regexp.MustCompile(`did you mean '([^']*)'\?`)

func loadSpelling(t *testing.T) spellingVectors {
	t.Helper()
	raw, err := os.ReadFile("../../contract/spelling.json")
	if err != nil {
		t.Fatal(err)
	}
	var v spellingVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decode) < 10 || len(v.CloseMatch) < 10 {
		t.Fatalf("only %d decode and %d close_match vectors", len(v.Decode), len(v.CloseMatch))
	}
	return v
}

func TestSpellingDecode(t *testing.T) {
	for _, v := range loadSpelling(t).Decode {
		t.Run(v.Name, func(t *testing.T) {
			task, err := Decode([]byte(v.Input), Format(v.Format), v.TaskTypeVersion)
			if v.Error != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, want a DecodeError", err)
				}
				var got *string
				if m := suggested.FindStringSubmatch(de.Reason); m != nil {
					got = &m[1]
				}
				if de.Field != v.Error.Field || !reflect.DeepEqual(got, v.Error.Suggestion) {
					t.Fatalf("field %q, suggestion %v in %q; want %q, %v", de.Field, deref(got), de.Reason,
						v.Error.Field, deref(v.Error.Suggestion))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkCustom(t, "Decode", task, v.Custom)
			if v.Format != string(FormatJSON) {
				return
			}
			tolerant, err := DecodeTolerant([]byte(v.Input), FormatJSON, v.TaskTypeVersion)
			if err != nil || len(tolerant.UnknownFields()) != 0 {
				t.Fatalf("DecodeTolerant: %v, unknown %v", err, tolerant.UnknownFields())
			}
			var custom map[string]any
			if err := json.Unmarshal([]byte(v.Input), &custom); err != nil {
				t.Fatal(err)
			}
			s, err := structpb.NewStruct(custom)
			if err != nil {
				t.Fatal(err)
			}
			for name, read := range map[string]func(*structpb.Struct, int32) (*Task, error){
				"FromStruct": FromStruct, "FromStructStrict": FromStructStrict,
			} {
				task, err := read(s, v.TaskTypeVersion)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkCustom(t, name, task, v.Custom)
			}
		})
	}
}

// checkCustom fails the test when the task's custom dict is not want.
func checkCustom(t *testing.T, label string, task *Task, want map[string]any) {
	t.Helper()
	custom, err := task.CustomJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(custom), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: custom %v, want %v", label, got, want)
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func TestSpellingCloseMatch(t *testing.T) {
	for _, v := range loadSpelling(t).CloseMatch {
		want := ""
		if v.Match != nil {
			want = *v.Match
		}
		if got := closeMatch(v.Word, v.Known); got != want {
			t.Errorf("%s: closeMatch(%.40q) = %q, want %q", v.Description, v.Word, got, want)
		}
	}
}

func TestEveryEnumHasShortNames(t *testing.T) {
	// The generated table names every enum of both task shapes, and each short name reads back.
	seen := map[string]bool{}
	for v := int32(TaskTypeVersionLegacy); v <= TaskTypeVersionKubeflow; v++ {
		msg, _ := newMessage(v)
		for _, fd := range allFields(msg.ProtoReflect().Descriptor(), map[string]bool{}) {
			if fd.Enum() == nil {
				continue
			}
			seen[string(fd.Enum().FullName())] = true
			for i := 0; i < fd.Enum().Values().Len(); i++ {
				name := string(fd.Enum().Values().Get(i).Name())
				if got, ok := enumValueName(fd.Enum(), name); !ok || got != name {
					t.Errorf("%s: %s reads as %q", fd.FullName(), name, got)
				}
			}
		}
	}
	for _, e := range enumShortNames {
		if !seen[e.enum] {
			t.Errorf("the table names %s, which no task field has", e.enum)
		}
	}
	if len(seen) != len(enumSpellings) {
		t.Errorf("%d enums in the task messages, %d in the table", len(seen), len(enumSpellings))
	}
}

// allFields is every field of desc and of the messages of this schema under it.
func allFields(desc protoreflect.MessageDescriptor, seen map[string]bool) []protoreflect.FieldDescriptor {
	if seen[string(desc.FullName())] || !strings.HasPrefix(string(desc.FullName()), "elastic_idl.") {
		return nil
	}
	seen[string(desc.FullName())] = true
	var out []protoreflect.FieldDescriptor
	for i := 0; i < desc.Fields().Len(); i++ {
		fd := desc.Fields().Get(i)
		out = append(out, fd)
		if fd.Message() != nil {
			out = append(out, allFields(fd.Message(), seen)...)
		}
	}
	return out
}
