#!/usr/bin/env bash
# Builds the one-machine cluster's binaries (cluster/go.mod) into a cache outside
# the repository, keyed by the Kubernetes version and a hash of the module files,
# so a second run builds nothing. Prints the cache's bin/ folder on stdout.
#
#   cluster/build.sh           build what is missing, print the bin folder
#   cluster/build.sh path      print the bin folder (built or not)
#
# Environment: ELASTIC_IDL_CACHE (default ~/.cache/elastic-idl), CLUSTER_BUILD_NICE
# (niceness of the build, default 19: it takes only idle CPU), CLUSTER_BUILD_P
# (go build -p; default Go's). Each binary's cold build time (wall and CPU) goes to
# <cache>/build-times.txt (later binaries reuse the packages the earlier ones compiled).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
K8S_VERSION=v1.36.3

go_home="${ELASTIC_IDL_GO_HOME:-/usr/local/go}"
if ! command -v go >/dev/null && [[ -x "$go_home/bin/go" ]]; then
  export PATH="$go_home/bin:$PATH"
fi

# name=package, in build order (the large shared part first).
BINARIES=(
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  kubectl=k8s.io/kubernetes/cmd/kubectl
  etcd=go.etcd.io/etcd/server/v3
  training-operator=github.com/kubeflow/training-operator/cmd/training-operator.v1
  coredns=./cmd/coredns
)

key=$(cd "$here" && cat go.mod go.sum cmd/coredns/main.go | sha256sum | cut -c1-16)
cache="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/cluster/k8s-$K8S_VERSION-$key"
bin="$cache/bin"

if [[ "${1:-}" == path ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "cluster/build.sh: missing command: go (Go 1.26 or newer)" >&2; exit 1; }

# What `make release` stamps into Kubernetes binaries (hack/lib/version.sh).
ldx=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldx+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=36 -X $pkg.gitTreeState=clean"
done
pflag=()
[[ -n "${CLUSTER_BUILD_P:-}" ]] && pflag=(-p "$CLUSTER_BUILD_P")

# CPU seconds (user + system) of this script's finished children: a build's cost
# apart from how busy the machine was.
cpu_seconds() {
  local t
  t=$(cat /proc/$$/stat)
  t=${t##*) }
  read -r -a f <<<"$t"
  echo $(( (f[13] + f[14]) / $(getconf CLK_TCK) ))
}

mkdir -p "$bin"
for entry in "${BINARIES[@]}"; do
  name=${entry%%=*}
  pkg=${entry#*=}
  [[ -x "$bin/$name" ]] && continue
  echo "== building $name ($pkg) into $bin" >&2
  start=$(date +%s)
  cpu0=$(cpu_seconds)
  (cd "$here" && GOWORK=off GOFLAGS=-mod=readonly nice -n "${CLUSTER_BUILD_NICE:-19}" \
    go build "${pflag[@]}" -trimpath -ldflags="-s -w$ldx" -o "$bin/.$name.tmp" "$pkg")
  mv "$bin/.$name.tmp" "$bin/$name"
  echo "$name wall $(( $(date +%s) - start ))s cpu $(( $(cpu_seconds) - cpu0 ))s $(date -u +%FT%TZ)" >>"$cache/build-times.txt"
done
echo "$bin"
