package elasticidl

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

func durationViolations(t *testing.T, e *eidlpluginsv1.ElasticConfig) string {
	t.Helper()
	e.MinReplicas, e.MaxReplicas, e.NprocPerNode = 1, 2, 1
	task, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: e})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range task.Violations() {
		out = append(out, strings.TrimPrefix(v.Field, "elastic_config.")+":"+strings.TrimPrefix(v.Rule, "elastic.duration."))
	}
	return strings.Join(out, " ")
}

// The rendezvous timeouts and shutdown_timeout are whole seconds (torch reads them
// with int()); monitor_interval may be a fraction. A Duration that is already
// invalid or not positive gets only that violation.
func TestTimeoutsAreWholeSeconds(t *testing.T) {
	d := func(s int64, n int32) *durationpb.Duration { return &durationpb.Duration{Seconds: s, Nanos: n} }
	for _, tc := range []struct {
		what string
		e    *eidlpluginsv1.ElasticConfig
		want string
	}{
		{"whole seconds and a fractional monitor interval", &eidlpluginsv1.ElasticConfig{MonitorInterval: d(0, 1),
			JoinTimeout: d(900, 0), LastCallTimeout: d(1, 0), CloseTimeout: d(maxDurationS, 0), ReadTimeout: d(60, 0),
			ShutdownTimeout: d(30, 0)}, ""},
		{"a fraction in each field, in field order", &eidlpluginsv1.ElasticConfig{MonitorInterval: d(1, 500000000),
			ShutdownTimeout: d(0, 500000000), ReadTimeout: d(1, 1), CloseTimeout: d(2, 999999999),
			LastCallTimeout: d(0, 250000000), JoinTimeout: d(maxDurationS, 1)},
			"join_timeout:whole_seconds last_call_timeout:whole_seconds close_timeout:whole_seconds " +
				"read_timeout:whole_seconds shutdown_timeout:whole_seconds"},
		{"invalid or not positive first, and only that", &eidlpluginsv1.ElasticConfig{JoinTimeout: d(0, 250000000),
			LastCallTimeout: d(1, -1), CloseTimeout: d(0, -5), ReadTimeout: d(0, 1000000000), ShutdownTimeout: d(-1, 0)},
			"join_timeout:whole_seconds last_call_timeout:valid close_timeout:positive read_timeout:valid " +
				"shutdown_timeout:positive"},
	} {
		if got := durationViolations(t, tc.e); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
	}
}
