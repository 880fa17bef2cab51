package elasticidl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The NetworkPolicy goldens the Python reference is held to too (tests/golden/networkpolicy).

func TestNetworkPolicyGoldens(t *testing.T) {
	files, err := filepath.Glob("../../tests/golden/networkpolicy/*.json")
	if err != nil || len(files) < 2 {
		t.Fatalf("goldens: %v, %d files", err, len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var golden struct {
				Job      PyTorchJob `json:"job"`
				Expected any        `json:"expected"`
			}
			if err := json.Unmarshal(raw, &golden); err != nil {
				t.Fatal(err)
			}
			policy, err := NetworkPolicyOf(&golden.Job)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(policy)
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, golden.Expected) {
				t.Errorf("got %s", out)
			}
		})
	}
}

func TestRenderObjects(t *testing.T) {
	task := mustTask(t, `{"elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 1}}`)
	o := RenderOptions{Name: "train", Namespace: "ml", Image: "i:1", Entrypoint: []string{"t.py"}}
	job, policy, _, err := task.RenderObjects(o)
	if err != nil || policy != nil || job == nil {
		t.Fatalf("without NetworkPolicy: %v %v %v", job, policy, err)
	}
	o.NetworkPolicy = true
	job, policy, _, err = task.RenderObjects(o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{PodLabelJobName: "train", PodLabelOperatorName: OperatorName}
	if policy.Metadata.Namespace != "ml" || !reflect.DeepEqual(policy.Spec.PodSelector.MatchLabels, want) ||
		!reflect.DeepEqual(policy.Spec.Ingress[0].From[0].PodSelector.MatchLabels, want) || job.Metadata.Name != "train" {
		t.Errorf("policy %+v", policy)
	}
	if _, err := NetworkPolicyOf(&PyTorchJob{}); err == nil || errorOf(err)["field"] != "metadata.name" {
		t.Errorf("a job without a name: %v", err)
	}
}

func mustTask(t *testing.T, custom string) *Task {
	t.Helper()
	task, err := Decode([]byte(custom), FormatJSON, TaskTypeVersionKubeflow)
	if err != nil {
		t.Fatal(err)
	}
	return task
}
