"""Peers that vanish without closing their sockets, or fail for good, and recreated pods' identities.

Real launcher processes on loopback (``tests/workers/fault_node.py``, each in its own session),
two per test, with one endpoint and run id. The rendezvous keep-alive is fast
(``keep_alive_interval=1``, ``keep_alive_max_attempt=3``): a dead node is judged dead after 3 s,
and the launcher's bound for noticing is ``1 x (3 + 1) + monitor_interval`` = 4.1 s. Every
process group keeps torch's default timeout (30 min), so no collective timing out can rescue
a test. Measured times are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher_nodes import Node, Nodes, free_port, listening, started_nodes, wait_until

NODE = Path(__file__).resolve().parent / "workers" / "fault_node.py"
KEEP_ALIVE_INTERVAL_S, KEEP_ALIVE_MAX_ATTEMPT = 1, 3
FAST_KEEPALIVE = [
    "--rdzv-option",
    f"keep_alive_interval={KEEP_ALIVE_INTERVAL_S}",
    "--rdzv-option",
    f"keep_alive_max_attempt={KEEP_ALIVE_MAX_ATTEMPT}",
]
MONITOR_INTERVAL_S = 0.1  # the launcher's default
#: The launcher's stated bound for noticing a dead peer (see agent.py's module docs, docs/guide/launching.md).
DETECTION_BOUND_S = KEEP_ALIVE_INTERVAL_S * (KEEP_ALIVE_MAX_ATTEMPT + 1) + MONITOR_INTERVAL_S
#: ... and a closed rendezvous: one fresh read of the state (torch caches it for 1 s).
CLOSED_BOUND_S = 1.0 + MONITOR_INTERVAL_S
#: What a busy 2-core machine adds to a bound: scheduling, stopping workers, process exit.
SLACK_S = 6.0


@pytest.fixture
def nodes() -> Iterator[Nodes]:
    """Start launchers with ``nodes.start(...)``; afterwards nothing of theirs may be left."""
    with started_nodes(NODE, prefix="ei-f-") as started:
        yield started


def _common(fn: str, *args: str, nmin: int, nmax: int, run_id: str, join_timeout: int = 30) -> list[str]:
    out = ["--fn", fn]
    for a in args:
        out += ["--arg", a]
    out += ["--min", str(nmin), "--max", str(nmax), "--nproc", "1", "--restarts", "0"]
    out += ["--endpoint", f"127.0.0.1:{free_port()}", "--run-id", run_id, "--last-call-timeout", "1"]
    return [*out, "--join-timeout", str(join_timeout), *FAST_KEEPALIVE]


def _two_in_a_world_of_2_then_freeze_one(nodes: Nodes, marks: Path, common: list[str]) -> tuple[Node, Node, float]:
    """Start the store host, then the other node; once they all_reduce together, SIGSTOP the other.

    Returns (host, frozen, the time of the SIGSTOP).
    """
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    host = nodes.start(*common)  # first: it binds the endpoint, so it hosts the rendezvous store
    wait_until(lambda: listening(port) or host.proc.poll() is not None, 60, "the rendezvous store")
    other = nodes.start(*common)
    wait_until(lambda: len(list(marks.glob("step-*"))) == 2, 60, "both nodes' workers in all_reduce steps")
    assert host.proc.poll() is None and other.proc.poll() is None
    time.sleep(0.3)  # mid-collective: the loop all_reduces every 0.05 s
    other.signal_group(signal.SIGSTOP)  # the whole node: launcher, fork server, workers; no socket closes
    return host, other, time.time()


def test_a_frozen_peer_is_noticed_by_the_keep_alive_and_the_survivor_re_forms_alone(
    nodes: Nodes, tmp_path: Path
) -> None:
    common = _common("train_until_peer_lost", str(tmp_path), nmin=1, nmax=2, run_id="frozen-peer")
    host, frozen, stopped_at = _two_in_a_world_of_2_then_freeze_one(nodes, tmp_path, common)
    code, result = host.result(timeout=60)
    assert code == 0, host.err[-3000:]
    (value,) = result["ok"].values()
    # A membership change, not a failure: no restart used (max_restarts is 0).
    assert (value["rank"], value["world"], value["attempt"]) == (0, 1, 0)
    detected = host.log_time(r"lost: no heartbeat") - stopped_at
    resumed = value["t"] - stopped_at
    print(f"\nfrozen peer, min 1: detected after {detected:.2f} s, alone again after {resumed:.2f} s")
    assert KEEP_ALIVE_INTERVAL_S * (KEEP_ALIVE_MAX_ATTEMPT - 1) - 0.5 <= detected <= DETECTION_BOUND_S + SLACK_S
    # then: stop the workers, a new round (last_call_timeout 1 s), a new worker
    assert resumed <= DETECTION_BOUND_S + 1 + SLACK_S + 5
    frozen.kill()


def test_a_frozen_peer_below_min_nodes_fails_the_survivor_after_join_timeout_retryably(
    nodes: Nodes, tmp_path: Path
) -> None:
    join_timeout = 12
    common = _common(
        "train_until_peer_lost", str(tmp_path), nmin=2, nmax=2, run_id="frozen-min2", join_timeout=join_timeout
    )
    host, frozen, stopped_at = _two_in_a_world_of_2_then_freeze_one(nodes, tmp_path, common)
    code, result = host.result(timeout=90)
    took = time.time() - stopped_at
    assert code == 3, host.err[-3000:]
    assert result["error"] == "PeerLostError", result
    assert "of the running group did not come back" in result["message"]
    assert f"did not re-form within join_timeout={join_timeout}s: 1 of the 2 node(s) needed joined" in result["message"]
    detected = host.log_time(r"lost: no heartbeat") - stopped_at
    print(f"\nfrozen peer, min 2: detected after {detected:.2f} s, failed after {took:.2f} s")
    assert detected <= DETECTION_BOUND_S + SLACK_S
    assert join_timeout <= took <= DETECTION_BOUND_S + join_timeout + SLACK_S + 5
    frozen.kill()


def test_a_peer_frozen_then_thawed_finds_itself_dropped_and_rejoins_without_using_a_restart(
    nodes: Nodes, tmp_path: Path
) -> None:
    # A partition that heals, a node that comes back: its workers' peers are gone (their all_reduce
    # fails on thawing), and it was dropped from the round. Neither is a failure (max_restarts 0).
    common = _common("train_through_a_freeze", str(tmp_path), nmin=1, nmax=2, run_id="thawed")
    host, frozen, stopped_at = _two_in_a_world_of_2_then_freeze_one(nodes, tmp_path, common)
    wait_until(lambda: any(tmp_path.glob("alone-*")), 30, "the host's worker alone")
    alone = time.time() - stopped_at
    thawed_at = time.time()
    frozen.signal_group(signal.SIGCONT)
    results = [n.result(timeout=60) for n in (host, frozen)]
    assert [code for code, _ in results] == [0, 0], [n.err[-3000:] for n in (host, frozen)]
    values = [v for _, r in results for v in r["ok"].values()]
    assert sorted(v["rank"] for v in values) == [0, 1]
    assert {(v["world"], v["sum"], v["attempt"]) for v in values} == {(2, 2.0, 0)}
    seen = frozen.log_time(r"this node is no longer a participant") - thawed_at
    back = max(v["t"] for v in values) - thawed_at
    print(
        f"\nfrozen, then thawed: host alone after {alone:.2f} s; thawed: dropped seen {seen:.2f} s, 2 again {back:.2f} s"
    )
    assert seen <= CLOSED_BOUND_S + SLACK_S  # one fresh read of the state
    assert back <= CLOSED_BOUND_S + 1 + SLACK_S + 5  # then a new round (last_call_timeout 1 s) and new workers


def test_a_frozen_store_host_ends_the_other_node_retryably_within_read_timeout_and_the_expiry(
    nodes: Nodes, tmp_path: Path
) -> None:
    # The node hosting the rendezvous store freezes (a lost machine: no FIN, no RST). torch's store
    # client times the other node's read out after read_timeout, then waits for the host to confirm
    # the cancel, forever: the launcher bounds the read and ends with the store lost (exit 200 in a
    # pod, which the ExitCode policy retries), its workers stopped.
    read_timeout = 5
    common = _common("train_until_peer_lost", str(tmp_path), nmin=1, nmax=2, run_id="frozen-host")
    common += ["--read-timeout", str(read_timeout)]
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    host = nodes.start(*common)  # first: it binds the endpoint, so it hosts the rendezvous store
    wait_until(lambda: listening(port) or host.proc.poll() is not None, 60, "the rendezvous store")
    other = nodes.start(*common)
    wait_until(lambda: len(list(tmp_path.glob("step-*"))) == 2, 60, "both nodes' workers in all_reduce steps")
    time.sleep(0.3)
    host.signal_group(signal.SIGSTOP)
    stopped_at = time.time()
    bound = read_timeout + KEEP_ALIVE_INTERVAL_S * KEEP_ALIVE_MAX_ATTEMPT + 1 + MONITOR_INTERVAL_S
    try:
        code, result = other.result(timeout=bound + SLACK_S + 30)
    finally:
        host.kill()
    took = time.time() - stopped_at
    noticed = other.log_time(r"did not answer within") - stopped_at
    print(f"\nfrozen store host: the other node noticed after {noticed:.2f} s, ended after {took:.2f} s")
    assert code == 3, other.err[-3000:]
    assert result["error"] == "RendezvousStoreLostError", result
    assert "lost the rendezvous store" in result["message"] and "did not return within" in result["message"]
    assert read_timeout <= noticed <= bound + SLACK_S
    assert took <= bound + SLACK_S + 3


@pytest.mark.parametrize("when", ["connecting", "waiting for the last nodes"])
def test_a_store_host_frozen_mid_rendezvous_ends_the_other_node_within_its_store_call_deadlines(
    nodes: Nodes, tmp_path: Path, when: str
) -> None:
    """Issue 30 item 4: every store call of the rendezvous has a deadline, read_timeout +
    STORE_CALL_SLACK_S. The round needs 3 nodes, so the other node waits in torch's join, reading
    the store's state every second; the store host freezes (before the other node connects, or
    while both wait for a third). torch's client timed the read out after read_timeout, then waited
    for the frozen host forever (measured with the deadlines removed: still waiting after 120 s,
    read_timeout 3 s). Bounds: connecting (the connection and the backend's first write) two
    deadlines, plus the node's start-up; waiting one deadline plus the join's 1 s poll."""
    from elastic_idl._launch.agent import STORE_CALL_SLACK_S, store_call_deadline

    read_timeout = 3
    common = _common("train_until_peer_lost", str(tmp_path), nmin=3, nmax=3, run_id="frozen-mid-rdzv", join_timeout=120)
    common += ["--read-timeout", str(read_timeout)]
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    host = nodes.start(*common)
    wait_until(lambda: listening(port) or host.proc.poll() is not None, 60, "the rendezvous store")
    if when == "connecting":
        host.signal_group(signal.SIGSTOP)
        stopped_at = time.time()
        other = nodes.start(*common)
        bound = 2 * store_call_deadline(read_timeout) + SLACK_S  # SLACK_S: the node's own start-up
    else:
        other = nodes.start(*common)
        time.sleep(5.0)  # both are participants of the round, waiting for a third
        host.signal_group(signal.SIGSTOP)
        stopped_at = time.time()
        bound = read_timeout + STORE_CALL_SLACK_S + 1
    try:
        code, result = other.result(timeout=bound + SLACK_S + 60)
    finally:
        host.kill()
    took = time.time() - stopped_at
    print(f"\nstore host frozen mid-rendezvous ({when}): the other node ended after {took:.2f} s")
    assert code == 3, other.err[-3000:]
    assert result["error"] == "RendezvousStoreLostError", result
    assert "did not return within" in result["message"], result
    assert took <= bound + SLACK_S, f"{took:.1f} s"


def test_a_worker_stopped_on_one_node_ends_both_nodes_within_the_collective_timeout(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Issue 30 item 3, two nodes: node 1's worker SIGSTOPs itself (its launcher heartbeats on, so the
    node is alive to the rendezvous). Node 0's worker waits in its all_reduce until the task's
    collective_timeout fails it; node 1's agent ends its stopped worker after the same time and names
    it. Both nodes end (max_restarts 0), within collective_timeout + monitor_interval + the margin,
    and nothing of theirs is left (the fixture checks), the stopped process included."""
    from elastic_idl._backend.worst_case import STUCK_MARGIN_S

    collective_timeout = 4
    common = _common("stop_on_node_1", str(tmp_path), nmin=2, nmax=2, run_id="stopped-worker")
    common += ["--collective-timeout", str(collective_timeout)]
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    first = nodes.start(*common)
    wait_until(lambda: listening(port) or first.proc.poll() is not None, 60, "the rendezvous store")
    second = nodes.start(*common)
    results = [n.result(timeout=120) for n in (first, second)]
    ended = time.time()
    fault = json.loads((tmp_path / "fault").read_text())
    took = ended - fault["t"]
    print(f"\na worker stopped on node 1: both nodes ended {took:.2f} s after the stop")
    assert [code for code, _ in results] == [3, 3], [n.err[-2000:] for n in nodes]
    messages = [r["message"] for _, r in results]
    stopped = [m for m in messages if "root cause: rank " in m and "was stopped (state T" in m]
    assert len(stopped) == 1, messages  # node 1 names its stopped worker as the root cause
    assert any("Timed out waiting 4000ms" in m for m in messages), messages  # node 0: the collective timed out
    assert took <= collective_timeout + MONITOR_INTERVAL_S + STUCK_MARGIN_S + SLACK_S, f"{took:.1f} s"


def test_a_store_host_frozen_while_the_other_waits_in_the_exit_barrier_lets_it_go(nodes: Nodes, tmp_path: Path) -> None:
    # Node 1's workers succeeded; its agent waits in the exit barrier (on the rendezvous store) for
    # node 0, the store's host, which freezes. Each store call of the barrier is bounded by
    # read_timeout + 5 s: node 1 leaves, its workers' success stands.
    read_timeout = 5
    common = _common("finish_unevenly", str(tmp_path), nmin=2, nmax=2, run_id="frozen-in-barrier")
    common += ["--read-timeout", str(read_timeout)]
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    host = nodes.start(*common, env={"EI_FAULT_IDENTITY": "job-worker-0:1"})
    wait_until(lambda: listening(port) or host.proc.poll() is not None, 60, "the rendezvous store")
    other = nodes.start(*common, env={"EI_FAULT_IDENTITY": "job-worker-1:1"})
    wait_until(lambda: (tmp_path / "done-g1").exists() and (tmp_path / "done-g0").exists(), 60, "both workers done")
    time.sleep(1.0)  # node 1's agent sees its worker's success and enters the exit barrier
    host.signal_group(signal.SIGSTOP)
    stopped_at = time.time()
    try:
        code, result = other.result(timeout=read_timeout + 5 + SLACK_S + 30)
    finally:
        host.kill()
    took = time.time() - stopped_at
    print(f"\nstore host frozen during the exit barrier: the other node ended {took:.2f} s later")
    assert code == 0, other.err[-3000:]
    assert [v["group"] for v in result["ok"].values()] == [1]
    assert "leaving the exit barrier (this node's workers succeeded)" in other.err
    assert took <= read_timeout + 5 + 1 + SLACK_S


def test_the_exit_code_of_a_lost_peer_is_retryable() -> None:
    from elastic_idl import PeerLostError, RendezvousIncompleteError
    from elastic_idl._task.messages import FailureReport
    from elastic_idl.exit_codes import EXIT_RENDEZVOUS, EXIT_STORE_LOST, exit_code_of

    err = PeerLostError("lost", FailureReport(), joined=1, needed=2, timeout_s=12, lost=["pod-b_1_7"])
    assert isinstance(err, RendezvousIncompleteError)
    # The pod entrypoint and the CLI share the table: 200, which the ExitCode policy retries (>= 128);
    # a job that never gathered its nodes stays 4.
    assert exit_code_of(err) == EXIT_STORE_LOST >= 128
    never = RendezvousIncompleteError("never", FailureReport(), joined=1, needed=2, timeout_s=12)
    assert exit_code_of(never) == EXIT_RENDEZVOUS
    assert err.lost == ("pod-b_1_7",)


@pytest.mark.parametrize("where", ["init", "allreduce"])
def test_a_node_that_fails_for_good_stops_the_other_within_the_bound(nodes: Nodes, tmp_path: Path, where: str) -> None:
    common = _common("fail_for_good_on_node", str(tmp_path), where, nmin=2, nmax=2, run_id=f"fails-{where}")
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    # Node ranks sort by torch's node identity, the host name first: as in a PyTorchJob, worker-0 is
    # node rank 0 (it hosts the workers' store) and worker-1 is node rank 1 (its workers fail).
    first = nodes.start(*common, env={"EI_FAULT_IDENTITY": "job-worker-0:1"})
    wait_until(lambda: listening(port) or first.proc.poll() is not None, 60, "the rendezvous store")
    second = nodes.start(*common, env={"EI_FAULT_IDENTITY": "job-worker-1:1"})  # not the store's host
    outcomes: dict[int, tuple[int, dict[str, Any], float]] = {}
    deadline = time.monotonic() + 60
    while len(outcomes) < 2 and time.monotonic() < deadline:
        for i, n in enumerate((first, second)):
            if i not in outcomes and n.proc.poll() is not None:
                code, result = n.result()
                outcomes[i] = (code, result, time.time())
        time.sleep(0.05)
    assert len(outcomes) == 2, "a node still runs 60 s in (torch's process group timeout is 30 min)"
    (failed,) = [o for o in outcomes.values() if "node 1 fails for good" in o[1].get("message", "")]
    (other,) = [o for o in outcomes.values() if o is not failed]
    assert failed[0] == 3
    if where == "init":  # its workers wait in init_process_group for ranks that never connect
        assert failed[1]["error"] == "LaunchFailedError", failed
        assert other[1]["error"] == "RendezvousClosedError", other
        assert "closed the rendezvous while this node's workers ran" in other[1]["message"]
    else:  # its all_reduce fails at once (the peer's sockets closed): a collateral failure, or the close
        assert other[1]["error"] in ("LaunchFailedError", "RendezvousClosedError"), other
        # When node 0 (the store's host) ended first, node 1 finds the store gone as it fails.
        assert failed[1]["error"] in ("LaunchFailedError", "RendezvousStoreLostError"), failed
    assert other[0] == 3
    (failed_marker,) = tmp_path.glob("failed-g1-*")
    raised = json.loads(failed_marker.read_text())["t"]
    print(f"\nnode 1 failed for good ({where}): node 0 ended {other[2] - raised:.2f} s after node 1's worker raised")
    if where == "init":
        closed = second.log_time(r"has closed the rendezvous")
        seen = first.log_time(r"closed rendezvous round \d+ while this node's workers ran")
        print(
            f"  node 1 closed the rendezvous {closed - raised:.2f} s after; node 0 saw it {seen - closed:.2f} s later"
        )
        assert seen - closed <= CLOSED_BOUND_S + SLACK_S
    # node 1's agent notices its failure (monitor_interval), stops, closes the rendezvous; node 0
    # reads it, stops its workers and ends.
    assert other[2] - raised <= MONITOR_INTERVAL_S + CLOSED_BOUND_S + SLACK_S + 3


def _joined(node: Node) -> list[tuple[str, int, int]]:
    """(node identity, round, rank) of every "joined round" line torch logged on this node."""
    found = re.findall(r"The node '([^']+)' has joined round (\d+) of the rendezvous '[^']+' as rank (\d+)", node.err)
    return [(ident, int(rnd), int(rank)) for ident, rnd, rank in found]


def test_two_launchers_with_a_recreated_pods_identity_are_two_nodes(nodes: Nodes) -> None:
    # torch names a pod's node "<hostname>_1_0" in every incarnation (PID 1, first handler):
    # both launchers here get exactly that, as a pod and its replacement would.
    common = _common("allreduce", nmin=2, nmax=2, run_id="same-identity")
    env = {"EI_FAULT_IDENTITY": "job-worker-1:1"}
    for _ in range(2):
        nodes.start(*common, env=env)
    results = [n.result(timeout=60) for n in nodes]
    assert [code for code, _ in results] == [0, 0], [n.err[-2000:] for n in nodes]
    values = [v for _, r in results for v in r["ok"].values()]
    assert sorted(v["rank"] for v in values) == [0, 1]
    assert {v["world"] for v in values} == {2}
    idents = [ident for n in nodes for ident, _, _ in _joined(n)]
    assert len(idents) == 2 and len(set(idents)) == 2, idents
    for ident in idents:  # the address (MASTER_ADDR of node rank 0) and the pid stay torch's
        assert re.fullmatch(r"job-worker-1_1_\d+", ident), ident
        assert ident != "job-worker-1_1_0"


def test_with_torchs_identity_the_second_incarnation_is_taken_for_the_first(nodes: Nodes) -> None:
    # The control for the test above: the same two launchers with the fix switched off.
    common = _common("allreduce", nmin=2, nmax=2, run_id="torch-identity", join_timeout=8)
    port = int(common[common.index("--endpoint") + 1].rpartition(":")[2])
    env = {"EI_FAULT_IDENTITY": "job-worker-1:1", "EI_FAULT_TORCH_IDENTITY": "1"}
    host = nodes.start(*common, env=env)
    wait_until(lambda: listening(port) or host.proc.poll() is not None, 60, "the rendezvous store")
    nodes.start(*common, env=env)
    results = [n.result(timeout=60) for n in nodes]
    # The second node's join removes the first's entry as its own: never 2 participants. (The
    # other node then loses the store with its host: a RendezvousStoreLostError, or the same.)
    assert [code for code, _ in results] == [3, 3], [n.err[-2000:] for n in nodes]
    assert results[0][1]["error"] == "RendezvousIncompleteError", results[0]
    assert "1 of the 2 node(s) needed joined" in results[0][1]["message"]


def _in_a_child(function: str) -> None:
    """Run ``function`` of this module in a child process: the c10d handlers it makes host their
    stores (native server threads) that must not outlive the test in this one, where later tests
    count this process's threads."""
    here = Path(__file__).resolve().parent
    code = f"import test_launcher_faults as t; t.{function}(); print('checked')"
    r = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "checked" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_a_launch_has_a_node_identity_of_its_own_with_torchs_address_and_pid() -> None:
    _in_a_child("_exercise_the_node_identity")


def _exercise_the_node_identity() -> None:
    from elastic_idl._launch import agent  # first: it imports torch quietly (no numpy here)

    RendezvousParameters = agent.RendezvousParameters

    made = []
    for _ in range(2):
        params = RendezvousParameters(
            backend="c10d", endpoint="127.0.0.1:0", run_id="ident", min_nodes=1, max_nodes=1, local_addr="10.0.0.7"
        )
        handler, _ = agent._make_handler(params, loopback=True)
        made.append(handler._this_node)  # type: ignore[attr-defined]
        assert handler._op_executor._node is handler._this_node  # type: ignore[attr-defined]
        handler.shutdown()
    assert [(n.addr, n.pid) for n in made] == [("10.0.0.7", os.getpid())] * 2
    assert made[0].local_id != made[1].local_id
    assert min(n.local_id for n in made) > 1000  # not torch's per-process counter (0, 1, ...)


def test_the_round_watch_applies_torchs_keep_alive_rule_and_sees_a_closed_rendezvous() -> None:
    """The watch on a real c10d handler (one node), its state edited as other nodes would."""
    _in_a_child("_exercise_the_round_watch")


def _exercise_the_round_watch() -> None:
    from datetime import datetime, timedelta, timezone

    from elastic_idl._launch import agent  # first: it imports torch quietly (no numpy here)

    params = agent.RendezvousParameters(
        backend="c10d",
        endpoint="127.0.0.1:0",
        run_id="watch",
        min_nodes=1,
        max_nodes=1,
        local_addr="127.0.0.1",
        keep_alive_interval=1,
        keep_alive_max_attempt=3,
    )
    inner, _ = agent._make_handler(params, loopback=True)
    handler = agent.FreshStoreHandler(inner, bind_host="127.0.0.1", read_timeout_s=10)
    raw: Any = inner

    def edit(change: Any) -> None:
        """Change the shared state and write it back, as another node's agent does."""
        with raw._heartbeat_lock:
            holder = raw._state_holder
            change(holder.state)
            holder.mark_dirty()
            holder.sync()

    try:
        info = handler.next_rendezvous()
        watch = handler.watch
        me = raw._this_node
        assert handler.num_nodes_waiting() == 0
        assert watch.round_void() is None and watch.missing() == []

        # A second node of the round whose clock is a minute behind: alive while its heartbeat moves
        # (issue 30 item 5: liveness is progress on this node's clock, not the writer's wall clock) ...
        peer = type(me)("10.9.9.9", 1, 7)
        behind = datetime.now(timezone.utc) - timedelta(seconds=60)
        edit(lambda st: (st.participants.__setitem__(peer, 1), st.last_heartbeats.__setitem__(peer, behind)))
        watch.round_started(info.store, 2)
        assert handler.num_nodes_waiting() == 0
        for beat in range(1, 5):
            time.sleep(1.0)
            edit(lambda st, b=beat: st.last_heartbeats.__setitem__(peer, behind + timedelta(seconds=b)))
            assert handler.num_nodes_waiting() == 0, beat
        # ... and dead once its heartbeat has not moved for 1 s x 3 here.
        time.sleep(3.5)
        assert handler.num_nodes_waiting() == 1  # torch's agent: a new round, no restart used
        assert watch.lost == [repr(peer)] and watch.missing() == [repr(peer)]
        assert "lost: no heartbeat for 3 s" in (watch.round_void() or "")

        # This node dropped from its round (it was frozen): its workers' failure is no failure.
        watch.round_started(info.store, 1)
        edit(lambda st: (st.participants.pop(me), st.last_heartbeats.pop(me)))
        assert "no longer a participant of rendezvous round" in (watch.round_void() or "")
        assert handler.num_nodes_waiting() == 1

        # Closed by another node while the workers run: the launch ends ...
        watch.round_started(info.store, 2)
        edit(lambda st: (st.participants.__setitem__(me, 0), setattr(st, "closed", True)))
        with pytest.raises(agent.RendezvousClosedError, match="while this node's workers ran"):
            handler.num_nodes_waiting()
        assert watch.round_void() is None  # a failure of the workers then stands
        # ... unless every other node of the round finished (it waited in the exit barrier, in vain).
        info.store.add(agent._EXIT_BARRIER_COUNT_KEY, 1)
        assert handler.num_nodes_waiting() == 0
    finally:
        handler.shutdown()
        handler.release()
