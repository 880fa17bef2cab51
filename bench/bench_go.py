"""Go backend vs the Python reference: time per contract vector for decode + validate + render.

In-process on both sides, never through the conformance subprocess: Go with its
``testing.B`` benchmark (``BenchmarkContract`` in go/elasticidl/bench_test.go),
Python with ``timeit``. Both take the same inputs, written here into one
conformance request: every contract vector that has a JSON form, as the custom
dict the backend receives (JSON text), with its case's render options. Per
vector, both decode the custom JSON, list the violations and render the
PyTorchJob (an invalid task's render is its ValidationError). The rounds
alternate Go and Python so that load from other jobs hits both alike; medians.

Go's allocations per vector come from ``-benchmem``. ``--write`` also stores the
results as JSON in bench/results/bench_go.json (committed; charts draw from it).

Usage: .venv/bin/python bench/bench_go.py [--rounds N] [--json] [--write]
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


def go_per_vector(binary: Path, request: Path, benchtime: str) -> tuple[float, float, float]:
    """Seconds, allocations and bytes allocated per vector, from one benchmark run."""
    proc = subprocess.run(
        [
            str(binary),
            "-test.run",
            "^$",
            "-test.bench",
            "^BenchmarkContract$",
            "-test.benchtime",
            benchtime,
            "-test.benchmem",
        ],
        cwd=ROOT / "go" / "elasticidl",
        env={**os.environ, "ELASTIC_IDL_BENCH_REQUEST": str(request), "GOMAXPROCS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    found = {
        unit: re.search(rf"([0-9.]+) {unit}", proc.stdout) for unit in ("ns/vector", "vectors", "B/op", "allocs/op")
    }
    if not all(found.values()):
        raise RuntimeError(f"no ns/vector, vectors, B/op or allocs/op in the benchmark output:\n{proc.stdout}")
    value = {unit: float(m.group(1)) for unit, m in found.items() if m}
    vectors = value["vectors"]
    return value["ns/vector"] / 1e9, value["allocs/op"] / vectors, value["B/op"] / vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating Go/Python rounds (default 5)")
    parser.add_argument("--number", type=int, default=20, help="Python passes over every vector per round")
    parser.add_argument("--benchtime", default="1s", help="go test -benchtime per round")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--write", action="store_true", help="also write them to bench/results/bench_go.json")
    args = parser.parse_args()

    cases = entries()
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "request.json"
        request.write_text(json.dumps({"version": conf.CONTRACT_VERSION, "cases": cases}))
        binary = go_test_binary(Path(tmp))
        go, py, allocs, alloc_bytes = [], [], [], []
        for _ in range(args.rounds):
            seconds, n, size = go_per_vector(binary, request, args.benchtime)
            go.append(seconds)
            allocs.append(n)
            alloc_bytes.append(size)
            py.append(python_per_vector(cases, args.number))
    go_us, py_us = statistics.median(go) * 1e6, statistics.median(py) * 1e6
    result = {
        "vectors": len(cases),
        "rounds": args.rounds,
        "go_us_per_vector": round(go_us, 1),
        "python_us_per_vector": round(py_us, 1),
        "python_over_go": round(py_us / go_us, 1),
        "go_allocs_per_vector": round(statistics.median(allocs), 1),
        "go_bytes_per_vector": round(statistics.median(alloc_bytes)),
        "go_us_rounds": [round(x * 1e6, 1) for x in go],
        "python_us_rounds": [round(x * 1e6, 1) for x in py],
        "load_average": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
    if args.write:
        out = ROOT / "bench" / "results" / "bench_go.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{len(cases)} contract vectors, decode (custom JSON) + validate + render, medians of {args.rounds} rounds\n")
    print("| implementation | time per vector (µs) | ratio |")
    print("| --- | ---: | ---: |")
    print(f"| Go (`testing.B`, GOMAXPROCS=1) | {go_us:.1f} | 1.0 |")
    print(f"| Python {platform.python_version()} (`timeit`) | {py_us:.1f} | {py_us / go_us:.1f} |")
    print(f"\nGo allocations per vector: {result['go_allocs_per_vector']} ({result['go_bytes_per_vector']} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
