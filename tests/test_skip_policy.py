"""Under CI=true a test skipped for a missing file or tool fails; hardware skips stay (tests/skip_policy.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from skip_policy import ALLOWED_SKIPS, in_ci

TESTS = Path(__file__).resolve().parent

#: A small test suite with one skip of each kind, run under the policy in a fresh pytest.
SUITE = {
    "test_kinds.py": f"""
import pytest

def test_missing_tool():
    pytest.skip("buf is not installed")

def test_hardware():
    pytest.skip({next(iter(ALLOWED_SKIPS))!r})

@pytest.mark.skipif(True, reason="no data file")
def test_marked():
    pass

@pytest.mark.xfail(strict=True, reason="a known failure is not a skip")
def test_xfail():
    assert False

@pytest.fixture
def tool():
    pytest.skip("tool missing")

def test_fixture(tool):
    pass

def test_runs():
    pass
""",
    "test_module_skip.py": """
import pytest
pytest.importorskip("a_module_that_is_not_installed")

def test_never():
    pass
""",
    "conftest.py": "from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n",
    "pytest.ini": "[pytest]\n",
}


def _run_suite(tmp_path: Path, ci: str | None) -> dict[str, str]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(TESTS)
    if ci is not None:
        env["CI"] = ci
    proc = subprocess.run(
        # (without --continue-on-collection-errors a failed module stops the run: exit 2, a failure too)
        [
            sys.executable,
            "-m",
            "pytest",
            "-rA",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    # "-rA" summary lines: "PASSED test_kinds.py::test_runs", "SKIPPED [1] test_kinds.py:5: reason", ...
    outcomes: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(PASSED|FAILED|ERROR|XFAIL|SKIPPED) (?:\[\d+\] )?(test_[a-z_]+\.py)(?:::|:\d+: )?(\w*)", line)
        if m:
            outcomes[f"{m.group(2)}::{m.group(3)}" if m.group(1) != "SKIPPED" else line.split(": ", 1)[1]] = m.group(1)
    return outcomes | {"exit": str(proc.returncode)}


def test_outside_ci_every_skip_is_a_skip(tmp_path: Path) -> None:
    out = _run_suite(tmp_path, None)
    assert out["exit"] == "0", out
    assert sorted(k for k, v in out.items() if v == "SKIPPED") == sorted(
        [
            "buf is not installed",
            next(iter(ALLOWED_SKIPS)),
            "no data file",
            "tool missing",
            "could not import 'a_module_that_is_not_installed': No module named 'a_module_that_is_not_installed'",
        ]
    )


def test_under_ci_only_hardware_skips_remain(tmp_path: Path) -> None:
    out = _run_suite(tmp_path, "true")
    assert out["exit"] == "1", out
    assert [k for k, v in out.items() if v == "SKIPPED"] == [next(iter(ALLOWED_SKIPS))]
    assert out["test_kinds.py::test_missing_tool"] == "FAILED"
    assert out["test_kinds.py::test_marked"] == "ERROR"  # a skip marker acts at setup
    assert out["test_kinds.py::test_fixture"] == "ERROR"
    assert out["test_module_skip.py::"] == "ERROR"  # the whole module, at collection
    assert out["test_kinds.py::test_xfail"] == "XFAIL"
    assert out["test_kinds.py::test_runs"] == "PASSED"


@pytest.mark.parametrize(
    ("value", "expected"), [("true", True), ("1", True), ("yes", True), ("", False), ("0", False), ("false", False)]
)
def test_what_counts_as_ci(value: str, expected: bool) -> None:
    assert in_ci({"CI": value}) is expected
    assert in_ci({}) is False


def test_every_allowed_skip_is_a_hardware_skip_of_this_suite() -> None:
    """No stale entry: each allowed reason is a pytest.skip(...) in tests/, and says why it is hardware."""
    sources = "\n".join(p.read_text() for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name)
    for reason, why in ALLOWED_SKIPS.items():
        assert f"pytest.skip({reason!r})" in sources.replace('"', "'"), reason
        assert why.startswith("hardware: "), reason
