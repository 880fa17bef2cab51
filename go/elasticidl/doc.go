// Package elasticidl is the Go backend of elastic-idl: what a flytepropeller
// plugin needs to turn an elastic PyTorch task into a kubeflow.org/v1 PyTorchJob,
// holding to the same contract as the Python reference (the elastic_idl package)
// and checked against it by the contract vectors (contract/ in the repository).
//
// The path through it:
//
//	task, err := elasticidl.FromStruct(taskTemplate.GetCustom(), taskTemplate.GetTaskTypeVersion())
//	err = task.Validate()                        // *ValidationError: every Violation{Field, Rule}
//	job, err := task.RenderPyTorchJob(options)   // *RenderError{Field} for a bad option
//	env, err := elasticidl.PodEnv(job, elasticidl.ReplicaWorker, 0)
//
// Decode reads the three forms of the conformance protocol (binary, the custom
// dict as JSON, textproto), at most MaxTaskBytes. Every error is a pointer to one
// of DecodeError, UnsupportedVersionError, ValidationError, RenderError or
// EncodeError (use errors.As; errors.Is(err, ErrTooLarge) for an input over the
// limit), and carries the field path (and the rule id) the reference reports. No
// input makes the package panic, and every input costs time and memory linear
// in its size.
//
// The generated messages live in the gen/ packages of this module
// (eidlpluginsv1, eidlkubeflowv1, eidlcorev1). The reference's tables (rule
// ids, limits, Kubernetes keys, env names) are generated into tables_gen.go by
// scripts/gen_go_tables.py; the validation steps are an ordered table (checks)
// in which each step names the rules it reports.
package elasticidl
