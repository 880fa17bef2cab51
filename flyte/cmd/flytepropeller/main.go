// Command flytepropeller is Flyte 1.16's propeller: flytepropeller v1.16.8's
// controller command, unchanged, with the plugins upstream's main loads
// (flytepropeller/plugins/loader.go at v1.16.8) but one, plus elastic-idl's
// pytorch plugin (go/flyteplugin, id "elastic-idl-pytorch") beside
// flyteplugins' own "pytorch". Which plugin runs a task type is propeller's
// configuration (tasks.task-plugins); flyte/flyte.py writes one.
//
// Left out: the spark plugin (flyteplugins/go/tasks/plugins/k8s/spark). It
// imports github.com/kubeflow/spark-operator at
// v0.0.0-20250325114751-1905be6e1dbd, which the Go module proxy refuses (403
// "This module version is not available"; no version of that module is listed).
package main

import (
	"github.com/flyteorg/flyte/flytepropeller/cmd/controller/cmd"

	// flytepropeller/plugins/loader.go at v1.16.8, in its order, without spark.
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/array/awsbatch"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/array/k8s"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/dask"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/pytorch"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/kfoperators/tensorflow"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/pod"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/ray"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/testing"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/webapi/athena"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/webapi/bigquery"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/webapi/databricks"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/webapi/snowflake"

	// Ours: registers "elastic-idl-pytorch" for the task type pytorch.
	_ "github.com/elastic-idl/elastic-idl/go/flyteplugin"
)

func main() {
	cmd.Execute()
}
