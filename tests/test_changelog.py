"""The changelog says what the code does: its version, and every deprecation with its removal version."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import tomllib

import elastic_idl as ei
from elastic_idl._errors import deprecated

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "docs" / "changelog.md"


def _deprecations_in_code() -> dict[str, str]:
    """old -> new, from every ``deprecated("old", "new")`` call under src/."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "elastic_idl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "deprecated":
                old, new = (ast.literal_eval(arg) for arg in node.args)
                assert isinstance(old, str) and isinstance(new, str), f"{path}:{node.lineno}"
                found[old] = new
    return found


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n### ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def test_the_newest_version_is_the_packages() -> None:
    text = CHANGELOG.read_text()
    versions = re.findall(r"^## (\d+\.\d+\.\d+)", text, re.M)
    assert versions, "no version heading"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert versions[0] == ei.__version__ == pyproject["project"]["version"]


def test_every_deprecation_in_the_code_is_in_the_table_with_its_replacement_and_removal_version() -> None:
    code = _deprecations_in_code()
    assert len(code) >= 2, code  # the two shims of 0.1.0; a wrong walk would find none
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        deprecated("old", "new")
    removal = re.search(r"removed in (\d+\.\d+)", str(caught[0].message))
    assert removal, caught[0].message
    text = CHANGELOG.read_text()
    section = _section(text, f"### Deprecated (removed in {removal.group(1)})")
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].split("`")[1]] = cells[1]
    assert set(rows) == set(code), f"changelog rows {sorted(rows)} vs deprecated() calls {sorted(code)}"
    for old, new in code.items():
        assert f"`{new}`" in rows[old], f"{old}: the changelog's replacement {rows[old]!r} is not {new!r}"
    # The root file a visitor opens first names the same removal version.
    assert f"removed in {removal.group(1)}" in (ROOT / "CHANGELOG.md").read_text()
