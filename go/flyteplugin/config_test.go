package flyteplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	stdErrors "github.com/flyteorg/flyte/flytestdlib/errors"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flyteerr "github.com/flyteorg/flyte/flyteplugins/go/tasks/errors"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
	stdConfig "github.com/flyteorg/flyte/flytestdlib/config"
	"github.com/flyteorg/flyte/flytestdlib/config/viper"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// withConfig sets the plugin's configuration section for one test.
func withConfig(t *testing.T, cfg *Config) {
	t.Helper()
	before := *GetConfig()
	if err := SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := SetConfig(&before); err != nil {
			t.Error(err)
		}
	})
}

func workerRestartPolicy(t *testing.T, p Plugin, custom string) kubeflowv1.RestartPolicy {
	t.Helper()
	res, err := build(t, p, taskTemplate(t, "job", 1, custom))
	if err != nil {
		t.Fatal(err)
	}
	return res.(*kubeflowv1.PyTorchJob).Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].RestartPolicy
}

const elasticCustom = `{"workerReplicas":{"replicas":2},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":1}}`

// The registered plugin (the zero Plugin) renders with propeller's configuration,
// read by flytestdlib from YAML as propeller reads its config files.
func TestConfigSectionFromPropellersYAML(t *testing.T) {
	withConfig(t, &Config{})
	if got := workerRestartPolicy(t, Plugin{}, elasticCustom); got != kubeflowv1.RestartPolicyNever {
		t.Fatalf("default: Worker %s; want upstream's Never", got)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	yaml := "plugins:\n  elastic-idl-pytorch:\n    mode: strict\n    elastic-worker-restart-policy: ExitCode\n    max-worst-case: 2h\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	accessor := viper.NewAccessor(stdConfig.Options{StrictMode: true, SearchPaths: []string{file}})
	if err := accessor.UpdateConfig(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: "strict", ElasticWorkerRestartPolicy: "ExitCode", MaxWorstCase: stdConfig.Duration{Duration: 2 * time.Hour}}
	if got := *GetConfig(); got != want {
		t.Fatalf("config read from YAML: %+v", got)
	}
	// ExitCode without a backoff_limit restarts without end: above any ceiling.
	if _, err := build(t, Plugin{}, taskTemplate(t, "job", 1, elasticCustom)); err == nil ||
		!strings.Contains(err.Error(), "is unbounded under restartPolicy ExitCode, above the ceiling 2h0m0s") {
		t.Fatalf("configured ExitCode under a 2h ceiling: %v", err)
	}
	withConfig(t, &Config{Mode: "strict", ElasticWorkerRestartPolicy: "ExitCode"})
	if got := workerRestartPolicy(t, Plugin{}, elasticCustom); got != kubeflowv1.RestartPolicyExitCode {
		t.Fatalf("configured ExitCode: Worker %s", got)
	}
	// Strict refuses an elastic worker count other than max; upstream keeps it.
	bad := taskTemplate(t, "job", 1, `{"workerReplicas":{"replicas":1},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":1}}`)
	if _, err := build(t, Plugin{}, bad); err == nil || !strings.Contains(err.Error(), "replicas.worker_matches_max") {
		t.Fatalf("configured strict: BuildResource %v; want the rule replicas.worker_matches_max", err)
	}
	withConfig(t, &Config{Mode: "upstream"})
	if _, err := build(t, Plugin{}, bad); err != nil {
		t.Fatalf("configured upstream: %v", err)
	}
	// Options set in code win over the configuration.
	withConfig(t, &Config{Mode: "strict"})
	if got := workerRestartPolicy(t, Plugin{}, elasticCustom); got != kubeflowv1.RestartPolicyExitCode {
		t.Fatalf("configured strict: Worker %s; want ExitCode (strict's default)", got)
	}
	inCode := Plugin{Options: kubeflow.Options{Mode: elasticidl.ModeUpstream}}
	if got := workerRestartPolicy(t, inCode, elasticCustom); got != kubeflowv1.RestartPolicyNever {
		t.Fatalf("configured strict, upstream in code: Worker %s; want Never (the code's mode wins)", got)
	}
}

// A value the plugin does not know fails the task as a system error naming the
// key and the values it takes, never a silent default.
func TestConfigRefusesUnknownValues(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: "lenient"}, `plugins.elastic-idl-pytorch.mode: "lenient" is not one of upstream, strict`},
		{Config{ElasticWorkerRestartPolicy: "Always"}, `plugins.elastic-idl-pytorch.elastic-worker-restart-policy: "Always" is not one of Never, ExitCode`},
	} {
		withConfig(t, &tc.cfg)
		_, err := build(t, Plugin{}, taskTemplate(t, "job", 1, elasticCustom))
		if code, _ := stdErrors.GetErrorCode(err); code != flyteerr.RuntimeFailure || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: BuildResource %v; want a RuntimeFailure saying %s", tc.cfg, err, tc.want)
		}
	}
}

// stateContext is a task context whose plugin state reader reads state: what
// propeller recorded of the phase it last reported.
type stateContext struct {
	pluginsCore.TaskExecutionContext
	state k8s.PluginState
}

func (c stateContext) PluginStateReader() pluginsCore.PluginStateReader { return stateReader(c) }

type stateReader stateContext

func (stateReader) GetStateVersion() uint8 { return 0 }

func (r stateReader) Get(into interface{}) (uint8, error) {
	*into.(*k8s.PluginState) = r.state
	return 0, nil
}

// A newer SDK's key and a dropped template field reach the user in the task
// events (the phase's reason, or additional reasons), until the job runs.
func TestWarningsReachTheTaskEvents(t *testing.T) {
	withConfig(t, &Config{})
	tmpl := taskTemplate(t, "job", 1, `{"workerReplicas":{"replicas":2},"futureKnob":3}`)
	tmpl.GetContainer().Ports = []*core.ContainerPort{{ContainerPort: 8080}}
	res, err := build(t, Plugin{}, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	created := metav1.NewTime(metav1.Now().Add(-30e9))
	phaseOf := func(prev k8s.PluginState, condition kubeflowv1.JobConditionType) pluginsCore.PhaseInfo {
		t.Helper()
		job := res.(*kubeflowv1.PyTorchJob).DeepCopy()
		job.ObjectMeta = metav1.ObjectMeta{Name: "the-job", Namespace: "ns", CreationTimestamp: created}
		job.Status = kubeflowv1.JobStatus{StartTime: &created, Conditions: []kubeflowv1.JobCondition{
			{Type: condition, Status: corev1.ConditionTrue, LastTransitionTime: created},
		}}
		phase, err := Plugin{}.GetTaskPhase(context.Background(), stateContext{taskContext(tmpl), prev}, job)
		if err != nil {
			t.Fatal(err)
		}
		return phase
	}
	wantIn := func(what, text string) {
		t.Helper()
		for _, w := range []string{"task custom field not used: futureKnob", "container.ports"} {
			if !strings.Contains(text, w) {
				t.Errorf("%s %q does not name %q", what, text, w)
			}
		}
	}
	queued := phaseOf(k8s.PluginState{}, kubeflowv1.JobCreated)
	if queued.Phase() != pluginsCore.PhaseQueued || !strings.HasPrefix(queued.Reason(), "JobCreated; warnings: ") {
		t.Fatalf("queued: %v %q", queued.Phase(), queued.Reason())
	}
	wantIn("the queued phase's reason", queued.Reason())

	// Never seen queued: the first running phase carries them as additional reasons.
	running := phaseOf(k8s.PluginState{Phase: pluginsCore.PhaseQueued, Reason: "task submitted to K8s"}, kubeflowv1.JobRunning)
	var reasons []string
	for _, r := range running.Info().AdditionalReasons {
		reasons = append(reasons, r.Reason)
		if !r.OccurredAt.Equal(created.Time) {
			t.Errorf("additional reason at %v; want the job's creation %v", r.OccurredAt, created.Time)
		}
	}
	wantIn("the running phase's additional reasons", strings.Join(reasons, "\n"))

	// Said in the queued reason already, or the job ran before: not repeated.
	for name, prev := range map[string]k8s.PluginState{
		"after the queued reason": {Phase: pluginsCore.PhaseQueued, Reason: queued.Reason()},
		"after running":           {Phase: pluginsCore.PhaseRunning},
	} {
		if got := phaseOf(prev, kubeflowv1.JobRunning).Info().AdditionalReasons; len(got) != 0 {
			t.Errorf("%s: additional reasons %v; want none", name, got)
		}
	}

	// A task without warnings: the phase is upstream's, untouched.
	clean := taskTemplate(t, "job", 1, `{"workerReplicas":{"replicas":2}}`)
	if res, err = build(t, Plugin{}, clean); err != nil {
		t.Fatal(err)
	}
	tmpl = clean
	if got := phaseOf(k8s.PluginState{}, kubeflowv1.JobCreated); got.Reason() != "JobCreated" {
		t.Errorf("a task without warnings: reason %q; want upstream's JobCreated", got.Reason())
	}
}

// max-worst-case refuses a task whose worst case under the job's Worker restart
// policy is above it, or unbounded, with the rule and both figures.
func TestMaxWorstCase(t *testing.T) {
	task, err := elasticidl.Decode([]byte(elasticCustom), elasticidl.FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	never, err := task.WorstCase("Never")
	if err != nil || never == nil || never.Seconds == nil {
		t.Fatalf("WorstCase(Never): %+v, %v", never, err)
	}
	bound := time.Duration(*never.Seconds * float64(time.Second))
	tmpl := taskTemplate(t, "job", 1, elasticCustom)

	withConfig(t, &Config{MaxWorstCase: stdConfig.Duration{Duration: bound + time.Second}})
	if _, err := build(t, Plugin{}, tmpl); err != nil {
		t.Fatalf("worst case %v under a ceiling %v: %v", bound, bound+time.Second, err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxWorstCase: stdConfig.Duration{Duration: bound - time.Second}},
			fmt.Sprintf("worst_case.max: the worst case from a fault to the job's end is %s (%s s) under restartPolicy Never, above the ceiling %v (plugins.elastic-idl-pytorch.max-worst-case)",
				formatSeconds(*never.Seconds), strconv.FormatFloat(*never.Seconds, 'f', -1, 64), bound-time.Second)},
		{Config{ElasticWorkerRestartPolicy: "ExitCode", MaxWorstCase: stdConfig.Duration{Duration: 100 * time.Hour}},
			"worst_case.max: the worst case from a fault to the job's end is unbounded under restartPolicy ExitCode"},
	} {
		withConfig(t, &tc.cfg)
		_, err := build(t, Plugin{}, tmpl)
		if code, _ := stdErrors.GetErrorCode(err); code != flyteerr.BadTaskSpecification || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: BuildResource %v; want a BadTaskSpecification saying %s", tc.cfg, err, tc.want)
		}
	}
	// No ceiling (the default): the unbounded task renders, as upstream's would.
	withConfig(t, &Config{ElasticWorkerRestartPolicy: "ExitCode"})
	if _, err := build(t, Plugin{}, tmpl); err != nil {
		t.Fatalf("no ceiling: %v", err)
	}
	withConfig(t, &Config{MaxWorstCase: stdConfig.Duration{Duration: -time.Second}})
	if _, err := build(t, Plugin{}, tmpl); err == nil || !strings.Contains(err.Error(), "plugins.elastic-idl-pytorch.max-worst-case: -1s is below zero") {
		t.Errorf("a negative ceiling: %v", err)
	}
}

func TestFormatSecondsAsValidatePrintsThem(t *testing.T) {
	for in, want := range map[float64]string{0: "0s", 0.2: "1s", 59: "59s", 60: "1m", 3725.5: "1h 2m 6s", 7200: "2h"} {
		if got := formatSeconds(in); got != want {
			t.Errorf("formatSeconds(%v) = %q, want %q", in, got, want)
		}
	}
}
