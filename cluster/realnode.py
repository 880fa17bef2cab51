"""The cluster's real Nodes: per Node a kubelet, a containerd with runc and the CNI bridge plugin,
and a kube-proxy, in namespaces of the Node's own (test equipment, not product).

cluster.py imports this file (`up`); it reads no environment and starts
nothing on import. docs/guide/cluster.md, "Real nodes", says what each piece is and why.

Per Node (index i, name n):
- a holder process (`unshare --net --mount --propagation private`) whose network and mount
  namespaces the Node's processes enter with `nsenter` (never `ip netns exec`, which remounts
  /sys and breaks runc's cgroup lookup). In its mount namespace: a tmpfs on /run and /var/log (the
  kubelet's and containerd's fixed paths, so nothing lands on the host) and, over the six kernel
  settings the kubelet would change (kernel.panic 1 -> 10 and the rest, `KERNEL_TUNABLES`), files
  holding the host's values: the kubelet writes its values there; the kernel keeps the host's.
- a veth `eidln<i>` on the pod bridge, its peer `eth0` at NODE_IP (10.237.0.2 + i) in the
  Node's namespace; a bridge `cni0` there for the Node's pods, the /28 POD_SUBNET(i) of the pod
  range (10.237.0.16 * (i + 1)). eth0 answers ARP for the Node's pods (proxy ARP), so the host and
  the other Nodes reach every pod as on the pod range's /24 link: no route in the host's namespace.
- cgroups: CGROUP_PARENT/<n> in each v1 hierarchy, under the cgroup of the process that ran `up`
  (the kubelet's cgroupRoot); `down` removes them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The pod range's /24 (cluster.py POD_CIDR): the host's bridge address is its first address.
POD_RANGE = ipaddress.IPv4Network("10.237.0.0/24")
#: A /28 of pods per Node (13 pods: its maxPods) after the first /28 (the host's and the Nodes' own
#: addresses, 10.237.0.2 to .15): 14 Nodes, as many as the chaos harness's lanes want.
SUBNET_PREFIX = 28
MAX_REAL_NODES = 14
#: The kubelet's Lease: nodeLeaseDurationSeconds [40], renewed every quarter of it, so that a Node
#: misses at least three renewals before the node lifecycle controller's grace period ends.
NODE_LEASE_S = 20
#: The hierarchies the kubelet's cgroup manager (cgroupfs) checks and uses: v1's (name=systemd too), and
#: the hybrid setup's v2 mount (runc makes each container's cgroup there too).
CGROUP_HIERARCHIES = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "unified")
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: What the kubelet's container manager sets when it may (setupKernelTunables): in the Node's
#: mount namespace each is a file (the host's value to start with) bind-mounted over the setting.
KERNEL_TUNABLES = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
KUBELET_PORT = 10250
#: On the Node's own loopback (its network namespace): the same ports on every Node, Kubernetes' defaults.
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_METRICS_PORT = 10249
KUBE_PROXY_HEALTHZ_PORT = 10256
HOST_LINK_PREFIX = "eidln"


@dataclass(frozen=True)
class NodeNet:
    """One Node's addresses."""

    index: int
    ip: ipaddress.IPv4Address
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address  # cni0's address, the pods' default route
    host_link: str

    @property
    def ip_cidr(self) -> str:
        return f"{self.ip}/{POD_RANGE.prefixlen}"


def node_net(index: int) -> NodeNet:
    if not 0 <= index < MAX_REAL_NODES:
        raise ValueError(f"a real Node's index must be 0..{MAX_REAL_NODES - 1}, not {index}")
    subnets = list(POD_RANGE.subnets(new_prefix=SUBNET_PREFIX))
    subnet = subnets[index + 1]
    return NodeNet(
        index=index,
        ip=POD_RANGE.network_address + 2 + index,
        subnet=subnet,
        gateway=subnet.network_address + 1,
        host_link=f"{HOST_LINK_PREFIX}{index}",
    )


def own_cgroup() -> str:
    """The memory cgroup of this process (v1): every Node's cgroups go under it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    raise RuntimeError("no v1 memory cgroup in /proc/self/cgroup (the real nodes need cgroup v1's hierarchies)")


# ---------------------------------------------------------------- configuration files (pure)


@dataclass(frozen=True)
class HostFiles:
    """What a pod needs to see host folders on a real Node (as kind's extraMounts): volumes, the
    mounts of each container, and PATH with a bin folder of the host's first. The pods' base image
    (cluster/image.py) holds no Python; the interpreter's prefix and the checkout with its venv are
    mounted read-only at their host paths. Only the tests and the Flyte harness add these."""

    volumes: list[dict[str, object]]
    volume_mounts: list[dict[str, object]]
    path: dict[str, str]


def host_files(mounts: dict[str, tuple[Path, bool]], bin_dir: Path) -> HostFiles:
    """mounts: volume name -> (host folder, read-only)."""
    return HostFiles(
        volumes=[
            {"name": k, "hostPath": {"path": str(p), "type": "DirectoryOrCreate"}} for k, (p, _) in mounts.items()
        ],
        volume_mounts=[{"name": k, "mountPath": str(p), "readOnly": ro} for k, (p, ro) in mounts.items()],
        path={"name": "PATH", "value": f"{bin_dir}:/usr/bin:/bin"},
    )


def for_real_nodes(objects: list[dict[str, Any]], image: str, files: HostFiles) -> list[dict[str, Any]]:
    """What the tests and the chaos harness add to the objects they make on real Nodes (edited in
    place; returned): every container of a PyTorchJob's replicas, a JobSet's, a TrainJob's trainer
    (volumes through a runtime patch of the tests' own manager) and a bare Pod runs `image` (the
    base image, tagged with its digest: the kubelet uses the imported one) with `files`."""
    volumes, volume_mounts, path = files.volumes, files.volume_mounts, files.path
    pods: list[dict[str, Any]] = []
    containers: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "PyTorchJob":
            pods += [r["template"]["spec"] for r in obj["spec"]["pytorchReplicaSpecs"].values()]
        elif obj["kind"] == "JobSet":
            pods += [r["template"]["spec"]["template"]["spec"] for r in obj["spec"]["replicatedJobs"]]
        elif obj["kind"] == "Pod":
            pods.append(obj["spec"])
        elif obj["kind"] == "TrainJob":
            # The trainer's image and env are the TrainJob's; volumes reach the runtime's `node`
            # pods through a runtime patch of the tests' own manager.
            containers.append(obj["spec"]["trainer"])
            pod_patch = {"volumes": volumes, "containers": [{"name": "node", "volumeMounts": volume_mounts}]}
            obj["spec"].setdefault("runtimePatches", []).append({
                "manager": "tests.elastic-idl.dev/real-nodes",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", "template": {"spec": {"template": {"spec": pod_patch}}}}
                ]}}},
            })  # fmt: skip
    for pod in pods:
        pod["volumes"] = [*pod.get("volumes", []), *volumes]
        for c in pod["containers"]:
            c["volumeMounts"] = [*c.get("volumeMounts", []), *volume_mounts]
            containers.append(c)
    for c in containers:
        c["image"] = image  # tagged with its digest, never `latest`: the kubelet uses the imported one
        c["env"] = [*c.get("env", []), path]
    return objects


def containerd_config(node_dir: Path, bindir: Path, sandbox_image: str) -> str:
    """containerd 2.x's config (version 3): everything under node_dir, CRI with runc on cgroupfs,
    no negative OOM score adjustment, the locally built sandbox image, CNI from bindir."""
    d = str(node_dir)
    return f"""version = 4
root = "{d}/containerd/root"
state = "{d}/containerd/state"
temp = "{d}/containerd/tmp"

[plugins.'io.containerd.server.v1.grpc']
  address = "{d}/containerd.sock"

[plugins.'io.containerd.server.v1.ttrpc']
  address = "{d}/containerd.sock.ttrpc"

[plugins.'io.containerd.server.v1.debug']
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{sandbox_image}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{bindir}"]
    conf_dir = "{d}/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{bindir}/runc"
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_config(net: NodeNet, node_dir: Path) -> dict[str, object]:
    """The Node's pod network: the bridge plugin on cni0 (the pods' gateway), host-local
    addresses of the Node's /28, its state under node_dir; no masquerading."""
    return {
        "cniVersion": "1.0.0",
        "name": "elastic-idl",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(net.subnet), "gateway": str(net.gateway)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node_dir / "cni" / "ipam"),
                },
            }
        ],
    }


def kubelet_config(
    *,
    net: NodeNet,
    node_dir: Path,
    ca: Path,
    cgroup_root: str,
    dns: str,
    cluster_domain: str,
) -> dict[str, object]:
    """The kubelet's KubeletConfiguration. The kubelet API (10250, on the Node's own address)
    takes only client certificates of the cluster's CA (the API server's), no anonymous."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": str(net.ip),
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        # cgroup v1 (this machine's): refused by 1.36's kubelet unless asked; cgroupfs, no systemd.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        # Leave the machine as found: no negative OOM score, and (protectKernelDefaults false) the
        # kernel settings it changes are the files of the Node's mount namespace, not the kernel's.
        "oomScoreAdj": 0,
        "protectKernelDefaults": False,
        "failSwapOn": False,
        "clusterDNS": [dns],
        "clusterDomain": cluster_domain,
        "resolvConf": str(node_dir / "resolv.conf"),
        "podLogsDir": str(node_dir / "pod-logs"),
        "containerRuntimeEndpoint": f"unix://{node_dir}/containerd.sock",
        "imageServiceEndpoint": f"unix://{node_dir}/containerd.sock",
        # Images are imported, never pulled: none is ever collected.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # The disk is shared with the rest of the machine: evict only when it is nearly full.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "nodeStatusUpdateFrequency": "5s",
        "nodeStatusReportFrequency": "10s",
        "nodeLeaseDurationSeconds": NODE_LEASE_S,
        "serializeImagePulls": False,
        # No rotation (a kept log is a hard link to the one file: keep_logs).
        "containerLogMaxSize": "1Gi",
        "registerNode": True,
        "maxPods": net.subnet.num_addresses - 3,
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
    }


def kube_proxy_config(*, net: NodeNet, node_name: str, kubeconfig: Path) -> dict[str, object]:
    """kube-proxy in iptables mode in the Node's namespace. The conntrack table sizes are
    global kernel settings: 0 leaves them as they are."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "bindAddress": str(net.ip),
        "clusterCIDR": str(POD_RANGE),
        "metricsBindAddress": f"127.0.0.1:{KUBE_PROXY_METRICS_PORT}",
        "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"masqueradeAll": True},
    }


# ---------------------------------------------------------------- processes and namespaces


def run(*argv: str) -> str:
    """A fixed command (no shell); its stderr in the error when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def nsenter(holder_pid: int, *, mount: bool = True) -> list[str]:
    """The command prefix that enters a Node's namespaces (network, and mount unless told)."""
    argv = ["nsenter", f"--net=/proc/{holder_pid}/ns/net"]
    if mount:
        argv.append(f"--mount=/proc/{holder_pid}/ns/mnt")
    return argv


def wait_namespaces(pid: int, seconds: float = 10.0) -> None:
    """Until the holder runs in namespaces of its own (unshare has done its part)."""
    deadline = time.monotonic() + seconds
    mine = os.readlink("/proc/self/ns/net")
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != mine and "sleep" in Path(f"/proc/{pid}/comm").read_text():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the Node's namespace holder (pid {pid}) did not start")


def setup_mounts(holder: int, node_dir: Path) -> None:
    """In the Node's mount namespace: tmpfs on /run and /var/log, and the kernel settings the
    kubelet writes as files of the Node's own."""
    enter = nsenter(holder)
    for where in ("/run", "/var/log"):
        run(*enter, "mount", "-t", "tmpfs", "-o", "mode=0755,size=64m", "tmpfs", where)
    tunables = node_dir / "sysctl"
    for name in KERNEL_TUNABLES:
        src = Path("/proc/sys") / name
        copy = tunables / name.replace("/", ".")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(src.read_text())
        run(*enter, "mount", "--bind", str(copy), str(src))


def setup_network(holder: int, net: NodeNet, bridge: str) -> None:
    """The Node's link on the pod bridge, its address, proxy ARP for its pods' /28."""
    pid = str(holder)
    run("ip", "link", "add", net.host_link, "type", "veth", "peer", "name", "eth0", "netns", pid)
    run("ip", "link", "set", net.host_link, "master", bridge, "up")
    enter = nsenter(holder, mount=False)
    for args in (
        ("link", "set", "lo", "up"),
        ("addr", "add", net.ip_cidr, "dev", "eth0"),
        ("link", "set", "eth0", "up"),
    ):
        run(*enter, "ip", *args)
    # Network settings of the Node's own namespace (not the host's): it routes between its pods'
    # bridge and eth0 and answers ARP on eth0 for its pods at once.
    for key, value in (
        ("net/ipv4/ip_forward", "1"),
        ("net/ipv4/conf/all/rp_filter", "0"),
        ("net/ipv4/conf/default/rp_filter", "0"),
        ("net/ipv4/conf/eth0/rp_filter", "0"),
        ("net/ipv4/conf/eth0/proxy_arp", "1"),
        ("net/ipv4/neigh/eth0/proxy_delay", "0"),
        ("net/ipv6/conf/all/disable_ipv6", "1"),
    ):
        run(*enter, "sh", "-c", 'echo "$1" > "$2"', "sysctl", value, f"/proc/sys/{key}")


def make_cgroups(cgroup_root: str) -> list[str]:
    """The Node's cgroup at `cgroup_root` in each v1 hierarchy; a new cpuset gets its parent's CPUs
    and memory nodes (it takes no task without). Returns every folder made, outermost first (a
    hierarchy where this process sits higher up gets the intermediate ones too): `down` removes
    exactly these."""
    made = []
    for h in CGROUP_HIERARCHIES:
        d = CGROUP_ROOT / h
        if not d.is_dir():
            continue
        for part in Path(cgroup_root.lstrip("/")).parts:
            d = d / part
            if d.is_dir():
                continue
            d.mkdir()
            made.append(str(d))
            if h == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((d.parent / f).read_text())
    return made


def cgroup_pids(cgroup_root: str) -> list[int]:
    """Every process in the Node's cgroups (the memory hierarchy holds them all)."""
    top = CGROUP_ROOT / "memory" / cgroup_root.lstrip("/")
    pids: set[int] = set()
    for procs in top.rglob("cgroup.procs") if top.is_dir() else []:
        try:
            pids.update(int(p) for p in procs.read_text().split())
        except OSError:
            continue
    return sorted(pids)


def thaw(cgroup_root: str) -> int:
    """THAWED in every freezer cgroup under cgroup_root that is not (a frozen process takes a
    SIGKILL only once thawed); how many were frozen."""
    thawed = 0
    for state in sorted((CGROUP_ROOT / "freezer" / cgroup_root.lstrip("/")).rglob("freezer.state")):
        try:
            if state.read_text().strip() != "THAWED":
                state.write_text("THAWED")
                thawed += 1
        except OSError:  # removed meanwhile
            continue
    return thawed


def remove_cgroups(cgroup_root: str, made: Sequence[str], seconds: float = 15.0) -> list[str]:
    """Kill what is left in the Node's cgroups, then remove them deepest first in every hierarchy
    (the kubelet's own below `cgroup_root`, then the folders `make_cgroups` made). Returns what
    was removed."""
    deadline = time.monotonic() + seconds
    while (pids := cgroup_pids(cgroup_root)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    below = []
    for h in CGROUP_HIERARCHIES:
        top = CGROUP_ROOT / h / cgroup_root.lstrip("/")
        if top.is_dir():
            below += [p for p in top.rglob("*") if p.is_dir()]
    removed = []
    for d in sorted({*below, *map(Path, made)}, key=lambda p: len(p.parts), reverse=True):
        if _rmdir(d, deadline):
            removed.append(str(d))
    return removed


def _rmdir(d: Path, deadline: float) -> bool:
    while True:
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return False
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def host_links() -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(HOST_LINK_PREFIX))


def keep_logs(nodes: Path, kept: Path, interval: float = 0.2) -> None:
    """Keep every container log of the Nodes' kubelets: a kubelet removes a pod's logs with the pod
    (a job's replaced pods, a deleted one), so each new log file under
    nodes/<node>/pod-logs/<ns>_<pod>_<uid>/<container>/ gets a hard link at the same place under
    `kept` as soon as it is seen (the runtime keeps writing the same file, so the link has it all).
    Runs until killed (`cluster.py down`), as a cluster's logging agent would."""
    while True:
        for log in nodes.glob("*/pod-logs/*/*/*.log"):
            link = kept / log.parent.parent.name / log.parent.name / log.name
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(log, link)
                except FileNotFoundError:
                    continue  # removed between the glob and the link
        time.sleep(interval)


def main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "keep-logs":
        keep_logs(Path(argv[1]), Path(argv[2]))
    print("usage: realnode.py keep-logs NODES_DIR KEPT_DIR", file=sys.stderr)
    return 2


def write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
