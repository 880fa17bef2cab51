package elasticidl

import (
	"errors"
	"fmt"
	"strings"
)

// Every error this package returns is a pointer to one of the types below, found
// with errors.As also when wrapped. Their names are the contract's error types
// (contract/README.md): the conformance entry point writes the type name, and
// the field (or violations) it carries. An error with a cause (a parser's error,
// ErrTooLarge) gives it to errors.Is and errors.As through Unwrap.

// The limits of the input, the reference's (elastic_idl.MAX_TASK_BYTES, MAX_NESTING).
const (
	// MaxTaskBytes is the size of the largest serialized task Decode reads (1 MiB).
	MaxTaskBytes = maxTaskBytes
	// MaxNesting is how deep lists and objects of a JSON task may nest.
	MaxNesting = maxNesting
	// MaxIntegerDigits is the most digits an integer may have, also one given as a
	// string (Python's default int max_str_digits).
	MaxIntegerDigits = pyMaxStrDigits
)

// ErrTooLarge is the cause of the DecodeError for an input larger than MaxTaskBytes:
// errors.Is(err, ErrTooLarge) tells it from a bad input.
var ErrTooLarge = errors.New("the input is larger than 1,048,576 bytes, the largest task elastic-idl reads")

// DecodeError reports input that is no task of the requested task_type_version.
type DecodeError struct {
	// Field is the dotted path of the offending field ("" when the input as a whole is bad),
	// e.g. "elastic_config.rdzv_options[1].key".
	Field string
	// Reason says what is wrong, in words (not part of the contract).
	Reason string
	// Format is the input format being decoded: "binary", "json", "textproto" or "custom".
	Format string
	// Err is the cause, when there is one: ErrTooLarge, or the error of protobuf-go's parser.
	Err error
}

// Unwrap is the cause (nil when there is none).
func (e *DecodeError) Unwrap() error { return e.Err }

func (e *DecodeError) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	if e.Format != "" {
		fmt.Fprintf(&b, " (%s)", e.Format)
	}
	return b.String()
}

// UnsupportedVersionError reports a task_type_version neither side knows (only 0 and 1 exist).
type UnsupportedVersionError struct {
	Version int32
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("task_type_version: unsupported task template version %d "+
		"(0 = legacy DistributedPyTorchTrainingTask, 1 = kubeflow DistributedPyTorchTrainingTask)", e.Version)
}

// Violation is one broken rule.
type Violation struct {
	// Field is the dotted path of the field in the task message, e.g. "elastic_config.min_replicas".
	Field string
	// Rule is the stable rule id, e.g. "elastic.min_le_max" (see Rules).
	Rule string
	// Message explains it with the offending values (prose, not part of the contract).
	Message string
}

// String is "field: rule: message"; an empty field (the task as a whole) is left out.
func (v Violation) String() string {
	if v.Field == "" {
		return v.Rule + ": " + v.Message
	}
	return v.Field + ": " + v.Rule + ": " + v.Message
}

// ValidationError reports a task that breaks one or more rules; Violations lists all of them.
type ValidationError struct {
	Violations []Violation
}

// Error lists at most 20 violations (the reference's limit), one a line, then how many more there are.
func (e *ValidationError) Error() string {
	var b strings.Builder
	n := len(e.Violations)
	fmt.Fprintf(&b, "%d violation", n)
	if n != 1 {
		b.WriteString("s")
	}
	b.WriteString(":")
	for i, v := range e.Violations {
		if i == maxViolationsShown {
			fmt.Fprintf(&b, "\n  ... and %d more violations", n-maxViolationsShown)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// RenderError reports a PyTorchJob that cannot be rendered from the task and options.
// RenderOptionsFromJSON reports options it cannot read with it too.
type RenderError struct {
	// Field is the option or task field at fault, e.g. "name", "labels.app", "worker_replicas.common.image";
	// "" for render options that are no JSON object.
	Field  string
	Reason string
	// Err is the JSON parser's error, for render options that are no JSON.
	Err error
}

func (e *RenderError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap is the cause (nil when there is none).
func (e *RenderError) Unwrap() error { return e.Err }

// EncodeError reports a task that has no serialized form: a Duration outside JSON's range,
// or a string changed after NewTask to text that is not valid UTF-8.
type EncodeError struct {
	// Field is the field at fault, e.g. "elastic_config.monitor_interval".
	Field  string
	Reason string
	// Err is protobuf-go's error, when it refused the message.
	Err error
}

// Unwrap is the cause (nil when there is none).
func (e *EncodeError) Unwrap() error { return e.Err }

func (e *EncodeError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// TargetLossError reports a strict render (TargetOptions.Strict) whose target would
// lose task fields; Losses lists every one, in task order.
type TargetLossError struct {
	Target string
	Losses []TargetLoss
}

func (e *TargetLossError) Error() string {
	fields := make([]string, len(e.Losses))
	for i, l := range e.Losses {
		fields[i] = l.Field
	}
	return fmt.Sprintf("a %s cannot carry %s (render without strict to accept the losses)", e.Target,
		strings.Join(fields, ", "))
}
