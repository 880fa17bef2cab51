package elasticidl

import (
	"fmt"
	"strings"
)

// Every error this package returns on purpose is one of the types below. Their
// names are the contract's error types (contract/README.md): the conformance
// entry point writes the type name, and the field (or violations) it carries.

// DecodeError reports input that is no task of the requested task_type_version.
type DecodeError struct {
	// Field is the dotted path of the offending field ("" when the input as a whole is bad),
	// e.g. "elastic_config.rdzv_options[1].key".
	Field string
	// Reason says what is wrong, in words (not part of the contract).
	Reason string
	// Format is the input format being decoded: "binary", "json", "textproto" or "custom".
	Format string
}

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
	Version int64
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

// Error lists at most maxViolationsShown violations, one a line, then how many more there are.
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
type RenderError struct {
	// Field is the option or task field at fault, e.g. "name", "labels.app", "worker_replicas.common.image".
	Field  string
	Reason string
}

func (e *RenderError) Error() string { return e.Field + ": " + e.Reason }

// EncodeError reports a task that has no proto3 JSON form (a Duration outside JSON's range).
type EncodeError struct {
	Field  string
	Reason string
}

func (e *EncodeError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}
