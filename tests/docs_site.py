"""The documentation site for the tests that read it: the docs venv's mkdocs, and one strict build.

``tests/conftest.py`` builds the site once per run (the ``site`` fixture) for ``tests/test_docs.py``
and ``tests/test_docs_browser.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = ROOT / ".venv-docs" / "bin" / "mkdocs"
#: Set to "run" where the site must be built (the make target that sets up .venv-docs): a missing
#: docs venv (or browser) then fails instead of skipping.
REQUIRED = "ELASTIC_IDL_DOCS"
#: mkdocs 1.6 prints a notice about MkDocs 2 on every run unless this is set.
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test for want of ``reason``'s tool; fail instead where ELASTIC_IDL_DOCS=run."""
    if os.environ.get(REQUIRED) == "run":
        pytest.fail(f"{REQUIRED}=run: {reason}")
    pytest.skip(reason)


def require_mkdocs() -> None:
    if not MKDOCS.exists():
        skip_or_fail(f"{MKDOCS.relative_to(ROOT)} is missing: `make venv-docs` (or `make docs`) creates it")


def build_site(out: Path) -> Path:
    """``mkdocs build --strict`` into ``out``; a warning, a broken link or a missing reference fails it."""
    require_mkdocs()
    proc = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return out
