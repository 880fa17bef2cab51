#!/usr/bin/env python3
"""Mutation check of go/flyteplugin's tests: each deliberate change to plugin.go must fail a test.

The list below is issue 31's seven changes that once survived the suite. For each, the script
replaces one exact string of ``go/flyteplugin/plugin.go`` in a temporary copy of ``go/`` (never in
the checkout: other work edits plugin.go), runs ``go test ./...`` in the copy's ``flyteplugin``
with ``GOWORK`` at the copy's ``go.work``, and checks that the mutant builds, that tests fail,
and that the tests named as its killers are among them. The unmutated copy must pass first. A
string that is no longer in plugin.go stops the script (the list cannot rot silently): rewrite
the mutation against the new code. docs/guide/propeller.md, "Mutation check", lists the mutants;
tests/test_go_mutations.py runs this script.

Usage: python scripts/go_mutations.py [--only a,c] [--list]
Exit status: 0 when the copy passes and every mutant is killed; 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "go"
TARGET = Path("flyteplugin") / "plugin.go"
#: One `go test` run's limit, seconds (a cold build of the workspace on a loaded machine included).
RUN_TIMEOUT = 900


@dataclass(frozen=True)
class Mutation:
    """One deliberate change: ``old`` (exactly once in plugin.go) becomes ``new``."""

    id: str
    what: str
    old: str
    new: str
    #: Top-level tests of go/flyteplugin that must fail under the mutant.
    killers: tuple[str, ...]


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        id="a",
        what="wrong log links for elastic jobs: every job is taken to have a Master (a master-0 link)",
        old="_, hasMaster := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]",
        new="hasMaster := true",
        killers=("TestUpstreamGetLogsElastic",),
    ),
    Mutation(
        id="b",
        what="the operator-timeout check removed: a job the operator never started is never an error",
        old="if !suspended && job.Status.StartTime == nil &&",
        new="if false && !suspended && job.Status.StartTime == nil &&",
        killers=("TestUpstreamGetTaskPhase",),
    ),
    Mutation(
        id="c",
        what="GetProperties ignores EnableDistributedErrorAggregation",
        old="if k8sConfig.GetK8sPluginConfig().EnableDistributedErrorAggregation {",
        new="if k8sConfig.GetK8sPluginConfig().EnableDistributedErrorAggregation && false {",
        killers=("TestUpstreamGetProperties", "TestUpstreamBuildResourcePytorchV1"),
    ),
    Mutation(
        id="d",
        what="the phase-version update removed: a new reason in the same phase keeps propeller's version",
        old="if verr := k8s.MaybeUpdatePhaseVersionFromPluginContext(&phase, &pluginContext); verr != nil {",
        new="if verr := error(nil); verr != nil {",
        killers=("TestUpstreamGetTaskPhaseIncreasePhaseVersion",),
    ),
    Mutation(
        id="e",
        what="TaskInfo without logs",
        old="pluginsCore.TaskInfo{Logs: logs, OccurredAt: &now, CustomInfo: status}",
        new="pluginsCore.TaskInfo{Logs: logs[:0], OccurredAt: &now, CustomInfo: status}",
        killers=("TestUpstreamGetLogs", "TestUpstreamGetLogsElastic"),
    ),
    Mutation(
        id="f",
        what="the Worker without the error-aggregation env (_F_DES)",
        old="if p.GetProperties().ErrorAggregationStrategy == k8s.EarliestErrorAggregationStrategy {",
        new="if false && p.GetProperties().ErrorAggregationStrategy == k8s.EarliestErrorAggregationStrategy {",
        killers=("TestUpstreamBuildResourcePytorchV1",),
    ),
    Mutation(
        id="g",
        what="`suspend` ignored: a suspended job the operator has not started times out",
        old="suspended := job.Spec.RunPolicy.Suspend != nil && *job.Spec.RunPolicy.Suspend",
        new="suspended := false",
        killers=("TestUpstreamGetTaskPhase",),
    ),
    Mutation(
        id="h",
        what="the configuration section ignored: the registered plugin renders with the zero Config",
        old="if opts, err = GetConfig().Options(); err != nil {",
        new="if opts, err = (&Config{}).Options(); err != nil {",
        killers=("TestConfigSectionFromPropellersYAML", "TestConfigRefusesUnknownValues"),
    ),
    Mutation(
        id="i",
        what="the task's warnings kept out of the task events",
        old="phase = p.withWarnings(ctx, pluginContext, tmpl, job, phase)",
        new="phase = phase.WithVersion(phase.Version())",
        killers=("TestWarningsReachTheTaskEvents",),
    ),
    Mutation(
        id="j",
        what="max-worst-case not checked",
        old="if err := GetConfig().checkWorstCase(task, fields); err != nil {",
        new="if err := error(nil); err != nil {",
        killers=("TestMaxWorstCase",),
    ),
)

#: A top-level test's failure line in `go test` output (subtests are indented).
FAIL_LINE = re.compile(r"^--- FAIL: (\S+)", re.M)


def apply(source: str, m: Mutation) -> str:
    """``source`` with ``m`` applied; an error unless ``m.old`` occurs exactly once."""
    count = source.count(m.old)
    if count != 1:
        raise SystemExit(
            f"mutation {m.id} ({m.what}): its string occurs {count} times in {TARGET}, want exactly 1; "
            f"rewrite it in scripts/go_mutations.py against the current code:\n  {m.old}"
        )
    return source.replace(m.old, m.new)


def go_test(copy: Path) -> tuple[int, str, float]:
    """`go test ./...` of the copy's flyteplugin module: (exit status, output, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "ELASTIC_IDL_TEMPLATE_JOBS_DIR"}
    env["GOWORK"] = str(copy / "go.work")
    # No -trimpath: the dependencies' build IDs are then those of every other `go test` here, so
    # the build cache serves them; only the copy's own packages build again (seconds).
    cmd = ["nice", "-n", "19", "go", "test", "-count=1", "./..."]
    start = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=copy / "flyteplugin",
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def build_failed(output: str) -> bool:
    return "[build failed]" in output or "[setup failed]" in output or "\n# " in "\n" + output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated mutation ids (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    args = parser.parse_args(argv)
    chosen = MUTATIONS
    if args.only:
        ids = set(args.only.split(","))
        unknown = ids - {m.id for m in MUTATIONS}
        if unknown:
            parser.error(f"unknown mutation ids: {sorted(unknown)}")
        chosen = tuple(m for m in MUTATIONS if m.id in ids)
    if args.list:
        for m in chosen:
            print(f"{m.id}: {m.what}\n   - {m.old}\n   + {m.new}\n   killed by: {', '.join(m.killers)}")
        return 0

    original = (GO_DIR / TARGET).read_text()
    for m in chosen:  # every string is checked before anything runs
        apply(original, m)
    total = time.monotonic()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="go-mutations-") as tmp:
        copy = Path(tmp) / "go"
        shutil.copytree(GO_DIR, copy, symlinks=True)
        target = copy / TARGET
        status, output, seconds = go_test(copy)
        print(f"unmutated: {'pass' if status == 0 else 'FAIL'} ({seconds:.0f} s)", flush=True)
        if status != 0:
            print(output[-6000:])
            return 1
        for m in chosen:
            target.write_text(apply(original, m))
            status, output, seconds = go_test(copy)
            target.write_text(original)
            failed = sorted(set(FAIL_LINE.findall(output)))
            if status == 0:
                verdict = "SURVIVED"
                problems.append(f"{m.id} survived: no test failed ({m.what})")
            elif build_failed(output) and not failed:
                verdict = "DOES NOT BUILD"
                problems.append(f"{m.id} does not build: fix the mutation\n{output[-3000:]}")
            else:
                missing = [k for k in m.killers if k not in failed]
                verdict = "killed"
                if missing:
                    verdict = "killed, but not by its killers"
                    problems.append(f"{m.id}: {missing} passed (failed: {failed})")
            print(f"{m.id}: {verdict} ({seconds:.0f} s) by {', '.join(failed) or '-'}: {m.what}", flush=True)
    print(f"{len(chosen)} mutants, {time.monotonic() - total:.0f} s in all")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
