#!/usr/bin/env bash
# The toolchain of the Go checks: go, protoc-gen-go and the source of
# google.golang.org/protobuf, as Debian packages (no Go module proxy is needed).
#
# Usage: scripts/go_toolchain.sh present   exit 0 when all are there, else 1 (silent)
#        scripts/go_toolchain.sh ensure    install what is missing, when possible:
#   exit 0  ready (after installing with apt-get when run as root);
#   exit 3  missing and cannot install (not root, or no apt-get): one line says the
#           Go checks did not run;
#   exit 1  missing under CI=true (the Go checks must run there), or apt-get failed.
set -euo pipefail
PACKAGES=(golang-go golang-google-protobuf-dev protoc-gen-go)
PROTOBUF_SRC=/usr/share/gocode/src/google.golang.org/protobuf

present() {
  command -v go >/dev/null && command -v protoc-gen-go >/dev/null && [[ -f "$PROTOBUF_SRC/go.mod" ]]
}

case "${1:-}" in
  present)
    present
    ;;
  ensure)
    present && exit 0
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      echo "== installing the Go toolchain with apt-get: ${PACKAGES[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
      present && exit 0
      echo "go_toolchain: apt-get installed ${PACKAGES[*]}, but go, protoc-gen-go or $PROTOBUF_SRC is still missing" >&2
      exit 1
    fi
    if [[ "${CI:-}" == true ]]; then
      echo "go_toolchain: the Go toolchain is missing (${PACKAGES[*]}) and cannot be installed here (needs root and apt-get); CI=true requires the Go checks" >&2
      exit 1
    fi
    echo "== the Go checks did not run: go, protoc-gen-go or $PROTOBUF_SRC is missing (as root with apt-get, make test installs ${PACKAGES[*]})"
    exit 3
    ;;
  *)
    echo "usage: scripts/go_toolchain.sh present|ensure" >&2
    exit 2
    ;;
esac
