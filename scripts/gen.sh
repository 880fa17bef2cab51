#!/usr/bin/env bash
# Regenerate gen/ (Python) and go/gen/ (Go) from protos/ with the pinned local
# plugins, and go/elasticidl/tables_gen.go from the Python reference (no network).
# Usage: scripts/gen.sh [VENV]   (default VENV: .venv-gen, made by `make venv-gen`)
#
# The Python reference's tables are read with .venv's python (ELASTIC_IDL_PY
# overrides it). Go's protoc-gen-go is the one pinned in go/tools/go.mod, built by
# `go` into its build cache (scripts/go_toolchain.sh); the version below must be
# the same, and every generated Go header names it. Without Go, go/gen/ is left
# as it is, with one line on stderr (none when ELASTIC_IDL_GO=skip, as under
# `make test` after that line was printed); under CI=true that is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-gen}"
runtime_py="${ELASTIC_IDL_PY:-.venv/bin/python}"
PROTOC_GEN_GO_VERSION=v1.34.2
# Go needs the pinned protoc-gen-go: checked before anything is written.
go_bindings=yes
plugin_dir=$(mktemp -d)
trap 'rm -rf "$plugin_dir"' EXIT
if ! scripts/go_toolchain.sh present; then
  if [[ "${CI:-}" == true ]]; then
    echo "scripts/gen.sh: Go is not installed, and CI=true needs go/gen/ checked (scripts/go_toolchain.sh ensure)" >&2
    exit 1
  fi
  [[ "${ELASTIC_IDL_GO:-}" == skip ]] ||
    echo "scripts/gen.sh: Go is not installed: go/gen/ is not regenerated (scripts/go_toolchain.sh ensure)" >&2
  go_bindings=no
else
  ln -s "$(scripts/go_toolchain.sh path protoc-gen-go)" "$plugin_dir/protoc-gen-go"
  have=$("$plugin_dir/protoc-gen-go" --version 2>/dev/null | awk '{print $2}')
  if [[ "$have" != "$PROTOC_GEN_GO_VERSION" ]]; then
    echo "scripts/gen.sh: go/tools/go.mod pins protoc-gen-go ${have:-of unknown version}, not $PROTOC_GEN_GO_VERSION: change both together" >&2
    exit 1
  fi
fi

# The pinned tools live in the venv: buf, python -m grpc_tools.protoc,
# protoc-gen-mypy and protoc-gen-python_betterproto (which runs black + isort).
export PATH="$plugin_dir:$PWD/$venv/bin:$PATH"
# Timestamps or locale must not leak into the output.
export LC_ALL=C.UTF-8 PYTHONHASHSEED=0 SOURCE_DATE_EPOCH=0
buf generate
# betterproto writes an empty __init__.py at its output root; the wheel maps
# gen/betterproto/elastic_idl to elastic_idl/betterproto, so that file is unused.
rm -f gen/betterproto/__init__.py
# Every folder below gen/pb2/elastic_idl/ is a regular package, so pkgutil and pydoc find the
# generated modules and the freshness check covers these files. Not gen/pb2/elastic_idl itself:
# the wheel and the dev tree merge it with src/elastic_idl, whose __init__.py is the package's.
find gen/pb2/elastic_idl -mindepth 1 -type d ! -name __pycache__ -exec touch {}/__init__.py \;

# Go: the Python reference's tables (no Go toolchain needed), then the bindings.
"$runtime_py" scripts/gen_go_tables.py
if [[ $go_bindings == yes ]]; then
  # The module path has one home, go/go.mod; the template names it @GO_MODULE@.
  module=$(sed -n 's/^module[[:space:]]\{1,\}//p' go/go.mod)
  buf generate --template "$(sed "s|@GO_MODULE@|$module|g" buf.gen.go.yaml)"
fi
