"""Launch wall time of elastic-idl's launcher against torchrun and `import torch`, side by side.

Every sample is a fresh process, timed from start to exit (interpreter start-up,
imports, rendezvous, workers, teardown: what a user waits for). Each round runs
every case once, in a new random order; the report gives medians and the median
of the per-round ratios (noise on a shared machine hits all cases of a round alike).

Workload: 2 workers on one node, gloo init_process_group + one all_reduce + destroy.

    .venv/bin/python bench/bench_launch.py --rounds 15
    .venv/bin/python bench/bench_launch.py --restart --rounds 10   # restart cost
    .venv/bin/python bench/bench_launch.py --workers 1,2,4,8 --rounds 12 --json bench/results/launch.json

--restart runs the same script with rank 1 failing in attempt 0 (max_restarts=1)
and reports the extra wall time over a clean run of the same launcher.

--workers sweeps the worker count: at each count our launcher (default start method,
the warm fork server) and torchrun --standalone run the same workload, every
(launcher, count) pair once per round in a new random order. With --json it writes
the results document the docs chart is drawn from (scripts/docs_charts.py): machine,
date, source commit, command, and per worker count both launchers' samples, their
medians and the median of the per-round ratios ours / torchrun.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
    e.nproc_per_node = int(sys.argv[4])
    e.rdzv_backend = "c10d"
    e.max_restarts = int(sys.argv[3])
    launch(task, sys.argv[1], *sys.argv[5:], start_method=sys.argv[2])
"""


TORCHRUN = "torchrun --standalone"
DEFAULT = "elastic-idl forkserver (default)"


def cases(script: str, launcher: str, restart: bool, workers: int = 2) -> dict[str, list[str]]:
    torchrun = shutil.which("torchrun", path=str(Path(PY).parent)) or "torchrun"
    extra = ["fail-once"] if restart else []
    restarts = "1" if restart else "0"
    n = str(workers)
    out = {
        TORCHRUN: [
            torchrun,
            "--standalone",
            f"--nproc-per-node={n}",
            f"--max-restarts={restarts}",
            script,
            *extra,
        ],
        DEFAULT: [PY, launcher, script, "forkserver", restarts, n, *extra],
        "elastic-idl fork": [PY, launcher, script, "fork", restarts, n, *extra],
        "elastic-idl spawn": [PY, launcher, script, "spawn", restarts, n, *extra],
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


def median_or_nan(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def paired_ratios(ours: list[tuple[float, int]], theirs: list[tuple[float, int]]) -> list[float]:
    """ours / theirs of each round where both exited 0."""
    return [o[0] / t[0] for o, t in zip(ours, theirs, strict=True) if o[1] == 0 and t[1] == 0]


def rounded(value: float) -> float | None:
    """3 decimals, or None for no value (JSON has no NaN)."""
    return None if value != value else round(value, 3)


def sweep_key(side: str, workers: int) -> str:
    return f"{side} x{workers}"


def git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, object]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "torch": importlib.metadata.version("torch"),
        # Installed beside torch, as nearly every user has them: `import torch` loads numpy, whose
        # OpenBLAS starts a thread pool in the launcher (None: not installed).
        "numpy": _version("numpy"),
        "pandas": _version("pandas"),
        "backend": "gloo (CPU)",
        # PYTHONDONTWRITEBYTECODE set: every launch compiles the modules that have no cached bytecode yet
        "bytecode_cache_written": not sys.dont_write_bytecode,
    }


def sweep_document(
    counts: list[int], samples: dict[str, list[tuple[float, int]]], args: argparse.Namespace, started: dict[str, object]
) -> dict[str, Any]:
    """The results file of a --workers sweep (bench/results/launch.json): what the docs chart is drawn from."""
    rows = []
    for n in counts:
        row: dict[str, object] = {"workers": n}
        for side in ("ours", "torchrun"):
            s = samples[sweep_key(side, n)]
            ok = [t for t, code in s if code == 0]
            row[side] = {
                "samples_s": [round(t, 3) for t, _ in s],
                "exit_codes": [code for _, code in s],
                "median_s": rounded(median_or_nan(ok)),
                "failed": sum(1 for _, code in s if code != 0),
            }
        ratios = paired_ratios(samples[sweep_key("ours", n)], samples[sweep_key("torchrun", n)])
        row["ratios"] = [round(r, 3) for r in ratios]
        row["ratio_median"] = rounded(median_or_nan(ratios))
        rows.append(row)
    python = os.path.relpath(PY, ROOT) if Path(PY).is_relative_to(ROOT) else PY
    return {
        "benchmark": "bench/bench_launch.py --workers: launch wall time vs workers, ours vs stock torchrun",
        "command": shlex.join([python, "bench/bench_launch.py", *sys.argv[1:]]),
        **started,
        "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
        "machine": machine(),
        "workload": (
            "one node, N workers: gloo init_process_group, one all_reduce, destroy_process_group; each sample a "
            "fresh launcher process timed from start to exit"
        ),
        "ours": "elastic-idl launch() from a 10-line script, default start method (the warm fork server)",
        "torchrun": "torchrun --standalone --nproc-per-node=N",
        "rounds": args.rounds,
        "timeout_s": args.timeout,
        "method": (
            "every (launcher, workers) pair runs once per round, in a new random order each round; "
            "ratio = ours / torchrun of the same round, ratio_median = median of the per-round ratios"
        ),
        "results": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--timeout", type=float, default=120.0, help="per-sample timeout in seconds")
    ap.add_argument("--restart", action="store_true", help="measure the restart cost instead")
    ap.add_argument(
        "--workers",
        help="comma-separated worker counts (e.g. 1,2,4,8): ours vs torchrun at each; --json writes the results file",
    )
    ap.add_argument("--json", help="also write the raw samples (with --workers: the results document) here")
    args = ap.parse_args()
    counts = sorted({int(n) for n in args.workers.split(",")}) if args.workers else []
    started: dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git("rev-parse", "HEAD"),
        "modified": git("status", "--porcelain", "--", "src", "bench/bench_launch.py").splitlines(),
        "loadavg_1m_start": round(os.getloadavg()[0], 2),
    }

    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        script = Path(tmp, "allreduce.py")
        script.write_text(WORKER)
        launcher = Path(tmp, "launch_one.py")
        launcher.write_text(LAUNCHER)
        clean = cases(str(script), str(launcher), restart=False)
        if counts:
            grid = {}
            for n in counts:
                each = cases(str(script), str(launcher), restart=False, workers=n)
                grid[sweep_key("ours", n)] = each[DEFAULT]
                grid[sweep_key("torchrun", n)] = each[TORCHRUN]
            samples = measure(grid, args.rounds, args.timeout)
        elif args.restart:
            failing = cases(str(script), str(launcher), restart=True)
            both = {**{f"{k} [clean]": v for k, v in clean.items() if "import torch" not in k}}
            both.update({f"{k} [fail once]": v for k, v in failing.items()})
            samples = measure(both, args.rounds, args.timeout)
        else:
            samples = measure(clean, args.rounds, args.timeout)

    ok = {name: [t for t, code in s if code == 0] for name, s in samples.items()}
    failed = {name: sum(1 for _, code in s if code != 0) for name, s in samples.items()}
    if counts:
        doc = sweep_document(counts, samples, args, started)
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\n{args.rounds} rounds, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
        print("| workers | ours: median (s) | torchrun: median (s) | ours / torchrun | failed runs (ours / torchrun) |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for row in doc["results"]:
            o, t = row["ours"], row["torchrun"]
            cells = [f"{v:.2f}" if v is not None else "-" for v in (o["median_s"], t["median_s"], row["ratio_median"])]
            print(f"| {row['workers']} | {' | '.join(cells)} | {o['failed']} / {t['failed']} |")
        return 0
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1))
    print(f"\n{args.rounds} rounds, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if not args.restart:
        imp = "python -c 'import torch'"
        print("| case | median wall (s) | ratio to torchrun | ratio to import torch | failed runs |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in clean:
            rt = paired_ratios(samples[name], samples[TORCHRUN])
            ri = paired_ratios(samples[name], samples[imp])
            print(
                f"| {name} | {median_or_nan(ok[name]):.2f} | {statistics.median(rt):.2f} | "
                f"{statistics.median(ri):.2f} | {failed[name]} |"
            )
    else:
        print("| launcher | clean (s) | one failure + restart (s) | restart cost (s) | failed runs (clean / restart) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in clean:
            if "import torch" in name:
                continue
            c, f = f"{name} [clean]", f"{name} [fail once]"
            cost = [fs[0] - cs[0] for cs, fs in zip(samples[c], samples[f], strict=True) if cs[1] == 0 and fs[1] == 0]
            print(
                f"| {name} | {median_or_nan(ok[c]):.2f} | {median_or_nan(ok[f]):.2f} | {median_or_nan(cost):.2f} | "
                f"{failed[c]} / {failed[f]} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
