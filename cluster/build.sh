#!/usr/bin/env bash
# Builds the one-machine cluster's binaries (cluster/go.mod) into a cache outside
# the repository, keyed by the Kubernetes version and a hash of the module files,
# so a second run builds nothing. Prints the cache's bin/ folder on stdout.
# Then the object store (cluster/objectstore/go.mod, a module of its own: the Versity
# S3 Gateway), into a cache of its own keyed by its version and a hash of its module files.
# The controllers of the other render targets (cluster/targets/go.mod, a module of its own: JobSet
# and Kubeflow Trainer) are built likewise, but only when asked (`targets`; `cluster.py targets-up`
# asks), so that `make cluster-up` builds no more than it starts.
# So are a node's binaries (`node`): kubelet and kube-proxy (cluster/kubelet/go.mod, a module of its own
# at the control plane's Kubernetes version) and the container runtime (cluster/runtime/go.mod,
# another: containerd and its runc shim and ctr, runc, the CNI plugins bridge, host-local, loopback
# and portmap), into one bin folder keyed by their versions and a hash of both modules' files. runc
# is built with cgo and seccomp: it needs pkg-config and libseccomp's headers (Debian and Ubuntu:
# apt-get install libseccomp-dev pkg-config; at run time libseccomp2).
#
#   cluster/build.sh                   build what is missing, print the bin folder
#   cluster/build.sh path              print the bin folder (built or not)
#   cluster/build.sh objectstore-path  print the object store's bin folder (built or not)
#   cluster/build.sh targets-path      print the JobSet and Trainer controllers' bin folder (built or not)
#   cluster/build.sh targets           build only those two (if missing), print their bin folder
#   cluster/build.sh node-path         print a node's bin folder (built or not)
#   cluster/build.sh node              build only a node's binaries (if missing), print their bin folder
#   cluster/build.sh netpol-path       print the NetworkPolicy engine's bin folder (built or not)
#   cluster/build.sh netpol            build only the NetworkPolicy engine, kube-router (cluster/netpol/go.mod),
#                                      if missing; print its bin folder
#
# Environment: ELASTIC_IDL_CACHE (default ~/.cache/elastic-idl), CLUSTER_BUILD_NICE
# (niceness of the build, default 19: it takes only idle CPU), CLUSTER_BUILD_P
# (go build -p; default Go's). Each binary's cold build time (wall and CPU) goes to
# <cache>/build-times.txt (later binaries reuse the packages the earlier ones compiled).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
K8S_VERSION=v1.36.3

# shellcheck source=../scripts/go_build.sh
source "$(dirname "$here")/scripts/go_build.sh"
go_on_path

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

# The object store: its version is the one its go.mod requires.
STORE_MODULE=github.com/versity/versitygw
store_version=$(awk -v m="$STORE_MODULE" '$1 == m { print $2 }' "$here/objectstore/go.mod")
[[ -n "$store_version" ]] || { echo "cluster/build.sh: no $STORE_MODULE in cluster/objectstore/go.mod" >&2; exit 1; }
store_key=$(cd "$here/objectstore" && cat go.mod go.sum | sha256sum | cut -c1-16)
store_cache="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/objectstore/versitygw-$store_version-$store_key"
store_bin="$store_cache/bin"

# The render targets' controllers: their versions are the ones cluster/targets/go.mod requires.
JOBSET_MODULE=sigs.k8s.io/jobset
TRAINER_MODULE=github.com/kubeflow/trainer/v2
jobset_version=$(awk -v m="$JOBSET_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/targets/go.mod")
trainer_version=$(awk -v m="$TRAINER_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/targets/go.mod")
[[ -n "$jobset_version" && -n "$trainer_version" ]] || {
  echo "cluster/build.sh: no $JOBSET_MODULE or $TRAINER_MODULE in cluster/targets/go.mod" >&2; exit 1; }
targets_key=$(cd "$here/targets" && cat go.mod go.sum | sha256sum | cut -c1-16)
targets_cache="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/targets/jobset-$jobset_version-trainer-$trainer_version-$targets_key"
targets_bin="$targets_cache/bin"

# A node's binaries: kubelet and kube-proxy at K8S_VERSION (cluster/kubelet/go.mod), the runtime at the
# versions cluster/runtime/go.mod requires.
CONTAINERD_MODULE=github.com/containerd/containerd/v2
RUNC_MODULE=github.com/opencontainers/runc
CNI_MODULE=github.com/containernetworking/plugins
containerd_version=$(awk -v m="$CONTAINERD_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/runtime/go.mod")
runc_version=$(awk -v m="$RUNC_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/runtime/go.mod")
cni_version=$(awk -v m="$CNI_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/runtime/go.mod")
[[ -n "$containerd_version" && -n "$runc_version" && -n "$cni_version" ]] || {
  echo "cluster/build.sh: no $CONTAINERD_MODULE, $RUNC_MODULE or $CNI_MODULE in cluster/runtime/go.mod" >&2; exit 1; }
node_key=$(cd "$here" && cat kubelet/go.mod kubelet/go.sum runtime/go.mod runtime/go.sum runtime/cmd/pause/main.go | sha256sum | cut -c1-16)
node_cache="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/node/k8s-$K8S_VERSION-containerd-$containerd_version-runc-$runc_version-cni-$cni_version-$node_key"
node_bin="$node_cache/bin"

# The NetworkPolicy engine: kube-router at the version cluster/netpol/go.mod requires.
NETPOL_MODULE=github.com/cloudnativelabs/kube-router/v2
netpol_version=$(awk -v m="$NETPOL_MODULE" '$1 == m && $2 ~ /^v/ { print $2 }' "$here/netpol/go.mod")
[[ -n "$netpol_version" ]] || { echo "cluster/build.sh: no $NETPOL_MODULE in cluster/netpol/go.mod" >&2; exit 1; }
netpol_key=$(cd "$here/netpol" && cat go.mod go.sum | sha256sum | cut -c1-16)
netpol_bin="${ELASTIC_IDL_CACHE:-$HOME/.cache/elastic-idl}/netpol/kube-router-$netpol_version-$netpol_key/bin"

case "${1:-}" in
  path) echo "$bin"; exit 0 ;;
  netpol-path) echo "$netpol_bin"; exit 0 ;;
  objectstore-path) echo "$store_bin"; exit 0 ;;
  targets-path) echo "$targets_bin"; exit 0 ;;
  node-path) echo "$node_bin"; exit 0 ;;
esac

command -v go >/dev/null || { echo "cluster/build.sh: missing command: go (Go 1.26 or newer)" >&2; exit 1; }

# What `make release` stamps into Kubernetes binaries (hack/lib/version.sh).
ldx=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldx+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=36 -X $pkg.gitTreeState=clean"
done
pflag=()
[[ -n "${CLUSTER_BUILD_P:-}" ]] && pflag=(-p "$CLUSTER_BUILD_P")

nice_level="${CLUSTER_BUILD_NICE:-19}"

# JobSet's main (stamped as its Makefile stamps it), then Trainer's controller manager (its
# Makefile stamps nothing).
build_targets() {
  go_build_cached "$here/targets" "$targets_bin" "$targets_cache/build-times.txt" "$nice_level" \
    "-X $JOBSET_MODULE/pkg/version.GitVersion=$jobset_version" jobset-controller "$JOBSET_MODULE" "${pflag[@]}"
  go_build_cached "$here/targets" "$targets_bin" "$targets_cache/build-times.txt" "$nice_level" \
    "" trainer-controller-manager "$TRAINER_MODULE/cmd/trainer-controller-manager" "${pflag[@]}"
}
# kubelet and kube-proxy (stamped as the control plane is), then containerd's three commands (stamped
# as its Makefile stamps them, with its build tags; the shim without cgo, as its Makefile builds it),
# runc (its version is its embedded VERSION file; seccomp as its Makefile's default) and the CNI
# plugins (stamped as their release is).
build_node() {
  local log="$node_cache/build-times.txt" entry
  go_build_cached "$here/kubelet" "$node_bin" "$log" "$nice_level" "$ldx" kubelet k8s.io/kubernetes/cmd/kubelet "${pflag[@]}"
  go_build_cached "$here/kubelet" "$node_bin" "$log" "$nice_level" "$ldx" kube-proxy k8s.io/kubernetes/cmd/kube-proxy "${pflag[@]}"
  local cx="-X $CONTAINERD_MODULE/version.Version=$containerd_version -X $CONTAINERD_MODULE/version.Package=$CONTAINERD_MODULE"
  go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" "$cx" containerd \
    "$CONTAINERD_MODULE/cmd/containerd" -tags urfave_cli_no_docs "${pflag[@]}"
  CGO_ENABLED=0 go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" "$cx" containerd-shim-runc-v2 \
    "$CONTAINERD_MODULE/cmd/containerd-shim-runc-v2" -tags "urfave_cli_no_docs no_grpc" "${pflag[@]}"
  go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" "$cx" ctr \
    "$CONTAINERD_MODULE/cmd/ctr" -tags urfave_cli_no_docs "${pflag[@]}"
  if [[ ! -x "$node_bin/runc" ]] && ! pkg-config --exists libseccomp 2>/dev/null; then
    echo "cluster/build.sh: runc needs libseccomp's headers and pkg-config (Debian and Ubuntu: apt-get install libseccomp-dev pkg-config)" >&2
    exit 1
  fi
  CGO_ENABLED=1 go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" "" runc \
    "$RUNC_MODULE" -tags "seccomp urfave_cli_no_docs" "${pflag[@]}"
  # The pod sandbox's process (written here: no registry to pull registry.k8s.io/pause from), static.
  CGO_ENABLED=0 go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" "" pause ./cmd/pause "${pflag[@]}"
  for entry in bridge=main/bridge host-local=ipam/host-local loopback=main/loopback portmap=meta/portmap; do
    go_build_cached "$here/runtime" "$node_bin" "$log" "$nice_level" \
      "-X $CNI_MODULE/pkg/utils/buildversion.BuildVersion=$cni_version" \
      "${entry%%=*}" "$CNI_MODULE/plugins/${entry#*=}" "${pflag[@]}"
  done
}
if [[ "${1:-}" == node ]]; then
  build_node
  echo "$node_bin"
  exit 0
fi
if [[ "${1:-}" == netpol ]]; then
  # Stamped as its Makefile stamps it (pkg/version).
  go_build_cached "$here/netpol" "$netpol_bin" "$(dirname "$netpol_bin")/build-times.txt" "$nice_level" \
    "-X $NETPOL_MODULE/pkg/version.Version=$netpol_version" kube-router "$NETPOL_MODULE/cmd/kube-router" "${pflag[@]}"
  echo "$netpol_bin"
  exit 0
fi
if [[ "${1:-}" == targets ]]; then
  build_targets
  echo "$targets_bin"
  exit 0
fi

for entry in "${BINARIES[@]}"; do
  go_build_cached "$here" "$bin" "$cache/build-times.txt" "$nice_level" "$ldx" "${entry%%=*}" "${entry#*=}" "${pflag[@]}"
done

# The object store's main, built as it is (stamped with its version, as its Makefile does).
go_build_cached "$here/objectstore" "$store_bin" "$store_cache/build-times.txt" "$nice_level" \
  "-X main.Version=$store_version" versitygw "$STORE_MODULE/cmd/versitygw" "${pflag[@]}"
echo "$bin"
