"""The one-machine cluster: start and stop it (test equipment, not product).

    python cluster/cluster.py up      build what is missing, start everything, wait until healthy;
                                      the last two lines are `export KUBECTL=...` / `export KUBECONFIG=...`
    python cluster/cluster.py down    stop everything this cluster started, remove its pod bridge
    python cluster/cluster.py restart NAME [--down-s S] [--kill]
                                      stop one control-plane component (RESTARTABLE), start it
                                      again after S seconds as `up` did, wait until it answers

`make cluster-up` / `make cluster-down` run these. State lives in one folder, CLUSTER_DIR
(default build/cluster in the checkout, or under /var/tmp for a checkout under /tmp: the operator
and the pods get a /tmp of their own).
The binaries come from cluster/build.sh (one wrapper module, Kubernetes 1.36.3, cached outside
the repository). docs/guide/cluster.md, "A cluster on one machine", says what is real and what is not.

What runs, all on this machine as root, each talking to 127.0.0.1 only:
etcd, kube-apiserver (Node,RBAC, NodeRestriction, an audit log), kube-controller-manager,
kube-scheduler, the Kubeflow training operator (its own webhook, reached by the API server
through a selector-less Service and an EndpointSlice naming the pod bridge's host address), and
CoreDNS on the pod bridge's host address, port 53, answering cluster.local and the pod range's
reverse zone only, and an S3-compatible object store (the Versity S3 Gateway, its posix backend,
data in CLUSTER_DIR/objectstore) on the pod bridge's host address, port OBJECTSTORE_PORT, with
credentials made per cluster and written to CLUSTER_DIR/objectstore.json. The pod bridge (POD_BRIDGE, POD_CIDR) carries no route out: no forwarding,
no masquerading, no ClusterIP routing. Nodes are real (cluster/realnode.py): a kubelet, containerd
and runc each, in a network namespace of its own, with a kube-proxy; cluster/faults.py injects
the faults no real component does.

Failure: one line `cluster up: <what>` on stderr, everything started so far is stopped, exit 1.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import functools
import hashlib
import importlib.util
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _sibling(name: str) -> types.ModuleType:
    """A module of this folder, loaded by its path (this file runs as a script and the tests load
    it by path; neither puts cluster/ on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"elastic_idl_cluster_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


realnode = _sibling("realnode")
image = _sibling("image")
faults = _sibling("faults")
K8S_VERSION = "v1.36.3"
OPERATOR_MODULE = "github.com/kubeflow/training-operator"

# The pod range: a /24 no route of this machine covers (checked at start); its first address is
# the host side of the pod bridge. Services get ClusterIPs from the next /24, never routed.
POD_CIDR = ipaddress.ip_network("10.237.0.0/24")
SERVICE_CIDR = ipaddress.ip_network("10.237.1.0/24")
BRIDGE_IP = ipaddress.IPv4Address("10.237.0.1")  # the first address of POD_CIDR
API_SERVICE_IP = ipaddress.IPv4Address("10.237.1.1")  # the first of SERVICE_CIDR: the `kubernetes` Service
POD_BRIDGE = "eidl0"
# The pod bridge's MAC, set at creation (locally administered, unicast). A bridge with no MAC of its
# own takes the lowest of its ports' and changes it when that port goes: a pod deleted would take
# the pod gateway's MAC with it, and every other pod's cached one would reach nothing until its
# ARP entry aged out (30 s and more with no connection to the host: the object store, CoreDNS).
POD_BRIDGE_MAC = "02:65:69:64:6c:30"
CLUSTER_DOMAIN = "cluster.local"
OPERATOR_NAMESPACE = "kubeflow"

# kube-controller-manager's controllers: what a cluster of pods, Services and Nodes needs.
CONTROLLERS = [
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "endpointslice-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "root-ca-certificate-publisher-controller",
    "service-cidr-controller",
    # The Jobs of a JobSet (and so of a TrainJob): the JobSet controller makes Jobs, this makes their pods.
    "job-controller",
]

# Start order; `down` stops in the reverse order.
COMPONENTS = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "training-operator",
    "coredns",
    "objectstore",
    # Started only on request, on a running cluster (`targets-up`, `targets_up`).
    "jobset-controller",
    "trainer-controller-manager",
]
#: In CLUSTER_DIR: every container log of the real Nodes, kept after the kubelet removes its pod's
#: (realnode.keep_logs): <ns>_<pod>_<uid>/<container>/<restart>.log.
KEPT_LOGS = "pod-logs"
#: What `cluster/build.sh node` builds for the real Nodes.
NODE_BINARIES = [
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "pause",
    "bridge",
    "host-local",
    "loopback",
]
#: What cluster/build.sh builds into its bin folder (the object store goes to a folder of its own).
BINARIES = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "training-operator",
    "coredns",
    "kubectl",
]
# `up` starts this many Nodes: the largest job here (a 1:3 elastic job, 3 pods) plus one. CLUSTER_NODES (or `up --nodes N`) serves more: the chaos harness
# gives each job it runs at once Nodes of its own (bench/chaos_cluster.py).
NODE_COUNT = 4
NODES = [f"node-{i}" for i in range(NODE_COUNT)]
#: In CLUSTER_DIR: the control socket of the faults (cluster/faults.py), the log of every fault
#: injected, and the log of container starts and exits (exact times, exit codes).
CONTROL_SOCKET = faults.CONTROL_SOCKET
FAULT_LOG = faults.FAULT_LOG
LIFECYCLE_LOG = faults.LIFECYCLE_LOG

# Node loss, lowered from the defaults so that a lost Node is handled within a chaos run (docs/guide/cluster.md;
# Kubernetes' defaults in brackets):
#: kube-controller-manager --node-monitor-grace-period [50s]: a Node whose Lease and status were
#: not renewed for this long is marked Ready=Unknown and tainted node.kubernetes.io/unreachable.
NODE_MONITOR_GRACE_S = 20
#: kube-controller-manager --node-monitor-period [5s]: how often the node lifecycle controller looks.
NODE_MONITOR_PERIOD_S = 5
#: kube-apiserver --default-unreachable-toleration-seconds and --default-not-ready-toleration-seconds
#: [300]: the DefaultTolerationSeconds admission plugin gives every pod these tolerations, so the
#: taint eviction controller deletes a lost Node's pods this long after the taint. The pods then
#: stay Terminating (no kubelet confirms) until the Node gets the node.kubernetes.io/out-of-service
#: taint: the pod garbage collector (gcTerminating, every 20 s) force-deletes a terminating pod on a
#: Node that is not Ready and has that taint.
TOLERATION_S = 30
NODE_LEASE_S = realnode.NODE_LEASE_S

# The object store: the Versity S3 Gateway (cluster/objectstore/go.mod), its posix backend, on the
# pod bridge's host address (pods and the host reach it there; nothing else does), plain HTTP.
OBJECTSTORE_BINARY = "versitygw"
OBJECTSTORE_PORT = 7070
OBJECTSTORE_REGION = "us-east-1"  # what S3 clients sign with when no region is set
OBJECTSTORE_BUCKET = "elastic-idl"  # made by `up`; a client may make more

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    # Every write, with who made it; reads are left out (they are most of the traffic).
    "rules": [{"level": "None", "verbs": ["get", "list", "watch"]}, {"level": "Metadata"}],
}


class ClusterError(Exception):
    """Why the cluster did not come up: one line, then maybe the end of a component's log."""


def timeout_scale() -> float:
    """CLUSTER_TIMEOUT_SCALE stretches every wait (a loaded machine starts slowly)."""
    return float(os.environ.get("CLUSTER_TIMEOUT_SCALE", "1"))


def default_state_dir(name: str) -> Path:
    """A cluster's state folder: build/<name> in the checkout, or, for a checkout under /tmp
    (the operator's and the pods' /tmp are their own, so no state may live there), a folder under
    /var/tmp named after the checkout."""
    if Path("/tmp") in REPO.parents:
        tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
        return Path("/var/tmp/elastic-idl-clusters") / f"{REPO.name}-{tag}" / name
    return REPO / "build" / name


def node_names(count: int | None = None) -> list[str]:
    """The Nodes a cluster serves: `count`, else CLUSTER_NODES, else NODE_COUNT (node-0, node-1, ...)."""
    if count is None:
        text = os.environ.get("CLUSTER_NODES", "").strip()
        try:
            count = int(text) if text else NODE_COUNT
        except ValueError:
            raise ClusterError(f"CLUSTER_NODES must be a whole number, not {text!r}") from None
    if not 1 <= count <= realnode.MAX_REAL_NODES:
        raise ClusterError(
            f"the node count must be 1..{realnode.MAX_REAL_NODES} (a /28 of the pod range each), not {count}"
        )
    return [f"node-{i}" for i in range(count)]


def cluster_dir() -> Path:
    d = Path(os.environ.get("CLUSTER_DIR", default_state_dir("cluster"))).resolve()
    if d == Path("/tmp") or Path("/tmp") in d.parents:
        raise ClusterError(f"CLUSTER_DIR must not be under /tmp ({d}): the operator gets a /tmp of its own")
    return d


# ---------------------------------------------------------------- certificates


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _name(cn: str, orgs: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Pki:
    """A CA and the certificates signed by it, as files in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca_key = _key()
        now = dt.datetime.now(dt.timezone.utc)
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("elastic-idl-cluster-ca"))
            .issuer_name(_name("elastic-idl-cluster-ca"))
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key()), critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        self.ca = folder / "ca.crt"
        self.ca.write_bytes(self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, cn: str, orgs: Sequence[str] = (), *, server: bool = False) -> tuple[Path, Path]:
        """A client certificate (CN = user, O = groups) or a server certificate for the loopback
        address (and, for the API server, its Service names)."""
        key = _key()
        now = dt.datetime.now(dt.timezone.utc)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()), critical=False)
        )
        if server:
            dns = ["localhost"]
            if cn == "kube-apiserver":
                svc = "kubernetes.default.svc"
                dns += ["kubernetes", "kubernetes.default", svc, f"{svc}.{CLUSTER_DOMAIN}"]
            sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            sans += [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.IPAddress(API_SERVICE_IP)]
            if cn == "kube-apiserver":
                sans.append(x509.IPAddress(BRIDGE_IP))  # where real Nodes reach it
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        crt, keyfile = self.folder / f"{name}.crt", self.folder / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(keyfile, key)
        return crt, keyfile


def write_kubeconfig(
    path: Path, server: str, ca: Path, crt: Path | None = None, key: Path | None = None, *, token: str | None = None
) -> Path:
    """A kubeconfig with a client certificate, or with a bearer token (a ServiceAccount's)."""
    user = {"token": token} if token else {"client-certificate": str(crt), "client-key": str(key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "elastic-idl", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "default", "context": {"cluster": "elastic-idl", "user": "user"}}],
        "current-context": "default",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


# ---------------------------------------------------------------- processes


def ephemeral_ports() -> range:
    """The ports the kernel hands to outgoing connections (net.ipv4.ip_local_port_range)."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def free_ports(names: Sequence[str]) -> dict[str, int]:
    """A free loopback port for each name, all different, none of them ephemeral.

    A port the kernel picked (bind to port 0) is an ephemeral one: between choosing it and the
    component binding it, any outgoing connection (every kubectl call is one) may take it, and
    the component then exits with "address already in use". Ports below the ephemeral range are
    never handed out that way, so only a listener could take them, and each is checked free."""
    eph = ephemeral_ports()
    low, high = max(1024, eph.start - 12000), eph.start  # [20768, 32768) with Linux's defaults
    if high - low < 2 * len(names):
        low, high = eph.stop, 65536  # a range that starts low: take the ports above it
    chosen: dict[str, int] = {}
    rng = secrets.SystemRandom()
    for name in names:
        for _ in range(200):
            port = rng.randrange(low, high)
            if port in chosen.values():
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            chosen[name] = port
            break
        else:
            raise ClusterError(f"no free loopback port in [{low}, {high}) for {name}")
    return chosen


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), or None when it is gone: a pid and its
    start time name one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.pids = folder / "pids"
        self.logs = folder / "logs"
        self.state_file = folder / "cluster.json"
        self.state: dict[str, object] = {}
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())
        self.started = time.monotonic()
        self.timings: dict[str, float] = {}
        self.began = False  # set once `up` starts changing anything; a failure before that stops nothing
        self.log_of: dict[int, str] = {}  # pid -> the component whose log it writes (`spawn`)

    def nodes(self) -> list[str]:
        """The Nodes this cluster serves (`up` records them)."""
        return [str(n) for n in self.state.get("nodes", NODES)]  # type: ignore[attr-defined]

    def save(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=2, sort_keys=True) + "\n")

    # -- processes

    def spawn(
        self, name: str, argv: Sequence[str], env: dict[str, str] | None = None, *, inherit_env: bool = True
    ) -> subprocess.Popen[bytes]:
        """Start one component in a session of its own, its output to logs/<name>.log; its
        environment is this one's plus `env`, or only `env` when not `inherit_env`."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pids.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**(os.environ if inherit_env else {}), **(env or {})},
            )
        (self.pids / f"{name}.pid").write_text(f"{proc.pid} {_start_time(proc.pid)}\n")
        # How it was started, for `restart` (its environment: what was added to this one's).
        started = {"argv": list(argv), "env": dict(env or {}), "inherit_env": inherit_env}
        (self.pids / f"{name}.start.json").write_text(json.dumps(started) + "\n")
        self.log_of[proc.pid] = name
        return proc

    def wait(self, name: str, proc: subprocess.Popen[bytes] | None, ready: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds * timeout_scale()
        t0 = time.monotonic()
        while True:
            if proc is not None and proc.poll() is not None:
                component = self.log_of.get(proc.pid, name)
                raise ClusterError(
                    f"{name}: {component} exited with code {proc.returncode}; the end of its log:\n"
                    + self.log_tail(component)
                )
            try:
                if ready():
                    break
            except (OSError, ssl.SSLError, subprocess.SubprocessError):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{name} not up in {seconds * timeout_scale():.0f}s (log: {self.logs / (name + '.log')})"
                )
            time.sleep(0.3)
        self.timings[name] = round(time.monotonic() - t0, 1)
        print(f"== {name} up ({self.timings[name]}s)", flush=True)

    def start_until_up(
        self,
        start: Callable[[], subprocess.Popen[bytes]],
        waits: Sequence[tuple[str, Callable[[], bool], float]],
        starts: int,
    ) -> int:
        """Start a component and wait for each of its readiness checks in turn; when it exits
        before all pass, start it again (as its pod would restart), `starts` times at most, each
        exit printed with the end of its log. Returns the starts it took."""
        if starts < 1:
            raise ValueError(f"starts must be at least 1, not {starts}")
        for attempt in range(1, starts + 1):
            proc = start()
            try:
                for name, ready, seconds in waits:
                    self.wait(name, proc, ready, seconds)
                return attempt
            except ClusterError as e:
                if proc.poll() is None or attempt == starts:
                    raise
                print(f"== start {attempt} of {starts}: {e}\n== starting it again", flush=True)
        raise AssertionError("unreachable: the last start returns or raises")  # pragma: no cover

    def log_tail(self, name: str, lines: int = 8) -> str:
        """The last lines of a component's log (each cut to 300 characters), then the log's path."""
        log = self.logs / f"{name}.log"
        text = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        tail = [f"  {line[:300]}" for line in text[-lines:]] or ["  (no output)"]
        return "\n".join([*tail, f"(log: {log})"])

    def running(self) -> list[str]:
        """The components of this folder's pid files that still run (a pid file whose process is
        gone, e.g. killed with the session, is no cluster)."""
        alive = []
        for pidfile in sorted(self.pids.glob("*.pid")) if self.pids.is_dir() else []:
            pid_s, start = pidfile.read_text().split()
            if _start_time(int(pid_s)) == start:
                alive.append(pidfile.stem)
        return alive

    def stop(self) -> list[str]:
        """Stop every process this cluster started, newest first; return what was stopped."""
        stopped = []
        listed = {f"{n}.pid" for n in COMPONENTS}
        # The real Nodes' processes (named after their Node, started last), newest first; then the rest.
        node_files = sorted(
            (f for f in self.pids.glob("*.pid") if f.name not in listed) if self.pids.is_dir() else [],
            key=lambda f: f.stat().st_mtime,
            reverse=True,
        )
        for name in [f.stem for f in node_files] + list(reversed(COMPONENTS)):
            pidfile = self.pids / f"{name}.pid"
            if not pidfile.exists():
                continue
            pid_s, start = pidfile.read_text().split()
            pid = int(pid_s)
            if _start_time(pid) == start:
                _terminate(pid)
                stopped.append(name)
            pidfile.unlink()
        # Anything left from a lost pid file: a process running one of our binaries on this folder.
        bindirs = [
            str(d)
            for d in (
                self.state.get("bin"),
                self.state.get("objectstore_bin"),
                self.state.get("targets_bin"),
                self.state.get("node_bin"),
            )
            if d
        ]
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                exe = os.readlink(proc / "exe")
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            ours = any(exe.startswith(f"{d}/") for d in bindirs)
            if ours and str(self.dir) in cmdline:
                _terminate(int(proc.name))
                stopped.append(f"{Path(exe).name} (pid {proc.name}, no pid file)")
        return stopped

    # -- the API server

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        bindir = Path(str(self.state["bin"]))
        argv = [str(bindir / "kubectl"), "--kubeconfig", str(self.dir / "admin.kubeconfig"), *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout * timeout_scale(), check=False)
        if check and result.returncode != 0:
            msg = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise ClusterError(f"kubectl {' '.join(args[:3])}: {msg[-1] if msg else result.returncode}")
        return result

    def https_ok(self, url: str, *, client: str | None = None) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.dir / "pki" / "ca.crt"))
        if client:
            ctx.load_cert_chain(self.dir / "pki" / f"{client}.crt", self.dir / "pki" / f"{client}.key")
        with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
            return bool(r.status == 200)


#: The components `restart` stops and starts again (the chaos harness's control-plane classes).
RESTARTABLE = ("kube-apiserver", "training-operator", "kube-controller-manager", "kube-scheduler")


def restart(
    c: Cluster, name: str, down_s: float = 0.0, *, kill: bool = False, during: Callable[[], None] | None = None
) -> dict[str, float]:
    """Stop one running component of the cluster (SIGTERM, SIGKILL after 10 s; `kill`: SIGKILL
    at once, as a crash), leave it down `down_s` seconds (calling `during` first, if given),
    start it again with the argv and added environment `up` gave it (its log appended to) and
    wait until it answers as `up` waited for it. Returns when it went down, came up and answered
    (host times)."""
    if name not in RESTARTABLE:
        raise ClusterError(f"restart: {name!r} is not one of {', '.join(RESTARTABLE)}")
    pidfile, startfile = c.pids / f"{name}.pid", c.pids / f"{name}.start.json"
    if not pidfile.exists() or not startfile.exists():
        raise ClusterError(f"restart: {name} was not started by this cluster ({c.dir}): no {pidfile.name}")
    pid_s, start = pidfile.read_text().split()
    if _start_time(int(pid_s)) != start:
        raise ClusterError(f"restart: {name} (pid {pid_s}) is not running")
    how = json.loads(startfile.read_text())
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_s), signal.SIGKILL)
    _terminate(int(pid_s))
    down = time.time()
    if during is not None:
        during()
    time.sleep(max(0.0, down - time.time() + down_s))
    proc = c.spawn(name, how["argv"], how["env"], inherit_env=bool(how["inherit_env"]))
    up = time.time()
    probe = answers(c, name)
    # The operator is up for `up` once its webhook answers too (a check of its own there).
    ready = (lambda: probe() and webhook_answers(c)) if name == "training-operator" else probe
    c.wait(name, proc, ready, 180)
    return {"down": down, "started": up, "ready": time.time()}


def answers(c: Cluster, name: str) -> Callable[[], bool]:
    """The check that a control-plane component is up: the one `up` waits for and `restart` waits
    for again (the API server's /readyz, the controllers' /healthz, the operator's /readyz)."""
    ports = c.state["ports"]
    assert isinstance(ports, dict)
    urls = {
        "kube-apiserver": f"{c.state['api']}/readyz",
        "kube-controller-manager": f"https://127.0.0.1:{ports['kcm']}/healthz",
        "kube-scheduler": f"https://127.0.0.1:{ports['scheduler']}/healthz",
        "training-operator": f"http://127.0.0.1:{ports['op-probe']}/readyz",
    }
    url = urls[name]
    if name == "kube-apiserver":
        return lambda: c.https_ok(url, client="admin")
    if url.startswith("https:"):
        return lambda: c.https_ok(url)
    return lambda: http_ok(url)


def _terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process (and its process group), SIGKILL after the grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if _start_time(pid) is None or _zombie(pid):
                return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as r:
        return bool(r.status == 200)


# ---------------------------------------------------------------- DNS


def dns_query_a(server: str, name: str, port: int = 53, timeout: float = 2.0) -> list[str]:
    """The A records `server` gives for `name` (one UDP query, no recursion asked)."""
    qid = os.getpid() & 0xFFFF
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, (server, port))
        reply, _ = s.recvfrom(4096)
    rid, flags, _qd, ancount = struct.unpack(">HHHH", reply[:8])
    if rid != qid or flags & 0xF:
        return []
    pos = 12 + len(question) + 4
    answers = []
    for _ in range(ancount):
        while reply[pos] and reply[pos] & 0xC0 != 0xC0:  # the owner name: labels, or a pointer
            pos += reply[pos] + 1
        pos += 2 if reply[pos] & 0xC0 == 0xC0 else 1
        rtype, _cls, _ttl, rdlen = struct.unpack(">HHIH", reply[pos : pos + 10])
        pos += 10
        if rtype == 1 and rdlen == 4:
            answers.append(socket.inet_ntoa(reply[pos : pos + 4]))
        pos += rdlen
    return answers


# ---------------------------------------------------------------- faults


def fault_request(folder: Path, request: dict[str, object], timeout: float = 30.0) -> dict[str, object]:
    """One request to the control socket of the faults in the cluster folder `folder` (those
    cluster/faults.py lists); its answer.
    A refused request raises ClusterError with the reason."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout * timeout_scale())
        s.connect(str(folder / CONTROL_SOCKET))
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        raise ClusterError(f"faults: no answer to {request.get('op')!r}")
    answer = json.loads(data)
    if not answer.get("ok"):
        raise ClusterError(f"faults: {request.get('op')}: {answer.get('error')}")
    return dict(answer)


# ---------------------------------------------------------------- up


def preflight() -> None:
    if os.geteuid() != 0:
        raise ClusterError("needs root (the pod bridge, the namespaces of pods and of the operator)")
    go_command()
    for cmd in ("ip", "bridge", "unshare", "sh", "mount", "nsenter"):
        if shutil.which(cmd) is None:
            raise ClusterError(f"missing command: {cmd}")
    for line in clear_stale_bridge(POD_BRIDGE):
        print(f"== {line}", flush=True)
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True, check=True)
    for line in routes.stdout.splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest in ("default", "local", "broadcast", "unreachable", "prohibit", "blackhole"):
            dest = line.split()[1] if len(line.split()) > 1 else ""
        try:
            net = ipaddress.ip_network(dest, strict=False)
        except ValueError:
            continue
        for ours in (POD_CIDR, SERVICE_CIDR):
            if net.version == 4 and net.overlaps(ours) and net.prefixlen > 0:
                raise ClusterError(f"the range {ours} is in use on this machine (route: {line.strip()})")


def cluster_processes() -> list[str]:
    """The processes of any one-machine cluster on this machine, whatever its checkout or
    CLUSTER_DIR: a binary from the build cache (cluster/build.sh's folders).
    One "pid: command" line each."""
    cache = Path(os.environ.get("ELASTIC_IDL_CACHE") or Path.home() / ".cache" / "elastic-idl")
    roots = [f"{cache / 'cluster'}/", f"{cache / 'objectstore'}/", f"{cache / 'targets'}/"]
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            exe = os.readlink(proc / "exe")
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(exe.startswith(r) for r in roots):
            found.append(f"{proc.name}: {' '.join(argv).strip()[:160]}")
    return found


def clear_stale_bridge(bridge: str) -> list[str]:
    """A pod bridge left behind by a cluster whose processes are all gone (killed with the
    session or the machine's processes, never brought down) is removed, with its ports; what was
    removed is returned. A bridge while any cluster process runs is refused: that cluster is up."""
    dev = Path(f"/sys/class/net/{bridge}")
    if not dev.exists():
        return []
    alias = (dev / "ifalias").read_text().strip() if (dev / "ifalias").exists() else ""
    owner = f" (from CLUSTER_DIR={alias})" if alias else ""
    running = cluster_processes()
    if running:
        raise ClusterError(
            f"the pod bridge {bridge} exists and a cluster is up{owner}: make cluster-down "
            f"({len(running)} of its processes run, e.g. {running[0]})"
        )
    done = []
    for port in sorted((dev / "brif").iterdir()) if (dev / "brif").is_dir() else []:
        subprocess.run(["ip", "link", "del", port.name], check=False)
        done.append(f"removed the stale pod veth {port.name}")
    subprocess.run(["ip", "link", "del", bridge], check=True)
    done.append(f"removed the stale pod bridge {bridge}{owner}: no process of any cluster runs")
    return done


def check_not_in_tmp(bindir: Path) -> Path:
    """The training operator and the target controllers run with a /tmp of their own (a bind mount), which
    hides a binary under the host's /tmp: refuse such a cache at once, naming the setting."""
    resolved = bindir.resolve()
    if resolved == Path("/tmp") or Path("/tmp") in resolved.parents:
        raise ClusterError(
            f"the binaries are under /tmp ({bindir}): the training operator and the controllers get a /tmp of "
            "their own, which hides them; set ELASTIC_IDL_CACHE to a folder outside /tmp (default ~/.cache/elastic-idl)"
        )
    return bindir


def build() -> tuple[Path, Path]:
    """cluster/build.sh: builds what is missing (once per version), prints the bin folder; then the
    object store's bin folder (`build.sh objectstore-path`). Returns both."""
    result = subprocess.run([str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise ClusterError("cluster/build.sh failed (its output is above)")
    bindir = check_not_in_tmp(Path(result.stdout.strip().splitlines()[-1]))
    store = subprocess.run([str(HERE / "build.sh"), "objectstore-path"], stdout=subprocess.PIPE, text=True, check=True)
    storedir = Path(store.stdout.strip())
    for path in [*(bindir / b for b in BINARIES), storedir / OBJECTSTORE_BINARY]:
        if not path.is_file():
            raise ClusterError(f"missing binary after the build: {path}")
    return bindir, storedir


def go_command() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).is_file():
        raise ClusterError("missing command: go (Go 1.26 or newer; or /usr/local/go/bin/go)")
    return go


def operator_dir() -> Path:
    """The training operator's module folder (its manifests), from Go's module cache."""
    out = subprocess.run(
        [go_command(), "list", "-m", "-f", "{{.Dir}}", OPERATOR_MODULE],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"},
    )
    d = Path(out.stdout.strip())
    if out.returncode != 0 or not (d / "manifests").is_dir():
        raise ClusterError(f"no source of {OPERATOR_MODULE} in Go's module cache: {out.stderr.strip()}")
    return d


def check_port_free(host: str, port: int, what: str) -> None:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:
                # As servers bind (Go's listeners too): a previous cluster's connections in TIME_WAIT
                # on the port are no conflict, a listening socket is.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                raise ClusterError(f"port in use: {host}:{port} ({what})") from None


#: How the Nodes run pods (cluster.json's `runtime`): a kubelet with containerd and runc each
#: (cluster/realnode.py).
RUNTIME = "containerd"


def up(c: Cluster, nodes: Sequence[str] = NODES) -> None:
    if len(nodes) > realnode.MAX_REAL_NODES:
        raise ClusterError(
            f"at most {realnode.MAX_REAL_NODES} real Nodes (a /28 of the pod range each), not {len(nodes)}"
        )
    if alive := c.running():
        raise ClusterError(f"a cluster is already running from {c.dir}: {', '.join(alive)} (make cluster-down)")
    preflight()
    if shutil.which("iptables") is None:
        raise ClusterError(
            "missing command: iptables (kube-proxy's on the real Nodes; Debian: apt-get install iptables)"
        )
    bindir, storedir = build()
    node_bin = build_part("node", NODE_BINARIES)
    opdir = operator_dir()
    # From here on, a failure stops what was started. A fresh state folder: a previous run's
    # data, logs and certificates go.
    c.began = True
    if c.dir.exists():
        shutil.rmtree(c.dir)
    c.dir.mkdir(parents=True)
    c.state = {"bin": str(bindir), "objectstore_bin": str(storedir), "k8s": K8S_VERSION, "nodes": list(nodes)}
    c.state["runtime"] = RUNTIME
    c.state["node_bin"] = str(node_bin)
    c.save()
    t0 = time.monotonic()

    # The pod bridge: its host address is where the API server reaches the operator's webhook and
    # where pods (phase 2) reach CoreDNS. No forwarding on it, no IPv6.
    subprocess.run(["ip", "link", "add", POD_BRIDGE, "address", POD_BRIDGE_MAC, "type", "bridge"], check=True)
    c.state["bridge"] = POD_BRIDGE
    c.save()
    # The bridge names its cluster (ip link show: alias), for the next `up` to say whose it is.
    subprocess.run(["ip", "link", "set", "dev", POD_BRIDGE, "alias", str(c.dir)[:250]], check=True)
    Path(f"/proc/sys/net/ipv6/conf/{POD_BRIDGE}/disable_ipv6").write_text("1\n")
    Path(f"/proc/sys/net/ipv4/conf/{POD_BRIDGE}/forwarding").write_text("0\n")
    subprocess.run(["ip", "addr", "add", f"{BRIDGE_IP}/{POD_CIDR.prefixlen}", "dev", POD_BRIDGE], check=True)
    subprocess.run(["ip", "link", "set", POD_BRIDGE, "up"], check=True)
    check_port_free(str(BRIDGE_IP), 53, "CoreDNS")
    check_port_free(str(BRIDGE_IP), OBJECTSTORE_PORT, "the object store")

    components = ["etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "op-metrics", "op-probe", "op-webhook"]
    ports = free_ports([*components, "dns-health", "dns-ready"])
    c.state["ports"] = ports
    c.save()

    pki = Pki(c.dir / "pki")
    # Real Nodes reach the API server from their own namespaces: it listens on the bridge's address.
    api_host = str(BRIDGE_IP)  # where the Nodes' network namespaces reach it
    api = f"https://{api_host}:{ports['apiserver']}"
    c.state["api"] = api
    kubeconfigs = {}
    for name, cn, orgs in [
        ("admin", "elastic-idl-admin", ["system:masters"]),
        ("kube-controller-manager", "system:kube-controller-manager", []),
        ("kube-scheduler", "system:kube-scheduler", []),
        (
            "training-operator",
            f"system:serviceaccount:{OPERATOR_NAMESPACE}:training-operator",
            ["system:serviceaccounts", f"system:serviceaccounts:{OPERATOR_NAMESPACE}"],
        ),
        ("coredns", "system:serviceaccount:kube-system:coredns", ["system:serviceaccounts"]),
    ]:
        crt, key = pki.issue(name, cn, orgs)
        kubeconfigs[name] = write_kubeconfig(c.dir / f"{name}.kubeconfig", api, pki.ca, crt, key)
    serving = {name: pki.issue(f"{name}-serving", name, server=True) for name in ("kube-apiserver", "kcm", "scheduler")}
    kubelet_client = pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ["system:masters"])
    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(c.dir / "pki" / "sa.key", sa_key)
    (c.dir / "pki" / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (c.dir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
    print(f"== state in {c.dir}; binaries in {bindir}", flush=True)

    # etcd
    etcd_url, peer_url = f"http://127.0.0.1:{ports['etcd']}", f"http://127.0.0.1:{ports['etcd-peer']}"
    proc = c.spawn(
        "etcd",
        [
            str(bindir / "etcd"),
            "--name=default",
            f"--data-dir={c.dir / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--log-level=warn",
            # Test equipment: the data is thrown away with the cluster; no fsync spares the shared disk.
            "--unsafe-no-fsync",
        ],
    )
    c.wait("etcd", proc, lambda: http_ok(f"{etcd_url}/health"), 60)

    # kube-apiserver
    crt, key = serving["kube-apiserver"]
    proc = c.spawn(
        "kube-apiserver",
        [
            str(bindir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={api_host}",
            f"--secure-port={ports['apiserver']}",
            f"--advertise-address={BRIDGE_IP}",
            f"--tls-cert-file={crt}",
            f"--tls-private-key-file={key}",
            f"--client-ca-file={pki.ca}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
            f"--service-account-key-file={c.dir / 'pki' / 'sa.pub'}",
            f"--service-account-signing-key-file={c.dir / 'pki' / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--audit-policy-file={c.dir / 'audit-policy.yaml'}",
            f"--audit-log-path={c.dir / 'audit.log'}",
            f"--default-not-ready-toleration-seconds={TOLERATION_S}",
            f"--default-unreachable-toleration-seconds={TOLERATION_S}",
            # Webhook Services resolve to their EndpointSlices (no kube-proxy, no ClusterIP route).
            "--enable-aggregator-routing=true",
            "--profiling=false",
            # To the kubelets (logs, exec, port-forward): a client certificate of the cluster's CA.
            f"--kubelet-client-certificate={kubelet_client[0]}",
            f"--kubelet-client-key={kubelet_client[1]}",
            "--kubelet-preferred-address-types=InternalIP",
        ],
    )
    c.wait("kube-apiserver", proc, answers(c, "kube-apiserver"), 180)

    # kube-controller-manager and kube-scheduler
    crt, key = serving["kcm"]
    kcm = kubeconfigs["kube-controller-manager"]
    proc_kcm = c.spawn(
        "kube-controller-manager",
        [
            str(bindir / "kube-controller-manager"),
            f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kcm']}",
            f"--tls-cert-file={crt}",
            f"--tls-private-key-file={key}",
            "--leader-elect=false",
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={c.dir / 'pki' / 'sa.key'}",
            f"--root-ca-file={pki.ca}",
            "--allocate-node-cidrs=false",
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE_S}s",
            f"--node-monitor-period={NODE_MONITOR_PERIOD_S}s",
            "--profiling=false",
        ],
    )
    crt, key = serving["scheduler"]
    sched = kubeconfigs["kube-scheduler"]
    proc_sched = c.spawn(
        "kube-scheduler",
        [
            str(bindir / "kube-scheduler"),
            f"--kubeconfig={sched}",
            f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['scheduler']}",
            f"--tls-cert-file={crt}",
            f"--tls-private-key-file={key}",
            "--leader-elect=false",
            "--profiling=false",
        ],
    )
    c.wait("kube-controller-manager", proc_kcm, answers(c, "kube-controller-manager"), 120)
    c.wait("kube-scheduler", proc_sched, answers(c, "kube-scheduler"), 120)

    # The operator's manifests (its CRDs, RBAC, webhook configuration, empty cert Secret), from
    # its module, through kustomize (kubectl -k): upstream's standalone overlay without its
    # Deployment, its Service without a selector, and an EndpointSlice to the bridge's address.
    manifests = c.dir / "manifests"
    manifests.mkdir()
    (manifests / "webhook-route.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "training-operator-host",
                    "namespace": OPERATOR_NAMESPACE,
                    "labels": {
                        "kubernetes.io/service-name": "training-operator",
                        "endpointslice.kubernetes.io/managed-by": "cluster.elastic-idl",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [str(BRIDGE_IP)], "conditions": {"ready": True}}],
                "ports": [{"name": "webhook-server", "port": ports["op-webhook"], "protocol": "TCP"}],
            },
            sort_keys=False,
        )
    )
    shutil.copy(HERE / "manifests" / "coredns-rbac.yaml", manifests / "coredns-rbac.yaml")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize takes a base outside the folder only by a relative path.
        "resources": [
            os.path.relpath(opdir / "manifests" / "overlays" / "standalone", manifests),
            "webhook-route.yaml",
            "coredns-rbac.yaml",
        ],
        "patches": [
            {
                "patch": yaml.safe_dump(
                    {
                        "$patch": "delete",
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": "training-operator", "namespace": OPERATOR_NAMESPACE},
                    }
                )
            },
            {
                "patch": yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {"name": "training-operator", "namespace": OPERATOR_NAMESPACE},
                        "spec": {"selector": None},
                    }
                )
            },
        ],
    }
    (manifests / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    rendered = c.kubectl("kustomize", str(manifests)).stdout
    (c.dir / "manifests.yaml").write_text(rendered)
    c.kubectl("apply", "--server-side", "--field-manager=cluster-up", "-f", str(c.dir / "manifests.yaml"))
    c.wait(
        "CRDs Established",
        None,
        lambda: (
            c.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=5s", check=False).returncode
            == 0
        ),
        60,
    )

    # The training operator, as its Deployment runs it (MY_POD_NAMESPACE, the probe and metrics
    # addresses). Its certificate folder is /tmp/k8s-webhook-server/serving-certs, where its
    # Deployment mounts the Secret its cert rotator writes: it gets a /tmp of its own (a folder
    # of CLUSTER_DIR, bound in its own mount namespace), and `sync_operator_certs` plays the
    # kubelet's Secret volume.
    op_tmp = c.dir / "training-operator-tmp"
    op_tmp.mkdir(mode=0o700)
    op = [
        str(bindir / "training-operator"),
        f"--metrics-bind-address=127.0.0.1:{ports['op-metrics']}",
        f"--health-probe-bind-address=127.0.0.1:{ports['op-probe']}",
        f"--webhook-server-port={ports['op-webhook']}",
        f"--kubeconfig={kubeconfigs['training-operator']}",
    ]

    def start_operator() -> subprocess.Popen[bytes]:
        return c.spawn(
            "training-operator",
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
             'mount --bind "$1" /tmp && shift && exec "$@"', "sh", str(op_tmp), *op],
            env={"MY_POD_NAMESPACE": OPERATOR_NAMESPACE, "MY_POD_NAME": "training-operator-host"},
        )  # fmt: skip

    # Its Deployment's pod restarts (restartPolicy Always) when the operator exits, and its setup
    # exits on errors a second start gets past: so does `up`.
    c.state["operator_starts"] = c.start_until_up(
        start_operator,
        [
            ("training-operator certificate", lambda: sync_operator_certs(c, op_tmp), 60),
            ("training-operator", answers(c, "training-operator"), 120),
            ("training-operator webhook", lambda: webhook_answers(c), 60),
        ],
        OPERATOR_STARTS,
    )

    # CoreDNS
    zones = f"{CLUSTER_DOMAIN} {reverse_zone()}"
    (c.dir / "Corefile").write_text(
        f"{CLUSTER_DOMAIN}:53 {reverse_zone()}:53 {{\n"
        f"    bind {BRIDGE_IP}\n"
        "    errors\n"
        "    log\n"
        f"    health 127.0.0.1:{ports['dns-health']}\n"
        f"    ready 127.0.0.1:{ports['dns-ready']}\n"
        "    cache 5\n"
        f"    kubernetes {zones} {{\n"
        f"        kubeconfig {kubeconfigs['coredns']} default\n"
        "    }\n"
        "}\n"
    )
    proc = c.spawn("coredns", [str(bindir / "coredns"), "-conf", str(c.dir / "Corefile")])
    c.wait("coredns", proc, lambda: http_ok(f"http://127.0.0.1:{ports['dns-ready']}/ready"), 60)
    want = str(API_SERVICE_IP)
    c.wait(
        "coredns answers",
        proc,
        lambda: dns_query_a(str(BRIDGE_IP), f"kubernetes.default.svc.{CLUSTER_DOMAIN}") == [want],
        30,
    )

    start_objectstore(c, storedir / OBJECTSTORE_BINARY)

    start_real_nodes(c, nodes, pki, api, node_bin)

    c.timings["total"] = round(time.monotonic() - t0, 1)
    c.state["timings"] = c.timings
    c.save()
    env = c.dir / "env"
    env.write_text(
        f"export KUBECTL={bindir / 'kubectl'}\nexport KUBECONFIG={c.dir / 'admin.kubeconfig'}\n",
    )
    print(f"== cluster up in {c.timings['total']}s (Kubernetes {K8S_VERSION}); stop it with: make cluster-down")
    print(env.read_text(), end="", flush=True)


def _proxy_synced(c: Cluster, node: str) -> bool:
    """The Node's kube-proxy has written its rules once (its healthz answers 200 after a sync)."""
    holder = int((c.pids / f"{node}-ns.pid").read_text().split()[0])
    url = f"http://127.0.0.1:{realnode.KUBE_PROXY_HEALTHZ_PORT}/healthz"
    probe = "import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=3).status != 200)"
    argv = [*realnode.nsenter(holder, mount=False), sys.executable, "-c", probe, url]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _answers(ctr: list[str]) -> bool:
    """containerd answers its API (`ctr version`)."""
    return subprocess.run([*ctr, "version"], capture_output=True, check=False).returncode == 0


def build_images(folder: Path, node_bin: Path) -> dict[str, Any]:
    """The real Nodes' images (cluster/image.py), into folder: `base` (the libraries and shell the
    pods need; they mount the interpreter, the checkout and its venv) and `pause` (the sandbox).
    Their references go to the cluster's state (`images`)."""
    try:
        built = {
            "base": image.build_image(folder / "base.tar"),
            "pause": image.build_pause_image(folder / "pause.tar", node_bin / "pause"),
        }
    except image.ImageError as e:
        raise ClusterError(f"cluster/image.py: {e}") from None
    for name, result in built.items():
        print(f"== image {result.ref} ({name}, {result.archive_size / 1e6:.1f} MB, {result.seconds:.1f}s)", flush=True)
    return built


def start_real_nodes(c: Cluster, nodes: Sequence[str], pki: Pki, api: str, node_bin: Path) -> None:
    """Per Node (cluster/realnode.py): its namespaces, link, cgroups, a containerd with the images
    built here, a kubelet with the Node's credentials; then waits until every Node is Ready."""
    images = build_images(c.dir / "images", node_bin)
    c.state["images"] = {name: built.ref for name, built in images.items()}
    cgroup_parent = f"{realnode.own_cgroup().rstrip('/')}/elastic-idl"
    made: list[str] = []
    c.state["cgroups_made"] = made
    c.state["cgroup_parent"] = cgroup_parent
    crt, key = pki.issue("kube-proxy", "system:kube-proxy")  # bound to system:node-proxier by default
    proxy_kubeconfig = write_kubeconfig(c.dir / "kube-proxy.kubeconfig", api, pki.ca, crt, key)
    kubelets = []
    for i, node in enumerate(nodes):
        net = realnode.node_net(i)
        d = c.dir / "nodes" / node
        d.mkdir(parents=True)
        holder = c.spawn(f"{node}-ns", ["unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity"])
        realnode.wait_namespaces(holder.pid)
        realnode.setup_mounts(holder.pid, d)
        realnode.setup_network(holder.pid, net, POD_BRIDGE)
        cgroup_root = f"{cgroup_parent}/{node}"
        made += realnode.make_cgroups(cgroup_root)
        c.save()
        realnode.write_json(d / "cni" / "net.d" / "10-elastic-idl.conflist", realnode.cni_config(net, d))
        (d / "containerd.toml").write_text(realnode.containerd_config(d, node_bin, images["pause"].ref))
        (d / "resolv.conf").write_text(f"nameserver {BRIDGE_IP}\n")
        enter = realnode.nsenter(holder.pid)
        path_env = {"PATH": f"{node_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        proc = c.spawn(
            f"{node}-containerd",
            [*enter, str(node_bin / "containerd"), "--config", str(d / "containerd.toml")],
            env=path_env,
        )
        sock = d / "containerd.sock"
        ctr = [*enter, str(node_bin / "ctr"), "--address", str(sock)]
        c.wait(f"{node} containerd", proc, functools.partial(_answers, ctr), 60)
        for built in images.values():
            subprocess.run(
                [*ctr, "-n", "k8s.io", "images", "import", str(built.archive)], capture_output=True, check=True
            )
        crt, key = pki.issue(f"node-{node}", f"system:node:{node}", ["system:nodes"])
        kubeconfig = write_kubeconfig(d / "kubelet.kubeconfig", api, pki.ca, crt, key)
        config = realnode.kubelet_config(
            net=net,
            node_dir=d,
            ca=pki.ca,
            cgroup_root=cgroup_root,
            dns=str(BRIDGE_IP),
            cluster_domain=CLUSTER_DOMAIN,
        )
        (d / "kubelet.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        kubelets.append(
            c.spawn(
                f"{node}-kubelet",
                [
                    *enter,
                    str(node_bin / "kubelet"),
                    f"--config={d / 'kubelet.yaml'}",
                    f"--kubeconfig={kubeconfig}",
                    f"--hostname-override={node}",
                    f"--node-ip={net.ip}",
                    f"--root-dir={d / 'kubelet'}",
                    f"--cert-dir={d / 'kubelet' / 'pki'}",
                    "--v=1",
                ],
                env=path_env,
            )
        )
        proxy = realnode.kube_proxy_config(net=net, node_name=node, kubeconfig=proxy_kubeconfig)
        (d / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy, sort_keys=False))
        c.spawn(
            f"{node}-kube-proxy",
            [*enter, str(node_bin / "kube-proxy"), f"--config={d / 'kube-proxy.yaml'}", "--v=1"],
            env=path_env,
        )
    keeper = [sys.executable, str(HERE / "realnode.py"), "keep-logs", str(c.dir / "nodes"), str(c.dir / KEPT_LOGS)]
    c.spawn("log-keeper", keeper)
    c.wait("nodes Ready", kubelets[0], lambda: nodes_ready(c), 120)
    for node in nodes:
        c.wait(f"{node} kube-proxy", None, functools.partial(_proxy_synced, c, node), 60)
    c.save()  # faults.py reads the Nodes and their cgroups from the state
    injector = c.spawn("faults", [sys.executable, str(HERE / "faults.py"), str(c.dir)])
    c.wait("faults", injector, lambda: bool(fault_request(c.dir, {"op": "ping"}, 2)["ok"]), 30)


#: The operator's webhook certificate: its Secret (the cert rotator writes it) and the folder
#: under its /tmp where its Deployment mounts that Secret.
OPERATOR_CERT_SECRET = "training-operator-webhook-cert"
#: How many times `up` starts the training operator when it exits before it is up.
OPERATOR_STARTS = 3
OPERATOR_CERT_DIR = "k8s-webhook-server/serving-certs"


def sync_operator_certs(c: Cluster, op_tmp: Path) -> bool:
    """The kubelet's Secret volume for the operator: once its cert rotator has written the
    certificate into the Secret, the Secret's keys become files of the operator's cert folder."""
    return sync_webhook_certs(c, OPERATOR_NAMESPACE, OPERATOR_CERT_SECRET, op_tmp)


def sync_webhook_certs(c: Cluster, namespace: str, secret: str, tmp: Path) -> bool:
    """The kubelet's Secret volume for a controller's webhook certificate (its cert rotator writes
    the Secret; its Deployment mounts it at /tmp/k8s-webhook-server/serving-certs): once the
    Secret has its keys, they become files of that folder under the controller's own /tmp."""
    out = c.kubectl("get", "secret", secret, "-n", namespace, "-o", "json", check=False)
    if out.returncode != 0:
        return False
    data = json.loads(out.stdout).get("data") or {}
    if not all(data.get(k) for k in ("tls.crt", "tls.key", "ca.crt")):
        return False
    folder = tmp / OPERATOR_CERT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in data.items():
        (folder / name).write_bytes(base64.b64decode(value))
        (folder / name).chmod(0o600)
    return True


def nodes_ready(c: Cluster) -> bool:
    """Every Node registered, Ready, and free of the not-ready/unreachable taints."""
    out = c.kubectl("get", "nodes", "-o", "json", check=False, timeout=30)
    if out.returncode != 0:
        return False
    ready = set()
    for node in json.loads(out.stdout)["items"]:
        conds = {x["type"]: x["status"] for x in node.get("status", {}).get("conditions", [])}
        taints = [t["key"] for t in node.get("spec", {}).get("taints", [])]
        if conds.get("Ready") == "True" and not any(t.startswith("node.kubernetes.io/") for t in taints):
            ready.add(node["metadata"]["name"])
    return ready == set(c.nodes())


def start_objectstore(c: Cluster, binary: Path) -> None:
    """The object store on the pod bridge's host address, with credentials made for this cluster
    (its environment carries them, not its command line), its data in CLUSTER_DIR/objectstore (a
    new cluster starts empty). Up once a signed ListBuckets answers; then `up` makes the bucket
    OBJECTSTORE_BUCKET and writes CLUSTER_DIR/objectstore.json (0600) for clients."""
    endpoint = f"http://{BRIDGE_IP}:{OBJECTSTORE_PORT}"
    access = "EIDL" + secrets.token_hex(8).upper()  # 20 characters, as an AWS access key id
    secret = secrets.token_urlsafe(30)  # 40 characters
    data = c.dir / "objectstore"
    data.mkdir(mode=0o700)
    proc = c.spawn(
        "objectstore",
        [
            str(binary),
            f"--port={BRIDGE_IP}:{OBJECTSTORE_PORT}",
            f"--region={OBJECTSTORE_REGION}",
            "posix",
            str(data),
        ],
        # Only these: the gateway reads dozens of variables (VGW_*, LOGFILE, WEBHOOK, ...) as flags.
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "ROOT_ACCESS_KEY_ID": access, "ROOT_SECRET_ACCESS_KEY": secret},
        inherit_env=False,
    )
    c.wait("objectstore", proc, lambda: s3_request(endpoint, access, secret, "GET", "/")[0] == 200, 60)
    status, body = s3_request(endpoint, access, secret, "PUT", f"/{OBJECTSTORE_BUCKET}")
    if status != 200:
        raise ClusterError(f"the object store refused the bucket {OBJECTSTORE_BUCKET}: {status} {body[:300]!r}")
    config = {
        "endpoint": endpoint,
        "region": OBJECTSTORE_REGION,
        "access_key_id": access,
        "secret_access_key": secret,
        "bucket": OBJECTSTORE_BUCKET,
        # What flytekit (its S3Config, then s3fs) reads in a pod: `s3://` paths then go to the store.
        "env": {
            "FLYTE_AWS_ENDPOINT": endpoint,
            "FLYTE_AWS_ACCESS_KEY_ID": access,
            "FLYTE_AWS_SECRET_ACCESS_KEY": secret,
        },
    }
    path = c.dir / "objectstore.json"
    path.touch(mode=0o600)
    path.write_text(json.dumps(config, indent=2) + "\n")
    c.state["objectstore"] = endpoint
    c.save()


def s3_request(endpoint: str, access: str, secret: str, method: str, path: str) -> tuple[int, bytes]:
    """One S3 request (path style, no body), signed with AWS Signature Version 4 by botocore (the
    signer flytekit's S3 client uses); its status and body. HTTP errors are answers too."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=endpoint + path, data=b"")
    S3SigV4Auth(Credentials(access, secret), "s3", OBJECTSTORE_REGION).add_auth(request)
    body = b"" if method in ("PUT", "POST") else None  # urllib then sends Content-Length: 0
    prepared = urllib.request.Request(request.url, data=body, headers=dict(request.headers), method=method)
    try:
        with urllib.request.urlopen(prepared, timeout=5) as r:
            return int(r.status), bytes(r.read())
    except urllib.error.HTTPError as e:
        return int(e.code), bytes(e.read())


def reverse_zone() -> str:
    """The pod range's reverse zone (a /24: three octets)."""
    octets = str(POD_CIDR.network_address).split(".")[:3]
    return ".".join(reversed(octets)) + ".in-addr.arpa"


# A PyTorchJob the operator's webhook refuses (nprocPerNode given twice): the API server
# answering with the webhook's message shows the whole route works.
WEBHOOK_PROBE = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "webhook-probe", "namespace": "default"},
    "spec": {
        "nprocPerNode": "1",
        "elasticPolicy": {"nProcPerNode": 1, "minReplicas": 1, "maxReplicas": 1},
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "example.com/x:1"}]}},
            }
        },
    },
}


def webhook_answers(c: Cluster) -> bool:
    probe = c.dir / "webhook-probe.json"
    probe.write_text(json.dumps(WEBHOOK_PROBE))
    r = c.kubectl("create", "--dry-run=server", "-f", str(probe), check=False, timeout=30)
    return (
        r.returncode != 0
        and "validator.pytorchjob.training-operator.kubeflow.org" in r.stderr
        and ("must not be used with" in r.stderr)
    )


# ---------------------------------------------------------------- the render targets' controllers

#: The JobSet and Kubeflow Trainer controllers (cluster/targets/go.mod, built by `build.sh targets`),
#: started on a running cluster by `targets-up` only (a test fixture asks): `up` stays as fast.
TARGETS_DIR = HERE / "targets"
JOBSET_MODULE = "sigs.k8s.io/jobset"
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
#: The ClusterTrainingRuntime the TrainJob target renders against, from Trainer's module.
TRAINER_RUNTIME = "torch-distributed"
TRAINER_RUNTIME_FILE = "manifests/base/runtimes/torch_distributed.yaml"


@dataclass(frozen=True)
class TargetController:
    """One controller as its Deployment would run it: its namespace (each reads it from its
    service-account namespace file, absent on the host, so the default is theirs), its
    ServiceAccount (whose identity its client certificate carries), its webhook Service and the
    port's name there, the Secret its cert rotator writes, its configuration's API version, and
    the kustomize bases of its module that hold its CRDs, RBAC and webhook configuration."""

    module: str
    namespace: str
    service_account: str
    service: str
    service_port: str
    secret: str
    config_api: str
    bases: tuple[str, ...]


TARGET_CONTROLLERS = {
    "jobset-controller": TargetController(
        module=JOBSET_MODULE,
        namespace="jobset-system",
        service_account="jobset-controller-manager",
        service="jobset-webhook-service",
        service_port="",  # upstream's Service port has no name
        secret="jobset-webhook-server-cert",
        config_api="config.jobset.x-k8s.io/v1alpha1",
        bases=("config/default",),
    ),
    "trainer-controller-manager": TargetController(
        module=TRAINER_MODULE,
        namespace="kubeflow-system",
        service_account="kubeflow-trainer-controller-manager",
        service="kubeflow-trainer-controller-manager",
        service_port="webhook-server",
        secret="kubeflow-trainer-webhook-cert",
        config_api="config.trainer.kubeflow.org/v1alpha1",
        # Upstream's overlay `manager` minus its JobSet (a release URL): the bases it lists.
        bases=("manifests/base/crds", "manifests/base/manager", "manifests/base/rbac", "manifests/base/webhook"),
    ),
}


def build_part(part: str, names: Sequence[str]) -> Path:
    """`cluster/build.sh <part>` (`targets`: the two controllers; `node`: a real Node's binaries),
    built once per version; their bin folder, each of `names` checked to be there."""
    result = subprocess.run([str(HERE / "build.sh"), part], stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise ClusterError(f"cluster/build.sh {part} failed (its output is above)")
    bindir = check_not_in_tmp(Path(result.stdout.strip().splitlines()[-1]))
    for name in names:
        if not (bindir / name).is_file():
            raise ClusterError(f"missing binary after the build: {bindir / name}")
    return bindir


def module_dir(module: str, folder: Path) -> Path:
    """A module's source folder in Go's module cache, as the module in `folder` requires it."""
    out = subprocess.run(
        [go_command(), "mod", "download", "-json", module],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"},
    )
    try:
        d = Path(json.loads(out.stdout)["Dir"])
    except (ValueError, KeyError):
        why = out.stderr.strip() or out.stdout.strip()
        raise ClusterError(f"no source of {module} in Go's module cache: {why}") from None
    if not d.is_dir():
        raise ClusterError(f"no source of {module} in Go's module cache: {d}")
    return d


def _target_manifests(c: Cluster, name: str, t: TargetController, src: Path, port: int) -> Path:
    """The controller's manifests from its module through kustomize, as for the operator: without
    its Deployment (and the metrics Service of JobSet's), its webhook Service without a selector,
    an EndpointSlice routing that Service to the host process on the pod bridge's host address,
    and (Trainer's overlay makes them) its namespace and the empty Secret its cert rotator fills."""
    folder = c.dir / "targets" / name
    folder.mkdir(parents=True, exist_ok=True)
    extra = [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{t.service}-host",
                "namespace": t.namespace,
                "labels": {
                    "kubernetes.io/service-name": t.service,
                    "endpointslice.kubernetes.io/managed-by": "cluster.elastic-idl",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [str(BRIDGE_IP)], "conditions": {"ready": True}}],
            "ports": [{"name": t.service_port, "port": port, "protocol": "TCP"}],
        }
    ]
    if t.module == TRAINER_MODULE:
        extra.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": t.namespace}})
        extra.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": t.secret, "namespace": t.namespace}})
    (folder / "host.yaml").write_text(yaml.safe_dump_all(extra, sort_keys=False))
    kustomization: dict[str, object] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [*(os.path.relpath(src / b, folder) for b in t.bases), "host.yaml"],
        "patches": [
            {
                "target": {"kind": "Service", "name": t.service},
                "patch": yaml.safe_dump([{"op": "remove", "path": "/spec/selector"}]),
            },
        ],
    }
    if t.module == TRAINER_MODULE:
        kustomization["namespace"] = t.namespace
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    docs = [d for d in yaml.safe_load_all(c.kubectl("kustomize", str(folder)).stdout) if d]
    # Its Deployment and the metrics Service (nothing serves metrics here) are not applied.
    keep = [
        d
        for d in docs
        if d["kind"] != "Deployment" and not (d["kind"] == "Service" and d["metadata"]["name"] != t.service)
    ]
    rendered = c.dir / "targets" / f"{name}.yaml"
    rendered.write_text(yaml.safe_dump_all(keep, sort_keys=False))
    return rendered


def _webhook_probe_jobset(c: Cluster) -> bool:
    """A JobSet created with a server-side dry run: its mutating and validating webhooks (failure
    policy Fail) answered through the API server."""
    probe = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "node", "image": "example.com/x:1"}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }
    path = c.dir / "targets" / "jobset-webhook-probe.json"
    path.write_text(json.dumps(probe))
    return c.kubectl("create", "--dry-run=server", "-f", str(path), check=False, timeout=30).returncode == 0


def targets_running(c: Cluster) -> list[str]:
    running = c.running()
    return [n for n in TARGET_CONTROLLERS if n in running]


def targets_up(c: Cluster) -> dict[str, float]:
    """Start the JobSet and Trainer controllers on this running cluster (once: a second call finds
    them running and returns), install their CRDs, RBAC and webhook configuration from their
    modules' manifests, and Trainer's `torch-distributed` ClusterTrainingRuntime. Each runs as a
    host process as its Deployment would run it (leader election off, the probe on 127.0.0.1, its
    webhook server on the pod bridge's host address, a /tmp of its own where `sync_webhook_certs`
    plays its cert Secret's volume). Returns the seconds each step took. `down` stops them."""
    if "kube-apiserver" not in c.running():
        raise ClusterError(f"no cluster is running from {c.dir} (make cluster-up)")
    if len(targets_running(c)) == len(TARGET_CONTROLLERS):
        return dict(c.state.get("targets_timings") or {})  # type: ignore[arg-type]
    if targets_running(c):
        raise ClusterError(f"only {', '.join(targets_running(c))} of the render targets' controllers run")
    t0 = time.monotonic()
    bindir = build_part("targets", list(TARGET_CONTROLLERS))
    c.timings = {}
    c.state["targets_bin"] = str(bindir)
    names = [f"{n}-{p}" for n in TARGET_CONTROLLERS for p in ("webhook", "probe")]
    ports = free_ports(names)
    for name in TARGET_CONTROLLERS:
        check_port_free(str(BRIDGE_IP), ports[f"{name}-webhook"], f"the {name} webhook")
    c.state["targets_ports"] = ports
    c.save()
    for name, t in TARGET_CONTROLLERS.items():
        src = module_dir(t.module, TARGETS_DIR)
        manifests = _target_manifests(c, name, t, src, ports[f"{name}-webhook"])
        c.kubectl("apply", "--server-side", "--field-manager=cluster-up", "-f", str(manifests))
        crds = [
            d["metadata"]["name"]
            for d in yaml.safe_load_all(manifests.read_text())
            if d and d["kind"] == "CustomResourceDefinition"
        ]
        c.wait(
            f"{name} CRDs Established",
            None,
            lambda crds=crds: c.kubectl("wait", "--for=condition=Established", *(f"crd/{x}" for x in crds),
                                       "--timeout=5s", check=False).returncode == 0,
            60,
        )  # fmt: skip
        # Its identity: a token of its ServiceAccount (a client certificate's CN, at most 64
        # characters, cannot hold Trainer's 73-character user name).
        token = c.kubectl("create", "token", t.service_account, "-n", t.namespace, "--duration=720h").stdout.strip()
        kubeconfig = c.dir / f"{name}.kubeconfig"
        write_kubeconfig(kubeconfig, str(c.state["api"]), c.dir / "pki" / "ca.crt",
                         token=token)  # fmt: skip
        config = {
            "apiVersion": t.config_api,
            "kind": "Configuration",
            "webhook": {"port": ports[f"{name}-webhook"], "host": str(BRIDGE_IP)},
            "metrics": {"bindAddress": "0"},  # no metrics server
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ports[f'{name}-probe']}"},
            "leaderElection": {"leaderElect": False},
        }
        config_file = c.dir / "targets" / f"{name}-config.yaml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        tmp = c.dir / f"{name}-tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        argv = [str(bindir / name), f"--config={config_file}"]

        def start(
            name: str = name, tmp: Path = tmp, argv: list[str] = argv, kubeconfig: Path = kubeconfig
        ) -> subprocess.Popen[bytes]:
            return c.spawn(
                name,
                ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                 'mount --bind "$1" /tmp && shift && exec "$@"', "sh", str(tmp), *argv],
                env={"KUBECONFIG": str(kubeconfig)},
            )  # fmt: skip

        probe = ports[f"{name}-probe"]
        waits: list[tuple[str, Callable[[], bool], float]] = [
            (f"{name} certificate", lambda t=t, tmp=tmp: sync_webhook_certs(c, t.namespace, t.secret, tmp), 60),
            (name, lambda probe=probe: http_ok(f"http://127.0.0.1:{probe}/readyz"), 120),
        ]
        if t.module == JOBSET_MODULE:
            waits.append(("jobset-controller webhook", lambda: _webhook_probe_jobset(c), 60))
        else:
            # The runtime passes Trainer's validating webhook (failure policy Fail) once it answers.
            runtime = src / TRAINER_RUNTIME_FILE
            waits.append(
                (
                    f"ClusterTrainingRuntime {TRAINER_RUNTIME}",
                    lambda runtime=runtime: c.kubectl("apply", "--server-side", "--field-manager=cluster-up",
                                                      "-f", str(runtime), check=False, timeout=30).returncode == 0,
                    60,
                )
            )  # fmt: skip
        c.state[f"{name}_starts"] = c.start_until_up(start, waits, OPERATOR_STARTS)
    c.timings["targets total"] = round(time.monotonic() - t0, 1)
    c.state["targets_timings"] = c.timings
    c.save()
    print(f"== the render targets' controllers up in {c.timings['targets total']}s", flush=True)
    return dict(c.timings)


# ---------------------------------------------------------------- down


def stop_real_nodes(c: Cluster) -> list[str]:
    """Real Nodes go first and at once: every process in their cgroups (the pods' containers and
    sandboxes), then every process of the Node binaries (kubelets, containerds, their shims,
    kube-proxies), SIGKILLed; a Node's namespaces go with their holder (`stop`)."""
    parent = c.state.get("cgroup_parent")
    node_bin = c.state.get("node_bin")
    done = []
    if isinstance(parent, str):
        killed = realnode.cgroup_pids(parent)
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        realnode.thaw(parent)  # a frozen pod or lost Node (faults.py): its processes die once thawed
        if killed:
            done.append(f"killed {len(killed)} processes of the Nodes' pods")
    if isinstance(node_bin, str):
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                exe = os.readlink(proc / "exe")
            except OSError:
                continue
            if exe.startswith(f"{node_bin}/"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)
                done.append(f"killed {Path(exe).name} (pid {proc.name})")
    return done


def down(c: Cluster) -> list[str]:
    """Stop every process, remove the bridge; return what was done. The folder (logs, audit log)
    stays for reading; the next `up` clears it."""
    done = stop_real_nodes(c) + [f"stopped {n}" for n in c.stop()]
    made = c.state.get("cgroups_made")
    parent = c.state.get("cgroup_parent")
    if isinstance(made, list) and isinstance(parent, str):
        removed = realnode.remove_cgroups(parent, [str(m) for m in made])
        done += [f"removed the cgroup {d}" for d in removed]
        c.state.pop("cgroups_made", None)
    for link in realnode.host_links():
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        done.append(f"removed the Node link {link}")
    bridge = c.state.get("bridge")
    # A pod's veth goes with its sandbox; one left by a sandbox that outlived its agent goes here.
    ports = Path(f"/sys/class/net/{bridge}/brif")
    for veth in sorted(ports.iterdir()) if bridge and ports.is_dir() else []:
        subprocess.run(["ip", "link", "del", veth.name], check=False)
        done.append(f"removed the pod veth {veth.name}")
    if bridge and Path(f"/sys/class/net/{bridge}").exists():
        subprocess.run(["ip", "link", "del", str(bridge)], check=True)
        done.append(f"removed the bridge {bridge}")
    c.state.pop("bridge", None)
    if c.state_file.exists():
        c.save()
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=["up", "down", "targets-up", "restart"])
    parser.add_argument("component", nargs="?", help=f"restart: which ({', '.join(RESTARTABLE)})")
    parser.add_argument("--down-s", type=float, default=0.0, help="restart: seconds it stays down")
    parser.add_argument("--kill", action="store_true", help="restart: SIGKILL it (a crash), not SIGTERM")
    parser.add_argument("--nodes", type=int, help=f"how many Nodes (default: CLUSTER_NODES, else {NODE_COUNT})")
    args = parser.parse_args(argv)
    try:
        c = Cluster(cluster_dir())
        nodes = node_names(args.nodes)
    except ClusterError as e:
        print(f"cluster {args.command}: {e}", file=sys.stderr)
        return 1
    if args.command == "targets-up":
        try:
            targets_up(c)
        except (ClusterError, subprocess.CalledProcessError) as e:
            print(f"cluster targets-up: {e}", file=sys.stderr)
            return 1
        return 0
    if args.command == "restart":
        try:
            times = restart(c, args.component or "", args.down_s, kill=args.kill)
        except ClusterError as e:
            print(f"cluster restart: {e}", file=sys.stderr)
            return 1
        print(f"== {args.component} down {times['started'] - times['down']:.1f}s, "
              f"answering {times['ready'] - times['started']:.1f}s after its start")  # fmt: skip
        return 0
    if args.command == "down":
        for line in down(c):
            print(f"== {line}")
        print(f"== cluster down ({c.dir})")
        return 0
    try:
        up(c, nodes)
    except (ClusterError, KeyboardInterrupt, subprocess.CalledProcessError) as e:
        if isinstance(e, subprocess.CalledProcessError):
            e = ClusterError(f"{' '.join(map(str, e.cmd))} failed (exit {e.returncode})")
        print(f"cluster up: {e or 'interrupted'}", file=sys.stderr)
        if c.began:
            down(c)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
