package elasticidl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// Errors compose: wrapped, they keep their type (errors.As) and their cause (errors.Is).
func TestErrorsCompose(t *testing.T) {
	_, err := Decode(make([]byte, MaxTaskBytes+1), FormatBinary, 1)
	wrapped := fmt.Errorf("reading the task: %w", err)
	var de *DecodeError
	if !errors.Is(wrapped, ErrTooLarge) || !errors.As(wrapped, &de) || de.Field != "" {
		t.Errorf("too large: %v", wrapped)
	}
	if got := errorOf(wrapped)["type"]; got != "DecodeError" {
		t.Errorf("errorOf a wrapped DecodeError: %v", got)
	}
	_, err = Decode([]byte{0xff}, FormatBinary, 1)
	if !errors.As(err, &de) || de.Unwrap() == nil {
		t.Errorf("garbled binary: no cause in %#v", err)
	}
	_, err = Decode([]byte("{"), FormatJSON, 1)
	if !errors.As(err, &de) || errors.Unwrap(err) == nil {
		t.Errorf("malformed JSON: no cause in %#v", err)
	}
	_, err = RenderOptionsFromJSON([]byte("{"))
	var re *RenderError
	if !errors.As(err, &re) || errors.Unwrap(err) == nil {
		t.Errorf("options that are no JSON: %#v", err)
	}
}

// The zero Task is the empty kubeflow task: it says version 1 and is the task "{}" decodes to.
func TestZeroTask(t *testing.T) {
	var zero Task
	if zero.TaskTypeVersion() != TaskTypeVersionKubeflow || zero.Legacy() != nil {
		t.Fatalf("version %d", zero.TaskTypeVersion())
	}
	m, ok := zero.Message().(*eidlkubeflowv1.DistributedPyTorchTrainingTask)
	if !ok || m == nil {
		t.Fatalf("Message() = %#v", zero.Message())
	}
	empty, err := Decode([]byte("{}"), FormatJSON, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(zero.Violations()) != fmt.Sprint(empty.Violations()) {
		t.Errorf("violations %v, want %v", zero.Violations(), empty.Violations())
	}
	if c, err := zero.CustomJSON(); err != nil || c != "{}" {
		t.Errorf("CustomJSON %q %v", c, err)
	}
}

// A string that is not valid UTF-8 is refused naming its field, by NewTask, and by
// Binary and CustomJSON alike when the message was changed afterwards.
func TestInvalidUTF8IsRefused(t *testing.T) {
	bad := &eidlpluginsv1.ElasticConfig{RdzvOptions: []*eidlpluginsv1.RendezvousOption{{Key: "a"}, {Key: "b\xff"}}}
	_, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: bad})
	var de *DecodeError
	if !errors.As(err, &de) || de.Field != "elastic_config.rdzv_options[1].key" {
		t.Errorf("NewTask: %v", err)
	}
	m := &eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: &eidlpluginsv1.ElasticConfig{}}
	task, err := NewTask(m)
	if err != nil {
		t.Fatal(err)
	}
	m.ElasticConfig = proto.Clone(bad).(*eidlpluginsv1.ElasticConfig) // changed after NewTask
	for name, f := range map[string]func() error{
		"Binary":     func() error { _, err := task.Binary(); return err },
		"CustomJSON": func() error { _, err := task.CustomJSON(); return err },
	} {
		var ee *EncodeError
		if err := f(); !errors.As(err, &ee) || ee.Field != "elastic_config.rdzv_options[1].key" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewTask((*eidlpluginsv1.DistributedPyTorchTrainingTask)(nil)); !errors.As(err, &de) {
		t.Errorf("a nil message: %v", err)
	}
}

// Options are plain data: a field set after RenderOptionsFromJSON is the one rendered.
func TestRenderOptionsArePlainData(t *testing.T) {
	o, err := RenderOptionsFromJSON([]byte(`{"name": "first", "image": "img:1", "entrypoint": ["t.py"]}`))
	if err != nil {
		t.Fatal(err)
	}
	o.Name = "second"
	job, err := elasticTask(t).RenderPyTorchJob(o)
	if err != nil || job.Metadata.Name != "second" {
		t.Errorf("job %v, %v", job, err)
	}
}

// The options of issue 19 are fields too: RenderOptionsFromJSON keeps them, and a
// network_policy that is no bool is refused naming it.
func TestRenderOptionsFromJSONModes(t *testing.T) {
	o, err := RenderOptionsFromJSON([]byte(`{"name": "j", "image": "img:1", "entrypoint": ["t.py"],
		"mode": "upstream", "elastic_worker_restart_policy": "Never", "network_policy": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != ModeUpstream || o.ElasticWorkerRestartPolicy != RestartPolicyNever || !o.NetworkPolicy {
		t.Errorf("options %+v", o)
	}
	_, err = RenderOptionsFromJSON([]byte(`{"name": "j", "image": "img:1", "network_policy": "yes"}`))
	var re *RenderError
	if !errors.As(err, &re) || re.Field != "network_policy" {
		t.Errorf("network_policy \"yes\": %v", err)
	}
}

// Rules returns a copy: changing it changes nothing else.
func TestRulesIsACopy(t *testing.T) {
	r := Rules()
	r[0].ID = "changed"
	if Rules()[0].ID == "changed" || !strings.Contains(ruleText(Rules()[0].ID), " ") {
		t.Errorf("Rules() shares its table")
	}
}
