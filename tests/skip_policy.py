"""Under CI no test may skip for a missing file or tool: such a skip fails there.

A skip says "this was not checked". Locally that can be fine (no buf yet, no torch); in CI it
would hide a check that silently stopped running. So when ``CI`` is set (``CI=true``, as CI
services set it), a skipped test, fixture or module fails instead, unless its reason is in
:data:`ALLOWED_SKIPS`: skips that depend on the machine's hardware, which CI cannot choose.
xfail is not a skip (strict xfail already fails when the test passes).

``tests/conftest.py`` installs the two hooks below; ``tests/test_skip_policy.py`` checks them
and the allow-list.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping
from typing import Any

import pytest

#: Skip reason (exactly as passed to pytest.skip) -> why CI may skip it. Hardware only.
ALLOWED_SKIPS: dict[str, str] = {
    "counts accelerators on a machine that has them": (
        "hardware: tests/test_launch_config.py checks what an nproc policy resolves to on a machine "
        "without accelerators"
    ),
    "this machine has CUDA": "hardware: tests/test_launch_config.py checks the error the gpu policy gives without CUDA",
}


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``CI`` is set to anything but empty, ``0``, ``false`` or ``no``."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The reason a skipped report gives, without pytest's "Skipped: " prefix."""
    longrepr: Any = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def enforce(report: pytest.CollectReport | pytest.TestReport, environ: Mapping[str, str] = os.environ) -> None:
    """Turn a skip whose reason is not allowed into a failure, under CI only."""
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci(environ):
        return
    reason = skip_reason(report)
    if reason in ALLOWED_SKIPS:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI: {reason!r}. CI runs every test: install what is missing, or, for a "
        "hardware-dependent skip, add its reason to ALLOWED_SKIPS in tests/skip_policy.py"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    enforce(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report = yield
    enforce(report)
    return report
