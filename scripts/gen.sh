#!/usr/bin/env bash
# Regenerate gen/ from protos/ with the pinned local plugins (no network).
# Usage: scripts/gen.sh [VENV]   (default VENV: .venv-gen, made by `make venv-gen`)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-gen}"
# The pinned tools live in the venv: buf, python -m grpc_tools.protoc,
# protoc-gen-mypy and protoc-gen-python_betterproto (which runs black + isort).
export PATH="$PWD/$venv/bin:$PATH"
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
