"""Regenerate the expected outputs of the contract vectors (contract/cases/*/).

The ONE way expectation files change: run this, review the diff, commit it.
Inputs (case.yaml, input.textproto; forward/*/vector.yaml) are written by hand and never touched here;
the forward-compatibility vectors' expectations (contract/forward/*/expected.json) are written here too.
Expectations come from the Python reference implementation
(elastic_idl._conformance.evaluate); flytekit and flyte2 cases first ask the installed
SDK (flytekitplugins-kfpytorch, Flyte 2's flyteplugins-pytorch) for the payload (sdk.json) and feed that in.

Usage:
    python scripts/regen_contract.py            # rewrite every case's expectations
    python scripts/regen_contract.py NAME ...   # only these cases
    python scripts/regen_contract.py --check    # exit 1 if any file would change (CI)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from elastic_idl._conformance import (
    FORWARD_EXPECTED,
    SDK_KINDS,
    Case,
    evaluate,
    forward_outputs,
    load_cases,
    load_forward_vectors,
    read_expected,
    sdk_output,
    write_expected,
)

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "contract" / "cases"
FORWARD = ROOT / "contract" / "forward"


def outputs_of(case: Case) -> tuple[dict[str, object], dict[str, object] | None]:
    """(expected outputs, sdk.json content or None) for one case."""
    sdk = None
    if case.kind in SDK_KINDS:
        sdk = sdk_output(case)
        if sdk["custom"] is None:
            return {}, sdk
        data, fmt = json.dumps(sdk["custom"], sort_keys=True), "json"
    else:
        assert case.textproto is not None
        data, fmt = case.textproto, "textproto"
    out = evaluate(data, format=fmt, task_type_version=case.task_type_version, render=case.render, envs=case.envs)
    return out, sdk


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="case names (default: all)")
    parser.add_argument("--check", action="store_true", help="report stale expectations, write nothing")
    args = parser.parse_args(argv)
    cases = load_cases(CASES)
    unknown = sorted(set(args.names) - {c.name for c in cases} - {v.name for v in load_forward_vectors(FORWARD)})
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    stale: list[str] = []
    for case in cases:
        if args.names and case.name not in args.names:
            continue
        outputs, sdk = outputs_of(case)
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                write_expected(Path(tmp), outputs, sdk=sdk)
                if read_expected(Path(tmp)) != read_expected(case.path):
                    stale.append(case.name)
            continue
        changed = write_expected(case.path, outputs, sdk=sdk)
        if changed:
            print(f"{case.name}: {', '.join(changed)}")
    for vector in load_forward_vectors(FORWARD):
        if args.names and vector.name not in args.names:
            continue
        text = json.dumps(forward_outputs(vector), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        target = vector.path / FORWARD_EXPECTED
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(f"forward/{vector.name}")
        else:
            target.write_text(text, encoding="utf-8")
            print(f"forward/{vector.name}: {FORWARD_EXPECTED}")
    if args.check:
        if stale:
            print("stale expectations (run scripts/regen_contract.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        print(f"{len(cases)} cases up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
