"""The node agent: a stand-in for the kubelet and the network plugin (test equipment).

    python node_agent.py CONFIG.json

One process serving several Nodes (cluster/cluster.py writes the config and starts it). It is the
only part of the one-machine cluster that is not the real thing: no container runtime runs here,
so a pod's containers are processes in Linux namespaces (cluster/podinit.py). Every decision about
a job stays with the real components: the training operator makes pods and Services, the
scheduler binds pods, the controllers keep EndpointSlices, CoreDNS answers from them.

What it does, per Node, with that Node's own credentials (``system:node:<name>`` in
``system:nodes``; the API server's Node authorizer and NodeRestriction admission hold it to them):

- registers the Node, keeps its Lease (renewed every quarter of its duration) and its Ready condition;
- watches the pods bound to it (``spec.nodeName``); for each (keyed by UID):
  a sandbox (network, UTS and IPC namespaces; a veth on the pod bridge; an address of the pod
  range, a new one for every new pod, kept across in-place restarts; hostname = pod name), then
  each container as its own PID 1 in its own PID and mount namespaces (podinit.py), with the
  pod's /etc/hosts, /etc/resolv.conf (CoreDNS, the cluster search path, ndots:5), /tmp and
  emptyDirs; the env from the pod spec (values, the downward API, ``$(VAR)`` expansion, the
  ``kubernetes`` Service's link variables), the working directory, ``command`` or else ``args``;
- restarts containers by the pod's ``restartPolicy`` with the kubelet's back-off (Kubernetes
  1.36: the first restart at once, then 10 s doubling up to 300 s; reset after 600 s);
- graceful deletion: SIGTERM to each PID 1, SIGKILL after the grace period, the terminal phase,
  then the final delete of the object (grace 0, the pod's UID as precondition), as a kubelet
  does; a pod deleted with grace 0 (force) is killed at once;
- reports status as a kubelet does: phase, podIP(s), hostIP, conditions (Initialized,
  PodReadyToStartContainers, ContainersReady, Ready), containerStatuses (state, lastState,
  exitCode, reason, message from the termination log, restartCount, ready, started), Events
  (Started, Killing, BackOff, Failed).

It also injects faults on request (``Faults``: a control socket the chaos harness drives): a pod
partitioned, a namespace's links degraded, a Node lost, a pod's Ready withheld, a pod's start held,
a process killed. It never decides what a real component would.

What it does not do: images (the host's file system is every image; ``python`` is the project's
.venv), probes (a running container is Ready), cgroups and resource limits, init and sidecar
containers (a pod with them fails), volumes other than emptyDir, the kubelet's own API
(``kubectl logs``/``exec``/``port-forward``: the logs are files under the pod's folder), the
link variables of Services other than ``kubernetes``, host networking, dnsPolicy Default.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import ipaddress
import json
import logging
import math
import os
import re
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import faults  # cluster/faults.py: this folder is the script's, first on sys.path
from elastic_idl._task.resources import parse_quantity

HERE = Path(__file__).resolve().parent
PODINIT = HERE / "podinit.py"
FAULTS = HERE / "faults.py"
K8S_VERSION = "v1.36.3"

LEASE_SECONDS = 40  # the kubelet's nodeLeaseDurationSeconds (the config's lease_seconds wins)
LEASE_RENEW_FRACTION = 0.25  # renewed every quarter of it, as the kubelet renews
NODE_STATUS_EVERY = 60.0
# The kubelet's container restart back-off in Kubernetes 1.36 (pkg/kubelet: initialCrashLoopBackOff,
# MaxContainerBackOff; the entry is reset once it is older than twice the maximum).
BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
BACKOFF_RESET = 2 * BACKOFF_MAX
START_ERROR = 128  # podinit.py: the command could not start
TERMINATION_MESSAGE_MAX = 4096
FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES = 80, 2048
MOUNT_RETRY_SECONDS = 60.0
#: The sources of a projected volume the agent writes (what the service account admission adds).
PROJECTED_SOURCES = {"serviceAccountToken", "configMap", "downwardAPI"}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

log = logging.getLogger("node-agent")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the API server


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Api:
    """A client of the API server with one Node's certificate (one connection per call)."""

    def __init__(self, server: str, ca: str, cert: str, key: str) -> None:
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> dict[str, Any]:
        conn = self._conn(30)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        out = json.loads(raw) if raw else {}
        if resp.status >= 300:
            raise ApiError(resp.status, str(out.get("message", raw[:200])))
        return dict(out)

    def watch(self, path: str) -> Iterator[dict[str, Any]]:
        """The events of one watch request (it ends after timeoutSeconds; the caller re-watches)."""
        conn = self._conn(90)
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise ApiError(resp.status, resp.read()[:200].decode(errors="replace"))
            while True:
                line = resp.readline()
                if not line:
                    return
                yield json.loads(line)
        finally:
            conn.close()


# ---------------------------------------------------------------- addresses


class Ipam:
    """Addresses of the pod range, handed out round-robin: a new pod never gets the address a
    pod had just before (a recreated pod has a new address, as with a real network plugin)."""

    def __init__(self, cidr: str, reserved: set[str]) -> None:
        net = ipaddress.ip_network(cidr)
        self.prefix = net.prefixlen
        self.pool = [str(a) for a in net.hosts() if str(a) not in reserved]
        self.used: set[str] = set()
        self.next = 0
        self.lock = threading.Lock()

    def allocate(self) -> str:
        with self.lock:
            for i in range(len(self.pool)):
                addr = self.pool[(self.next + i) % len(self.pool)]
                if addr not in self.used:
                    self.used.add(addr)
                    self.next = (self.next + i + 1) % len(self.pool)
                    return addr
        raise RuntimeError("the pod range has no free address")

    def release(self, addr: str) -> None:
        with self.lock:
            self.used.discard(addr)


def run(*argv: str) -> None:
    """A fixed command (no shell); its stderr in the error when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")


# ---------------------------------------------------------------- env and quantities


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][-._A-Za-z0-9]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: a defined VAR is replaced, an undefined one kept as
    written, ``$$`` is one ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF.sub(sub, text)


def resource_value(
    pod: dict[str, Any], container: dict[str, Any], ref: dict[str, Any], node_alloc: dict[str, str]
) -> str:
    """A resourceFieldRef as the kubelet gives it: the value divided by the divisor, rounded up;
    an unset limit is the node's allocatable."""
    kind, _, name = ref["resource"].partition(".")
    res = container.get("resources", {})
    text = res.get(kind, {}).get(name)
    if text is None and kind == "requests":
        text = res.get("limits", {}).get(name)
    if text is None:
        text = node_alloc.get(name, "0")
    divisor = parse_quantity(str(ref.get("divisor", "1")))
    if divisor == 0:
        divisor = Decimal(1)
    return str(math.ceil(parse_quantity(str(text)) / divisor))


def field_value(pod: dict[str, Any], path: str) -> str:
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str(meta.get(m.group(1), {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIPs": ",".join(a["ip"] for a in status.get("hostIPs", [])),
        "status.podIPs": ",".join(a["ip"] for a in status.get("podIPs", [])),
    }
    if path not in simple:
        raise ValueError(f"fieldRef {path} is not supported by the node agent")
    return str(simple[path])


# ---------------------------------------------------------------- containers


@dataclass
class Container:
    spec: dict[str, Any]
    dir: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    finished_mono: float = 0.0
    backoff: float = 0.0
    backoff_updated: float = -1e9
    done: bool = False  # terminated and not to be restarted
    #: Why the agent signalled it ("deletion", "fault", "node-lost"); None: it ended by itself.
    killed_by: str | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def pid1(self) -> int | None:
        try:
            return int((self.dir / "pid").read_text())
        except (OSError, ValueError):
            return None

    def signal(self, sig: int, why: str | None = None) -> None:
        if why is not None and self.killed_by is None:
            self.killed_by = why
        pid = self.pid1()
        try:
            if pid is not None:
                os.kill(pid, sig)
            elif self.proc is not None:
                self.proc.send_signal(sig)  # not started yet: its wrapper (PID 1 dies with it)
        except ProcessLookupError:
            pass


class PodWorker(threading.Thread):
    """One pod bound to this node, from its sandbox to its final delete."""

    def __init__(self, node: Node, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.node = node
        self.pod = pod
        self.uid: str = meta["uid"]
        self.ns: str = meta["namespace"]
        self.pod_name: str = meta["name"]
        self.dir = node.agent.pods_dir / f"{self.ns}_{self.pod_name}_{self.uid}"
        self.wake = threading.Event()
        self.gone = False  # the object is deleted (a force delete, or our final delete)
        self.ip: str | None = None
        self.sandbox: subprocess.Popen[bytes] | None = None
        self.veth = f"ev{self.uid.replace('-', '')[:10]}"
        self.port: str | None = None  # the pod's port on the pod bridge: its veth, or its netem tap
        self.netem: faults.Forwarder | None = None
        self.withhold_until: float | None = None  # the Ready condition is False until then (a fault)
        self.containers: list[Container] = []
        self.start_time = now()
        self.kill_deadline: float | None = None
        self.killing = False
        self.reported: dict[str, Any] | None = None
        self.failure: tuple[str, str] | None = None  # (reason, message): the pod cannot run here

    # -- from the watch

    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.wake.set()

    def deleted(self) -> None:
        self.gone = True
        self.wake.set()

    # -- the loop

    def run(self) -> None:
        try:
            self.setup()
            self.loop()
        except Exception as e:  # a defect of the agent: log it, stop the pod's processes
            log.exception("pod %s/%s: %s", self.ns, self.pod_name, e)
        finally:
            self.teardown()
            self.node.finished(self.uid)

    def setup(self) -> None:
        spec = self.pod["spec"]
        for key, why in (("initContainers", "init containers"), ("ephemeralContainers", "ephemeral containers")):
            if spec.get(key):
                self.failure = ("Unsupported", f"{why} are not run by the node agent")
        if spec.get("hostNetwork"):
            self.failure = ("Unsupported", "hostNetwork pods are not run by the node agent")
        if spec.get("dnsPolicy") == "Default":
            self.failure = ("Unsupported", "dnsPolicy Default: no DNS but the cluster's here")
        for vol in spec.get("volumes", []):
            sources = {k for src in vol.get("projected", {}).get("sources", []) for k in src}
            if "emptyDir" not in vol and not ("projected" in vol and sources <= PROJECTED_SOURCES):
                self.failure = (
                    "Unsupported",
                    f"volume {vol['name']}: the node agent mounts emptyDir and projected volumes "
                    f"(sources {', '.join(sorted(PROJECTED_SOURCES))}) only",
                )
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(exist_ok=True)
        (self.dir / "tmp").chmod(0o1777)
        for vol in spec.get("volumes", []):
            (self.dir / "volumes" / vol["name"]).mkdir(parents=True, exist_ok=True)
        self.containers = [Container(c, self.dir / "containers" / c["name"]) for c in spec["containers"]]
        for c in self.containers:
            c.dir.mkdir(parents=True, exist_ok=True)
        # The volumes, retried as the kubelet retries a mount (the pod stays ContainerCreating):
        # right after binding, the Node authorizer may not know the pod is this node's yet (403),
        # and a new namespace's kube-root-ca.crt may not be published yet (404).
        deadline = time.monotonic() + MOUNT_RETRY_SECONDS
        while self.failure is None and not self.gone:
            try:
                for vol in spec.get("volumes", []):
                    if "projected" in vol:
                        self.project(vol)
                break
            except ApiError as e:
                if e.status not in (403, 404) or time.monotonic() > deadline:
                    self.failure = ("FailedMount", f"volume: {e}")
                self.wake.wait(0.5)
            except (OSError, KeyError, ValueError) as e:
                self.failure = ("FailedMount", f"volume: {e}")
        if self.failure:
            self.node.event(self.pod, "Warning", "Failed", self.failure[1])
            return
        self.start_sandbox()

    def project(self, vol: dict[str, Any]) -> None:
        """A projected volume's files, as the kubelet writes them: the service account token
        (a TokenRequest bound to this pod), config map keys, downward API fields."""
        folder = self.dir / "volumes" / vol["name"]
        spec = vol["projected"]
        files: dict[str, bytes] = {}
        for src in spec.get("sources", []):
            if "serviceAccountToken" in src:
                req = src["serviceAccountToken"]
                sa = self.pod["spec"].get("serviceAccountName", "default")
                body: dict[str, Any] = {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {
                        "expirationSeconds": int(req.get("expirationSeconds", 3600)),
                        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.uid},
                    },
                }
                if req.get("audience"):
                    body["spec"]["audiences"] = [req["audience"]]
                token = self.node.api.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", body)
                files[req["path"]] = token["status"]["token"].encode()
            elif "configMap" in src:
                ref = src["configMap"]
                cm = self.node.api.call("GET", f"/api/v1/namespaces/{self.ns}/configmaps/{ref['name']}")
                items = ref.get("items") or [{"key": k, "path": k} for k in cm.get("data", {})]
                for item in items:
                    files[item["path"]] = str(cm.get("data", {})[item["key"]]).encode()
            elif "downwardAPI" in src:
                for item in src["downwardAPI"].get("items", []):
                    files[item["path"]] = field_value(self.pod, item["fieldRef"]["fieldPath"]).encode()
        for rel, data in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(spec.get("defaultMode", 0o644))

    def start_sandbox(self) -> None:
        agent = self.node.agent
        self.ip = agent.ipam.allocate()
        self.sandbox = subprocess.Popen(
            [agent.python, str(PODINIT), "sandbox", self.hostname(), str(self.dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=(self.dir / "sandbox.log").open("ab"),
            env={"PATH": DEFAULT_PATH},
        )
        assert self.sandbox.stdout is not None
        if self.sandbox.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the sandbox did not start (see {self.dir / 'sandbox.log'})")
        pid = str(self.sandbox.pid)
        run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", pid)
        degrade = agent.faults.degraded.get(self.ns)
        if degrade is None:
            run("ip", "link", "set", self.veth, "master", agent.bridge, "up")
            self.port = self.veth
        else:
            # A degraded link (the fault `degrade`): the veth stays off the bridge and a forwarder
            # carries the pod's frames to a tap on the bridge, each delayed and some dropped, as
            # `tc netem` on the pod's eth0 would (this kernel has no netem).
            self.netem = Netem(agent, self, degrade)
            self.port = self.netem.tap_name
        for args in (
            ("addr", "add", f"{self.ip}/{agent.ipam.prefix}", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "set", "lo", "up"),
        ):
            run("nsenter", f"--net=/proc/{pid}/ns/net", "ip", *args)
        if self.netem is not None:
            # Whole frames with their checksums through the forwarder: no segmentation or checksum offload.
            run("nsenter", f"--net=/proc/{pid}/ns/net", agent.python, str(FAULTS), "offload-off", "eth0")
        self.write_etc()

    def hostname(self) -> str:
        return str(self.pod["spec"].get("hostname") or self.pod_name)[:63]

    def write_etc(self) -> None:
        agent = self.node.agent
        spec = self.pod["spec"]
        host = self.hostname()
        names = [host]
        if spec.get("subdomain"):
            names.insert(0, f"{host}.{spec['subdomain']}.{self.ns}.svc.{agent.domain}")
        hosts = [
            "# Kubernetes-managed hosts file (the node agent).",
            "127.0.0.1\tlocalhost",
            f"{self.ip}\t{chr(9).join(names)}",
        ]
        for alias in spec.get("hostAliases", []):
            hosts.append(f"{alias['ip']}\t{chr(9).join(alias.get('hostnames', []))}")
        (self.dir / "hosts").write_text("\n".join(hosts) + "\n")
        (self.dir / "hostname").write_text(host + "\n")
        nameservers, search, options = (
            [agent.dns],
            [f"{self.ns}.svc.{agent.domain}", f"svc.{agent.domain}", agent.domain],
            ["ndots:5"],
        )
        if spec.get("dnsPolicy") == "None":
            nameservers, search, options = [], [], []
        cfg = spec.get("dnsConfig", {})
        nameservers += cfg.get("nameservers", [])
        search += cfg.get("searches", [])
        options += [o["name"] + (f":{o['value']}" if o.get("value") else "") for o in cfg.get("options", [])]
        lines = [f"nameserver {n}" for n in nameservers]
        if search:
            lines.append("search " + " ".join(search))
        if options:
            lines.append("options " + " ".join(options))
        (self.dir / "resolv.conf").write_text("\n".join(lines) + "\n")

    def container_env(self, c: Container) -> dict[str, str]:
        agent = self.node.agent
        pod = {**self.pod, "status": self.status_body()}
        env = {"PATH": f"{agent.image_path}:{DEFAULT_PATH}", "HOSTNAME": self.hostname(), "HOME": "/root"}
        # The `kubernetes` Service's link variables (the kubelet sets them in every pod, whatever
        # enableServiceLinks says; the jobs' own Services are headless, which it skips).
        ip = agent.api_service_ip
        env |= {
            "KUBERNETES_SERVICE_HOST": ip,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
            "KUBERNETES_PORT": f"tcp://{ip}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{ip}:443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_ADDR": ip,
        }
        for var in c.spec.get("env", []):
            if "value" in var or "valueFrom" not in var:
                env[var["name"]] = expand(str(var.get("value", "")), env)
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                env[var["name"]] = field_value(pod, source["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in source:
                env[var["name"]] = resource_value(pod, c.spec, source["resourceFieldRef"], agent.allocatable)
            else:
                raise ValueError(f"env {var['name']}: {next(iter(source))} is not supported by the node agent")
        if c.spec.get("envFrom"):
            raise ValueError("envFrom is not supported by the node agent")
        return env

    def start_container(self, c: Container) -> None:
        assert self.sandbox is not None and self.ip is not None
        try:
            env = self.container_env(c)
        except ValueError as e:
            self.set_waiting(c, "CreateContainerConfigError", str(e))
            c.done = True
            return
        command = [expand(a, env) for a in c.spec.get("command", [])]
        args = [expand(a, env) for a in c.spec.get("args", [])]
        argv = command + args if command else args  # no command: the args run (an image without an entrypoint)
        if not argv:
            self.set_waiting(c, "CreateContainerError", "neither command nor args: there is no image entrypoint here")
            c.done = True
            return
        mounts = []
        vols = {v["name"]: v for v in self.pod["spec"].get("volumes", [])}
        for vm in c.spec.get("volumeMounts", []):
            vol = vols[vm["name"]].get("emptyDir") or {}
            size = vol.get("sizeLimit") or self.node.agent.allocatable["memory"]
            mounts.append(
                {
                    "name": vm["name"],
                    "path": vm["mountPath"],
                    "source": str(self.dir / "volumes" / vm["name"]),
                    "medium": vol.get("medium", ""),
                    "size_kib": int(parse_quantity(str(size)) // 1024),
                }
            )
        term_log = c.dir / f"termination-log.{c.restarts}"
        term_log.write_text("")
        spec = {
            "sandbox_pid": self.sandbox.pid,
            "argv": argv,
            "env": env,
            "cwd": c.spec.get("workingDir") or "/",
            "tmp": str(self.dir / "tmp"),
            "etc": {
                str(self.dir / "hosts"): "/etc/hosts",
                str(self.dir / "hostname"): "/etc/hostname",
                str(self.dir / "resolv.conf"): "/etc/resolv.conf",
            },
            "mounts": mounts,
            "keep": self.node.agent.image_folders,
            "termination_log": str(term_log),
            "pid_file": str(c.dir / "pid"),
        }
        (c.dir / "pid").unlink(missing_ok=True)
        (c.dir / "spec.json").write_text(json.dumps(spec, indent=1))
        with (c.dir / "log").open("ab") as out:
            out.write(f"==== {now()} start #{c.restarts}: {argv}\n".encode())
            out.flush()
            c.proc = subprocess.Popen(
                [self.node.agent.python, str(PODINIT), "container", str(c.dir / "spec.json")],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={"PATH": DEFAULT_PATH},
            )
        c.state = {"running": {"startedAt": now()}}
        c.killed_by = None
        withhold = self.node.agent.faults.take_withhold(self)
        if withhold is not None:
            self.withhold_until = time.monotonic() + withhold
        self.node.agent.lifecycle(self, "start", container=c.name, restart=c.restarts, ip=self.ip)
        self.node.event(self.pod, "Normal", "Started", f"Started container {c.name}", c.name)

    def set_waiting(self, c: Container, reason: str, message: str) -> None:
        c.state = {"waiting": {"reason": reason, "message": message}}
        self.node.event(self.pod, "Warning", "Failed", f"Error: {message}", c.name)

    def exited(self, c: Container, code: int) -> None:
        assert c.proc is not None
        c.finished_mono = time.monotonic()
        message = ""
        term_log = c.dir / f"termination-log.{c.restarts}"
        if term_log.exists():
            message = term_log.read_bytes()[:TERMINATION_MESSAGE_MAX].decode(errors="replace")
        if code == START_ERROR and not message:
            message = self.log_tail(c)
        if not message and code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = self.log_tail(c)
        reason = "StartError" if code == START_ERROR else "Completed" if code == 0 else "Error"
        started = c.state.get("running", {}).get("startedAt", now())
        c.state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now()}}
        if message:
            c.state["terminated"]["message"] = message
        c.proc = None
        self.node.agent.lifecycle(self, "exit", container=c.name, restart=c.restarts, code=code, killed_by=c.killed_by)
        policy = self.pod["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        c.done = self.killing or not restart

    def log_tail(self, c: Container) -> str:
        try:
            lines = (c.dir / "log").read_bytes().splitlines()[-FALLBACK_LOG_LINES:]
        except OSError:
            return ""
        return b"\n".join(lines)[-FALLBACK_LOG_BYTES:].decode(errors="replace")

    def maybe_restart(self, c: Container) -> None:
        """The kubelet's doBackOff: in back-off while less than the delay has passed since the
        container finished; otherwise restart now and move the delay to the next mark."""
        t = time.monotonic()
        if c.backoff and t - c.backoff_updated <= BACKOFF_RESET and t - c.finished_mono < c.backoff:
            if "waiting" not in c.state:
                c.last_state = {"terminated": c.state["terminated"]}
                delay = int(c.backoff)
                c.state = {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {delay}s restarting failed container={c.name} pod={self.pod_name}_{self.ns}({self.uid})",
                    }
                }
                self.node.event(
                    self.pod, "Warning", "BackOff", f"Back-off restarting failed container {c.name}", c.name
                )
            return
        if not c.backoff or t - c.backoff_updated > BACKOFF_RESET:
            c.backoff = BACKOFF_INITIAL
        else:
            c.backoff = min(c.backoff * 2, BACKOFF_MAX)
        c.backoff_updated = t
        if "terminated" in c.state:
            c.last_state = {"terminated": c.state["terminated"]}
        c.restarts += 1
        self.start_container(c)

    def loop(self) -> None:
        # The fault `hold-start`: the containers wait (ContainerCreating, as behind a slow image pull).
        while self.failure is None and self.node.agent.faults.held(self) and not self.gone:
            if self.pod["metadata"].get("deletionTimestamp"):
                break
            if not self.node.lost.is_set():
                self.report()
            self.wake.wait(0.2)
            self.wake.clear()
        if self.failure is None:
            for c in self.containers:
                self.start_container(c)
        while True:
            if self.node.lost.is_set():  # the fault `lose-node`: a dead kubelet does nothing
                self.wake.wait(0.5)
                self.wake.clear()
                continue
            if self.gone:  # force-deleted (or our final delete went through): stop at once
                self.kill_now()
                return
            meta = self.pod["metadata"]
            if meta.get("deletionTimestamp") and not self.killing:
                self.killing = True
                grace = float(meta.get("deletionGracePeriodSeconds", 30))
                self.kill_deadline = time.monotonic() + grace
                for c in self.containers:
                    if c.proc is not None:
                        self.node.event(self.pod, "Normal", "Killing", f"Stopping container {c.name}", c.name)
                        c.signal(signal.SIGTERM if grace > 0 else signal.SIGKILL, "deletion")
                    if c.proc is None:
                        c.done = True
            if self.killing and self.kill_deadline is not None and time.monotonic() >= self.kill_deadline:
                for c in self.containers:
                    if c.proc is not None:
                        c.signal(signal.SIGKILL, "deletion")
                self.kill_deadline = None
            for c in self.containers:
                if c.proc is not None and (code := c.proc.poll()) is not None:
                    self.exited(c, code)
                if c.proc is None and not c.done and not self.killing and self.failure is None:
                    self.maybe_restart(c)
            terminal = self.failure is not None or all(c.done for c in self.containers)
            self.report()
            if terminal:
                self.stop_sandbox()
                if self.killing or meta.get("deletionTimestamp"):
                    self.final_delete()
                    return
                # A finished pod stays (the operator's to clean up); wait for its deletion.
                if self.failure is None and not self.gone:
                    self.wake.wait(1.0)
                    self.wake.clear()
                    if self.pod["metadata"].get("deletionTimestamp"):
                        self.killing = True
                    continue
            self.wake.wait(0.2)
            self.wake.clear()

    def kill_now(self, why: str = "deletion") -> None:
        for c in self.containers:
            if c.proc is not None:
                c.signal(signal.SIGKILL, why)
                try:
                    code = c.proc.wait(10)
                except subprocess.TimeoutExpired:
                    c.proc.kill()
                    code = c.proc.wait()
                c.proc = None
                self.node.agent.lifecycle(
                    self, "exit", container=c.name, restart=c.restarts, code=code, killed_by=c.killed_by
                )

    def final_delete(self) -> None:
        if self.gone:
            return
        try:
            self.node.api.call(
                "DELETE",
                f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}",
                {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": self.uid},
                },
            )
        except ApiError as e:
            if e.status not in (404, 409):
                raise

    def stop_sandbox(self) -> None:
        if self.netem is not None:
            self.netem.stop()
            self.netem = None
        if self.sandbox is not None:
            self.sandbox.kill()
            self.sandbox.wait()
            self.sandbox = None
        if self.ip is not None:
            self.node.agent.ipam.release(self.ip)

    def teardown(self) -> None:
        self.kill_now()
        self.stop_sandbox()
        self.ip = None

    # -- faults (node_agent.py, "Faults")

    def container_pids(self) -> list[int]:
        """Every process of the pod's containers, as host PIDs: the members of each container's
        PID namespace (its PID 1 and all it started)."""
        namespaces = set()
        for c in self.containers:
            pid = c.pid1()
            if pid is not None and c.proc is not None:
                with _suppress_gone():
                    namespaces.add(os.readlink(f"/proc/{pid}/ns/pid"))
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with _suppress_gone():
                    if os.readlink(f"/proc/{entry}/ns/pid") in namespaces:
                        pids.append(int(entry))
        return pids

    def host_pid(self, pid_in_pod: int) -> int | None:
        """The host PID of the process that is `pid_in_pod` in one of the pod's containers."""
        for pid in self.container_pids():
            with _suppress_gone():
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("NSpid:") and int(line.split()[-1]) == pid_in_pod:
                        return pid
        return None

    def set_port(self, forwarding: bool) -> None:
        """The pod's bridge port forwarding, or disabled: a disabled port drops every frame to and
        from the pod without a trace (no FIN, no RST, no ICMP); the pod's own link stays up."""
        if self.port is not None and Path(f"/sys/class/net/{self.port}").exists():
            run("bridge", "link", "set", "dev", self.port, "state", "3" if forwarding else "0")

    def freeze(self) -> list[int]:
        """The Node is lost: every process of the pod stopped (SIGSTOP), every frame dropped."""
        self.set_port(False)
        pids = self.container_pids()
        for pid in pids:
            with _suppress_gone():
                os.kill(pid, signal.SIGSTOP)
        return pids

    def power_off(self) -> None:
        """The lost Node comes back rebooted: the pod's processes are gone (SIGKILL: they were
        stopped), its containers exited as a machine's power loss ends them."""
        for c in self.containers:
            if c.proc is not None:
                c.signal(signal.SIGKILL, "node-lost")
        with contextlib.suppress(RuntimeError):
            self.set_port(True)

    # -- status

    def phase(self) -> str:
        if self.failure is not None:
            return "Failed"
        if all(c.done for c in self.containers) and all("terminated" in c.state for c in self.containers):
            codes = [c.state["terminated"]["exitCode"] for c in self.containers]
            return "Succeeded" if all(code == 0 for code in codes) else "Failed"
        if all(c.done and "waiting" in c.state for c in self.containers):
            return "Failed"
        if any("running" in c.state or c.restarts or "terminated" in c.state for c in self.containers):
            return "Running"
        return "Pending"

    def status_body(self) -> dict[str, Any]:
        agent = self.node.agent
        withheld = False  # the fault `withhold-ready`
        if self.withhold_until is not None:
            if time.monotonic() < self.withhold_until:
                withheld = True
            else:
                self.withhold_until = None
                self.node.agent.faults.log("withhold-ready ended", ns=self.ns, pod=self.pod_name, uid=self.uid)
        ready = (
            bool(self.containers)
            and all("running" in c.state for c in self.containers)
            and not self.killing
            and not withheld
        )
        stamp = now()

        def cond(kind: str, ok: bool, reason: str | None = None) -> dict[str, Any]:
            old = {c["type"]: c for c in (self.reported or {}).get("conditions", [])}.get(kind)
            status = "True" if ok else "False"
            since = stamp if old is None or old["status"] != status else old["lastTransitionTime"]
            out = {"type": kind, "status": status, "lastTransitionTime": since}
            if reason and not ok:
                out["reason"] = reason
            return out

        conditions = [
            cond("PodReadyToStartContainers", self.sandbox is not None),
            cond("Initialized", True),
            cond("ContainersReady", ready, "ContainersNotReady"),
            cond("Ready", ready, "ContainersNotReady"),
        ]
        conditions += [c for c in self.pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"]
        statuses = []
        for c in self.containers:
            running = "running" in c.state
            s: dict[str, Any] = {
                "name": c.name,
                "image": c.spec.get("image", ""),
                "imageID": "",
                "ready": running and not self.killing and not withheld,
                "started": running,
                "restartCount": c.restarts,
                "state": c.state,
            }
            if "waiting" not in c.state or c.restarts:
                s["containerID"] = f"eidl://{self.uid}/{c.name}/{c.restarts}"
            if c.last_state:
                s["lastState"] = c.last_state
            statuses.append(s)
        body: dict[str, Any] = {
            "phase": self.phase(),
            "conditions": conditions,
            "hostIP": agent.host_ip,
            "hostIPs": [{"ip": agent.host_ip}],
            "startTime": self.start_time,
            "containerStatuses": statuses,
            "qosClass": self.pod.get("status", {}).get("qosClass", "BestEffort"),
        }
        if self.ip is not None or (self.reported or {}).get("podIP"):
            ip = self.ip or (self.reported or {})["podIP"]
            body |= {"podIP": ip, "podIPs": [{"ip": ip}]}
        if self.failure is not None:
            body |= {"reason": self.failure[0], "message": self.failure[1]}
        return body

    def report(self) -> None:
        body = self.status_body()
        if self.reported is not None and _same(body, self.reported):
            return
        try:
            self.node.api.call(
                "PATCH",
                f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}/status",
                {"metadata": {"uid": self.uid}, "status": body},
                "application/merge-patch+json",
            )
        except ApiError as e:
            # Deleted meanwhile, or the name is another pod's now (409: the UID precondition; 403:
            # NodeRestriction, when that pod is bound to another node).
            # (422 names metadata.uid when the new pod of that name is on this node: the merge
            # patch's UID is refused as a change of an immutable field.)
            if e.status in (403, 404, 409) or (e.status == 422 and "metadata.uid" in str(e)):
                self.gone = True
                return
            raise
        self.reported = body


def _suppress_gone() -> contextlib.AbstractContextManager[None]:
    """A process that ended meanwhile (its /proc entry is gone) is no error."""
    return contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError, ValueError, IndexError)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# ---------------------------------------------------------------- nodes


class Node:
    def __init__(self, agent: Agent, name: str, cert: str, key: str) -> None:
        self.agent = agent
        self.name = name
        self.api = Api(agent.server, agent.ca, cert, key)
        self.workers: dict[str, PodWorker] = {}
        self.finished_uids: set[str] = set()
        self.lock = threading.Lock()
        self.last_status = 0.0
        #: The fault `lose-node`: no Lease, no status, no pod handled, until `restore-node`.
        self.lost = threading.Event()

    def node_status(self) -> dict[str, Any]:
        stamp = now()

        def cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": self.agent.started,
            }

        return {
            "capacity": self.agent.capacity,
            "allocatable": self.agent.allocatable,
            "conditions": [
                cond(
                    "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
                ),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "the elastic-idl node agent is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.agent.host_ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": self.agent.boot_id,
                "kernelVersion": os.uname().release,
                "osImage": "the host (elastic-idl node agent)",
                "containerRuntimeVersion": "elastic-idl-node-agent://1",
                "kubeletVersion": K8S_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64" if os.uname().machine == "x86_64" else os.uname().machine,
            },
        }

    def register(self) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": self.node_status()["nodeInfo"]["architecture"],
                },
            },
            "spec": {},
        }
        try:
            self.api.call("POST", "/api/v1/nodes", body)
        except ApiError as e:
            if e.status != 409:
                raise
        self.post_status()

    def post_status(self) -> None:
        self.api.call(
            "PATCH", f"/api/v1/nodes/{self.name}/status", {"status": self.node_status()}, "application/merge-patch+json"
        )
        self.last_status = time.monotonic()

    def renew_lease(self, node_uid: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": self.agent.lease_seconds, "renewTime": stamp}
        try:
            lease = self.api.call("GET", path)
        except ApiError as e:
            if e.status != 404:
                raise
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node_uid}
            meta = {"name": self.name, "namespace": "kube-node-lease", "ownerReferences": [owner]}
            self.api.call(
                "POST",
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec},
            )
            return
        lease["spec"] = {**lease.get("spec", {}), **spec}
        self.api.call("PUT", path, lease)

    def heartbeat(self) -> None:
        node_uid = self.api.call("GET", f"/api/v1/nodes/{self.name}")["metadata"]["uid"]
        while not self.agent.stopping.is_set():
            try:
                if not self.lost.is_set():
                    self.renew_lease(node_uid)
                    if time.monotonic() - self.last_status >= NODE_STATUS_EVERY:
                        self.post_status()
            except (ApiError, OSError) as e:
                log.warning("node %s: heartbeat: %s", self.name, e)
            self.agent.stopping.wait(self.agent.lease_seconds * LEASE_RENEW_FRACTION)

    def watch_pods(self) -> None:
        selector = urllib.parse.quote(f"spec.nodeName={self.name}")
        base = f"/api/v1/pods?fieldSelector={selector}"
        while not self.agent.stopping.is_set():
            if self.lost.is_set():  # a lost Node watches nothing; back, it lists its pods afresh
                self.agent.stopping.wait(0.5)
                continue
            try:
                listing = self.api.call("GET", base)
                seen = set()
                for pod in listing.get("items", []):
                    seen.add(pod["metadata"]["uid"])
                    self.pod_event("MODIFIED", pod)
                for uid in list(self.workers):
                    if uid not in seen:
                        self.workers[uid].deleted()
                rv = listing["metadata"]["resourceVersion"]
                while not self.agent.stopping.is_set() and not self.lost.is_set():
                    for ev in self.api.watch(
                        f"{base}&watch=1&resourceVersion={rv}&timeoutSeconds=60&allowWatchBookmarks=true"
                    ):
                        if self.lost.is_set():
                            break
                        obj = ev["object"]
                        if ev["type"] == "ERROR":
                            raise ApiError(int(obj.get("code", 500)), str(obj.get("message")))
                        rv = obj["metadata"]["resourceVersion"]
                        if ev["type"] != "BOOKMARK":
                            self.pod_event(ev["type"], obj)
            except (ApiError, OSError, ValueError) as e:
                if not self.agent.stopping.is_set():
                    log.info("node %s: pod watch restarts: %s", self.name, e)
                    time.sleep(0.5)

    def pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            worker = self.workers.get(uid)
            if kind == "DELETED":
                if worker is not None:
                    worker.deleted()
                self.finished_uids.discard(uid)
                return
            if worker is not None:
                worker.update(pod)
            elif uid not in self.finished_uids and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                worker = PodWorker(self, pod)
                self.workers[uid] = worker
                worker.start()

    def lose(self) -> list[dict[str, Any]]:
        """The fault `lose-node`: the Node stops renewing its Lease and status and handles nothing;
        each of its pods is frozen (SIGSTOP) and cut off (every frame dropped)."""
        self.lost.set()
        with self.lock:
            workers = list(self.workers.values())
        frozen = []
        for w in workers:
            pids = w.freeze()
            frozen.append({"namespace": w.ns, "pod": w.pod_name, "uid": w.uid, "pids": len(pids)})
        return frozen

    def restore(self) -> list[dict[str, Any]]:
        """The fault `restore-node`: the lost Node is back, rebooted: its pods' processes are gone
        (their containers exit 137, as a kubelet after a reboot finds them); it renews its Lease
        and status again and lists its pods afresh (those deleted meanwhile are torn down)."""
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.power_off()
        self.lost.clear()
        try:
            self.post_status()
        except (ApiError, OSError) as e:
            log.warning("node %s: status after restore: %s", self.name, e)
        for w in workers:
            w.wake.set()
        return [{"namespace": w.ns, "pod": w.pod_name, "uid": w.uid} for w in workers]

    def finished(self, uid: str) -> None:
        with self.lock:
            self.workers.pop(uid, None)
            self.finished_uids.add(uid)

    def event(self, pod: dict[str, Any], kind: str, reason: str, message: str, container: str | None = None) -> None:
        meta = pod["metadata"]
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        }
        if container:
            obj["fieldPath"] = f"spec.containers{{{container}}}"
        stamp = now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"]},
            "involvedObject": obj,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": "kubelet", "host": self.name},
            "reportingComponent": "kubelet",
            "reportingInstance": self.name,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.api.call("POST", f"/api/v1/namespaces/{meta['namespace']}/events", body)
        except (ApiError, OSError) as e:
            log.info("event %s for %s: %s", reason, meta["name"], e)


# ---------------------------------------------------------------- faults

FaultError = faults.FaultError  # a request refused: the message names the field and the rule


def Netem(agent: Agent, worker: PodWorker, params: dict[str, Any]) -> faults.Forwarder:
    """A degraded link for one pod (faults.Forwarder): the pod's veth stays off the bridge, its
    frames reach a tap on the bridge `delay_ms` late, a `loss` share dropped (drawn from `seed`, the
    pod's name and UID). The tap goes with its file (the agent's exit removes it); the veth goes
    with the pod's network namespace."""
    ids = {"ns": worker.ns, "pod": worker.pod_name, "uid": worker.uid}

    def stopped(counts: dict[str, int]) -> None:
        agent.faults.log("netem stopped", **ids, **counts)

    return faults.Forwarder(
        worker.veth, agent.bridge, "evt" + worker.veth[2:], float(params["delay_ms"]), float(params["loss"]),
        f"{params['seed']}:{worker.ns}/{worker.pod_name}:{worker.uid}", stopped,
    )  # fmt: skip


class Faults:
    """The faults the chaos harness asks for, over the control socket (one JSON request per line,
    one JSON answer per line). The agent injects them as a network, a machine or a slow image
    registry would fail; it never decides what a real component would (the node lifecycle
    controller, the taint eviction and pod garbage collectors, the operator and the scheduler
    decide what follows). Every fault injected and healed goes to the fault log (JSON lines,
    host times), and every container start and exit to the lifecycle log.

    Requests (`op` and its fields):

    - ``kill`` namespace, pod, signal (a number or a name such as ``SIGKILL``); ``pid`` (the PID
      inside the pod, as the process sees it: a worker process) or else the container's PID 1;
    - ``partition`` namespace, pod, seconds: every frame to and from the pod dropped (its bridge
      port disabled: no FIN, no RST, no ICMP), healed after `seconds`; ``heal`` namespace, pod;
    - ``degrade`` namespace, loss (0..1), delay_ms, seed: every pod of the namespace started from
      now on sends through a degraded link (`Netem`); ``off: true`` ends it for new pods;
    - ``lose-node`` node / ``restore-node`` node (`Node.lose`, `Node.restore`);
    - ``withhold-ready`` namespace, pod, seconds, next (bool): the pod's Ready condition stays
      False for `seconds` after its containers start (its Service then has no ready address and
      cluster DNS answers NXDOMAIN); ``next``: the next incarnation of that name, not this one;
    - ``hold-start`` namespace, pod / ``release`` namespace, pod: the pod's containers wait
      (ContainerCreating, as behind a slow image pull) until released;
    - ``pods``: the pods the agent runs (namespace, name, uid, node, ip, port).
    """

    def __init__(self, agent: Agent, log_path: str | None) -> None:
        self.agent = agent
        self.log_path = Path(log_path) if log_path else None
        self.lock = threading.Lock()
        self.degraded: dict[str, dict[str, Any]] = {}
        self.withheld: dict[tuple[str, str], dict[str, Any]] = {}
        self.holding: set[tuple[str, str]] = set()

    def log(self, what: str, **fields: Any) -> None:
        record = {"t": time.time(), "fault": what, **fields}
        log.info("fault: %s", json.dumps(record, sort_keys=True))
        if self.log_path is not None:
            with self.lock, self.log_path.open("a") as fh:
                fh.write(json.dumps(record, sort_keys=True) + "\n")

    # -- asked by pod workers

    def held(self, w: PodWorker) -> bool:
        return (w.ns, w.pod_name) in self.holding

    def take_withhold(self, w: PodWorker) -> float | None:
        with self.lock:
            entry = self.withheld.get((w.ns, w.pod_name))
            if entry is None or entry["not_uid"] == w.uid:
                return None
            del self.withheld[(w.ns, w.pod_name)]
        self.log("withhold-ready started", ns=w.ns, pod=w.pod_name, uid=w.uid, seconds=entry["seconds"])
        return float(entry["seconds"])

    # -- requests

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "ping": lambda r: {},
            "pods": self.op_pods,
            "kill": self.op_kill,
            "partition": self.op_partition,
            "heal": self.op_heal,
            "degrade": self.op_degrade,
            "lose-node": self.op_lose_node,
            "restore-node": self.op_restore_node,
            "withhold-ready": self.op_withhold,
            "hold-start": self.op_hold,
            "release": self.op_release,
        }
        if op not in handlers:
            raise FaultError(f"op: {op!r} is not one of {', '.join(sorted(handlers))}")
        return handlers[str(op)](req)

    _str = staticmethod(faults.require_str)
    _number = staticmethod(faults.require_number)

    def _named(self, ns: str, name: str) -> list[PodWorker]:
        """Every incarnation of pod ns/name on this agent's Nodes, oldest first."""
        return [w for node in self.agent.nodes for w in list(node.workers.values()) if (w.ns, w.pod_name) == (ns, name)]

    def _worker(self, req: dict[str, Any]) -> PodWorker:
        ns, name = self._str(req, "namespace"), self._str(req, "pod")
        found = self._named(ns, name)
        live = [w for w in found if not w.gone and w.sandbox is not None]
        if not live:
            raise FaultError(f"pod {ns}/{name}: no running incarnation on this agent's Nodes")
        return live[-1]

    def _node(self, req: dict[str, Any]) -> Node:
        name = self._str(req, "node")
        for node in self.agent.nodes:
            if node.name == name:
                return node
        raise FaultError(f"node: {name!r} is not one of this agent's Nodes")

    def op_pods(self, req: dict[str, Any]) -> dict[str, Any]:
        pods = []
        for node in self.agent.nodes:
            for w in list(node.workers.values()):
                pods.append(
                    {"namespace": w.ns, "pod": w.pod_name, "uid": w.uid, "node": node.name, "ip": w.ip, "port": w.port}
                )
        return {"pods": pods}

    def op_kill(self, req: dict[str, Any]) -> dict[str, Any]:
        w = self._worker(req)
        sig = faults.require_signal(req)
        if "pid" in req:
            pid_in_pod = int(self._number(req, "pid", 1, 2**22))
            host = w.host_pid(pid_in_pod)
            if host is None:
                raise FaultError(f"pid: no process {pid_in_pod} in pod {w.ns}/{w.pod_name}")
            os.kill(host, sig)
            self.log("kill", ns=w.ns, pod=w.pod_name, uid=w.uid, signal=sig.name, pid=pid_in_pod, host_pid=host)
            return {"uid": w.uid, "host_pid": host}
        c = w.containers[0]
        pid1 = c.pid1()
        if pid1 is None or c.proc is None:
            raise FaultError(f"pod {w.ns}/{w.pod_name}: its container is not running")
        c.signal(sig, "fault")
        self.log("kill", ns=w.ns, pod=w.pod_name, uid=w.uid, signal=sig.name, pid=1, host_pid=pid1)
        return {"uid": w.uid, "host_pid": pid1}

    def op_partition(self, req: dict[str, Any]) -> dict[str, Any]:
        w = self._worker(req)
        seconds = self._number(req, "seconds", 0.1, 3600)
        w.set_port(False)
        until = time.time() + seconds
        self.log("partition", ns=w.ns, pod=w.pod_name, uid=w.uid, port=w.port, seconds=seconds)

        def heal() -> None:
            try:
                w.set_port(True)
                self.log("partition healed", ns=w.ns, pod=w.pod_name, uid=w.uid, port=w.port)
            except RuntimeError as e:  # the pod (and its port) went meanwhile
                self.log("partition ended with the pod", ns=w.ns, pod=w.pod_name, uid=w.uid, error=str(e))

        timer = threading.Timer(seconds, heal)
        timer.daemon = True
        timer.start()
        return {"uid": w.uid, "port": w.port, "until": until}

    def op_heal(self, req: dict[str, Any]) -> dict[str, Any]:
        w = self._worker(req)
        w.set_port(True)
        self.log("heal", ns=w.ns, pod=w.pod_name, uid=w.uid, port=w.port)
        return {"uid": w.uid}

    def op_degrade(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = self._str(req, "namespace")
        if req.get("off"):
            self.degraded.pop(ns, None)
            self.log("degrade off", ns=ns)
            return {}
        params = {
            "loss": self._number(req, "loss", 0, 1),
            "delay_ms": self._number(req, "delay_ms", 0, 10_000),
            "seed": int(self._number(req, "seed", -(2**63), 2**63)),
        }
        self.degraded[ns] = params
        self.log("degrade", ns=ns, **params)
        return {"applies_to": "pods started from now on"}

    def op_lose_node(self, req: dict[str, Any]) -> dict[str, Any]:
        node = self._node(req)
        if node.lost.is_set():
            raise FaultError(f"node: {node.name} is lost already")
        frozen = node.lose()
        self.log("lose-node", node=node.name, pods=frozen)
        return {"pods": frozen}

    def op_restore_node(self, req: dict[str, Any]) -> dict[str, Any]:
        node = self._node(req)
        if not node.lost.is_set():
            raise FaultError(f"node: {node.name} is not lost")
        pods = node.restore()
        self.log("restore-node", node=node.name, pods=pods)
        return {"pods": pods}

    def op_withhold(self, req: dict[str, Any]) -> dict[str, Any]:
        ns, name = self._str(req, "namespace"), self._str(req, "pod")
        seconds = self._number(req, "seconds", 0.1, 3600)
        not_uid = None
        if req.get("next"):
            current = self._named(ns, name)
            not_uid = current[-1].uid if current else None
        with self.lock:
            self.withheld[(ns, name)] = {"seconds": seconds, "not_uid": not_uid}
        self.log("withhold-ready armed", ns=ns, pod=name, seconds=seconds, not_uid=not_uid)
        return {"not_uid": not_uid}

    def op_hold(self, req: dict[str, Any]) -> dict[str, Any]:
        key = (self._str(req, "namespace"), self._str(req, "pod"))
        self.holding.add(key)
        self.log("hold-start", ns=key[0], pod=key[1])
        return {}

    def op_release(self, req: dict[str, Any]) -> dict[str, Any]:
        key = (self._str(req, "namespace"), self._str(req, "pod"))
        self.holding.discard(key)
        for w in self._named(*key):
            w.wake.set()
        self.log("release", ns=key[0], pod=key[1])
        return {}


# ---------------------------------------------------------------- the agent


class Agent:
    def __init__(self, config: dict[str, Any]) -> None:
        self.server: str = config["server"]
        self.ca: str = config["ca"]
        self.bridge: str = config["bridge"]
        self.dns: str = config["dns"]
        self.host_ip: str = config["host_ip"]
        self.domain: str = config["cluster_domain"]
        self.api_service_ip: str = config["api_service_ip"]
        self.image_path: str = config["image_path"]
        #: Host folders that are part of the "image" (the checkout): kept visible even under /tmp.
        self.image_folders: list[str] = config.get("image_folders", [])
        self.python: str = config["python"]
        self.pods_dir = Path(config["pods_dir"])
        self.ipam = Ipam(config["pod_cidr"], {self.host_ip, self.dns})
        self.stopping = threading.Event()
        self.started = now()
        self.boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        mem_kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        # Every Node offers the whole machine (no cgroups here: the scheduler's arithmetic only).
        self.capacity = {
            "cpu": str(os.cpu_count() or 1),
            "memory": f"{mem_kib}Ki",
            "pods": "110",
            "ephemeral-storage": "100Gi",
        }
        self.allocatable = dict(self.capacity)
        self.lease_seconds = int(config.get("lease_seconds", LEASE_SECONDS))
        self.faults = Faults(self, config.get("fault_log"))
        self.lifecycle_path = Path(config["lifecycle_log"]) if config.get("lifecycle_log") else None
        self.lifecycle_lock = threading.Lock()
        self.control_socket: str | None = config.get("control_socket")
        self.nodes = [Node(self, n["name"], n["cert"], n["key"]) for n in config["nodes"]]

    def lifecycle(self, w: PodWorker, event: str, **fields: Any) -> None:
        """One container start or exit, with the host's exact time (the API's times are seconds)."""
        if self.lifecycle_path is None:
            return
        record = {"t": time.time(), "event": event, "ns": w.ns, "pod": w.pod_name, "uid": w.uid, "node": w.node.name}
        with self.lifecycle_lock, self.lifecycle_path.open("a") as fh:
            fh.write(json.dumps({**record, **fields}, sort_keys=True) + "\n")

    def serve_control(self) -> None:
        """The control socket (mode 0600, root's only): fault requests (Faults)."""
        assert self.control_socket is not None
        faults.serve(Path(self.control_socket), self.faults.handle)

    def run(self) -> None:
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            node.register()
        for node in self.nodes:
            for target in (node.heartbeat, node.watch_pods):
                threading.Thread(target=target, name=f"{node.name}-{target.__name__}", daemon=True).start()
        if self.control_socket:
            self.serve_control()
        log.info("serving %s", ", ".join(n.name for n in self.nodes))
        self.stopping.wait()

    def stop(self) -> None:
        """Kill every pod's processes at once and remove their sandboxes (cluster down)."""
        self.stopping.set()
        for node in self.nodes:
            with node.lock:
                workers = list(node.workers.values())
            for w in workers:
                w.gone = True
                w.teardown()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: node_agent.py CONFIG.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s: %(message)s")
    agent = Agent(json.loads(Path(argv[0]).read_text()))
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    try:
        agent.run()
    finally:
        agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
