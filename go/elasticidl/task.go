package elasticidl

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// The task_type_version of a TaskTemplate, which names the task shape (an int32,
// as flyteidl's TaskTemplate.GetTaskTypeVersion()).
const (
	// TaskTypeVersionLegacy is the legacy shape, eidlpluginsv1.DistributedPyTorchTrainingTask.
	TaskTypeVersionLegacy = 0
	// TaskTypeVersionKubeflow is the kubeflow shape, eidlkubeflowv1.DistributedPyTorchTrainingTask
	// (what flytekit 1.16 emits).
	TaskTypeVersionKubeflow = 1
)

// Task is a decoded task of either shape, with the task_type_version it was decoded as.
// Build one with Decode, DecodeTolerant, FromStruct, FromStructStrict or NewTask. The zero Task is the empty task of
// the kubeflow shape (task_type_version 1), as Decode reads "{}": it says version
// 1, validates as version 1, and its Message is a new empty kubeflow message.
// A Task is not changed by its methods: several goroutines may use one.
type Task struct {
	legacy  *eidlpluginsv1.DistributedPyTorchTrainingTask  // set: the legacy shape (version 0)
	kf      *eidlkubeflowv1.DistributedPyTorchTrainingTask // nil in the zero Task
	skipped []string                                       // JSON keys and enum names a tolerant decode left out (UnknownFields)
}

// NewTask wraps a generated task message: a *eidlpluginsv1.DistributedPyTorchTrainingTask
// (task_type_version 0) or a *eidlkubeflowv1.DistributedPyTorchTrainingTask (1). The task
// keeps the message; do not change it afterwards.
//
// Errors: *DecodeError (format "message") for a nil message, another type, or a
// string field that is not valid UTF-8 (which protobuf cannot serialize, and the
// reference cannot hold), naming the field.
func NewTask(m proto.Message) (*Task, error) {
	var t *Task
	switch msg := m.(type) {
	case *eidlpluginsv1.DistributedPyTorchTrainingTask:
		if msg != nil {
			t = &Task{legacy: msg}
		}
	case *eidlkubeflowv1.DistributedPyTorchTrainingTask:
		if msg != nil {
			t = &Task{kf: msg}
		}
	default:
		return nil, &DecodeError{Reason: fmt.Sprintf("expected a DistributedPyTorchTrainingTask, got %T", m),
			Format: formatMessage}
	}
	if t == nil {
		return nil, &DecodeError{Reason: "nil task message", Format: formatMessage}
	}
	if field, bad := invalidUTF8(m.ProtoReflect()); bad {
		return nil, &DecodeError{Field: field, Reason: "not valid UTF-8", Format: formatMessage}
	}
	return t, nil
}

// formatMessage is the DecodeError format of NewTask: a generated message.
const formatMessage = "message"

// invalidUTF8 is the path of the first string field (in field number order)
// that is not valid UTF-8, and whether there is one.
func invalidUTF8(m protoreflect.Message) (string, bool) {
	var steps []string // the path of the bad field, innermost first
	var walk func(m protoreflect.Message) bool
	walk = func(m protoreflect.Message) bool {
		fields := m.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if !m.Has(fd) || (fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.MessageKind) {
				continue
			}
			bad := func(v protoreflect.Value) bool {
				if fd.Kind() == protoreflect.StringKind {
					return !utf8.ValidString(v.String())
				}
				return walk(v.Message())
			}
			if fd.IsList() {
				list := m.Get(fd).List()
				for j := 0; j < list.Len(); j++ {
					if bad(list.Get(j)) {
						steps = append(steps, fmt.Sprintf("%s[%d]", fd.Name(), j))
						return true
					}
				}
			} else if bad(m.Get(fd)) {
				steps = append(steps, string(fd.Name()))
				return true
			}
		}
		return false
	}
	if !walk(m) {
		return "", false
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return strings.Join(steps, "."), true
}

// newMessage is the empty message of a task_type_version, or UnsupportedVersionError.
func newMessage(taskTypeVersion int32) (proto.Message, error) {
	switch taskTypeVersion {
	case TaskTypeVersionLegacy:
		return &eidlpluginsv1.DistributedPyTorchTrainingTask{}, nil
	case TaskTypeVersionKubeflow:
		return &eidlkubeflowv1.DistributedPyTorchTrainingTask{}, nil
	}
	return nil, &UnsupportedVersionError{Version: taskTypeVersion}
}

// taskOf wraps a message newMessage made and a decoder filled (valid UTF-8 already).
func taskOf(m proto.Message) *Task {
	if legacy, ok := m.(*eidlpluginsv1.DistributedPyTorchTrainingTask); ok {
		return &Task{legacy: legacy}
	}
	return &Task{kf: m.(*eidlkubeflowv1.DistributedPyTorchTrainingTask)}
}

// TaskTypeVersion is 0 (legacy shape) or 1 (kubeflow shape), the type of
// flyteidl's TaskTemplate.GetTaskTypeVersion().
func (t *Task) TaskTypeVersion() int32 {
	if t.legacy != nil {
		return TaskTypeVersionLegacy
	}
	return TaskTypeVersionKubeflow
}

// Message is the generated message: never nil, and never an interface holding a nil pointer.
func (t *Task) Message() proto.Message {
	if t.legacy != nil {
		return t.legacy
	}
	return t.Kubeflow()
}

// Legacy is the legacy-shape message, or nil for a kubeflow-shape task.
func (t *Task) Legacy() *eidlpluginsv1.DistributedPyTorchTrainingTask { return t.legacy }

// Kubeflow is the kubeflow-shape message (a new empty one for the zero Task), or
// nil for a legacy-shape task.
func (t *Task) Kubeflow() *eidlkubeflowv1.DistributedPyTorchTrainingTask {
	switch {
	case t.legacy != nil:
		return nil
	case t.kf == nil:
		return &eidlkubeflowv1.DistributedPyTorchTrainingTask{}
	}
	return t.kf
}

// Binary is the task's deterministic wire form (unknown fields kept, as read).
// Error: *EncodeError naming the field, for a message changed after NewTask to
// hold a string that is not valid UTF-8.
func (t *Task) Binary() ([]byte, error) {
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(t.Message())
	if err != nil {
		field, _ := invalidUTF8(t.Message().ProtoReflect()) // the one way a task message fails to marshal
		return nil, &EncodeError{Field: field, Reason: "not valid UTF-8", Err: err}
	}
	return out, nil
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
	return t.kf.GetElasticConfig() // nil-safe: nil for the zero Task
}
