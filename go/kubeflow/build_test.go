package kubeflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

const casesDir = "../../contract/cases"

// contractCase is what this test reads of a contract vector (contract/README.md).
type contractCase struct {
	name    string
	version int32
	custom  []byte         // custom.json
	render  map[string]any // case.yaml's render: over the defaults
	job     []byte         // pytorchjob.yaml, as JSON
	// loneSurrogate: case.yaml escapes a lone surrogate, which a Go string cannot
	// carry from YAML; such render options are refused (the conformance test
	// sends them as JSON), so the expected job must be a RenderError.
	loneSurrogate bool
}

func loadCases(t *testing.T) []contractCase {
	t.Helper()
	dirs, err := os.ReadDir(casesDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []contractCase
	for _, d := range dirs {
		dir := filepath.Join(casesDir, d.Name())
		var meta struct {
			TaskTypeVersion int32          `json:"task_type_version"`
			Render          map[string]any `json:"render"`
		}
		lone := readYAML(t, filepath.Join(dir, "case.yaml"), &meta)
		c := contractCase{name: d.Name(), version: meta.TaskTypeVersion, render: meta.Render, loneSurrogate: lone}
		if b, err := os.ReadFile(filepath.Join(dir, "custom.json")); err == nil {
			c.custom = b
		}
		if b, err := os.ReadFile(filepath.Join(dir, "pytorchjob.yaml")); err == nil {
			if c.job, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatalf("%s/pytorchjob.yaml: %v", d.Name(), err)
			}
		}
		out = append(out, c)
	}
	if len(out) < 50 {
		t.Fatalf("only %d contract cases under %s", len(out), casesDir)
	}
	return out
}

// loneSurrogateEscape is a YAML/JSON escape of a UTF-16 surrogate.
var loneSurrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// readYAML reads path into into; it reports true, reading nothing, for a file
// that escapes a lone surrogate (Go's YAML reader refuses those).
func readYAML(t *testing.T, path string, into any) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if loneSurrogateEscape.Match(b) {
		return true
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return false
}

// renderOptions are the case's render options over the contract's defaults (a
// null removes a default), as JSON with the reference's keyword names.
func (c contractCase) renderOptions(t *testing.T) elasticidl.RenderOptions {
	opts := map[string]any{"name": "job", "image": "example.com/train:1", "entrypoint": []string{"train.py"}}
	for k, v := range c.render {
		if v == nil {
			delete(opts, k)
		} else {
			opts[k] = v
		}
	}
	b, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	o, err := elasticidl.RenderOptionsFromJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return o
}

// Every contract vector's PyTorchJob: Build's equals the Python renderer's
// pytorchjob.yaml, both in kubeflowv1.PyTorchJob, under apimachinery's semantic
// equality (quantities by value). The expected YAML is decoded strictly, so a
// key the operator's type does not have fails the case instead of vanishing.
func TestBuildEqualsPythonRenderer(t *testing.T) {
	compared, refused := 0, 0
	for _, c := range loadCases(t) {
		if c.custom == nil || c.job == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			var want struct {
				Error *struct{ Type string } `json:"error"`
			}
			if err := json.Unmarshal(c.job, &want); err != nil {
				t.Fatal(err)
			}
			if c.loneSurrogate {
				if want.Error == nil || want.Error.Type != "RenderError" {
					t.Fatalf("render options with a lone surrogate: the reference must refuse them (RenderError), got %s", c.job)
				}
				refused++
				return
			}
			task, err := elasticidl.Decode(c.custom, elasticidl.FormatJSON, c.version)
			if err != nil {
				if want.Error == nil {
					t.Fatalf("decode: %v", err)
				}
				return // a custom dict with no task of this version: nothing to render
			}
			got, err := Build(task, c.renderOptions(t))
			if want.Error != nil {
				if err == nil {
					t.Fatalf("Build rendered a job; the reference refuses it with %s", want.Error.Type)
				}
				if typ := errorType(err); typ != want.Error.Type {
					t.Fatalf("Build: %v (%v); the reference: %s", err, typ, want.Error.Type)
				}
				refused++
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var expected kubeflowv1.PyTorchJob
			if err := yaml.UnmarshalStrict(c.job, &expected); err != nil {
				t.Fatalf("pytorchjob.yaml into kubeflowv1.PyTorchJob: %v", err)
			}
			if !equality.Semantic.DeepEqual(got, &expected) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(&expected)
				t.Fatalf("Build differs from pytorchjob.yaml\n--- Build:\n%s\n--- pytorchjob.yaml:\n%s", g, w)
			}
			writeTypedJob(t, c.name, got)
			compared++
		})
	}
	t.Logf("%d jobs equal, %d refusals of the same type", compared, refused)
	if compared < 30 || refused < 5 {
		t.Fatalf("compared %d jobs and %d refusals; expected most contract vectors", compared, refused)
	}
}

// A quantity compares by value: the Python renderer writes the text it was given.
func TestBuildQuantitiesSemantic(t *testing.T) {
	task, err := elasticidl.Decode([]byte(`{"workerReplicas":{"replicas":2}}`), elasticidl.FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	o, err := elasticidl.RenderOptionsFromJSON([]byte(
		`{"name":"job","image":"i:1","entrypoint":["t.py"],"resources":{"requests":{"cpu":"1000m","memory":"1Gi"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(task, o)
	if err != nil {
		t.Fatal(err)
	}
	var want kubeflowv1.PyTorchJob
	if err := yaml.UnmarshalStrict([]byte(`{"spec":{"pytorchReplicaSpecs":{"Worker":{"template":{"spec":{"containers":
		[{"resources":{"requests":{"cpu":"1","memory":"1024Mi"}}}]}}}}}}`), &want); err != nil {
		t.Fatal(err)
	}
	got := job.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Resources
	if !equality.Semantic.DeepEqual(got, want.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Resources) {
		t.Fatalf("resources %v, want cpu 1 and memory 1Gi by value", got)
	}
}

func TestBuildInvalidTask(t *testing.T) {
	task, err := elasticidl.Decode([]byte(`{"elasticConfig":{"minReplicas":3,"maxReplicas":2}}`), elasticidl.FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(task, fieldsRender)
	var verr *elasticidl.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Build: %v; want a *elasticidl.ValidationError", err)
	}
}

// errorType is the contract's name of the core's error type (the conformance
// harness's own mapping is internal to the core module).
func errorType(err error) string {
	var (
		ve *elasticidl.ValidationError
		re *elasticidl.RenderError
		de *elasticidl.DecodeError
		ue *elasticidl.UnsupportedVersionError
		ee *elasticidl.EncodeError
	)
	switch {
	case errors.As(err, &ve):
		return "ValidationError"
	case errors.As(err, &re):
		return "RenderError"
	case errors.As(err, &de):
		return "DecodeError"
	case errors.As(err, &ue):
		return "UnsupportedVersionError"
	case errors.As(err, &ee):
		return "EncodeError"
	}
	return fmt.Sprintf("%T", err)
}

// typedJobsDirEnv names a folder where TestBuildEqualsPythonRenderer also writes
// each case's job as Go's Kubernetes types serialize it (<case>.json): the
// cluster test (tests/test_cluster.py) sends those to a real API server.
const typedJobsDirEnv = "ELASTIC_IDL_TYPED_JOBS_DIR"

func writeTypedJob(t *testing.T, name string, job *kubeflowv1.PyTorchJob) {
	t.Helper()
	dir := os.Getenv(typedJobsDirEnv)
	if dir == "" {
		return
	}
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
