#!/usr/bin/env bash
# Checks that the Go submodules build for a consumer, outside the workspace: a
# throwaway module requires go/kubeflow and go/flyteplugin at the release
# version (docs/guide/go-backend.md, "Releasing the Go modules"), with GOWORK=off and
# GOFLAGS=-mod=mod, replacing the three elastic-idl modules by this checkout (as
# `go get` of the tags would fetch them) and carrying the flyte replaces a
# flyteplugins consumer has. It builds a program importing both and vets it.
#
# Usage: scripts/go_release_check.sh [VERSION]   (default: pyproject.toml's version)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="v${1:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)}"
mod=github.com/elastic-idl/elastic-idl/go
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

# Each submodule requires the core (and the plugin requires go/kubeflow) at $version, by version.
for m in kubeflow flyteplugin; do
  grep -q "^[[:space:]]*$mod $version\$" "$repo/go/$m/go.mod" ||
    { echo "go/$m/go.mod does not require $mod $version" >&2; exit 1; }
  if grep -q "=> \.\./\|=> \./" "$repo/go/$m/go.mod"; then
    echo "go/$m/go.mod has a directory replace; only go/go.work may resolve the modules locally" >&2; exit 1
  fi
done
grep -q "^[[:space:]]*$mod/kubeflow $version\$" "$repo/go/flyteplugin/go.mod" ||
  { echo "go/flyteplugin/go.mod does not require $mod/kubeflow $version" >&2; exit 1; }

cd "$tmp"
cat > go.mod <<MOD
module example.com/consumer

go 1.26.0

require (
	$mod/kubeflow $version
	$mod/flyteplugin $version
)

replace (
	$mod $version => $repo/go
	$mod/kubeflow $version => $repo/go/kubeflow
	$mod/flyteplugin $version => $repo/go/flyteplugin
)
MOD
# The flyteplugin module's own replaces (the flyte release tags, flyteplugins' others):
# a consumer's go.mod states them, as every module that requires flyteplugins does.
(cd "$repo/go/flyteplugin" && go mod edit -json) | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]
    if not new["Path"].startswith("."):
        print("-replace=" + r["Old"]["Path"] + "=" + new["Path"] + "@" + new["Version"])
' | xargs -r go mod edit
cat "$repo/go/go.sum" "$repo/go/kubeflow/go.sum" "$repo/go/flyteplugin/go.sum" | sort -u > go.sum
cat > main.go <<'GO'
// Command consumer builds a program that imports the released Go modules.
package main

import (
	"fmt"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/flyteplugin"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

func main() {
	task, err := elasticidl.Decode([]byte(`{"workerReplicas":{"replicas":2}}`), elasticidl.FormatJSON, 1)
	if err != nil {
		panic(err)
	}
	f, err := kubeflow.Fields(task, kubeflow.Options{})
	fmt.Println(flyteplugin.PluginID, f.Replicas, err)
}
GO
go mod tidy
go build -o consumer .
go vet .
./consumer
echo "go_release_check: a consumer of $mod/kubeflow and $mod/flyteplugin $version builds without go.work"
