package elasticidl

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// The task_type_version of a TaskTemplate, which names the task shape.
const (
	// TaskTypeVersionLegacy is the legacy shape, eidlpluginsv1.DistributedPyTorchTrainingTask.
	TaskTypeVersionLegacy = 0
	// TaskTypeVersionKubeflow is the kubeflow shape, eidlkubeflowv1.DistributedPyTorchTrainingTask
	// (what flytekit 1.16 emits).
	TaskTypeVersionKubeflow = 1
)

// Task is a decoded task of either shape, with the task_type_version it was decoded as.
// Build one with Decode, FromCustom, FromStruct or NewTask; the zero value is not a task.
type Task struct {
	version int
	legacy  *eidlpluginsv1.DistributedPyTorchTrainingTask
	kf      *eidlkubeflowv1.DistributedPyTorchTrainingTask
	skipped []string // JSON keys and enum names a tolerant decode left out (UnknownFields)
}

// NewTask wraps a generated task message: a *eidlpluginsv1.DistributedPyTorchTrainingTask
// (task_type_version 0) or a *eidlkubeflowv1.DistributedPyTorchTrainingTask (1). The task
// keeps the message; do not change it afterwards.
func NewTask(m proto.Message) (*Task, error) {
	switch msg := m.(type) {
	case *eidlpluginsv1.DistributedPyTorchTrainingTask:
		if msg == nil {
			return nil, &RenderError{Field: "task", Reason: "nil task message"}
		}
		return &Task{version: TaskTypeVersionLegacy, legacy: msg}, nil
	case *eidlkubeflowv1.DistributedPyTorchTrainingTask:
		if msg == nil {
			return nil, &RenderError{Field: "task", Reason: "nil task message"}
		}
		return &Task{version: TaskTypeVersionKubeflow, kf: msg}, nil
	}
	return nil, &RenderError{Field: "task", Reason: fmt.Sprintf("expected a DistributedPyTorchTrainingTask, got %T", m)}
}

// newMessage is the empty message of a task_type_version, or UnsupportedVersionError.
func newMessage(taskTypeVersion int64) (proto.Message, error) {
	switch taskTypeVersion {
	case TaskTypeVersionLegacy:
		return &eidlpluginsv1.DistributedPyTorchTrainingTask{}, nil
	case TaskTypeVersionKubeflow:
		return &eidlkubeflowv1.DistributedPyTorchTrainingTask{}, nil
	}
	return nil, &UnsupportedVersionError{Version: taskTypeVersion}
}

func taskOf(m proto.Message) *Task {
	t, _ := NewTask(m) // m comes from newMessage: always a task message
	return t
}

// TaskTypeVersion is 0 (legacy shape) or 1 (kubeflow shape).
func (t *Task) TaskTypeVersion() int { return t.version }

// Message is the generated message.
func (t *Task) Message() proto.Message {
	if t.legacy != nil {
		return t.legacy
	}
	return t.kf
}

// Legacy is the legacy-shape message, or nil for a kubeflow-shape task.
func (t *Task) Legacy() *eidlpluginsv1.DistributedPyTorchTrainingTask { return t.legacy }

// Kubeflow is the kubeflow-shape message, or nil for a legacy-shape task.
func (t *Task) Kubeflow() *eidlkubeflowv1.DistributedPyTorchTrainingTask { return t.kf }

// Binary is the task's deterministic wire form (unknown fields kept, as read).
func (t *Task) Binary() ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(t.Message())
}

// ExtensionFields lists the paths of the elastic-idl extension fields (numbers >= 100) set in
// the task: what an upstream reader, which discards unknown JSON keys, would lose.
func (t *Task) ExtensionFields() []string {
	e := t.elasticConfig()
	if e == nil {
		return nil
	}
	var out []string
	m := e.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if int(fd.Number()) >= extensionFieldMin && m.Has(fd) {
			out = append(out, "elastic_config."+string(fd.Name()))
		}
	}
	return out
}

func (t *Task) elasticConfig() *eidlpluginsv1.ElasticConfig {
	if t.legacy != nil {
		return t.legacy.GetElasticConfig()
	}
	return t.kf.GetElasticConfig()
}
