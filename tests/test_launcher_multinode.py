"""Several launcher processes on this machine (real processes, loopback): multi-node jobs and signals.

Each "node" is ``tests/workers/node.py`` in its own session, so that the test can
check afterwards that nothing it started (zygote, workers, helpers) is left.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher_nodes import Nodes, free_port, listening, session_pids, started_nodes, wait_until

NODE = Path(__file__).resolve().parent / "workers" / "node.py"
#: Fast failure detection for the tests: a dead node is noticed after ~3 s, not 15 s. (A heartbeat is
#: renewed once it is older than the interval, so it can reach twice that age: 2 attempts is too tight.)
FAST_KEEPALIVE = ["--rdzv-option", "keep_alive_interval=1", "--rdzv-option", "keep_alive_max_attempt=3"]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.fixture
def nodes() -> Iterator[Nodes]:
    """Start launchers with ``nodes.start(...)``; afterwards nothing of theirs may be left."""
    with started_nodes(NODE, prefix="ei-n-") as started:
        yield started


def test_two_launchers_with_one_endpoint_and_run_id_form_one_world(nodes: Nodes) -> None:
    common = ["--fn", "world_then_return", "--min", "2", "--max", "2", "--nproc", "1"]
    common += ["--endpoint", f"127.0.0.1:{free_port()}", "--run-id", "two-nodes", "--join-timeout", "60"]
    nodes.start(*common)
    nodes.start(*common)
    results = [n.result() for n in nodes]
    assert [code for code, _ in results] == [0, 0], [n.err[-2000:] for n in nodes]
    values = [v for _, r in results for v in r["ok"].values()]
    assert sorted(v["rank"] for v in values) == [0, 1]
    assert {v["world"] for v in values} == {2}
    assert {v["sum"] for v in values} == {2.0}
    assert sorted(v["group_rank"] for v in values) == [0, 1]


@pytest.mark.parametrize("skew", [-60, 60])
def test_a_node_whose_clock_is_a_minute_off_is_not_declared_dead(nodes: Nodes, skew: int) -> None:
    """Issue 30 item 5: heartbeats were compared across the nodes' wall clocks, so 10 s of skew declared a
    live peer dead and looped restart rounds. Liveness is a heartbeat's progress on the reader's own clock:
    one round, no restart, with one node's clock 60 s off and a keep-alive expiry of 3 s."""
    common = ["--fn", "allreduce_for", "--arg", "8", "--min", "2", "--max", "2", "--nproc", "1", "--restarts", "2"]
    common += ["--endpoint", f"127.0.0.1:{free_port()}", "--run-id", "skewed", "--join-timeout", "60"]
    common += ["--rdzv-option", "keep_alive_interval=1", "--rdzv-option", "keep_alive_max_attempt=3"]
    nodes.start(*common)
    nodes.start(*common, "--clock-skew", str(skew))
    results = [n.result(timeout=120) for n in nodes]
    assert [code for code, _ in results] == [0, 0], [n.err[-3000:] for n in nodes]
    values = [v for _, r in results for v in r["ok"].values()]
    assert [(v["world"], v["attempt"]) for v in values] == [(2, 0), (2, 0)]
    assert not any("lost: no heartbeat" in n.err or "no longer a participant" in n.err for n in nodes), [
        n.err[-3000:] for n in nodes
    ]


def test_a_node_joining_later_triggers_a_rerendezvous_and_both_finish_in_a_world_of_2(
    nodes: Nodes, tmp_path: Path
) -> None:
    common = ["--fn", "wait_for_world", "--arg", str(tmp_path), "--arg", "2", "--min", "1", "--max", "2"]
    common += ["--endpoint", f"127.0.0.1:{free_port()}", "--run-id", "late-join", "--last-call-timeout", "1"]
    common += ["--join-timeout", "60", *FAST_KEEPALIVE]
    first = nodes.start(*common)
    # Node A alone: its worker runs in a world of 1, waiting.
    wait_until(lambda: any(tmp_path.glob("world1-*")), 60, "node A's worker in a world of 1")
    assert first.proc.poll() is None
    nodes.start(*common)
    results = [n.result() for n in nodes]
    assert [code for code, _ in results] == [0, 0], [n.err[-3000:] for n in nodes]
    values = [v for _, r in results for v in r["ok"].values()]
    assert {v["world"] for v in values} == {2}
    assert {v["sum"] for v in values} == {2.0}
    assert sorted(v["rank"] for v in values) == [0, 1]
    # A membership change is not a failure: no restart was used up.
    assert {v["attempt"] for v in values} == {0}
    assert len(list(tmp_path.glob("world2-*"))) == 2


def test_when_a_node_that_does_not_host_the_store_dies_the_survivor_carries_on_alone(
    nodes: Nodes, tmp_path: Path
) -> None:
    common = ["--fn", "loop_until_alone", "--arg", str(tmp_path), "--min", "1", "--max", "2", "--restarts", "1"]
    common += ["--endpoint", f"127.0.0.1:{free_port()}", "--run-id", "node-dies", "--last-call-timeout", "1"]
    common += ["--join-timeout", "60", *FAST_KEEPALIVE]
    host = nodes.start(*common)  # first: it binds the endpoint, so it hosts the rendezvous store
    wait_until(lambda: any(tmp_path.glob("world1-*")), 60, "the host's worker alone")
    other = nodes.start(*common)
    wait_until(lambda: len(list(tmp_path.glob("world2-*"))) == 2, 60, "both nodes in a world of 2")
    assert host.proc.poll() is None and other.proc.poll() is None
    os.killpg(other.proc.pid, signal.SIGKILL)  # the whole node: launcher, zygote, workers
    code, result = host.result()
    assert code == 0, host.err[-3000:]
    (value,) = result["ok"].values()
    assert value == {"rank": 0, "world": 1, "attempt": 1}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_stops_every_worker_and_says_so(nodes: Nodes, tmp_path: Path, sig: int) -> None:
    node = nodes.start("--fn", "sleep_forever", "--arg", str(tmp_path), "--nproc", "2", "--restarts", "3")
    wait_until(lambda: len(list(tmp_path.glob("*.pid"))) == 2, 60, "two workers")
    workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
    sent = time.monotonic()
    os.kill(node.proc.pid, sig)
    code, result = node.result(timeout=30)
    took = time.monotonic() - sent
    name = signal.Signals(sig).name
    assert code == 130
    assert result["error"] == "LaunchInterruptedError"
    assert f"launch interrupted by {name}: stopped 2 worker process(es)" in result["message"]
    assert "no worker process is left running" in result["message"]
    for pid in workers:
        assert str(pid) in result["message"]
        assert not _alive(pid)
    assert took < 20, f"stopping took {took:.1f} s"  # generous: a hang would take torch's 30 s or forever


def test_a_signal_during_the_rendezvous_stops_the_launcher_promptly(nodes: Nodes) -> None:
    port = free_port()
    node = nodes.start(
        "--fn", "allreduce", "--min", "2", "--max", "2", "--join-timeout", "600",
        "--endpoint", f"127.0.0.1:{port}", "--run-id", "never-fills",
    )  # fmt: skip
    # In the rendezvous once its store listens (a fixed sleep raced the interpreter's start-up under load).
    wait_until(lambda: listening(port) or node.proc.poll() is not None, 120, "the rendezvous store")
    time.sleep(0.5)
    os.kill(node.proc.pid, signal.SIGTERM)
    code, result = node.result(timeout=30)
    assert code == 130
    assert "launch interrupted by SIGTERM: no worker was running yet" in result["message"]


def test_a_launcher_killed_outright_leaves_no_orphans(nodes: Nodes, tmp_path: Path) -> None:
    node = nodes.start("--fn", "sleep_forever", "--arg", str(tmp_path), "--nproc", "2")
    wait_until(lambda: len(list(tmp_path.glob("*.pid"))) == 2, 60, "two workers")
    workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
    os.kill(node.proc.pid, signal.SIGKILL)  # only the launcher: no chance to clean up
    node.close()
    # The fork server dies with the launcher, the workers with the fork server (parent-death signals).
    wait_until(lambda: not any(_alive(p) for p in workers), 10, "workers to die")
    wait_until(lambda: not session_pids(node.proc.pid), 10, "the session to empty")
