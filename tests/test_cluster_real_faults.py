"""The fault primitives on real Nodes (cluster/faults.py), on the one-machine cluster.

Each primitive against plain pods on kubelets, measured from inside them: a partition (a DROP
rule in the pod's own network namespace) drops every packet without a trace and heals; a degraded
namespace's pods send through a forwarder in their Node's namespace (their round trips slow by the
delay, about the loss share of their frames dropped); a frozen pod (the freezer cgroup) stops where
it is and goes on when thawed; a lost Node (its kubelet, containerd and kube-proxy stopped, its pods
frozen, its packets dropped) stops renewing its Lease, so the node lifecycle controller marks it
Unknown and taints it, and comes back rebooted (its pods' processes killed: the kubelet reports the
exit); a withheld readiness gate keeps a running pod out of cluster DNS; a held pod waits in its
init container until released; a kill reaches a process by the PID it has inside its container, or
the container's PID 1. The lifecycle log (containerd's starts and exits) names what killed each
container. Bad requests are refused naming the field.

One cluster per module (``cluster/cluster.py up``, real Nodes: the default runtime), as
tests/test_cluster.py; marker ``cluster``. Start it under ``flock /var/lock/elastic-idl-cluster.lock``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import test_cluster as tc

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import chaos_cluster as cc  # noqa: E402

ct = cc.ct
faults = ct.faults
NS = "real-faults"
SHARED = tc.SHARED / "real-faults"


@pytest.fixture(scope="module")
def kube() -> Iterator[cc.Kube]:
    state = ct.default_state_dir("cluster-test")
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    cmd = [sys.executable, str(REPO / "cluster" / "cluster.py")]
    try:
        up = subprocess.run([*cmd, "up"], env=env, capture_output=True, text=True,
                            timeout=3600, check=False)  # fmt: skip
        if up.returncode != 0:
            pytest.fail(f"cluster up failed: {up.stderr.strip()}\n{up.stdout[-2000:]}")
        k = cc.Kube(state)
        for ns in (NS, f"{NS}-degraded"):
            k.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            _until(lambda ns=ns: _exists(k, f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60)
        if SHARED.exists():
            shutil.rmtree(SHARED)
        SHARED.mkdir(parents=True)
        yield k
        k.close()
    finally:
        subprocess.run([*cmd, "down"], env=env, capture_output=True, text=True, timeout=300, check=True)
        tc._nothing_left(state)


def _exists(k: cc.Kube, path: str) -> bool:
    try:
        k.call("GET", path)
    except cc.ApiError:
        return False
    return True


def _until(what: Callable[[], Any], seconds: float, why: str = "") -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:.0f} s: {why}")
        time.sleep(0.2)


def _pod(
    k: cc.Kube, name: str, script: str, *, ns: str = NS, node: str | None = None, gate: bool = False,
    hold: bool = False, labels: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """A plain pod running `script` (the venv's python -c) with OUT, its folder, in the env,
    through the tests' pod template for real Nodes (tests/test_cluster.py on_real_nodes)."""
    out = SHARED / name
    out.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "c",
                "image": "example.com/unused:1",  # the template puts the base image here
                "command": ["python", "-c", script],
                "env": [{"name": "OUT", "value": str(out)}],
            }
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
           "spec": spec}  # fmt: skip
    tc.on_real_nodes(k, [pod])  # type: ignore[arg-type]
    if gate:
        faults.with_ready_gate(spec)
    if hold:
        faults.with_hold(spec, k.dir, spec["containers"][0]["image"])
    k.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)


def _get(k: cc.Kube, name: str, ns: str = NS) -> dict[str, Any]:
    return dict(k.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}"))


def _ip(k: cc.Kube, name: str, ns: str = NS) -> str:
    return str(_until(lambda: _get(k, name, ns).get("status", {}).get("podIP"), 60, f"{name} has no address"))


def _file(path: Path, seconds: float = 60) -> str:
    return str(_until(lambda: path.read_text() if path.exists() else "", seconds, f"{path} not written"))


def _faults(k: cc.Kube) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (k.dir / ct.FAULT_LOG).read_text().splitlines()]


def _lifecycle(k: cc.Kube, name: str) -> list[dict[str, Any]]:
    """The pod's container starts and exits in the lifecycle log (faults.py, from containerd's events)."""
    path = k.dir / ct.LIFECYCLE_LOG
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["pod"] == name and r["ns"] == NS]


def _exits(k: cc.Kube, name: str, count: int = 1) -> list[tuple[int, str | None]]:
    """(exit code, killed_by) of the pod's container exits, once there are `count`."""

    def exits() -> list[tuple[int, str | None]]:
        return [(r["code"], r["killed_by"]) for r in _lifecycle(k, name) if r["event"] == "exit"]

    _until(lambda: len(exits()) >= count, 30, f"{name}: not {count} exits in the lifecycle log")
    return exits()


def _terminated(k: cc.Kube, name: str, seconds: float = 60) -> dict[str, Any]:
    def state() -> dict[str, Any] | None:
        statuses = _get(k, name).get("status", {}).get("containerStatuses") or [{}]
        return statuses[0].get("state", {}).get("terminated")

    return dict(_until(state, seconds, f"{name}'s container not terminated"))


#: A TCP echo server on port 9000 (answers each message).
ECHO = """
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 9000)); s.listen()
open(os.environ["OUT"] + "/ready", "w").write("1")
while True:
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(65536)
        if not d: break
        c.sendall(d)
"""

#: Connects to SERVER's echo, then (once OUT/go exists) sends one byte and writes what came back,
#: or the error, and how long it took.
PARTITION_CLIENT = """
import json, os, socket, time
out = os.environ["OUT"]
c = socket.create_connection((os.environ["SERVER"], 9000), timeout=10)
c.sendall(b"a"); assert c.recv(1) == b"a"
open(out + "/connected", "w").write("1")
while not os.path.exists(out + "/go"): time.sleep(0.05)
t = time.time(); c.sendall(b"b"); c.settimeout(60)
try:
    got, err = c.recv(1).decode(), None
except OSError as e:
    got, err = None, repr(e)
json.dump({"got": got, "error": err, "after": time.time() - t}, open(out + "/result", "w"))
"""

#: 150 round trips of one byte to SERVER's echo, their times written to OUT/rtts.
RTT_CLIENT = """
import json, os, socket, time
c = socket.create_connection((SERVER, 9000), timeout=30); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for i in range(150):
    t = time.time(); c.sendall(b"x"); c.recv(1); rtts.append(time.time() - t)
json.dump(rtts, open(os.environ["OUT"] + "/rtts", "w"))
"""

#: Writes a counter ten times a second.
TICKER = """
import os, time
n = 0
while True:
    n += 1; open(os.environ["OUT"] + "/n", "w").write(str(n)); time.sleep(0.1)
"""


def _ticks(name: str) -> int:
    text = (SHARED / name / "n").read_text() if (SHARED / name / "n").exists() else ""
    return int(text or 0)


def test_the_faults_component_serves_real_nodes(kube: cc.Kube) -> None:
    state = json.loads((kube.dir / "cluster.json").read_text())
    assert state["runtime"] == "containerd"
    assert "faults" in ct.Cluster(kube.dir).running()
    assert (kube.dir / ct.CONTROL_SOCKET).stat().st_mode & 0o777 == 0o600


def test_partition_drops_every_packet_without_a_trace_then_heals(kube: cc.Kube) -> None:
    _pod(kube, "echo", ECHO, node="node-0")
    _file(SHARED / "echo" / "ready")
    server = _ip(kube, "echo")
    _pod(kube, "client", PARTITION_CLIENT.replace('os.environ["SERVER"]', repr(server)), node="node-1")
    _file(SHARED / "client" / "connected")
    answer = kube.faults(op="partition", namespace=NS, pod="echo", seconds=5)
    (SHARED / "client" / "go").write_text("1")
    result = json.loads(_file(SHARED / "client" / "result", 60))
    # No RST, no FIN, no ICMP reached the client: its data got through once the partition healed,
    # by TCP's own retransmission, and not before.
    assert result["error"] is None and result["got"] == "b", result
    assert 4.5 <= result["after"] < 20, result
    log = [f for f in _faults(kube) if f.get("pod") == "echo"]
    assert [f["fault"] for f in log] == ["partition", "partition healed"]
    assert log[0]["uid"] == answer["uid"] == _get(kube, "echo")["metadata"]["uid"]
    assert 4.9 <= log[1]["t"] - log[0]["t"] < 7
    with pytest.raises(ct.ClusterError, match=f"pod {NS}/echo: not partitioned"):
        kube.faults(op="heal", namespace=NS, pod="echo")


def test_a_degraded_namespace_delays_and_drops_each_pods_packets(kube: cc.Kube) -> None:
    ns = f"{NS}-degraded"
    kube.faults(op="degrade", namespace=ns, loss=0.05, delay_ms=50, seed=7)
    _pod(kube, "decho", ECHO, ns=ns, node="node-2")
    _file(SHARED / "decho" / "ready")
    server = _ip(kube, "decho", ns)

    def degraded(pod: str) -> bool:
        return any(f.get("pod") == pod and f["fault"] == "netem started" for f in _faults(kube))

    _until(lambda: degraded("decho"), 10, "decho not degraded")
    # The client waits for its own link (a pod is degraded within a poll of its running).
    marker = SHARED / "dclient" / "go"
    _pod(kube, "dclient", f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.05)\n"
         + RTT_CLIENT.replace("SERVER", repr(server)), ns=ns, node="node-3")  # fmt: skip
    _until(lambda: degraded("dclient"), 30, "dclient not degraded")
    marker.write_text("1")
    rtts = json.loads(_file(SHARED / "dclient" / "rtts", 120))
    kube.faults(op="degrade", namespace=ns, off=True)
    # Each pod's packets wait 50 ms on the way out: a round trip crosses two pods, so 100 ms; a lost
    # packet costs a retransmission (200 ms or more) on top.
    assert 0.095 <= statistics.median(rtts) < 0.2, sorted(rtts)[::15]
    assert max(rtts) >= 0.25, "no round trip paid for a lost packet"
    stopped = [f for f in _faults(kube) if f["fault"] == "netem stopped" and f.get("ns") == ns]
    assert sorted(f["pod"] for f in stopped) == ["dclient", "decho"], stopped
    sent = sum(f["from_pod"] for f in stopped)
    dropped = sum(f["dropped"] for f in stopped)
    assert sent > 300 and 0.02 <= dropped / sent <= 0.09, stopped
    # Healed: decho's veth is back on its Node's bridge, a round trip from the host fast again.
    with socket.create_connection((server, 9000), timeout=10) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = time.time()
        c.sendall(b"y")
        assert c.recv(1) == b"y"
        assert time.time() - t < 0.04
    assert not any(f.get("ns") == NS and f["fault"].startswith("netem") for f in _faults(kube))  # others untouched


def test_a_frozen_pod_stops_where_it_is_and_goes_on_when_thawed(kube: cc.Kube) -> None:
    _pod(kube, "frozen", TICKER, node="node-2")
    _until(lambda: _ticks("frozen") > 3, 60, "frozen's ticker not started")
    answer = kube.faults(op="freeze", namespace=NS, pod="frozen")
    assert answer["pids"] >= 2  # the sandbox's pause and the container's python
    at = _ticks("frozen")
    time.sleep(2)
    assert _ticks("frozen") == at  # stopped where it was
    assert _get(kube, "frozen")["status"]["phase"] == "Running"  # the kubelet sees nothing wrong
    kube.faults(op="thaw", namespace=NS, pod="frozen")
    _until(lambda: _ticks("frozen") > at + 5, 10, "frozen's ticker not going on")
    assert [f["fault"] for f in _faults(kube) if f.get("pod") == "frozen"] == ["frozen", "thawed"]
    # Deleted (grace 1 s): a PID 1 without a SIGTERM handler ignores the kubelet's SIGTERM (the
    # kernel spares a namespace's init), so the SIGKILL after the grace period ends it: the deletion's.
    kube.call("DELETE", f"/api/v1/namespaces/{NS}/pods/frozen")
    assert _exits(kube, "frozen") == [(137, "deletion")]
    (start,) = [r for r in _lifecycle(kube, "frozen") if r["event"] == "start"]
    assert (start["container"], start["node"], start["restart"]) == ("c", "node-2", 0)


def test_a_lost_node_stops_its_pods_and_its_lease_and_comes_back_rebooted(kube: cc.Kube) -> None:
    _pod(kube, "ticker", TICKER, node="node-3")
    _until(lambda: _ticks("ticker") > 3, 60, "ticker not started")
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-3"
    lost = kube.faults(op="lose-node", node="node-3")
    t = time.time()
    assert lost["pids"] >= 2
    time.sleep(1)
    frozen = _ticks("ticker")
    renewed = kube.call("GET", lease)["spec"]["renewTime"]

    # The node lifecycle controller: Unknown after the grace period (+ its period), then the taint.
    def unreachable() -> bool:
        node = kube.call("GET", "/api/v1/nodes/node-3")
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        taints = {x["key"] for x in node["spec"].get("taints", [])}
        return ready == "Unknown" and "node.kubernetes.io/unreachable" in taints

    _until(unreachable, ct.NODE_MONITOR_GRACE_S + ct.NODE_MONITOR_PERIOD_S + 15, "node-3 not Unknown")
    took = time.time() - t
    # The kubelet renews its Lease every quarter of nodeLeaseDurationSeconds (realnode.kubelet_config).
    assert took >= ct.NODE_MONITOR_GRACE_S - ct.NODE_LEASE_S * 0.25 - 1, took
    assert _ticks("ticker") == frozen  # its process stopped
    assert kube.call("GET", lease)["spec"]["renewTime"] == renewed  # no renewal
    assert _get(kube, "ticker")["status"]["phase"] == "Running"  # no kubelet reports otherwise
    # The host reaches no pod of node-3 (its namespace drops every packet).
    kube.faults(op="restore-node", node="node-3")

    def back() -> bool:
        node = kube.call("GET", "/api/v1/nodes/node-3")
        return {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"

    _until(back, 60, "node-3 not Ready again")
    # Rebooted: the container's process was killed; the kubelet reports its exit (restartPolicy Never).
    assert _terminated(kube, "ticker", 60)["exitCode"] == 137
    _until(lambda: _get(kube, "ticker")["status"]["phase"] == "Failed", 30, "ticker not Failed")
    assert _ticks("ticker") <= frozen + 1
    assert _exits(kube, "ticker") == [(137, "node-lost")]
    with pytest.raises(ct.ClusterError, match="node: node-3 is not lost"):
        kube.faults(op="restore-node", node="node-3")


def test_kill_reaches_a_process_by_its_pid_in_the_container_or_its_pid_1(kube: cc.Kube) -> None:
    parent = """
import os, time
pid = os.fork()
if pid == 0:
    time.sleep(600); os._exit(0)
open(os.environ["OUT"] + "/child", "w").write(str(pid))
_, status = os.waitpid(pid, 0)
open(os.environ["OUT"] + "/child-status", "w").write(str(os.waitstatus_to_exitcode(status)))
time.sleep(600)
"""
    _pod(kube, "killme", parent)
    child = int(_file(SHARED / "killme" / "child"))
    assert child > 1  # a PID of the container's own PID namespace
    answer = kube.faults(op="kill", namespace=NS, pod="killme", pid=child, signal="SIGKILL")
    assert answer["host_pid"] != child
    assert _file(SHARED / "killme" / "child-status", 30) == "-9"
    assert _get(kube, "killme")["status"]["phase"] == "Running"  # PID 1 lives
    kube.faults(op="kill", namespace=NS, pod="killme", signal=9)
    assert _terminated(kube, "killme")["exitCode"] == 137  # the kubelet's report of the kernel's kill
    _until(lambda: _get(kube, "killme")["status"]["phase"] == "Failed", 30, "killme not Failed")
    assert [f["pid"] for f in _faults(kube) if f.get("pod") == "killme"] == [child, 1]
    assert _exits(kube, "killme") == [(137, "fault")]  # the child's end is no container's exit


def test_a_withheld_ready_gate_keeps_the_pod_out_of_cluster_dns(kube: cc.Kube) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "wr", "namespace": NS},
        "spec": {"clusterIP": "None", "selector": {"app": "wr"}, "ports": [{"name": "p", "port": 9000}]},
    }
    kube.call("POST", f"/api/v1/namespaces/{NS}/services", svc)
    # A pod with the gate and nothing withheld: Ready once its container runs.
    _pod(kube, "open", ECHO, gate=True)
    _file(SHARED / "open" / "ready")
    _until(lambda: _ready(kube, "open") == "True", 10, "open not Ready")
    kube.faults(op="withhold-ready", namespace=NS, pod="wr-0", seconds=8, next=True)
    _pod(kube, "wr-0", ECHO, gate=True, labels={"app": "wr"})
    _file(SHARED / "wr-0" / "ready")
    started = time.time()  # at or after the container's start
    ip = _ip(kube, "wr-0")
    name = f"wr.{NS}.svc.{ct.CLUSTER_DOMAIN}"
    answers = []
    while time.time() - started < 20:
        answers.append((time.time() - started, _ready(kube, "wr-0"), ct.dns_query_a(str(ct.BRIDGE_IP), name)))
        time.sleep(0.3)
    during = [a for a in answers if a[0] < 6.5]  # the API's start time has whole seconds
    after = [a for a in answers if a[0] > 8 + 5 + 1]  # + CoreDNS's 5 s cache
    # The container runs (it answered), but the pod is not Ready: no ready address, NXDOMAIN.
    assert during and all(r == "False" and not dns for _, r, dns in during), during
    assert after and all(r == "True" and dns == [ip] for _, r, dns in after), after
    log = [f["fault"] for f in _faults(kube) if f.get("pod") == "wr-0"]
    assert log == ["withhold-ready armed", "withhold-ready started", "withhold-ready ended"], log


def _ready(k: cc.Kube, name: str) -> str | None:
    conditions = _get(k, name).get("status", {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), None)


def test_a_held_pod_starts_only_when_released(kube: cc.Kube) -> None:
    kube.faults(op="hold-start", namespace=NS, pod="held")
    _pod(kube, "held", ECHO, hold=True)
    _until(lambda: _get(kube, "held").get("spec", {}).get("nodeName"), 30, "held not scheduled")
    _until(
        lambda: "running" in ((_get(kube, "held")["status"].get("initContainerStatuses") or [{}])[0].get("state", {})),
        30, "the hold's init container not running",
    )  # fmt: skip
    time.sleep(2)
    status = _get(kube, "held")["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    assert not (SHARED / "held" / "ready").exists()
    kube.faults(op="release", namespace=NS, pod="held")
    _file(SHARED / "held" / "ready", 30)
    (init,) = _get(kube, "held")["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"op": "explode"}, "op: 'explode' is not one of"),
        ({"op": "withhold-ready", "namespace": NS, "pod": "x", "seconds": -1}, "seconds: a number in 0.1..3600"),
        ({"op": "hold-start", "namespace": NS}, "pod: a non-empty string is required"),
        ({"op": "kill", "pod": "x"}, "namespace: a non-empty string is required"),
        ({"op": "kill", "namespace": NS, "pod": "nobody"}, f"pod {NS}/nobody: no such pod"),
        ({"op": "kill", "namespace": NS, "pod": "x", "signal": "SIGNOPE"}, "signal: 'SIGNOPE' is not a signal"),
        ({"op": "partition", "namespace": NS, "pod": "x", "seconds": 0}, "seconds: a number in 0.1..3600"),
        ({"op": "degrade", "namespace": NS, "loss": 2, "delay_ms": 1, "seed": 1}, "loss: a number in 0..1"),
        ({"op": "freeze", "namespace": NS, "pod": "nobody"}, f"pod {NS}/nobody: no such pod"),
        ({"op": "lose-node", "node": "node-99"}, "node: 'node-99' is not one of this cluster's Nodes"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field(kube: cc.Kube, request_: dict[str, Any], message: str) -> None:
    with pytest.raises(ct.ClusterError, match=re.escape(f"faults: {request_['op']}: {message}")):
        kube.faults(**request_)


def test_a_restarted_api_server_comes_back_and_the_nodes_pods_run_on(kube: cc.Kube) -> None:
    """`cluster.py restart kube-apiserver --down-s 2`: a new process (its log appended to), the
    API answering again; a pod that ran meanwhile never stopped, and its Node stays Ready."""
    _pod(kube, "through", TICKER, node="node-1")
    _until(lambda: _ticks("through") > 3, 60, "through's ticker not started")
    before = (kube.dir / "pids" / "kube-apiserver.pid").read_text().split()[0]
    env = {**os.environ, "CLUSTER_DIR": str(kube.dir)}
    cmd = [sys.executable, str(REPO / "cluster" / "cluster.py"), "restart", "kube-apiserver", "--down-s", "2"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    down = float(re.search(r"kube-apiserver down ([\d.]+)s", r.stdout).group(1))  # type: ignore[union-attr]
    assert down >= 2, r.stdout
    assert (kube.dir / "pids" / "kube-apiserver.pid").read_text().split()[0] != before
    at = _ticks("through")
    _until(lambda: _ticks("through") > at + 3, 20, "through's ticker stopped")
    pod = _until(lambda: _exists(kube, f"/api/v1/namespaces/{NS}/pods/through") and _get(kube, "through"), 30)
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 0
    node = kube.call("GET", "/api/v1/nodes/node-1")
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    bad = subprocess.run([*cmd[:3], "etcd"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1 and "restart: 'etcd' is not one of kube-apiserver, training-operator" in bad.stderr
    kube.call("DELETE", f"/api/v1/namespaces/{NS}/pods/through")
