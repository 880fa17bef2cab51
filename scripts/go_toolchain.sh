#!/usr/bin/env bash
# The Go toolchain of the Go checks: the `go` command (Go >= 1.22, the `go` line of
# go/go.mod) and the developer tools pinned in go/tools/go.mod (protoc-gen-go,
# staticcheck), built by `go` from the module proxy into its build cache, keyed by
# version, so a second run builds nothing. Nothing is installed system-wide.
#
# Usage: scripts/go_toolchain.sh present       exit 0 when a usable `go` is there, else 1 (silent)
#        scripts/go_toolchain.sh ensure        exit 0 ready; 3 missing (one line says the Go
#                                              checks did not run); 1 missing under CI=true
#        scripts/go_toolchain.sh path TOOL     print the path of the pinned TOOL's binary
#        scripts/go_toolchain.sh run TOOL ARG  run the pinned TOOL in the current directory
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS_MOD="$repo/go/tools"
MIN_MINOR=22

# The official toolchain's default home (ELASTIC_IDL_GO_HOME), for a PATH that lacks it.
go_home="${ELASTIC_IDL_GO_HOME:-/usr/local/go}"
if ! command -v go >/dev/null && [[ -x "$go_home/bin/go" ]]; then
  export PATH="$go_home/bin:$PATH"
fi

present() {
  command -v go >/dev/null || return 1
  local v
  v=$(go env GOVERSION 2>/dev/null) || return 1 # e.g. go1.26.8
  [[ $v =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= MIN_MINOR))
}

tool_path() {
  # `go tool -n` builds the tool (once per version, in go's build cache) and prints its path.
  (cd "$TOOLS_MOD" && GOWORK=off GOFLAGS= go tool -n "$1")
}

case "${1:-}" in
  present)
    present
    ;;
  ensure)
    present && exit 0
    if [[ "${CI:-}" == true ]]; then
      echo "go_toolchain: Go 1.$MIN_MINOR or newer is missing (no 'go' on PATH or in /usr/local/go/bin); CI=true requires the Go checks" >&2
      exit 1
    fi
    echo "== the Go checks did not run: Go 1.$MIN_MINOR or newer is not installed (https://go.dev/doc/install puts it in /usr/local/go)"
    exit 3
    ;;
  path)
    [[ -n "${2:-}" ]] || { echo "usage: scripts/go_toolchain.sh path TOOL" >&2; exit 2; }
    tool_path "$2"
    ;;
  run)
    [[ -n "${2:-}" ]] || { echo "usage: scripts/go_toolchain.sh run TOOL [ARG...]" >&2; exit 2; }
    bin=$(tool_path "$2")
    shift 2
    exec "$bin" "$@"
    ;;
  *)
    echo "usage: scripts/go_toolchain.sh present|ensure|path TOOL|run TOOL [ARG...]" >&2
    exit 2
    ;;
esac
