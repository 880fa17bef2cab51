"""flyteplugins-pytorch's own tests run against elastic_idl.flyte2 (issue 32, item 7).

The file is ``plugins/pytorch/tests/test_task.py`` of flyteorg/flyte-sdk. It is upstream code and
is not on the package index (flyteplugins-pytorch ships no sdist, its wheel no tests), so it is
not kept here and CI cannot fetch it: this script reads it from a clone of flyte-sdk given on the
command line (a bare clone or a snapshot's git directory), checks it against the sha256 below,
and writes three copies to a temporary directory:

- ``released``: the file as released, against flyteplugins-pytorch (the baseline);
- ``config``: its ``Elastic`` and ``RunPolicy`` imported from ``elastic_idl.flyte2`` (the one
  change a switching user makes), upstream's task class left as it is;
- ``plugin``: the task class switched too (``TorchFunctionTask`` is our ``ElasticFunctionTask``),
  which is what ``@env.task`` builds for our config.

Each copy runs in a pytest process of its own (rootdir the temporary directory, no project
config) and the outcome of every test is printed, then a summary line per copy, and with
``--json FILE`` all of it as JSON. Every outcome is pinned: the tests a copy fails are listed in
`FAILS` with the reason; any other failure, a missing or extra test, exits 1.
docs/guide/flyte2.md, "Moving from flyteplugins-pytorch", quotes the counts and the reasons.

Usage: .venv/bin/python scripts/flyte2_peer_suite.py --repo DIR [--rev REV] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

MEMBER = "plugins/pytorch/tests/test_task.py"
#: sha256 of the file this script was written against (flyte-sdk's file as of its last change,
#: c67313cf, 2026-02-23; flyteplugins-pytorch 2.12.1's task.py matches that tree's).
SHA256 = "ac66bf6e8848db1b0034411c452f8f875ea22ba1ad94a48fa8da2f43719a15e6"
IMPORT = "from flyteplugins.pytorch.task import Elastic, RunPolicy, TorchFunctionTask"
SWITCHES = {
    "released": IMPORT,
    "config": "from flyteplugins.pytorch.task import TorchFunctionTask\nfrom elastic_idl.flyte2 import Elastic, RunPolicy",
    "plugin": (
        "from elastic_idl.flyte2 import Elastic, RunPolicy\n"
        "from elastic_idl.flyte2 import ElasticFunctionTask as TorchFunctionTask"
    ),
}


#: The released file's 25 tests.
TESTS = frozenset(
    {
        "test_torch_post_init",
        "test_custom_config",
        "test_elastic_nccl_heartbeat_default",
        "test_elastic_nccl_heartbeat_custom",
        "test_elastic_nccl_heartbeat_none",
        "test_pre_sets_pythonunbuffered",
        "test_pre_does_not_override_existing_pythonunbuffered",
        "test_pre_sets_nccl_heartbeat_env",
        "test_pre_sets_omp_num_threads",
        "test_pre_skips_omp_when_single_proc",
        "test_pre_does_not_override_existing_nccl_env",
        "test_pre_skips_nccl_when_none",
        "test_elastic_nccl_async_error_handling_default",
        "test_pre_sets_async_error_handling_when_enabled",
        "test_pre_skips_async_error_handling_when_disabled",
        "test_pre_does_not_override_existing_async_error_handling",
        "test_elastic_nccl_collective_timeout_default",
        "test_pre_sets_collective_timeout_env",
        "test_pre_skips_collective_timeout_when_none",
        "test_pre_does_not_override_existing_collective_timeout",
        "test_elastic_nccl_enable_monitoring_default",
        "test_pre_sets_nccl_enable_monitoring_when_enabled",
        "test_pre_skips_nccl_enable_monitoring_when_disabled",
        "test_pre_does_not_override_existing_nccl_enable_monitoring",
        "test_launcher_entrypoint_overrides_nccl_default",
    }
)
_PRE = "pre() writes no os.environ: only the launcher sets a worker's env, from the task's fields"
#: Per copy, the tests it fails and why (docs/guide/flyte2.md); every other test passes.
FAILS: dict[str, dict[str, str]] = {
    "released": {},
    "config": {},
    "plugin": {
        "test_custom_config": "elasticConfig carries the extension fields flyteplugins-pytorch keeps off the wire",
        "test_torch_post_init": "the node range is the config's, not a max_nodes attribute of the task",
        "test_pre_sets_pythonunbuffered": _PRE,
        "test_pre_sets_nccl_heartbeat_env": _PRE,
        "test_pre_sets_omp_num_threads": _PRE,
        "test_pre_sets_async_error_handling_when_enabled": _PRE,
        "test_pre_sets_collective_timeout_env": _PRE,
        "test_pre_sets_nccl_enable_monitoring_when_enabled": _PRE,
    },
}


def unexpected(copy: str, outcomes: dict[str, str]) -> list[str]:
    """What differs from the pinned outcomes of one copy (empty when all is as pinned)."""
    problems = [f"{copy}: missing {t}" for t in sorted(TESTS - set(outcomes))]
    problems += [f"{copy}: unknown test {t}" for t in sorted(set(outcomes) - TESTS)]
    for test, outcome in sorted(outcomes.items()):
        want = "failed" if test in FAILS[copy] else "passed"
        if test in TESTS and outcome != want:
            problems.append(f"{copy}: {test} {outcome}, pinned {want}")
    return problems


def read_member(repo: Path, rev: str) -> str:
    """The test file at ``rev`` of the flyte-sdk clone ``repo``, checked against `SHA256`."""
    proc = subprocess.run(
        ["git", f"--git-dir={repo}", "show", f"{rev}:{MEMBER}"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"flyte2_peer_suite: cannot read {MEMBER} at {rev} in {repo}: {proc.stderr.decode().strip()}")
    digest = hashlib.sha256(proc.stdout).hexdigest()
    if digest != SHA256:
        sys.exit(
            f"flyte2_peer_suite: {MEMBER} at {rev} has sha256 {digest}, not the {SHA256} this script was "
            "written against: read the new file and update SHA256 and the docs' counts together"
        )
    text = proc.stdout.decode("utf-8")
    if text.count(IMPORT) != 1:
        sys.exit(f"flyte2_peer_suite: the import line {IMPORT!r} is not in the file once")
    return text


def run(name: str, text: str, workdir: Path) -> dict[str, str]:
    """Run one copy; the outcome of each test (passed, failed, error, skipped) by node name."""
    folder = workdir / name
    folder.mkdir()
    (folder / "test_task.py").write_text(text.replace(IMPORT, SWITCHES[name]), encoding="utf-8")
    report = folder / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--rootdir={folder}",
            "-c",
            "/dev/null",
            f"--junitxml={report}",
            str(folder / "test_task.py"),
        ],
        cwd=folder,
        capture_output=True,
        check=False,
        timeout=900,
    )
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name", "?")] = {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
    return outcomes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a flyteorg/flyte-sdk git directory")
    parser.add_argument("--rev", default="HEAD", help="the revision to read the file at (default HEAD)")
    parser.add_argument("--json", type=Path, help="also write the outcomes as JSON here")
    args = parser.parse_args(argv)
    text = read_member(args.repo, args.rev)
    results: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="flyte2-peer-") as tmp:
        for name in SWITCHES:
            results[name] = run(name, text, Path(tmp))
    names = sorted({n for outcomes in results.values() for n in outcomes})
    for test in names:
        print(f"{test:64} " + " ".join(f"{results[c].get(test, 'missing'):8}" for c in SWITCHES))
    for copy, outcomes in results.items():
        counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("passed", "failed", "error", "skipped")}
        print(f"{copy}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + f" of {len(outcomes)}")
    if args.json:
        args.json.write_text(json.dumps({"member": MEMBER, "sha256": SHA256, "outcomes": results}, indent=2) + "\n")
    problems = [p for copy, outcomes in results.items() for p in unexpected(copy, outcomes)]
    for problem in problems:
        print(f"flyte2_peer_suite: not as pinned: {problem}", file=sys.stderr)
    if not problems:
        print("flyte2_peer_suite: every outcome as pinned")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
