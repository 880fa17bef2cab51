"""Cost per task of the pure paths, beside protobuf's ParseFromString of the same bytes, side by side.

Paths, each timed over the same inputs in the same run:

- ``ParseFromString``: protobuf alone, the floor (a new message, parse the bytes);
- ``decode``: ``ei.decode(raw, format="binary", task_type_version=v)`` (the format layer: a message);
- ``view``: ``ei.view(raw, format="binary", task_type_version=v)``: the strict decode, then the TaskView value;
- ``-> to_launch_spec``: ``t = ei.view(...)``, then ``ei.validate(t)``, then ``ei.to_launch_spec(t)``
  (no env; the rules run once, on the value);
- ``-> render_pytorchjob``: ``t = ei.view(...)``, then ``ei.validate(t)``, then
  ``ei.render_pytorchjob(t, ...)`` with the case's render options (what the contract runner renders with).

Inputs: the wire bytes of every contract vector (``contract/cases/*/binary.hex``) with the
case's task_type_version, in a fixed order in which no input follows itself (nor across the
wrap-around), so no path can profit from seeing the same bytes twice in a row. A path that
rejects an input (an invalid vector raises ValidationError, a non-elastic task gets no
LaunchSpec) has done its work and said no: it is timed like the rest ("all" rows). The "ok" rows
time only the inputs the path completes, and ParseFromString over that same subset.

Each round times one pass of every (path, inputs) pair, in a rotating order, so machine
noise hits every row alike; a row's figure is the median over rounds of (pass time / inputs).
Only public API is called (plus the contract loader), so the script measures any version.

Usage: .venv/bin/python bench/bench_pure.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import elastic_idl as ei
from elastic_idl._conformance import load_cases

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "contract" / "cases"


@dataclass(frozen=True)
class Input:
    name: str
    raw: bytes
    version: int
    render: Mapping[str, Any]


def load_inputs() -> list[Input]:
    """Every contract vector that has wire bytes, ordered so that no input follows itself."""
    out: list[Input] = []
    for case in load_cases(CASES_DIR):
        hex_file = case.path / "binary.hex"
        if hex_file.is_file():
            raw = bytes.fromhex(hex_file.read_text().strip())
            out.append(Input(case.name, raw, case.task_type_version, dict(case.render)))
    # Equal bytes (e.g. two empty tasks) must not be neighbours, also across the wrap-around:
    # take each next input from the largest group of equal ones that differs from the last.
    groups: dict[Any, list[Input]] = {}
    for item in out:
        groups.setdefault(_key(item), []).append(item)
    ordered: list[Input] = []
    while groups:
        last = _key(ordered[-1]) if ordered else None
        pick = max((k for k in groups if k != last), key=lambda k: len(groups[k]), default=None)
        if pick is None:
            break
        ordered.append(groups[pick].pop(0))
        if not groups[pick]:
            del groups[pick]
    if not groups and (len(ordered) < 2 or _key(ordered[0]) != _key(ordered[-1])):
        return ordered
    raise SystemExit("cannot order the inputs without repeats")


def _key(x: Input) -> tuple[bytes, int]:
    return (x.raw, x.version)


def _parse(x: Input) -> Any:
    cls = ei.KubeflowTask if x.version == 1 else ei.LegacyTask
    msg = cls()
    msg.ParseFromString(x.raw)
    return msg


def _decode(x: Input) -> Any:
    return ei.decode(x.raw, format="binary", task_type_version=x.version)


def _view(x: Input) -> Any:
    return ei.view(x.raw, format="binary", task_type_version=x.version)


def _to_launch_spec(x: Input) -> Any:
    t = ei.view(x.raw, format="binary", task_type_version=x.version)
    ei.validate(t)
    return ei.to_launch_spec(t)


def _render(x: Input) -> Any:
    t = ei.view(x.raw, format="binary", task_type_version=x.version)
    ei.validate(t)
    return ei.render_pytorchjob(t, ei.JobOptions(**x.render), task_type_version=x.version)


SPEC_PATH = "view -> validate -> to_launch_spec"
RENDER_PATH = "view -> validate -> render_pytorchjob"
PATHS: dict[str, Callable[[Input], Any]] = {
    "ParseFromString": _parse,
    "decode": _decode,
    "view": _view,
    SPEC_PATH: _to_launch_spec,
    RENDER_PATH: _render,
}


def completes(path: Callable[[Input], Any], x: Input) -> bool:
    try:
        path(x)
    except ei.ElasticIdlError:
        return False
    return True


def one_pass(path: Callable[[Input], Any], inputs: Sequence[Input]) -> float:
    """Seconds per input of one pass; a typed rejection counts as the path's answer."""
    errors = ei.ElasticIdlError
    start = time.perf_counter()
    for x in inputs:
        try:
            path(x)
        except errors:
            pass
    return (time.perf_counter() - start) / len(inputs)


@dataclass(frozen=True)
class Row:
    label: str
    path: str
    inputs: tuple[Input, ...]
    baseline: str  # label of the ParseFromString row over the same inputs


def rows(inputs: list[Input]) -> list[Row]:
    everything = tuple(inputs)
    out = [
        Row("ParseFromString (all)", "ParseFromString", everything, "ParseFromString (all)"),
        Row("decode (all)", "decode", everything, "ParseFromString (all)"),
        Row("view (all)", "view", everything, "ParseFromString (all)"),
    ]
    for name in (SPEC_PATH, RENDER_PATH):
        ok = tuple(x for x in inputs if completes(PATHS[name], x))
        short = name.rsplit(" ", 1)[-1]
        out.append(Row(f"{name} (all)", name, everything, "ParseFromString (all)"))
        out.append(Row(f"ParseFromString ({short} ok)", "ParseFromString", ok, f"ParseFromString ({short} ok)"))
        out.append(Row(f"{name} (ok)", name, ok, f"ParseFromString ({short} ok)"))
    return out


def run(rounds: int) -> dict[str, Any]:
    inputs = load_inputs()
    table = rows(inputs)
    for r in table:  # warm-up: imports, descriptor pools, lazy tables
        one_pass(PATHS[r.path], r.inputs)
    samples: dict[str, list[float]] = {r.label: [] for r in table}
    for i in range(rounds):
        order = table[i % len(table) :] + table[: i % len(table)]
        gc.collect()
        for r in order:
            samples[r.label].append(one_pass(PATHS[r.path], r.inputs))
    medians = {label: statistics.median(s) * 1e6 for label, s in samples.items()}
    return {
        "rounds": rounds,
        "inputs": len(inputs),
        "rows": [
            {
                "row": r.label,
                "inputs": len(r.inputs),
                "us_per_task": medians[r.label],
                "ratio_to_parse": medians[r.label] / medians[r.baseline],
            }
            for r in table
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    result = run(args.rounds)
    result["loadavg_1min"] = [load_before, os.getloadavg()[0]]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    import google.protobuf
    from google.protobuf.internal import api_implementation

    print(
        f"{result['rounds']} rounds over {result['inputs']} contract vectors, medians; "
        f"Python {platform.python_version()}, protobuf {google.protobuf.__version__} "
        f"({api_implementation.Type()}), elastic-idl {ei.__version__}; "
        f"load average {load_before:.2f} before, {result['loadavg_1min'][1]:.2f} after\n"
    )
    print("| path (inputs) | n | µs/task | ratio to ParseFromString (same inputs) |")
    print("| --- | ---: | ---: | ---: |")
    for r in result["rows"]:
        print(f"| {r['row']} | {r['inputs']} | {r['us_per_task']:.1f} | {r['ratio_to_parse']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
