"""The flyteplugins plugin's BuildResource per task, ours beside flyteplugins' own pytorch plugin.

Both plugins are compiled into one test binary (go/flyteplugin: ours, and
flyteplugins v1.16.8's kfoperators/pytorch, registered under "pytorch") and run
``BenchmarkBuildResource`` on the same TaskTemplates (those of upstream's
pytorch_test.go) with the same mocked TaskExecutionContext. ``-count`` repeats
every sub-benchmark; the rounds interleave the two plugins per template. Medians
of ns/op, B/op and allocs/op; the ratio is ours / upstream.

Usage: python3 bench/bench_plugin.py [--count N] [--benchtime T] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "go" / "flyteplugin"
KUBEFLOW = ROOT / "go" / "kubeflow"
FIELDS = re.compile(
    r"^BenchmarkFields/(?P<template>[^/\s]+?)(?:-\d+)?\s+\d+\s+"
    r"(?P<ns>[\d.]+) ns/op\s+(?P<bytes>\d+) B/op\s+(?P<allocs>\d+) allocs/op"
)
LINE = re.compile(
    r"^BenchmarkBuildResource/(?P<template>[^/]+)/(?P<plugin>ours|upstream)(?:-\d+)?\s+\d+\s+"
    r"(?P<ns>[\d.]+) ns/op\s+(?P<bytes>\d+) B/op\s+(?P<allocs>\d+) allocs/op"
)


def go(*args: str, cwd: Path = PLUGIN) -> str:
    """Run the go command in a module (the plugin's by default); its stdout."""
    done = subprocess.run(["go", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--benchtime", default="1s")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "plugin_buildresource.json")
    ns = parser.parse_args()

    load_before = os.getloadavg()
    samples: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    for _ in range(ns.count):
        out = go("test", "-run", "^$", "-bench", "BenchmarkBuildResource", "-benchmem", "-benchtime", ns.benchtime, ".")
        for line in out.splitlines():
            if m := LINE.match(line):
                key = (m["template"], m["plugin"])
                samples.setdefault(key, []).append((float(m["ns"]), int(m["bytes"]), int(m["allocs"])))
        # What the plugin adds per task: kubeflow.Fields alone (no mocks, no pod machinery).
        out = go(
            "test",
            "-run",
            "^$",
            "-bench",
            "BenchmarkFields",
            "-benchmem",
            "-benchtime",
            ns.benchtime,
            ".",
            cwd=KUBEFLOW,
        )
        for line in out.splitlines():
            if m := FIELDS.match(line):
                key = (m["template"], "fields")
                samples.setdefault(key, []).append((float(m["ns"]), int(m["bytes"]), int(m["allocs"])))
    load_after = os.getloadavg()

    rows: list[dict[str, Any]] = []

    def median_of(runs: list[tuple[float, int, int]]) -> dict[str, Any]:
        return {
            "ns_per_op": statistics.median(r[0] for r in runs),
            "bytes_per_op": int(statistics.median(r[1] for r in runs)),
            "allocs_per_op": int(statistics.median(r[2] for r in runs)),
            "rounds": len(runs),
        }

    fields = {t: median_of(runs) for (t, p), runs in sorted(samples.items()) if p == "fields"}
    for template in sorted({t for t, p in samples if p != "fields"}):
        row: dict[str, Any] = {"template": template}
        for plugin in ("ours", "upstream"):
            row[plugin] = median_of(samples[(template, plugin)])
        row["ratio_ns"] = round(row["ours"]["ns_per_op"] / row["upstream"]["ns_per_op"], 3)
        row["ratio_allocs"] = round(row["ours"]["allocs_per_op"] / row["upstream"]["allocs_per_op"], 3)
        rows.append(row)

    result = {
        "benchmark": "go/flyteplugin BenchmarkBuildResource",
        "flyteplugins": "v1.16.8",
        "go": go("env", "GOVERSION").strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "loadavg_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "count": ns.count,
        "benchtime": ns.benchtime,
        "note": "BuildResource includes flyteplugins' testify mocks (identical for both plugins); "
        "kubeflow_fields is the job-level work our plugin adds, without mocks or pod machinery",
        "templates": rows,
        "kubeflow_fields": fields,
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in rows:
        print(
            f"{row['template']:22} ours {row['ours']['ns_per_op'] / 1000:8.1f} µs {row['ours']['allocs_per_op']:5} allocs"
            f"  upstream {row['upstream']['ns_per_op'] / 1000:8.1f} µs {row['upstream']['allocs_per_op']:5} allocs"
            f"  ratio {row['ratio_ns']:.2f}"
        )
    for template, f in fields.items():
        print(f"kubeflow.Fields {template:14} {f['ns_per_op'] / 1000:8.1f} µs {f['allocs_per_op']:5} allocs")
    print(f"wrote {ns.out}")


if __name__ == "__main__":
    main()
