"""scripts/flyte2_peer_suite.py refuses what it was not written against (the run itself needs a flyte-sdk clone).

flyteplugins-pytorch's own tests are not on the package index, so CI cannot run the peer suite;
docs/guide/flyte2.md gives the counts the script printed. Here: the script reads the file from a
git directory, and refuses a file whose sha256 is not the one it pins, or a revision without it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "flyte2_peer_suite.py"
MEMBER = "plugins/pytorch/tests/test_task.py"


def _repo(tmp_path: Path, text: str | None) -> Path:
    work = tmp_path / "flyte-sdk"
    work.mkdir()
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    if text is not None:
        (work / MEMBER).parent.mkdir(parents=True)
        (work / MEMBER).write_text(text)
    (work / "README").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    return work / ".git"


def _run(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo)], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_changed_file_is_refused_naming_both_digests(tmp_path: Path) -> None:
    proc = _run(_repo(tmp_path, "from flyteplugins.pytorch.task import Elastic, RunPolicy, TorchFunctionTask\n"))
    assert proc.returncode != 0
    assert "has sha256" in proc.stderr and "update SHA256 and the docs' counts together" in proc.stderr


def test_a_revision_without_the_file_is_refused(tmp_path: Path) -> None:
    proc = _run(_repo(tmp_path, None))
    assert proc.returncode != 0
    assert f"cannot read {MEMBER}" in proc.stderr


def test_outcomes_other_than_the_pinned_ones_are_named() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("flyte2_peer_suite", SCRIPT)
    assert spec is not None and spec.loader is not None
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    pinned = {t: ("failed" if t in suite.FAILS["plugin"] else "passed") for t in suite.TESTS}
    assert suite.unexpected("plugin", pinned) == []
    assert len(suite.TESTS) == 25 and len(suite.FAILS["plugin"]) == 8
    # A pinned failure that passes, a new failure, a missing and an unknown test: each named.
    changed = {**pinned, "test_custom_config": "passed", "test_spec_x": "passed"}
    changed["test_elastic_nccl_heartbeat_default"] = "failed"
    del changed["test_pre_skips_nccl_when_none"]
    assert suite.unexpected("plugin", changed) == [
        "plugin: missing test_pre_skips_nccl_when_none",
        "plugin: unknown test test_spec_x",
        "plugin: test_custom_config passed, pinned failed",
        "plugin: test_elastic_nccl_heartbeat_default failed, pinned passed",
    ]
