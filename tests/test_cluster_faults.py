"""The node agent's fault primitives (cluster/node_agent.py, "Faults"), on the one-machine cluster.

Each primitive against plain pods, measured from inside them: a partition drops every packet
without a trace and heals; a degraded link adds its delay and drops about its share; a lost Node
stops its pods' processes, stops renewing its Lease (the node lifecycle controller marks it
Unknown and taints it) and comes back rebooted; a withheld Ready condition keeps the pod's address
out of cluster DNS; a held pod starts only when released; a kill reaches a process by the PID it
has inside its pod. The chaos harness (bench/chaos_cluster.py) builds its fault classes on these.

One cluster per module (``cluster/cluster.py up`` in build/cluster-test, ``down`` at the end), as
tests/test_cluster.py; marker ``cluster``. Start it under ``flock /var/lock/elastic-idl-cluster.lock``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cluster_long  # make cluster-test; make test runs tests/test_cluster_real_faults.py

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import chaos_cluster as cc  # noqa: E402
import test_cluster_real_faults as rf  # noqa: E402  (the helpers and pods' programs both runtimes' tests use)
from test_cluster_real_faults import (  # noqa: E402
    ECHO,
    PARTITION_CLIENT,
    RTT_CLIENT,
    _exists,
    _faults,
    _file,
    _until,
)

ct = cc.ct
NS = "faults"
SHARED = Path("/var/tmp/elastic-idl-cluster-test/faults")
_get = functools.partial(rf._get, ns=NS)
_ip = functools.partial(rf._ip, ns=NS)


@pytest.fixture(scope="module")
def kube() -> Iterator[cc.Kube]:
    state = ct.default_state_dir("cluster-test")
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    cmd = [sys.executable, str(REPO / "cluster" / "cluster.py")]
    try:
        up = subprocess.run(
            [*cmd, "up", "--runtime", cc.RUNTIME], env=env, capture_output=True, text=True, timeout=3600, check=False
        )
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


def _pod(k: cc.Kube, name: str, script: str, *, ns: str = NS, node: str | None = None, **extra: Any) -> None:
    """A plain pod running `script` (python -c) with OUT, its folder, in the env."""
    out = SHARED / name
    out.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "c",
                "image": "example.com/faults:1",
                "command": ["python", "-c", script],
                "env": [{"name": "OUT", "value": str(out)}],
            }
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, **extra}, "spec": spec}
    k.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)


def _lifecycle(k: cc.Kube, name: str) -> list[dict[str, Any]]:
    path = k.dir / ct.LIFECYCLE_LOG
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["pod"] == name]


def test_partition_drops_every_packet_without_a_trace_then_heals(kube: cc.Kube) -> None:
    _pod(kube, "echo", ECHO, node="node-0")
    _file(SHARED / "echo" / "ready")
    server = _ip(kube, "echo")
    _pod(kube, "client", PARTITION_CLIENT.replace('os.environ["SERVER"]', repr(server)), node="node-1")
    _file(SHARED / "client" / "connected")
    answer = kube.agent(op="partition", namespace=NS, pod="echo", seconds=5)
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


def test_a_degraded_namespace_delays_and_drops_each_pods_packets(kube: cc.Kube) -> None:
    ns = f"{NS}-degraded"
    kube.agent(op="degrade", namespace=ns, loss=0.05, delay_ms=50, seed=7)
    _pod(kube, "decho", ECHO, ns=ns, node="node-2")
    _file(SHARED / "decho" / "ready")
    server = _ip(kube, "decho", ns=ns)
    _pod(kube, "dclient", RTT_CLIENT.replace("SERVER", repr(server)), ns=ns, node="node-3")
    rtts = json.loads(_file(SHARED / "dclient" / "rtts", 120))
    kube.agent(op="degrade", namespace=ns, off=True)
    # Each pod's packets wait 50 ms on the way out: a round trip crosses two pods, so 100 ms; a lost
    # packet costs a retransmission (200 ms or more) on top.
    assert 0.095 <= statistics.median(rtts) < 0.2, sorted(rtts)[::15]
    assert max(rtts) >= 0.25, "no round trip paid for a lost packet"
    for name in ("decho", "dclient"):
        kube.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}")
    stopped = _until(
        lambda: (
            (x := [f for f in _faults(kube) if f.get("fault") == "netem stopped" and f.get("ns") == ns])
            and len(x) == 2
            and x
        ),
        60,
        "both pods' degraded links stopped",
    )
    sent = sum(f["from_pod"] for f in stopped)
    dropped = sum(f["dropped"] for f in stopped)
    assert sent > 300 and 0.02 <= dropped / sent <= 0.09, stopped
    # Pods of other namespaces are untouched: their round trips stay under a few milliseconds.


def test_a_lost_node_stops_its_pods_and_its_lease_and_comes_back_rebooted(kube: cc.Kube) -> None:
    ticker = """
import os, time
n = 0
while True:
    n += 1; open(os.environ["OUT"] + "/n", "w").write(str(n)); time.sleep(0.1)
"""
    _pod(kube, "ticker", ticker, node="node-3")
    _until(lambda: (SHARED / "ticker" / "n").exists() and int((SHARED / "ticker" / "n").read_text() or 0) > 3, 60)
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-3"
    lost = kube.agent(op="lose-node", node="node-3")
    t = time.time()
    (mine,) = [p for p in lost["pods"] if p["pod"] == "ticker"]
    assert mine["pids"] >= 1
    time.sleep(1)
    frozen = (SHARED / "ticker" / "n").read_text()
    renewed = kube.call("GET", lease)["spec"]["renewTime"]

    # The node lifecycle controller: Unknown after the grace period (+ its period), then the taint.
    def unreachable() -> bool:
        node = kube.call("GET", "/api/v1/nodes/node-3")
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        taints = {x["key"] for x in node["spec"].get("taints", [])}
        return ready == "Unknown" and "node.kubernetes.io/unreachable" in taints

    _until(unreachable, ct.NODE_MONITOR_GRACE_S + ct.NODE_MONITOR_PERIOD_S + 15, "node-3 not Unknown")
    took = time.time() - t
    assert took >= ct.NODE_MONITOR_GRACE_S - ct.NODE_LEASE_S * 0.25 - 1, took
    assert (SHARED / "ticker" / "n").read_text() == frozen  # its process stopped
    assert kube.call("GET", lease)["spec"]["renewTime"] == renewed  # no renewal
    assert _get(kube, "ticker")["status"]["phase"] == "Running"  # no kubelet reports otherwise
    kube.agent(op="restore-node", node="node-3")

    def back() -> bool:
        node = kube.call("GET", "/api/v1/nodes/node-3")
        return {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"

    _until(back, 30, "node-3 not Ready again")
    _until(lambda: _get(kube, "ticker")["status"]["phase"] == "Failed", 30, "ticker not Failed")
    exits = [r for r in _lifecycle(kube, "ticker") if r["event"] == "exit"]
    assert [(r["code"], r["killed_by"]) for r in exits] == [(137, "node-lost")]
    with pytest.raises(ct.ClusterError, match="node: node-3 is not lost"):
        kube.agent(op="restore-node", node="node-3")


def test_a_withheld_ready_condition_keeps_the_pod_out_of_cluster_dns(kube: cc.Kube) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "wr", "namespace": NS},
        "spec": {"clusterIP": "None", "selector": {"app": "wr"}, "ports": [{"name": "p", "port": 9000}]},
    }
    kube.call("POST", f"/api/v1/namespaces/{NS}/services", svc)
    kube.agent(op="withhold-ready", namespace=NS, pod="wr-0", seconds=8, next=True)
    _pod(kube, "wr-0", ECHO, labels={"app": "wr"})
    _file(SHARED / "wr-0" / "ready")
    started = next(r["t"] for r in _lifecycle(kube, "wr-0") if r["event"] == "start")
    ip = _ip(kube, "wr-0")
    name = f"wr.{NS}.svc.{ct.CLUSTER_DOMAIN}"
    answers = []
    while time.time() - started < 20:
        ready = {c["type"]: c["status"] for c in _get(kube, "wr-0")["status"]["conditions"]}["Ready"]
        answers.append((time.time() - started, ready, ct.dns_query_a(str(ct.BRIDGE_IP), name)))
        time.sleep(0.3)
    during = [a for a in answers if a[0] < 7.5]
    after = [a for a in answers if a[0] > 8 + 5 + 1]  # + CoreDNS's 5 s cache
    # The container runs (it answered), but the pod is not Ready: no ready address, NXDOMAIN.
    assert during and all(r == "False" and not dns for _, r, dns in during), during
    assert after and all(r == "True" and dns == [ip] for _, r, dns in after), after


def test_a_held_pod_starts_only_when_released(kube: cc.Kube) -> None:
    kube.agent(op="hold-start", namespace=NS, pod="held")
    _pod(kube, "held", ECHO)
    _until(lambda: _get(kube, "held").get("spec", {}).get("nodeName"), 30, "held not scheduled")
    time.sleep(3)
    status = _get(kube, "held")["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    assert not _lifecycle(kube, "held")
    kube.agent(op="release", namespace=NS, pod="held")
    _file(SHARED / "held" / "ready", 30)
    assert [r["event"] for r in _lifecycle(kube, "held")] == ["start"]


def test_kill_reaches_a_process_by_its_pid_in_the_pod_or_the_containers_pid_1(kube: cc.Kube) -> None:
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
    assert child > 1  # a PID of the pod's own PID namespace
    answer = kube.agent(op="kill", namespace=NS, pod="killme", pid=child, signal="SIGKILL")
    assert answer["host_pid"] != child
    assert _file(SHARED / "killme" / "child-status", 30) == "-9"
    assert _get(kube, "killme")["status"]["phase"] == "Running"  # PID 1 lives
    kube.agent(op="kill", namespace=NS, pod="killme", signal=9)
    _until(lambda: _get(kube, "killme")["status"]["phase"] == "Failed", 30, "killme not Failed")
    exits = [r for r in _lifecycle(kube, "killme") if r["event"] == "exit"]
    assert [(r["code"], r["killed_by"]) for r in exits] == [(137, "fault")]
    assert [f["pid"] for f in _faults(kube) if f.get("pod") == "killme"] == [child, 1]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"op": "explode"}, "op: 'explode' is not one of"),
        ({"op": "kill", "pod": "x"}, "namespace: a non-empty string is required"),
        ({"op": "kill", "namespace": NS, "pod": "nobody"}, f"pod {NS}/nobody: no running incarnation"),
        ({"op": "partition", "namespace": NS, "pod": "x", "seconds": 0}, "pod faults/x: no running"),
        ({"op": "degrade", "namespace": NS, "loss": 2, "delay_ms": 1, "seed": 1}, "loss: a number in 0..1"),
        ({"op": "withhold-ready", "namespace": NS, "pod": "x", "seconds": -1}, "seconds: a number in 0.1..3600"),
        ({"op": "lose-node", "node": "node-99"}, "node: 'node-99' is not one of"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field(kube: cc.Kube, request_: dict[str, Any], message: str) -> None:
    with pytest.raises(ct.ClusterError, match=re.escape(f"faults: {request_['op']}: {message}")):
        kube.agent(**request_)
