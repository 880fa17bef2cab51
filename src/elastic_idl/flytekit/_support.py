"""The flytekit release lines the plugin is tested on (standard library only: the entry point reads it)."""

from __future__ import annotations

import importlib.metadata
import sys

__all__ = ["TESTED_FLYTEKIT_LINES", "WARM_START_FLYTEKIT_LINES", "flytekit_line", "flytekit_version", "lines_text"]

#: flytekit release lines (major, minor) the plugin's tests run on: 1.16 is both the line of
#: requirements/dev.txt and the newest on PyPI (tests/test_flytekit_install.py checks that the
#: newest release is tested). The ``flytekit`` extra admits exactly these; on any other line the
#: plugin still registers and says so once per process (``elastic_idl.flytekit._entry``).
TESTED_FLYTEKIT_LINES: tuple[tuple[int, int], ...] = ((1, 16),)

#: Lines whose private loop-runner fields the warm start (``_fastpath``) reads; elsewhere it
#: launches cold. Only lines whose runner tests/test_flytekit_plugin.py has checked.
WARM_START_FLYTEKIT_LINES: tuple[tuple[int, int], ...] = ((1, 16),)


def flytekit_version() -> str:
    """The imported (else installed) flytekit's version; "" when there is none."""
    version = str(getattr(sys.modules.get("flytekit"), "__version__", "") or "")
    if not version:
        try:
            version = importlib.metadata.version("flytekit")
        except importlib.metadata.PackageNotFoundError:
            return ""
    return version


def flytekit_line(version: str) -> tuple[int, int] | None:
    """(major, minor) of a flytekit version string such as ``"1.16.31"`` or ``"1.16.0b7"``; None if unreadable."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def lines_text(lines: tuple[tuple[int, int], ...]) -> str:
    """``"1.16.x"`` (``"1.16.x, 1.17.x"`` for two lines)."""
    return ", ".join(f"{major}.{minor}.x" for major, minor in lines)
