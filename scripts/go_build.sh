# shellcheck shell=bash
# Sourced by cluster/build.sh and flyte/build.sh: the Go toolchain on PATH, and one Go binary built
# into a cache outside the repository (skipped when it is there), its wall and CPU time logged.

# Go on PATH: the one on PATH, else $ELASTIC_IDL_GO_HOME/bin (default /usr/local/go/bin).
go_on_path() {
  local go_home="${ELASTIC_IDL_GO_HOME:-/usr/local/go}"
  if ! command -v go >/dev/null && [[ -x "$go_home/bin/go" ]]; then
    export PATH="$go_home/bin:$PATH"
  fi
}

# CPU seconds (user + system) of the sourcing script's finished children: a build's cost apart from
# how busy the machine was.
cpu_seconds() {
  local t
  t=$(cat /proc/$$/stat)
  t=${t##*) }
  read -r -a f <<<"$t"
  echo $(( (f[13] + f[14]) / $(getconf CLK_TCK) ))
}

# go_build_cached MODULE_DIR BIN_DIR LOG NICE LDFLAGS NAME PACKAGE [go build flags...]
# Builds PACKAGE of the module in MODULE_DIR (readonly, no workspace, stripped, -trimpath) into
# BIN_DIR/NAME unless it is there; a line with its wall and CPU time and the GOCACHE goes to LOG.
go_build_cached() {
  local dir=$1 bin=$2 log=$3 niceness=$4 ldflags=$5 name=$6 pkg=$7 start cpu0
  shift 7
  [[ -x "$bin/$name" ]] && return 0
  mkdir -p "$bin"
  echo "== building $name ($pkg) into $bin" >&2
  start=$(date +%s)
  cpu0=$(cpu_seconds)
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly nice -n "$niceness" \
    go build "$@" -trimpath -ldflags="-s -w $ldflags" -o "$bin/.$name.tmp" "$pkg")
  mv "$bin/.$name.tmp" "$bin/$name"
  echo "$name wall $(( $(date +%s) - start ))s cpu $(( $(cpu_seconds) - cpu0 ))s gocache $(go env GOCACHE) $(date -u +%FT%TZ)" >>"$log"
}
