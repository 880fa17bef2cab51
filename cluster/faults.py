"""Faults on the real Nodes (test equipment): what no real component does, done with the kernel's
and the Nodes' own mechanisms, for the cluster tests and the chaos harness.

    python faults.py CLUSTER_DIR
    python faults.py netem VETH BRIDGE TAP DELAY_MS LOSS SEED COUNTS   (in a Node's network namespace)
    python faults.py offload-off IFNAME                                (in a pod's network namespace)

cluster.py starts it (`up`) as the component `faults`. It serves CONTROL_SOCKET in CLUSTER_DIR
(mode 0600: root only): one JSON request per line, one JSON answer per line (`{"ok": true, ...}`
or `{"ok": false, "error": "<field>: <rule>"}`; cluster.fault_request sends one). Every fault it
injects and heals goes to FAULT_LOG (JSON lines, host times). It never decides what a real
component would: the kubelet, the node lifecycle controller, the taint eviction and pod garbage
collectors, the operator and the scheduler decide what follows.

Requests (`op` and its fields):

- ``kill`` namespace, pod, signal (a number or a name such as ``SIGKILL``; default SIGKILL),
  ``pid`` (the PID inside the pod's container, as the process sees it) or else the container's
  PID 1; ``container`` (default: the pod's first). The process is found through the container's
  cgroup (the kubelet's cgroupRoot under CLUSTER_DIR's `cgroup_parent`) and its NSpid.
- ``partition`` namespace, pod, seconds: every packet to and from the pod dropped by a DROP rule
  at the top of INPUT and OUTPUT in the pod's own network namespace (loopback spared; no RST, no
  ICMP); removed after `seconds`. ``heal`` namespace, pod: at once.
- ``freeze`` namespace, pod / ``thaw`` namespace, pod: the pod's cgroup in the v1 freezer
  hierarchy FROZEN / THAWED (its processes stop where they are, as a hung machine's would; the
  kubelet still reports them running).
- ``lose-node`` node: the Node's kubelet, containerd and kube-proxy stopped (SIGSTOP), its pods
  frozen (the freezer), and every packet of its network namespace dropped (INPUT, OUTPUT and
  FORWARD, loopback spared). ``restore-node`` node: the Node comes back rebooted: its pods'
  processes killed, the rules removed, its components continued (SIGCONT); the kubelet then finds
  its containers gone and acts on each pod as its spec and the API say.
- ``pods``: the pods on the real Nodes (namespace, name, uid, node, ip).

It also keeps LIFECYCLE_LOG, the log of container starts and exits, from the real runtime: each Node's containerd event stream (`ctr events`: /tasks/start, /tasks/exit with the
exit status and exact time, and /tasks/oom: the kernel's OOM killer killed a process of the
container's memory cgroup, its PID 1 or another, as event `oom`), each container named by its
CRI labels (namespace, pod, uid, container) and restart count; an exit's `killed_by` is `fault` (a `kill` of its PID 1),
`node-lost` (a `restore-node`'s reboot) or `deletion` (the pod's deletion seen before the exit,
by a watch of every pod), else null (it ended by itself).

- ``withhold-ready`` namespace, pod, seconds, next (bool): a pod that carries the readiness gate
  READY_GATE (`with_ready_gate`: the tests and the harness add it to the pods they mean) is Ready
  only once its gate's condition is True, which this component sets on every such pod as soon as
  its container runs, but on the one withheld: `seconds` after its container started (``next``:
  the next incarnation of that name, not the current one). Meanwhile the kubelet reports the pod
  not Ready, the EndpointSlice controller lists no ready address for it, and CoreDNS answers
  NXDOMAIN for its headless Service.
- ``hold-start`` namespace, pod / ``release`` namespace, pod: a pod that carries the init
  container HOLD_INIT (`with_hold`) waits in it while the file HOLDS/<namespace>_<pod> exists in
  CLUSTER_DIR (its main containers not started: `PodInitializing`, as behind a slow start);
  ``hold-start`` makes the file (before the pod is made), ``release`` removes it.

- ``degrade`` namespace, loss (0..1), delay_ms, seed: every pod of the namespace, those started
  later too (within DEGRADE_POLL_S of running), sends through a degraded link: this kernel has no
  `sch_netem`, so a Forwarder (`faults.py netem`, in the pod's Node's network namespace) takes the
  pod's veth off the Node's bridge and carries each frame the pod sends to a tap on the bridge
  `delay_ms` later, dropping a `loss` share (drawn from the seed, the pod's name and UID), as `tc
  netem` on the pod's eth0 would; offloads off in the pod (`faults.py offload-off`), so that a
  frame is a packet. ``off: true`` ends it: the veth back on the bridge, each pod's counts logged.
"""

from __future__ import annotations

import array
import base64
import calendar
import contextlib
import fcntl
import heapq
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CONTROL_SOCKET = "faults.sock"
FAULT_LOG = "faults.jsonl"
#: In CLUSTER_DIR: every container start and exit on the real Nodes, from containerd's own events
#: (exact times, exit codes; `killed_by`: fault, node-lost or deletion when that is what killed it).
LIFECYCLE_LOG = "lifecycle.jsonl"
#: A task event as `ctr events` prints it: its time (UTC), containerd namespace, topic and body.
EVENT_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \+0000 UTC (\S+) (/tasks/(?:start|exit|oom)) (\{.*\})$"
)
#: An exit this soon after its pod's deletion was first seen (or later) is the deletion's doing.
DELETION_SLACK_S = 0.05
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The readiness gate `withhold-ready` holds (a pod condition type of the tests' own domain).
READY_GATE = "faults.elastic-idl.dev/ready"
#: In CLUSTER_DIR: one file per held pod (`hold-start`), mounted read-only into pods with HOLD_INIT.
HOLDS = "holds"
HOLD_INIT = "faults-hold"
HOLD_MOUNT = "/elastic-idl-holds"
#: How often the readiness gates are looked at, and the pods of a degraded namespace.
GATE_POLL_S = 0.25
DEGRADE_POLL_S = 0.25
#: In CLUSTER_DIR: the degraded links' counts and logs (`degrade`).
NETEM = "netem"
#: The Node's processes `lose-node` stops (the names of their pid files, after the Node's name).
NODE_COMPONENTS = ("kubelet", "containerd", "kube-proxy")
#: The rules of a partition and of a lost Node: every packet but loopback's dropped.
DROP_RULES = (("INPUT", "-i"), ("OUTPUT", "-o"))
NODE_DROP_RULES = (*DROP_RULES, ("FORWARD", "-i"))


class FaultError(Exception):
    """A request refused: `<field>: <rule>` or what is missing."""


def require_str(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str) or not value:
        raise FaultError(f"{key}: a non-empty string is required, not {value!r}")
    return value


def require_number(req: dict[str, Any], key: str, low: float, high: float) -> float:
    value = req.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise FaultError(f"{key}: a number in {low:g}..{high:g} is required, not {value!r}")
    return float(value)


def require_signal(req: dict[str, Any]) -> signal.Signals:
    """The request's `signal` (a number or a name such as SIGKILL; default SIGKILL)."""
    value = req.get("signal", "SIGKILL")
    try:
        return signal.Signals[value] if isinstance(value, str) else signal.Signals(value)
    except (KeyError, ValueError):
        raise FaultError(f"signal: {value!r} is not a signal") from None


# ---------------------------------------------------------------- the API server


class Api:
    """A client of the API server with the admin's certificate (one connection per call)."""

    def __init__(self, folder: Path) -> None:
        state = json.loads((folder / "cluster.json").read_text())
        url = urllib.parse.urlsplit(str(state["api"]))
        self.host, self.port = str(url.hostname), int(url.port or 443)
        self.ctx = ssl.create_default_context(cafile=str(folder / "pki" / "ca.crt"))
        self.ctx.load_cert_chain(str(folder / "pki" / "admin.crt"), str(folder / "pki" / "admin.key"))

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> dict[str, Any]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        out = json.loads(raw) if raw else {}
        if resp.status == 404:
            raise LookupError(path)
        if resp.status >= 300:
            raise RuntimeError(f"API {method} {path}: {resp.status} {out.get('message', '')}")
        return dict(out)

    def watch(self, path: str) -> Iterator[dict[str, Any]]:
        """The events of one watch request (it ends after its timeoutSeconds; the caller watches again)."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=120)
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"API watch {path}: {resp.status}")
            while line := resp.readline():
                yield json.loads(line)
        finally:
            conn.close()


# ---------------------------------------------------------------- processes, cgroups, namespaces


def ns_pids(pid: int) -> list[int]:
    """The process's PIDs from the host's namespace to its innermost (NSpid)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(x) for x in line.split()[1:]]
    return [pid]


def cgroup_procs(folder: Path) -> list[int]:
    """Every process in the cgroup folder and those below it."""
    pids = []
    for procs in sorted(folder.rglob("cgroup.procs")):
        try:
            pids += [int(x) for x in procs.read_text().split()]
        except OSError:  # removed meanwhile
            continue
    return pids


def run(*argv: str) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    if r.returncode != 0:
        raise FaultError(f"{' '.join(argv[:6])}: {(r.stderr or r.stdout).strip() or f'exit {r.returncode}'}")
    return r.stdout


def in_netns(pid: int, *argv: str) -> str:
    """A command in the network namespace of process pid (nsenter: /sys stays the host's)."""
    return run("nsenter", f"--net=/proc/{pid}/ns/net", *argv)


def drop_rules(pid: int, rules: tuple[tuple[str, str], ...], add: bool) -> None:
    """DROP every packet but loopback's, at the top of each chain, in pid's network namespace."""
    for chain, side in rules:
        in_netns(
            pid, "iptables", "-w", "-I" if add else "-D", chain, *(["1"] if add else []), "!", side, "lo", "-j", "DROP"
        )


# ---------------------------------------------------------------- a degraded link

#: Linux constants of the forwarder: a tap device (linux/if_tun.h), a raw packet socket, and the
#: ethtool offloads (linux/ethtool.h) turned off in a degraded pod.
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # a frame this host sent (a raw socket sees its own sends)
MAX_FRAME = 65535
SIOCETHTOOL = 0x8946
ETHTOOL_OFFLOADS = {"tx": 0x17, "sg": 0x19, "tso": 0x1F, "gso": 0x24, "gro": 0x2C}


def struct_ifreq(name: str, flags: int) -> bytes:
    """struct ifreq with a name and the flags short (TUNSETIFF)."""
    return name.encode().ljust(16, b"\0") + flags.to_bytes(2, sys.byteorder) + b"\0" * 22


def offload_off(ifname: str) -> None:
    """Segmentation, scatter-gather, receive coalescing and transmit checksum offload off on ifname
    (the SIOCETHTOOL ioctl, as `ethtool -K IFNAME tx off sg off tso off gso off gro off` would), in
    this process's network namespace: each frame sent is one whole packet with its checksum, what a
    Forwarder carries."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for cmd in ETHTOOL_OFFLOADS.values():
            value = array.array("I", [cmd, 0])  # struct ethtool_value {cmd, data = 0}
            addr, _ = value.buffer_info()
            ifreq = ifname.encode().ljust(16, b"\0") + addr.to_bytes(8, sys.byteorder) + b"\0" * 16
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)


class Forwarder(threading.Thread):
    """A degraded link for one pod, where this kernel has no `tc netem`: the pod's veth (its
    host side) is off the bridge, and this forwarder carries each frame the pod sends to a tap on
    the bridge after `delay_ms`, dropping a `loss` fraction of them (drawn from `seed`); frames to
    the pod pass at once. netem on the pod's eth0 egress does the same. Runs in the network
    namespace of the veth and the bridge; the tap goes with its file. `stop` calls on_stop with the
    counts (from_pod, dropped, to_pod)."""

    def __init__(
        self, veth: str, bridge: str, tap_name: str, delay_ms: float, loss: float, seed: str,
        on_stop: Callable[[dict[str, int]], None],
    ) -> None:  # fmt: skip
        super().__init__(name=f"netem-{veth}", daemon=True)
        self.delay = delay_ms / 1000.0
        self.loss = loss
        self.rng = random.Random(seed)
        self.tap_name = tap_name
        self.veth = veth
        self.on_stop = on_stop
        self.stopping = threading.Event()
        self.queue: list[tuple[float, int, bytes]] = []
        self.cv = threading.Condition()
        self.counts = {"from_pod": 0, "dropped": 0, "to_pod": 0}
        run("ip", "link", "set", self.veth, "arp", "off", "up")
        Path(f"/proc/sys/net/ipv6/conf/{self.veth}/disable_ipv6").write_text("1\n")
        self.tap = os.open("/dev/net/tun", os.O_RDWR)
        try:
            fcntl.ioctl(self.tap, TUNSETIFF, struct_ifreq(self.tap_name, IFF_TAP | IFF_NO_PI))
            Path(f"/proc/sys/net/ipv6/conf/{self.tap_name}/disable_ipv6").write_text("1\n")
            run("ip", "link", "set", self.tap_name, "master", bridge, "up")
            self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.raw.bind((self.veth, ETH_P_ALL))
        except BaseException:
            os.close(self.tap)
            raise
        self.start()
        for target in (self.from_pod, self.to_pod):
            threading.Thread(target=target, name=f"{self.name}-{target.__name__}", daemon=True).start()

    def from_pod(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select([self.raw], [], [], 0.2)
            if not ready:
                continue
            try:
                frame, addr = self.raw.recvfrom(MAX_FRAME)
            except OSError:
                return  # the veth is gone with the pod
            if addr[2] == PACKET_OUTGOING:
                continue
            self.counts["from_pod"] += 1
            if self.rng.random() < self.loss:
                self.counts["dropped"] += 1
                continue
            with self.cv:
                heapq.heappush(self.queue, (time.monotonic() + self.delay, self.counts["from_pod"], frame))
                self.cv.notify()

    def run(self) -> None:  # the sender: each frame to the bridge when its delay is up
        while not self.stopping.is_set():
            with self.cv:
                while not self.stopping.is_set() and (not self.queue or self.queue[0][0] > time.monotonic()):
                    self.cv.wait(0.2 if not self.queue else max(0.0, self.queue[0][0] - time.monotonic()))
                if self.stopping.is_set():
                    return
                _, _, frame = heapq.heappop(self.queue)
            with contextlib.suppress(OSError):
                os.write(self.tap, frame)

    def to_pod(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select([self.tap], [], [], 0.2)
            if not ready:
                continue
            try:
                frame = os.read(self.tap, MAX_FRAME)
                self.raw.send(frame)
                self.counts["to_pod"] += 1
            except OSError:
                if self.stopping.is_set():
                    return

    def stop(self) -> None:
        with self.cv:
            if self.stopping.is_set():  # stopped already (the pod's end and the agent's may both ask)
                return
            self.stopping.set()
            self.cv.notify_all()
        self.join(2)
        time.sleep(0.3)  # the readers see the flag within their select timeout
        self.raw.close()
        with contextlib.suppress(OSError):
            os.close(self.tap)
        self.on_stop(dict(self.counts))


def netem_main(veth: str, bridge: str, tap: str, delay_ms: float, loss: float, seed: str, counts: Path) -> int:
    """`faults.py netem ...`, in a real Node's network namespace: the pod's veth taken off the
    bridge and a Forwarder in its place until SIGTERM or the veth goes; then the veth back on the
    bridge (if it is still there) and the counts written to `counts` (JSON)."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def write(c: dict[str, int]) -> None:
        counts.write_text(json.dumps(c))

    fwd = Forwarder(veth, bridge, tap, delay_ms, loss, seed, write)
    run("ip", "link", "set", veth, "nomaster")
    print(f"forwarding {veth} <-> {tap} on {bridge}", flush=True)
    while not done.wait(0.5):
        try:
            socket.if_nametoindex(veth)
        except OSError:
            break  # the pod's namespace is gone, and its veth with it
    fwd.stop()
    with contextlib.suppress(FaultError):
        run("ip", "link", "set", veth, "master", bridge, "arp", "on")
    return 0


# ---------------------------------------------------------------- what pods carry (pure)


def with_ready_gate(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec with READY_GATE among its readiness gates (in place; returned)."""
    gates = pod_spec.setdefault("readinessGates", [])
    if {"conditionType": READY_GATE} not in gates:
        gates.append({"conditionType": READY_GATE})
    return pod_spec


def with_hold(pod_spec: dict[str, Any], cluster_dir: Path, image: str) -> dict[str, Any]:
    """The pod spec with HOLD_INIT first among its init containers (in place; returned): it waits
    while CLUSTER_DIR/HOLDS/<namespace>_<pod> exists (the base image's dash and sleep)."""
    env = [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    wait = f'while [ -e "{HOLD_MOUNT}/${{POD_NAMESPACE}}_${{POD_NAME}}" ]; do sleep 0.2; done'
    init = {
        "name": HOLD_INIT,
        "image": image,
        "command": ["/bin/sh", "-c", wait],
        "env": env,
        "volumeMounts": [{"name": HOLD_INIT, "mountPath": HOLD_MOUNT, "readOnly": True}],
    }
    pod_spec["initContainers"] = [init, *pod_spec.get("initContainers", [])]
    volume = {"name": HOLD_INIT, "hostPath": {"path": str(cluster_dir / HOLDS), "type": "DirectoryOrCreate"}}
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), volume]
    return pod_spec


def event_time(text: str) -> float:
    """`ctr events`' time (UTC, nanoseconds) as seconds since the epoch."""
    whole, _, frac = text.partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%d %H:%M:%S")) + float(f"0.{frac or 0}")


def parse_event(line: str) -> tuple[float, str, str, dict[str, Any]] | None:
    """A task start, exit or OOM line of `ctr events`: (time, namespace, start|exit|oom, body); else None."""
    m = EVENT_LINE.match(line.strip())
    if not m:
        return None
    body = json.loads(m.group(4))
    if m.group(3) == "/tasks/exit":
        at = body.get("exited_at") or {}
        t = float(at.get("seconds", 0)) + float(at.get("nanos", 0)) / 1e9 if at else event_time(m.group(1))
        return t, m.group(2), "exit", body
    return event_time(m.group(1)), m.group(2), m.group(3).rsplit("/", 1)[1], body


def cri_attempt(info: dict[str, Any]) -> int | None:
    """The kubelet's attempt (restart count) of a container, from containerd's CRI metadata in
    `ctr containers info` (base64 JSON whose Metadata.Name ends in `_<attempt>`)."""
    ext = (info.get("Extensions") or {}).get("io.cri-containerd.container.metadata") or {}
    try:
        meta = json.loads(base64.b64decode(ext.get("value", "")))
        return int(str(meta["Metadata"]["Name"]).rsplit("_", 1)[1])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _running_since(pod: dict[str, Any]) -> float | None:
    """When the pod's first container started running (host time), or None."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        started = status.get("state", {}).get("running", {}).get("startedAt")
        if started:
            return float(calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ")))
    return None


def _gate_open(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == READY_GATE and c.get("status") == "True" for c in conditions)


# ---------------------------------------------------------------- the faults


class Faults:
    def __init__(self, folder: Path) -> None:
        self.dir = folder
        state = json.loads((folder / "cluster.json").read_text())
        self.nodes: list[str] = [str(n) for n in state["nodes"]]
        self.cgroup_parent = str(state["cgroup_parent"])
        self.api = Api(folder)
        self.log_path = folder / FAULT_LOG
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()  # the log's own: a record may be written under self.lock
        self.lost: set[str] = set()
        self.partitions: dict[str, threading.Timer] = {}
        self.withheld: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, pod) -> seconds, not_uid, uid
        self.degraded: dict[str, dict[str, Any]] = {}
        self.netem: dict[str, dict[str, Any]] = {}  # pod uid -> its ids, the forwarder's process, counts file
        (folder / NETEM).mkdir(exist_ok=True)
        threading.Thread(target=self._degrade_loop, name="degrade", daemon=True).start()
        (folder / HOLDS).mkdir(exist_ok=True)
        self.node_bin = Path(str(state["node_bin"]))
        self.containers: dict[str, dict[str, Any]] = {}  # containerd id -> the pod's ids, container, restart
        self.killed: dict[str, str] = {}  # containerd id -> why this component killed it
        self.deleting: dict[str, float] = {}  # pod uid -> when its deletion was first seen
        self.lifecycle_lock = threading.Lock()
        threading.Thread(target=self._watch_deletions, name="deletions", daemon=True).start()
        for node in self.nodes:
            threading.Thread(target=self._lifecycle, args=(node,), name=f"events-{node}", daemon=True).start()
        threading.Thread(target=self._gates, name="gates", daemon=True).start()

    def log(self, what: str, **fields: Any) -> None:
        record = {"t": time.time(), "fault": what, **fields}
        with self.log_lock, self.log_path.open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")

    # -- the lifecycle log

    def _record(self, **fields: Any) -> None:
        with self.lifecycle_lock, (self.dir / LIFECYCLE_LOG).open("a") as fh:
            fh.write(json.dumps(fields, sort_keys=True) + "\n")

    def _ctr(self, node: str) -> list[str]:
        return [str(self.node_bin / "ctr"), "--address", str(self.dir / "nodes" / node / "containerd.sock")]

    def _container(self, node: str, cid: str) -> dict[str, Any] | None:
        """The pod and container of a containerd container (its CRI labels); None for a sandbox."""
        if cid in self.containers:
            return self.containers[cid]
        r = subprocess.run([*self._ctr(node), "-n", "k8s.io", "containers", "info", cid],
                           capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
        if r.returncode != 0:
            return None
        info = json.loads(r.stdout)
        labels = info.get("Labels") or {}
        if labels.get("io.cri-containerd.kind") != "container":
            return None
        restart = cri_attempt(info)
        found = {
            "ns": labels.get("io.kubernetes.pod.namespace"),
            "pod": labels.get("io.kubernetes.pod.name"),
            "uid": labels.get("io.kubernetes.pod.uid"),
            "container": labels.get("io.kubernetes.container.name"),
            "node": node,
            "restart": restart,
        }
        self.containers[cid] = found
        return found

    def _lifecycle(self, node: str) -> None:
        """Each container start and exit on the Node, from containerd's event stream."""
        while True:
            try:
                proc = subprocess.Popen([*self._ctr(node), "events"], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)  # fmt: skip
            except OSError:
                time.sleep(1)
                continue
            assert proc.stdout is not None
            for line in proc.stdout:
                event = parse_event(line)
                if event is None or event[1] != "k8s.io":
                    continue
                t, _, kind, body = event
                cid = str(body.get("container_id", ""))
                found = self._container(node, cid)
                if found is None:
                    continue
                if kind == "start":
                    self._record(t=t, event="start", **found, host_pid=body.get("pid"))
                    continue
                if kind == "oom":  # the kernel's OOM killer killed a process of the container's cgroup
                    self._record(t=t, event="oom", **found)
                    continue
                why = self.killed.pop(cid, None)
                deleting = self.deleting.get(str(found["uid"]))
                if why is None and deleting is not None and deleting <= t + DELETION_SLACK_S:
                    why = "deletion"
                # (protobuf's JSON leaves a zero out: no exit_status is exit 0)
                self._record(t=t, event="exit", **found, code=int(body.get("exit_status", 0)), killed_by=why)
            proc.wait()
            time.sleep(1)  # containerd went (down, or a restart): listen again

    def _watch_deletions(self) -> None:
        """When each pod's deletion was first seen (its deletionTimestamp, or its removal)."""
        while True:
            try:
                listed = self.api.call("GET", "/api/v1/pods")
                version = listed["metadata"]["resourceVersion"]
                for pod in listed["items"]:
                    if pod["metadata"].get("deletionTimestamp"):
                        self.deleting.setdefault(pod["metadata"]["uid"], time.time())
                for ev in self.api.watch(f"/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds=300"):
                    meta = ev.get("object", {}).get("metadata", {})
                    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                        self.deleting.setdefault(str(meta.get("uid")), time.time())
            except (OSError, RuntimeError, LookupError, ValueError, KeyError, http.client.HTTPException):
                time.sleep(1)

    # -- requests

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "ping": lambda r: {},
            "pods": self.op_pods,
            "kill": self.op_kill,
            "partition": self.op_partition,
            "heal": self.op_heal,
            "degrade": self.op_degrade,
            "freeze": self.op_freeze,
            "thaw": self.op_thaw,
            "lose-node": self.op_lose_node,
            "restore-node": self.op_restore_node,
            "withhold-ready": self.op_withhold,
            "hold-start": self.op_hold,
            "release": self.op_release,
        }
        op = req.get("op")
        if op not in handlers:
            raise FaultError(f"op: {op!r} is not one of {', '.join(sorted(handlers))}")
        return handlers[str(op)](req)

    _str = staticmethod(require_str)
    _number = staticmethod(require_number)

    def _node(self, req: dict[str, Any]) -> str:
        name = self._str(req, "node")
        if name not in self.nodes:
            raise FaultError(f"node: {name!r} is not one of this cluster's Nodes ({', '.join(self.nodes)})")
        return name

    def _pod(self, req: dict[str, Any]) -> dict[str, Any]:
        """The pod the request names, running on a real Node."""
        ns, name = self._str(req, "namespace"), self._str(req, "pod")
        try:
            pod = self.api.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        except LookupError:
            raise FaultError(f"pod {ns}/{name}: no such pod") from None
        if pod.get("spec", {}).get("nodeName") not in self.nodes or not self._pod_cgroup(pod, "freezer"):
            raise FaultError(f"pod {ns}/{name}: not running on a Node of this cluster")
        return pod

    def _pod_cgroup(self, pod: dict[str, Any], hierarchy: str) -> Path | None:
        """The pod's cgroup folder in a v1 hierarchy (cgroupfs: kubepods[/<qos>]/pod<uid>)."""
        kubepods = self._kubepods(str(pod["spec"]["nodeName"]), hierarchy)
        name = f"pod{pod['metadata']['uid']}"
        for folder in (kubepods / name, *(kubepods / qos / name for qos in ("burstable", "besteffort"))):
            if folder.is_dir():
                return folder
        return None

    def _container_cgroup(self, pod: dict[str, Any], req: dict[str, Any]) -> tuple[str, Path]:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        wanted = req.get("container")
        for status in statuses:
            if wanted in (None, status["name"]) and status.get("containerID") and "running" in status.get("state", {}):
                folder = self._pod_cgroup(pod, "memory")
                cid = status["containerID"].split("://", 1)[-1]
                if folder is not None and (folder / cid).is_dir():
                    return status["name"], folder / cid
        which = f"container {wanted!r}" if wanted else "its container"
        raise FaultError(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: {which} is not running")

    def _a_pid(self, pod: dict[str, Any]) -> int:
        """A process of the pod (its sandbox's or a container's): its network namespace is the pod's."""
        folder = self._pod_cgroup(pod, "memory")
        pids = cgroup_procs(folder) if folder else []
        if not pids:
            raise FaultError(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: no process")
        return pids[0]

    @staticmethod
    def _ids(pod: dict[str, Any]) -> dict[str, str]:
        meta = pod["metadata"]
        return {"ns": meta["namespace"], "pod": meta["name"], "uid": meta["uid"], "node": pod["spec"]["nodeName"]}

    def op_pods(self, req: dict[str, Any]) -> dict[str, Any]:
        items = self.api.call("GET", "/api/v1/pods")["items"]
        return {
            "pods": [
                {**self._ids(p), "namespace": p["metadata"]["namespace"], "ip": p.get("status", {}).get("podIP")}
                for p in items
                if p.get("spec", {}).get("nodeName") in self.nodes
            ]
        }

    def op_kill(self, req: dict[str, Any]) -> dict[str, Any]:
        sig = require_signal(req)
        want = int(self._number(req, "pid", 1, 2**22)) if "pid" in req else 1
        pod = self._pod(req)
        container, folder = self._container_cgroup(pod, req)
        for host in cgroup_procs(folder):
            try:
                inner = ns_pids(host)[-1]
            except OSError:
                continue
            if inner == want:
                if want == 1:
                    self.killed[folder.name] = "fault"
                os.kill(host, sig)
                self.log("kill", **self._ids(pod), container=container, signal=sig.name, pid=want, host_pid=host)
                return {"uid": pod["metadata"]["uid"], "host_pid": host}
        raise FaultError(f"pid: no process {want} in pod {pod['metadata']['namespace']}/{pod['metadata']['name']}")

    def op_partition(self, req: dict[str, Any]) -> dict[str, Any]:
        seconds = self._number(req, "seconds", 0.1, 3600)
        pod = self._pod(req)
        ids, pid = self._ids(pod), self._a_pid(pod)
        if ids["uid"] in self.partitions:
            raise FaultError(f"pod {ids['ns']}/{ids['pod']}: partitioned already")
        drop_rules(pid, DROP_RULES, add=True)
        until = time.time() + seconds
        self.log("partition", **ids, seconds=seconds)
        timer = threading.Timer(seconds, self._heal, (ids, pid, "partition healed"))
        timer.daemon = True
        self.partitions[ids["uid"]] = timer
        timer.start()
        return {"uid": ids["uid"], "until": until}

    def _heal(self, ids: dict[str, str], pid: int, what: str) -> None:
        self.partitions.pop(ids["uid"], None)
        try:
            drop_rules(pid, DROP_RULES, add=False)
            self.log(what, **ids)
        except FaultError as e:  # the pod (and its namespace) went meanwhile
            self.log("partition ended with the pod", **ids, error=str(e))

    def op_heal(self, req: dict[str, Any]) -> dict[str, Any]:
        pod = self._pod(req)
        ids = self._ids(pod)
        timer = self.partitions.get(ids["uid"])
        if timer is None:
            raise FaultError(f"pod {ids['ns']}/{ids['pod']}: not partitioned")
        timer.cancel()
        self._heal(ids, self._a_pid(pod), "heal")
        return {"uid": ids["uid"]}

    def op_degrade(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = self._str(req, "namespace")
        if req.get("off"):
            with self.lock:
                self.degraded.pop(ns, None)
                ours = [uid for uid, e in self.netem.items() if e["ns"] == ns]
            for uid in ours:
                self._netem_stop(uid)
            self.log("degrade off", ns=ns)
            return {}
        params = {
            "loss": self._number(req, "loss", 0, 1),
            "delay_ms": self._number(req, "delay_ms", 0, 10_000),
            "seed": int(self._number(req, "seed", -(2**63), 2**63)),
        }
        with self.lock:
            self.degraded[ns] = params
        self.log("degrade", ns=ns, **params)
        return {"applies_to": f"every pod of the namespace, within {DEGRADE_POLL_S:g} s of its address"}

    def _degrade_loop(self) -> None:
        while True:
            time.sleep(DEGRADE_POLL_S)
            with self.lock:
                degraded = dict(self.degraded)
                gone = [uid for uid, e in self.netem.items() if e["proc"].poll() is not None]
            for uid in gone:  # the pod went, and its veth with it: the forwarder has ended
                self._netem_stop(uid)
            for ns, params in degraded.items():
                try:
                    pods = self.api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
                except (OSError, RuntimeError, LookupError, http.client.HTTPException):
                    continue
                for pod in pods:
                    try:
                        self._netem_start(pod, params)
                    except (FaultError, OSError) as e:
                        self.log("netem not started", **self._ids(pod), error=str(e))

    def _netem_start(self, pod: dict[str, Any], params: dict[str, Any]) -> None:
        """A Forwarder for the pod (`faults.py netem` in its Node's network namespace)."""
        uid = pod["metadata"]["uid"]
        if uid in self.netem or not pod.get("status", {}).get("podIP") or pod["spec"].get("nodeName") not in self.nodes:
            return
        if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Running":
            return
        ids = self._ids(pod)
        pid = self._a_pid(pod)
        peer = re.search(r"@if(\d+)", in_netns(pid, "ip", "-o", "link", "show", "eth0"))
        holder = self._component(ids["node"], "ns")
        veth = next(
            (m.group(1) for line in in_netns(holder, "ip", "-o", "link").splitlines()
             if peer and (m := re.match(rf"{peer.group(1)}: ([^@:]+)[@:]", line))),
            None,
        )  # fmt: skip
        if veth is None:
            raise FaultError(f"pod {ids['ns']}/{ids['pod']}: no veth of its eth0 on {ids['node']}")
        in_netns(pid, sys.executable, __file__, "offload-off", "eth0")
        counts = self.dir / NETEM / f"{uid}.json"
        seed = f"{params['seed']}:{ids['ns']}/{ids['pod']}:{uid}"
        argv = ["nsenter", f"--net=/proc/{holder}/ns/net", sys.executable, __file__, "netem", veth, "cni0",
                f"ef{uid.replace('-', '')[:11]}", str(params["delay_ms"]), str(params["loss"]), seed, str(counts)]  # fmt: skip
        with (self.dir / NETEM / f"{uid}.log").open("ab") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        with self.lock:
            self.netem[uid] = {**ids, "proc": proc, "counts": counts}
        self.log("netem started", **ids, veth=veth, **params)

    def _netem_stop(self, uid: str) -> None:
        with self.lock:
            entry = self.netem.pop(uid, None)
        if entry is None:
            return
        proc: subprocess.Popen[bytes] = entry["proc"]
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        try:
            counts = json.loads(entry["counts"].read_text())
        except (OSError, ValueError):
            counts = {"error": f"no counts (the forwarder exited {proc.returncode})"}
        self.log("netem stopped", **{k: entry[k] for k in ("ns", "pod", "uid", "node")}, **counts)

    def _freezer(self, pod: dict[str, Any], state: str) -> dict[str, Any]:
        folder = self._pod_cgroup(pod, "freezer")
        assert folder is not None  # _pod checked
        (folder / "freezer.state").write_text(state)
        deadline = time.monotonic() + 10
        while (folder / "freezer.state").read_text().strip() != state:
            if time.monotonic() > deadline:
                raise FaultError(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: not {state} in 10 s")
            time.sleep(0.02)
        pids = cgroup_procs(folder)
        self.log(state.lower(), **self._ids(pod), pids=len(pids))
        return {"uid": pod["metadata"]["uid"], "pids": len(pids)}

    def op_freeze(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._freezer(self._pod(req), "FROZEN")

    def op_thaw(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._freezer(self._pod(req), "THAWED")

    def _component(self, node: str, name: str) -> int:
        pid_s, _ = (self.dir / "pids" / f"{node}-{name}.pid").read_text().split()
        return int(pid_s)

    def _kubepods(self, node: str, hierarchy: str) -> Path:
        return CGROUP_ROOT / hierarchy / self.cgroup_parent.lstrip("/") / node / "kubepods"

    def op_lose_node(self, req: dict[str, Any]) -> dict[str, Any]:
        node = self._node(req)
        if node in self.lost:
            raise FaultError(f"node: {node} is lost already")
        holder = self._component(node, "ns")
        drop_rules(holder, NODE_DROP_RULES, add=True)
        for name in NODE_COMPONENTS:
            os.kill(self._component(node, name), signal.SIGSTOP)
        kubepods = self._kubepods(node, "freezer")
        (kubepods / "freezer.state").write_text("FROZEN")
        self.lost.add(node)
        pids = len(cgroup_procs(kubepods))
        self.log("lose-node", node=node, pids=pids)
        return {"node": node, "pids": pids}

    def op_restore_node(self, req: dict[str, Any]) -> dict[str, Any]:
        node = self._node(req)
        if node not in self.lost:
            raise FaultError(f"node: {node} is not lost")
        kubepods = self._kubepods(node, "freezer")
        for folder in kubepods.rglob("*"):  # each container's cgroup: pod<uid>/<containerd id>
            if folder.is_dir() and folder.parent.name.startswith("pod") and len(folder.name) == 64:
                self.killed[folder.name] = "node-lost"
        pids = cgroup_procs(kubepods)
        for pid in pids:  # the reboot: delivered as the freezer thaws them
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        (kubepods / "freezer.state").write_text("THAWED")
        drop_rules(self._component(node, "ns"), NODE_DROP_RULES, add=False)
        for name in reversed(NODE_COMPONENTS):
            os.kill(self._component(node, name), signal.SIGCONT)
        self.lost.discard(node)
        self.log("restore-node", node=node, killed=len(pids))
        return {"node": node, "killed": len(pids)}

    def op_withhold(self, req: dict[str, Any]) -> dict[str, Any]:
        ns, name = self._str(req, "namespace"), self._str(req, "pod")
        seconds = self._number(req, "seconds", 0.1, 3600)
        not_uid = None
        if req.get("next"):
            try:
                not_uid = self.api.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")["metadata"]["uid"]
            except LookupError:
                pass
        with self.lock:
            self.withheld[(ns, name)] = {"seconds": seconds, "not_uid": not_uid, "uid": None}
        self.log("withhold-ready armed", ns=ns, pod=name, seconds=seconds, not_uid=not_uid)
        return {"not_uid": not_uid}

    def _gates(self) -> None:
        """Open the readiness gate of every pod that carries it, as soon as its container runs,
        but a withheld one's only `seconds` after."""
        while True:
            time.sleep(GATE_POLL_S)
            try:
                pods = self.api.call("GET", "/api/v1/pods")["items"]
            except (OSError, RuntimeError, LookupError, http.client.HTTPException):
                continue
            for pod in pods:
                gates = pod.get("spec", {}).get("readinessGates") or []
                if {"conditionType": READY_GATE} not in gates or _gate_open(pod):
                    continue
                since = _running_since(pod)
                if since is None:
                    continue
                meta = pod["metadata"]
                key, uid = (meta["namespace"], meta["name"]), meta["uid"]
                started = ended = False
                with self.lock:
                    entry = self.withheld.get(key)
                    if entry is not None and entry["not_uid"] != uid and entry["uid"] in (None, uid):
                        started, entry["uid"] = entry["uid"] is None, uid
                        ended = time.time() >= since + entry["seconds"]
                        if ended:
                            del self.withheld[key]
                    else:
                        entry = None
                if started:
                    self.log("withhold-ready started", **self._ids(pod), seconds=entry["seconds"] if entry else None)
                if entry is not None and not ended:
                    continue
                if ended:
                    self.log("withhold-ready ended", **self._ids(pod))
                patch = {"status": {"conditions": [{"type": READY_GATE, "status": "True"}]}}
                try:
                    self.api.call("PATCH", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status", patch,
                                  "application/strategic-merge-patch+json")  # fmt: skip
                except (OSError, RuntimeError, LookupError, http.client.HTTPException):
                    continue

    def _hold_file(self, req: dict[str, Any]) -> tuple[str, str, Path]:
        ns, name = self._str(req, "namespace"), self._str(req, "pod")
        return ns, name, self.dir / HOLDS / f"{ns}_{name}"

    def op_hold(self, req: dict[str, Any]) -> dict[str, Any]:
        ns, name, path = self._hold_file(req)
        path.touch()
        self.log("hold-start", ns=ns, pod=name)
        return {}

    def op_release(self, req: dict[str, Any]) -> dict[str, Any]:
        ns, name, path = self._hold_file(req)
        path.unlink(missing_ok=True)
        self.log("release", ns=ns, pod=name)
        return {}


# ---------------------------------------------------------------- the control socket


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        handle: Callable[[dict[str, Any]], dict[str, Any]] = self.server.handle  # type: ignore[attr-defined]
        for line in self.rfile:
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise FaultError("a request is a JSON object")
                answer = {"ok": True, **handle(req)}
            except (FaultError, ValueError, RuntimeError, OSError) as e:
                answer = {"ok": False, "error": str(e)}
            self.wfile.write((json.dumps(answer) + "\n").encode())
            self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(path: Path, handle: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The control socket at path (mode 0600, root's only), in a thread of its own: one JSON
    request per line, handle's answer (or the reason it refused) per line."""
    path.unlink(missing_ok=True)
    old = os.umask(0o177)
    try:
        server = _Server(str(path), _Handler)
    finally:
        os.umask(old)
    server.handle = handle  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="control", daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) == 8 and argv[0] == "netem":
        veth, bridge, tap, delay_ms, loss, seed, counts = argv[1:]
        return netem_main(veth, bridge, tap, float(delay_ms), float(loss), seed, Path(counts))
    if len(argv) == 2 and argv[0] == "offload-off":
        offload_off(argv[1])
        return 0
    if len(argv) != 1:
        print("usage: faults.py CLUSTER_DIR | netem VETH BRIDGE TAP DELAY_MS LOSS SEED COUNTS | offload-off IFNAME",
              file=sys.stderr)  # fmt: skip
        return 2
    folder = Path(argv[0])
    faults = Faults(folder)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve(folder / CONTROL_SOCKET, faults.handle)
    print(f"serving {folder / CONTROL_SOCKET}", flush=True)
    stop.wait()
    for node in list(faults.lost):  # nothing stays stopped or frozen after `down`
        faults.handle({"op": "restore-node", "node": node})
    for uid in list(faults.netem):
        faults._netem_stop(uid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
