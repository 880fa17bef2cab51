"""Restart reliability: the same failure N times, with torch's shared store ("stock") and with the fix.

Scenario "restart" (default): one node, 2 workers, max_restarts=1; rank 1 exits
with code 3 in attempt 0, so the job succeeds only if attempt 1 works.
Scenario "join": two launchers on this machine, min 1 / max 2 nodes. Node A starts
alone; its workers wait for a world of 2. Node B starts 3 s later; the job
succeeds when both nodes finish in a world of 2 (a re-rendezvous with a late joiner).

Arms (same launcher, same start method; only the rendezvous store differs):
- stock: torch 2.13's default, one TCPStore shared by the agent and the workers of
  every round (``launch_values(..., fresh_store=False)`` of ``elastic_idl._launch.launcher``,
  torch's ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE`` unset);
- fixed: elastic-idl's default, a fresh agent-owned store per round.

Every run is a fresh process group with a wall-clock limit; a run that exceeds it
counts as a hang and is killed. Usage:

    .venv/bin/python bench/stress_restart.py --runs 30
    .venv/bin/python bench/stress_restart.py --runs 10 --scenario join
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_launch import kill_tree  # one process-tree killer for both benchmarks

PY = sys.executable

WORKER = """\
import os, sys, time
from datetime import timedelta
import torch
import torch.distributed as dist

def fail_once():
    dist.init_process_group("gloo", timeout=timedelta(seconds=15))
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if dist.get_rank() == 1 and attempt == 0:
        os._exit(3)
    t = torch.ones(1)
    dist.all_reduce(t)
    dist.destroy_process_group()
    return ("attempt", attempt, "sum", t.item())

def wait_for_two():
    dist.init_process_group("gloo", timeout=timedelta(seconds=15))
    world = dist.get_world_size()
    if world < 4:  # 2 nodes x 2 workers
        while True:
            time.sleep(0.2)  # the agent restarts us when the second node arrives
    t = torch.ones(1)
    dist.all_reduce(t)
    dist.destroy_process_group()
    return ("world", world, "sum", t.item())
"""

LAUNCHER = """\
import sys
sys.path.insert(0, sys.argv[1])
import stress_worker
from elastic_idl._launch.launcher import launch_values
from elastic_idl._task.messages import LegacyTask
from google.protobuf.duration_pb2 import Duration

if __name__ == "__main__":
    arm, scenario, method = sys.argv[2], sys.argv[3], sys.argv[4]
    fresh_store = arm == "fixed"
    task = LegacyTask()
    e = task.elastic_config
    e.rdzv_backend = "c10d"
    e.nproc_per_node = 2
    if scenario == "restart":
        e.min_replicas = e.max_replicas = 1
        e.max_restarts = 1
        out = launch_values(task, stress_worker.fail_once, start_method=method, fresh_store=fresh_store).get(0)
    else:
        e.min_replicas, e.max_replicas = 1, 2
        e.max_restarts = 0
        e.join_timeout.CopyFrom(Duration(seconds=30))
        e.last_call_timeout.CopyFrom(Duration(seconds=1))
        out = launch_values(task, stress_worker.wait_for_two, start_method=method, fresh_store=fresh_store,
                            rdzv_endpoint=sys.argv[5], run_id=sys.argv[6])
    print("RESULT", out, flush=True)
"""

KINDS = (
    ("connectFullMesh", "gloo connectFullMesh timed out"),
    ("Timed out", "store/gloo timeout"),
    ("DistStoreError", "DistStoreError"),
    ("Connection closed by peer", "peer connection closed"),
    ("Connection refused", "connection refused"),
    ("RendezvousIncompleteError", "rendezvous timeout"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _classify(text: str) -> str:
    for needle, kind in KINDS:
        if needle in text:
            return kind
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][-80:] if lines else "no output"


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _finish(proc: subprocess.Popen[str], deadline: float) -> tuple[int | None, str]:
    try:
        out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)  # the launcher and everything it started
        out, _ = proc.communicate()
        return None, out


def one_run(tmp: str, launcher: str, arm: str, scenario: str, method: str, limit: float) -> tuple[bool, str, float]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}
    t0 = time.monotonic()
    deadline = t0 + limit
    if scenario == "restart":
        code, out = _finish(_start([PY, launcher, tmp, arm, scenario, method], env), deadline)
        ok = code == 0 and "RESULT ('attempt', 1, 'sum', 2.0)" in out
        return ok, "ok" if ok else ("hang (killed)" if code is None else _classify(out)), time.monotonic() - t0
    endpoint, run_id = f"127.0.0.1:{_free_port()}", f"stress-{os.getpid()}-{time.time_ns()}"
    argv = [PY, launcher, tmp, arm, scenario, method, endpoint, run_id]
    first = _start(argv, env)
    time.sleep(3.0)
    second = _start(argv, env)
    (c1, o1), (c2, o2) = _finish(first, deadline), _finish(second, deadline)
    ok = c1 == 0 and c2 == 0 and o1.count("'world', 4") == 2 and o2.count("'world', 4") == 2
    if ok:
        why = "ok"
    elif c1 is None or c2 is None:
        why = "hang (killed)"
    else:
        why = _classify(o1 if c1 else o2)
    return ok, why, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30, help="runs per arm")
    ap.add_argument("--arms", default="stock,fixed")
    ap.add_argument("--scenario", choices=("restart", "join"), default="restart")
    ap.add_argument("--start-method", default="forkserver")
    ap.add_argument("--limit", type=float, default=90.0, help="wall-clock limit per run (s)")
    args = ap.parse_args()
    arms = args.arms.split(",")
    results: dict[str, list[tuple[bool, str, float]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory(prefix="stress-restart-") as tmp:
        Path(tmp, "stress_worker.py").write_text(WORKER)
        launcher = str(Path(tmp, "launch_stress.py"))
        Path(launcher).write_text(LAUNCHER)
        for i in range(args.runs):
            for arm in arms:  # interleaved: both arms see the same machine load
                r = one_run(tmp, launcher, arm, args.scenario, args.start_method, args.limit)
                results[arm].append(r)
                print(
                    f"run {i + 1:3d} {arm:6s} {'ok  ' if r[0] else 'FAIL'} {r[2]:6.1f}s {r[1]}",
                    file=sys.stderr,
                    flush=True,
                )
    print(f"\nscenario {args.scenario}, start method {args.start_method}, {args.runs} runs per arm")
    print("| arm | succeeded | rate | median run (s) | failures |")
    print("| --- | ---: | ---: | ---: | --- |")
    for arm in arms:
        rs = results[arm]
        good = sum(1 for r in rs if r[0])
        kinds = collections.Counter(r[1] for r in rs if not r[0])
        med = statistics.median(r[2] for r in rs)
        detail = ", ".join(f"{k}: {n}" for k, n in kinds.most_common()) or "-"
        print(f"| {arm} | {good}/{len(rs)} | {100 * good / len(rs):.0f}% | {med:.1f} | {detail} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
