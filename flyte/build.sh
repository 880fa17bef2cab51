#!/usr/bin/env bash
# Builds Flyte 1.16's backend (flyte/go.mod) into a cache outside the repository:
# flytepropeller (our main: upstream's controller with its plugins and
# elastic-idl's) and kubectl-flyte (upstream's, as it is). The cache is keyed by
# the propeller version and a hash of this module's files and of elastic-idl's Go
# sources compiled into propeller (go/, go/kubeflow, go/flyteplugin), so a
# second run builds nothing. Prints the bin folder on stdout.
#
#   flyte/build.sh        build what is missing, print the bin folder
#   flyte/build.sh path   print the bin folder (built or not)
#
# Environment: ELASTIC_IDL_CACHE (default ~/.cache/elastic-idl), FLYTE_BUILD_NICE
# (niceness of the build, default 19), FLYTE_BUILD_P (go build -p; default Go's).
# Each binary's build time (wall and CPU) goes to <cache>/build-times.txt, with
# the GOCACHE it used (kubectl-flyte reuses the packages propeller compiled).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
PROPELLER_MODULE=github.com/flyteorg/flyte/flytepropeller

# shellcheck source=../scripts/go_build.sh
source "$repo/scripts/go_build.sh"
go_on_path

# name=package, propeller first (it compiles nearly everything kubectl-flyte needs).
BINARIES=(
  flytepropeller=./cmd/flytepropeller
  kubectl-flyte=$PROPELLER_MODULE/cmd/kubectl-flyte
)

version=$(awk -v m="$PROPELLER_MODULE" '$1 == m { print $2 }' "$here/go.mod")
[[ -n "$version" ]] || { echo "flyte/build.sh: no $PROPELLER_MODULE in flyte/go.mod" >&2; exit 1; }
key=$(
  cd "$repo"
  {
    cat flyte/go.mod flyte/go.sum flyte/cmd/flytepropeller/main.go
    find go -path go/tools -prune -o \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) -type f -print |
      LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done
  } | sha256sum | cut -c1-16
)
cache="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/flyte/propeller-$version-$key"
bin="$cache/bin"

[[ "${1:-}" == path ]] && { echo "$bin"; exit 0; }
command -v go >/dev/null || { echo "flyte/build.sh: missing command: go (Go 1.26 or newer)" >&2; exit 1; }

# What Flyte's release build stamps (flytestdlib/version).
ldx="-X github.com/flyteorg/flyte/flytestdlib/version.Version=$version"
ldx+=" -X github.com/flyteorg/flyte/flytestdlib/version.Build=elastic-idl-$key"
pflag=()
[[ -n "${FLYTE_BUILD_P:-}" ]] && pflag=(-p "$FLYTE_BUILD_P")

for entry in "${BINARIES[@]}"; do
  go_build_cached "$here" "$bin" "$cache/build-times.txt" "${FLYTE_BUILD_NICE:-19}" "$ldx" \
    "${entry%%=*}" "${entry#*=}" "${pflag[@]}"
done
echo "$bin"
