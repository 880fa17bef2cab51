"""A 2-worker gloo task in a local flytekit workflow: our plugin against a plain launch and kfpytorch.

Every sample is a fresh process timed from start to exit; nothing is kept warm between
runs. Each round runs every case once, in a new random order, so load from other jobs
hits the cases of a round alike; the report gives medians and medians of per-round
(paired) differences and ratios.

Cases (the same function: gloo init_process_group, one all_reduce, destroy):

- ``flytekit + elastic_idl.Elastic``: ``python wf.py``, a ``@workflow`` calling an
  ``@task(task_config=elastic_idl.Elastic(nproc_per_node=2))``; the plugin comes in
  through flytekit's entry point;
- the same with ``import torch`` at the top of ``wf.py``, as in most training scripts: with
  numpy installed, torch's import starts OpenBLAS's thread pool before the task runs;
- ``ei.launch``: the function launched from a plain script, no flytekit;
- ``import flytekit``: ``python -c "import flytekit"``;
- ``flytekit + kfpytorch``: the same workflow with ``flytekitplugins.kfpytorch.Elastic``
  (its defaults: spawn, 5 s monitor interval).

Target (issue #11): median over rounds of ``ours - (ei.launch + import flytekit)`` at most 0.3 s.
Also reported: the entry point's own cost inside ``import flytekit`` (target: at most 20 ms), and
the numpy and pandas installed (issue 29: measure where users are, with both).

    .venv/bin/python bench/bench_flytekit.py --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_launch import machine, run_once

PY = sys.executable

FUNCTION = """
def allreduce(x: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.ones(1) * x
    dist.all_reduce(t)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return int(t.item()) * 10 + world
"""
#: allreduce(3) on 2 workers
EXPECTED = 62


def _workflow(elastic_from: str, prelude: str = "") -> str:
    """A one-task flytekit workflow over ``allreduce`` with the ``Elastic`` of ``elastic_from``."""
    return f"""{prelude}
from flytekit import task, workflow
from {elastic_from} import Elastic
{FUNCTION}
step = task(task_config=Elastic(nproc_per_node=2))(allreduce)

@workflow
def wf(x: int) -> int:
    return step(x=x)

if __name__ == "__main__":
    assert wf(x=3) == {EXPECTED}
"""


OURS = _workflow("elastic_idl")
OURS_TORCH = _workflow("elastic_idl", prelude="\nimport torch")

PLAIN = f"""
import elastic_idl as ei
{FUNCTION}
if __name__ == "__main__":
    assert ei.launch(ei.Elastic(nproc_per_node=2).to_task(), allreduce, 3) == {EXPECTED}
"""

KFP = _workflow("flytekitplugins.kfpytorch", prelude='\nimport warnings\nwarnings.simplefilter("ignore")')

#: The entry point's cost inside `import flytekit`: unload it, then import it again with flytekit loaded.
ENTRY_COST = """
import importlib, sys, time
import flytekit
assert "elastic_idl.flytekit._entry" in sys.modules
for name in [m for m in sys.modules if m == "elastic_idl" or m.startswith("elastic_idl.")]:
    del sys.modules[name]
t0 = time.perf_counter()
importlib.import_module("elastic_idl.flytekit._entry")
print((time.perf_counter() - t0) * 1000)
"""

A_OURS = "flytekit + elastic_idl.Elastic"
A_OURS_TORCH = "flytekit + elastic_idl.Elastic, torch imported first"
A_PLAIN = "ei.launch (plain script)"
A_IMPORT = "python -c 'import flytekit'"
A_KFP = "flytekit + kfpytorch"


def entry_cost_ms() -> float:
    out = subprocess.run([PY, "-c", ENTRY_COST], capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=180.0, help="per-sample timeout in seconds")
    ap.add_argument("--no-kfpytorch", action="store_true", help="leave flytekitplugins-kfpytorch out (it is slow)")
    ap.add_argument("--json", help="also write the raw samples here")
    args = ap.parse_args()
    host = machine()

    with tempfile.TemporaryDirectory(prefix="bench-flytekit-") as tmp:
        files = {}
        for name, text in (("ours.py", OURS), ("ours_torch.py", OURS_TORCH), ("plain.py", PLAIN), ("kfp.py", KFP)):
            files[name] = Path(tmp, name)
            files[name].write_text(text)
        cases = {
            A_OURS: [PY, str(files["ours.py"])],
            A_OURS_TORCH: [PY, str(files["ours_torch.py"])],
            A_PLAIN: [PY, str(files["plain.py"])],
            A_IMPORT: [PY, "-c", "import flytekit"],
        }
        if not args.no_kfpytorch:
            cases[A_KFP] = [PY, str(files["kfp.py"])]
        samples: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
        entry: list[float] = []
        names = list(cases)
        cwd = os.getcwd()
        os.chdir(tmp)  # flytekit writes nothing here, but keep the checkout clean whatever happens
        try:
            for r in range(args.rounds):
                random.shuffle(names)
                for name in names:
                    samples[name].append(run_once(cases[name], args.timeout))
                entry.append(entry_cost_ms())
                done = ", ".join(f"{n}={samples[n][-1][0]:.2f}" for n in sorted(names))
                print(f"round {r + 1}/{args.rounds}: {done}, entry point {entry[-1]:.1f} ms", file=sys.stderr)
        finally:
            os.chdir(cwd)

    if args.json:
        Path(args.json).write_text(json.dumps({"machine": host, "samples": samples, "entry_ms": entry}, indent=1))
    failed = {name: sum(1 for _, code in s if code != 0) for name, s in samples.items()}
    rounds = list(zip(*(samples[n] for n in cases), strict=True))
    idx = {name: i for i, name in enumerate(cases)}
    good = [r for r in rounds if all(code == 0 for _, code in r)]

    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    diff = [r[idx[A_OURS]][0] - r[idx[A_PLAIN]][0] - r[idx[A_IMPORT]][0] for r in good]
    print(
        f"\n{args.rounds} rounds ({len(good)} with every case ok), {os.cpu_count()} CPUs, Python {host['python']}, "
        f"torch {host['torch']}, numpy {host['numpy']}, pandas {host['pandas']}"
    )
    print("| case | median wall (s) | failed runs |")
    print("| --- | ---: | ---: |")
    for name in cases:
        print(f"| {name} | {med([t for t, code in samples[name] if code == 0]):.2f} | {failed[name]} |")
    print(
        f"\nours - (ei.launch + import flytekit), median of paired differences: {med(diff):+.2f} s (target <= 0.30 s)"
    )
    if A_KFP in cases:
        ratio = [r[idx[A_KFP]][0] / r[idx[A_OURS]][0] for r in good]
        print(f"kfpytorch / ours, median of paired ratios: {med(ratio):.2f}")
        ratio = [r[idx[A_KFP]][0] / r[idx[A_OURS_TORCH]][0] for r in good]
        print(f"kfpytorch / ours with torch imported first, median of paired ratios: {med(ratio):.2f}")
    print(f"entry point inside import flytekit: median {med(entry):.1f} ms, max {max(entry):.1f} ms (target <= 20 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
