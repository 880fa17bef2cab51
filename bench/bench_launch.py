"""Launch wall time of elastic-idl's launcher against torchrun and `import torch`, side by side.

Every sample is a fresh process, timed from start to exit (interpreter start-up,
imports, rendezvous, workers, teardown: what a user waits for). Each round runs
every case once, in a new random order; the report gives medians and the median
of the per-round ratios (noise on a shared machine hits all cases of a round alike).

Workload: 2 workers on one node, gloo init_process_group + one all_reduce + destroy.

    .venv/bin/python bench/bench_launch.py --rounds 15
    .venv/bin/python bench/bench_launch.py --restart --rounds 10   # restart cost

--restart runs the same script with rank 1 failing in attempt 0 (max_restarts=1)
and reports the extra wall time over a clean run of the same launcher.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

WORKER = """\
import os, sys
from datetime import timedelta
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=30))
if sys.argv[1:] == ["fail-once"] and dist.get_rank() == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    raise SystemExit(3)
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()
dist.destroy_process_group()
"""

LAUNCHER = """\
import sys
from elastic_idl._launch.launcher import launch
from elastic_idl._task.messages import LegacyTask

if __name__ == "__main__":  # spawned workers import this file again
    task = LegacyTask()
    e = task.elastic_config
    e.min_replicas = e.max_replicas = 1
    e.nproc_per_node = 2
    e.rdzv_backend = "c10d"
    e.max_restarts = int(sys.argv[3])
    launch(task, sys.argv[1], *sys.argv[4:], start_method=sys.argv[2])
"""


def cases(script: str, launcher: str, restart: bool) -> dict[str, list[str]]:
    torchrun = shutil.which("torchrun", path=str(Path(PY).parent)) or "torchrun"
    extra = ["fail-once"] if restart else []
    restarts = "1" if restart else "0"
    out = {
        "torchrun --standalone": [
            torchrun,
            "--standalone",
            "--nproc-per-node=2",
            f"--max-restarts={restarts}",
            script,
            *extra,
        ],
        "elastic-idl forkserver (default)": [PY, launcher, script, "forkserver", restarts, *extra],
        "elastic-idl fork": [PY, launcher, script, "fork", restarts, *extra],
        "elastic-idl spawn": [PY, launcher, script, "spawn", restarts, *extra],
    }
    if not restart:
        out = {"python -c 'import torch'": [PY, "-c", "import torch"], **out}
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (torchrun puts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    for p in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def run_once(argv: list[str], timeout: float) -> tuple[float, int]:
    """Wall time and exit code of one sample; on timeout its whole process group is killed (code -1)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.wait()
        code = -1
    return time.perf_counter() - t0, code


def measure(all_cases: dict[str, list[str]], rounds: int, timeout: float) -> dict[str, list[tuple[float, int]]]:
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in all_cases}
    names = list(all_cases)
    for r in range(rounds):
        random.shuffle(names)
        for name in names:
            samples[name].append(run_once(all_cases[name], timeout))
        done = ", ".join(f"{n}={samples[n][-1][0]:.2f}" for n in sorted(names))
        print(f"round {r + 1}/{rounds}: {done}", file=sys.stderr)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--timeout", type=float, default=120.0, help="per-sample timeout in seconds")
    ap.add_argument("--restart", action="store_true", help="measure the restart cost instead")
    ap.add_argument("--json", help="also write the raw samples here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        script = Path(tmp, "allreduce.py")
        script.write_text(WORKER)
        launcher = Path(tmp, "launch_one.py")
        launcher.write_text(LAUNCHER)
        clean = cases(str(script), str(launcher), restart=False)
        if args.restart:
            failing = cases(str(script), str(launcher), restart=True)
            both = {**{f"{k} [clean]": v for k, v in clean.items() if "import torch" not in k}}
            both.update({f"{k} [fail once]": v for k, v in failing.items()})
            samples = measure(both, args.rounds, args.timeout)
        else:
            samples = measure(clean, args.rounds, args.timeout)

    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1))
    ok = {name: [t for t, code in s if code == 0] for name, s in samples.items()}
    failed = {name: sum(1 for _, code in s if code != 0) for name, s in samples.items()}
    print(f"\n{args.rounds} rounds, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if not args.restart:
        base = "torchrun --standalone"
        imp = "python -c 'import torch'"
        print("| case | median wall (s) | ratio to torchrun | ratio to import torch | failed runs |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in clean:
            rt = [s[0] / b[0] for s, b in zip(samples[name], samples[base], strict=True) if s[1] == 0 and b[1] == 0]
            ri = [s[0] / b[0] for s, b in zip(samples[name], samples[imp], strict=True) if s[1] == 0 and b[1] == 0]
            med = statistics.median(ok[name]) if ok[name] else float("nan")
            print(
                f"| {name} | {med:.2f} | {statistics.median(rt):.2f} | {statistics.median(ri):.2f} | {failed[name]} |"
            )
    else:
        print("| launcher | clean (s) | one failure + restart (s) | restart cost (s) | failed runs (clean / restart) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in clean:
            if "import torch" in name:
                continue
            c, f = f"{name} [clean]", f"{name} [fail once]"
            cost = [fs[0] - cs[0] for cs, fs in zip(samples[c], samples[f], strict=True) if cs[1] == 0 and fs[1] == 0]
            mc = statistics.median(ok[c]) if ok[c] else float("nan")
            mf = statistics.median(ok[f]) if ok[f] else float("nan")
            mcost = statistics.median(cost) if cost else float("nan")
            print(f"| {name} | {mc:.2f} | {mf:.2f} | {mcost:.2f} | {failed[c]} / {failed[f]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
