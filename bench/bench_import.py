"""Import time of our messages module against upstream flyteidl's, side by side.

Every sample is a fresh interpreter that times one import with perf_counter
(interpreter start-up is not counted). The cases run interleaved, in a rotating
order, for N rounds, so machine noise hits all of them alike; the medians and
the ratio to upstream are printed as a Markdown table.

Two columns per case: "cold" imports the module into a bare interpreter
(google.protobuf included); "protobuf warm" first imports google.protobuf and the
descriptor machinery, so it shows what the module itself costs.

Usage: .venv/bin/python bench/bench_import.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: name -> (module, import it from gen/pb2 alone, without the runtime package's __init__)
CASES = {
    "ours: elastic_idl.plugins.kubeflow.v1.pytorch_pb2": ("elastic_idl.plugins.kubeflow.v1.pytorch_pb2", False),
    "upstream: flyteidl.plugins.kubeflow.pytorch_pb2": ("flyteidl.plugins.kubeflow.pytorch_pb2", False),
    "ours, gen/pb2 alone (no runtime __init__)": ("elastic_idl.plugins.kubeflow.v1.pytorch_pb2", True),
    "ours: elastic_idl.betterproto.plugins.kubeflow.v1": ("elastic_idl.betterproto.plugins.kubeflow.v1", False),
}
BASELINE = "upstream: flyteidl.plugins.kubeflow.pytorch_pb2"
WARMUP = "import google.protobuf.message, google.protobuf.descriptor_pool, google.protobuf.internal.builder"

_PROBE = """
import os, sys, time
if {bare}:  # hide every elastic_idl package; gen/pb2/elastic_idl is then a namespace package
    sys.path[:] = [p for p in sys.path if not os.path.exists(os.path.join(p, "elastic_idl", "__init__.py"))]
    sys.path.insert(0, {gen!r})
{warm}
t0 = time.perf_counter()
import {module}
print(time.perf_counter() - t0)
assert not ({bare} and "elastic_idl._task.codec" in sys.modules)
"""


def sample(module: str, bare: bool, warm: bool) -> float:
    code = _PROBE.format(module=module, bare=bare, gen=str(ROOT / "gen" / "pb2"), warm=WARMUP if warm else "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def run(rounds: int) -> dict[str, dict[str, float]]:
    names = list(CASES)
    times: dict[tuple[str, bool], list[float]] = {(n, w): [] for n in names for w in (False, True)}
    for i in range(rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        for warm in (False, True):
            for name in order:
                times[(name, warm)].append(sample(*CASES[name], warm))
    result: dict[str, dict[str, float]] = {}
    for name in names:
        cold = statistics.median(times[(name, False)])
        warm = statistics.median(times[(name, True)])
        result[name] = {"cold_ms": cold * 1e3, "warm_ms": warm * 1e3}
    for name in names:
        result[name]["cold_ratio"] = result[name]["cold_ms"] / result[BASELINE]["cold_ms"]
        result[name]["warm_ratio"] = result[name]["warm_ms"] / result[BASELINE]["warm_ms"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    import google.protobuf
    from google.protobuf.internal import api_implementation

    print(
        f"{args.rounds} rounds, median of fresh interpreters; Python {platform.python_version()}, "
        f"protobuf {google.protobuf.__version__} ({api_implementation.Type()})\n"
    )
    print("| module | cold (ms) | ratio | protobuf warm (ms) | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, r in result.items():
        print(f"| {name} | {r['cold_ms']:.1f} | {r['cold_ratio']:.2f} | {r['warm_ms']:.1f} | {r['warm_ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
