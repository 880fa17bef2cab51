package elasticidl

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"
)

// contract/worst_case.json, which the Python reference passes too (tests/test_worst_case.py):
// the Worker's restart policy the renderer writes, and the worst case from a fault to the
// job's end with its terms, equal to the reference's to the last bit.

type worstCaseVector struct {
	Name                       string         `json:"name"`
	TaskTypeVersion            int32          `json:"task_type_version"`
	Input                      string         `json:"input"`
	ElasticWorkerRestartPolicy string         `json:"elastic_worker_restart_policy"`
	RestartPolicy              string         `json:"restart_policy"`
	WorstCase                  map[string]any `json:"worst_case"`
	Error                      *struct {
		Field string `json:"field"`
		Rule  string `json:"rule"`
	} `json:"error"`
}

func loadWorstCase(t *testing.T) []worstCaseVector {
	t.Helper()
	raw, err := os.ReadFile("../../contract/worst_case.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []worstCaseVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) < 20 {
		t.Fatalf("only %d worst-case vectors", len(doc.Vectors))
	}
	return doc.Vectors
}

func TestWorstCaseVectors(t *testing.T) {
	for _, v := range loadWorstCase(t) {
		t.Run(v.Name, func(t *testing.T) {
			task, err := Decode([]byte(v.Input), FormatJSON, v.TaskTypeVersion)
			if err != nil {
				t.Fatal(err)
			}
			if err := task.Validate(); err != nil {
				t.Fatal(err)
			}
			policy := task.WorkerRestartPolicy(v.ElasticWorkerRestartPolicy)
			if policy != v.RestartPolicy {
				t.Fatalf("restart policy %q, want %q", policy, v.RestartPolicy)
			}
			w, err := task.WorstCase(policy)
			if v.Error != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Violations[0].Field != v.Error.Field || ve.Violations[0].Rule != v.Error.Rule {
					t.Fatalf("error %v, want %s: %s", err, v.Error.Field, v.Error.Rule)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if w != nil {
				raw, _ := json.Marshal(w)
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, v.WorstCase) {
				gotJSON, _ := json.Marshal(got)
				wantJSON, _ := json.Marshal(v.WorstCase)
				t.Fatalf("worst case\n got  %s\n want %s", gotJSON, wantJSON)
			}
		})
	}
}

// The formula of docs/guide/when-pods-die.md, written again from the inputs among each
// vector's terms: the expectations follow it.
func TestWorstCaseVectorsFollowTheFormula(t *testing.T) {
	for _, v := range loadWorstCase(t) {
		if v.WorstCase == nil {
			continue
		}
		terms := v.WorstCase["terms"].(map[string]any)
		num := func(key string) float64 {
			x, _ := terms[key].(float64) // null: 0
			return x
		}
		mon, kaI, kaN := num("monitor_interval_s"), num("keep_alive_interval_s"), num("keep_alive_max_attempt")
		d := math.Max(math.Max(num("collective_timeout_s")+mon+5, kaI*(kaN+1)+mon), num("read_timeout_s")+kaI*kaN+1+mon)
		p := num("rounds")*(d+num("stop_s")+num("rendezvous_s")) + num("leave_s")
		bl, deadline := num("backoff_limit"), num("active_deadline_s")
		var total *float64
		switch policy := v.WorstCase["restart_policy"]; {
		case policy == "Never":
			total = &p
		case (policy == "OnFailure" || policy == "Always") && bl > 0:
			crash := 0.0
			for i := 0; i < int(bl); i++ {
				crash += math.Min(10*math.Pow(2, float64(i)), 300)
			}
			x := (bl+1)*p + crash
			total = &x
		}
		if deadline > 0 && (total == nil || deadline < *total) {
			total = &deadline
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
		if l := num("monitor_interval_s") + num("stop_s") + 1; !near(num("leave_s"), l) {
			t.Errorf("%s: leave_s %v, formula %v", v.Name, num("leave_s"), l)
		}
		if !near(v.WorstCase["per_incarnation_s"].(float64), p) {
			t.Errorf("%s: per_incarnation_s %v, formula %v", v.Name, v.WorstCase["per_incarnation_s"], p)
		}
		seconds, bounded := v.WorstCase["seconds"].(float64)
		if bounded != (total != nil) || (bounded && !near(seconds, *total)) {
			t.Errorf("%s: seconds %v, formula %v", v.Name, v.WorstCase["seconds"], total)
		}
	}
}

func TestCrashLoopBackoffS(t *testing.T) {
	for n, want := range []int64{0, 10, 30, 70, 150, 310, 610, 910} {
		if got := CrashLoopBackoffS(int64(n)); got != want {
			t.Errorf("CrashLoopBackoffS(%d) = %d, want %d", n, got, want)
		}
	}
	if got := CrashLoopBackoffS(math.MaxInt32); got != 310+300*(math.MaxInt32-5) {
		t.Errorf("CrashLoopBackoffS(MaxInt32) = %d", got)
	}
}

func TestWorstCaseRefusesAnUnknownPolicy(t *testing.T) {
	task, err := Decode([]byte(`{"elasticConfig": {"minReplicas": 1, "maxReplicas": 1, "nprocPerNode": 1}}`), FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.WorstCase("Sometimes"); err == nil {
		t.Fatal("no error for restart policy Sometimes")
	}
}
