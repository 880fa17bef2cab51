"""Hostile inputs near the 1 MiB limit in the Go backend: time and allocations beside a normal input.

Runs ``BenchmarkHostile`` (go/elasticidl/hostile_test.go) with ``-benchmem``: one
hostile input per input shape (textproto, JSON custom, binary, Struct, render
options) and a normal input of the same size, each decoded (and validated or
rendered where the hostile cost lies). The ratio hostile/normal is what to read:
the machine is shared, so absolute times move with its load.

Usage: .venv/bin/python bench/bench_hostile_go.py [--write]
(--write stores the results in bench/results/hostile_go.json, which charts draw from.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(
    r"^BenchmarkHostile/(.+)/(hostile|normal)\S*\s+\d+\s+(\d+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op", re.M
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/hostile_go.json")
    parser.add_argument("--benchtime", default="3x", help="go test -benchtime (default 3x)")
    args = parser.parse_args()
    proc = subprocess.run(
        ["go", "test", "-run", "^$", "-bench", "^BenchmarkHostile$", "-benchmem", "-benchtime", args.benchtime],
        cwd=ROOT / "go" / "elasticidl",
        env={**os.environ, "GOMAXPROCS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    rows: dict[str, dict[str, dict[str, int]]] = {}
    for name, kind, ns, size, allocs in LINE.findall(proc.stdout):
        rows.setdefault(name, {})[kind] = {"ns": int(ns), "bytes": int(size), "allocs": int(allocs)}
    if not rows:
        raise RuntimeError(f"no BenchmarkHostile lines in:\n{proc.stdout}")
    result = {"load_average": round(os.getloadavg()[0], 2), "inputs": rows}
    if args.write:
        out = ROOT / "bench" / "results" / "hostile_go.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    print("| input (about 1 MiB) | hostile ms | normal ms | ratio | hostile allocs | hostile MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rows.items():
        h, n = r["hostile"], r["normal"]
        print(
            f"| {name} | {h['ns'] / 1e6:.1f} | {n['ns'] / 1e6:.1f} | {h['ns'] / n['ns']:.1f} | {h['allocs']} "
            f"| {h['bytes'] / 1e6:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
