"""Go backend vs the Python reference: time per contract vector for decode + validate + render.

In-process on both sides, never through the conformance subprocess: Go with its
``testing.B`` benchmark (``BenchmarkContract`` in go/elasticidl/bench_test.go),
Python with ``timeit``. Both take the same inputs, written here into one
conformance request: every contract vector that has a JSON form, as the custom
dict the backend receives (JSON text), with its case's render options. Per
vector, both decode the custom JSON, list the violations and render the
PyTorchJob (an invalid task's render is its ValidationError). The rounds
alternate Go and Python so that load from other jobs hits both alike; medians.

Usage: .venv/bin/python bench/bench_go.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

import elastic_idl as ei
from elastic_idl import _conformance as conf
from elastic_idl._backend.pytorchjob import render_pytorchjob

ROOT = Path(__file__).resolve().parent.parent
GO_ENV: dict[str, str] = {}


def entries() -> list[dict[str, Any]]:
    """One request entry per contract vector with a JSON form (the backend's input)."""
    out = []
    for case in conf.load_cases(ROOT / "contract" / "cases"):
        expected = conf.read_expected(case.path)
        if "custom" in expected and "error" not in expected["custom"]:
            out.append(conf.request_for(case, input_format="json"))
    return out


def python_per_vector(cases: list[dict[str, Any]], number: int) -> float:
    """Seconds per vector: decode + violations + render, best of one timeit block."""

    def run() -> None:
        for e in cases:
            version = e["task_type_version"]
            task = ei.decode(e["input"]["data"], format="json", task_type_version=version)
            ei.violations(task)
            try:
                render_pytorchjob(task, ei.JobOptions(**e["render"]), task_type_version=version)
            except ei.ElasticIdlError:
                pass

    run()  # warm caches
    return timeit.timeit(run, number=number) / number / len(cases)


def go_test_binary(tmp: Path) -> Path:
    binary = tmp / "elasticidl.test"
    subprocess.run(
        ["go", "test", "-c", "-o", str(binary), "./elasticidl"],
        cwd=ROOT / "go",
        env={**os.environ, **GO_ENV},
        check=True,
    )
    return binary


def go_per_vector(binary: Path, request: Path, benchtime: str) -> float:
    proc = subprocess.run(
        [str(binary), "-test.run", "^$", "-test.bench", "^BenchmarkContract$", "-test.benchtime", benchtime],
        cwd=ROOT / "go" / "elasticidl",
        env={**os.environ, "ELASTIC_IDL_BENCH_REQUEST": str(request), "GOMAXPROCS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    m = re.search(r"([0-9.]+) ns/vector", proc.stdout)
    if not m:
        raise RuntimeError(f"no ns/vector in the benchmark output:\n{proc.stdout}")
    return float(m.group(1)) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating Go/Python rounds (default 5)")
    parser.add_argument("--number", type=int, default=20, help="Python passes over every vector per round")
    parser.add_argument("--benchtime", default="1s", help="go test -benchtime per round")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    cases = entries()
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "request.json"
        request.write_text(json.dumps({"version": conf.CONTRACT_VERSION, "cases": cases}))
        binary = go_test_binary(Path(tmp))
        go, py = [], []
        for _ in range(args.rounds):
            go.append(go_per_vector(binary, request, args.benchtime))
            py.append(python_per_vector(cases, args.number))
    go_us, py_us = statistics.median(go) * 1e6, statistics.median(py) * 1e6
    result = {
        "vectors": len(cases),
        "rounds": args.rounds,
        "go_us_per_vector": round(go_us, 1),
        "python_us_per_vector": round(py_us, 1),
        "python_over_go": round(py_us / go_us, 1),
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{len(cases)} contract vectors, decode (custom JSON) + validate + render, medians of {args.rounds} rounds\n")
    print("| implementation | time per vector (µs) | ratio |")
    print("| --- | ---: | ---: |")
    print(f"| Go (`testing.B`, GOMAXPROCS=1) | {go_us:.1f} | 1.0 |")
    print(f"| Python {platform.python_version()} (`timeit`) | {py_us:.1f} | {py_us / go_us:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
