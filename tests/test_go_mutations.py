"""go/flyteplugin's tests kill each deliberate change to plugin.go that scripts/go_mutations.py lists.

The script mutates a temporary copy of go/ (never the checkout) and runs the module's tests on
each mutant; here it runs whole (about a minute with a warm Go build cache), its strings are
checked against plugin.go without Go, and docs/guide/propeller.md's table is checked against it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "go_mutations.py"
PLUGIN = REPO / "go" / "flyteplugin" / "plugin.go"
PAGE = REPO / "docs" / "guide" / "propeller.md"

_spec = importlib.util.spec_from_file_location("go_mutations", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
gm = importlib.util.module_from_spec(_spec)
sys.modules["go_mutations"] = gm  # dataclasses resolve the module's annotations through it
_spec.loader.exec_module(gm)


def test_every_mutation_targets_code_in_plugin_go() -> None:
    """Each string occurs exactly once in plugin.go: a rewrite of the code must rewrite the list too."""
    source = PLUGIN.read_text()
    assert len(gm.MUTATIONS) >= 7
    assert len({m.id for m in gm.MUTATIONS}) == len(gm.MUTATIONS)
    for m in gm.MUTATIONS:
        assert m.killers, m.id
        mutated = gm.apply(source, m)
        assert mutated != source
        assert m.new in mutated


def test_a_string_not_in_plugin_go_stops_the_script() -> None:
    gone = gm.Mutation(id="z", what="rotted", old="no such line in plugin.go", new="", killers=("TestX",))
    with pytest.raises(SystemExit, match="occurs 0 times"):
        gm.apply(PLUGIN.read_text(), gone)
    twice = gm.Mutation(id="z", what="ambiguous", old="return", new="", killers=("TestX",))
    with pytest.raises(SystemExit, match="want exactly 1"):
        gm.apply(PLUGIN.read_text(), twice)


def test_the_page_lists_the_mutations() -> None:
    """propeller.md's "Mutation check" table: one row per mutation, in order, with the same killers."""
    text = PAGE.read_text()
    section = text.split("\n## Mutation check\n", 1)
    assert len(section) == 2, "propeller.md has a 'Mutation check' section"
    body = section[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z]) \| (.+?) \| (.+?) \|$", body, re.M)
    assert [r[0] for r in rows] == [m.id for m in gm.MUTATIONS]
    for (mid, _, killers), m in zip(rows, gm.MUTATIONS, strict=True):
        assert set(re.findall(r"`(Test\w+)`", killers)) == set(m.killers), mid


def test_every_mutant_is_killed() -> None:
    """The unmutated copy passes, and every mutant builds and fails the tests it names."""
    if shutil.which("go") is None or os.environ.get("ELASTIC_IDL_GO") == "skip":
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the Go checks must run, but the Go toolchain is missing (scripts/go_toolchain.sh)")
        pytest.skip("no Go toolchain (scripts/go_toolchain.sh ensure installs it)")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=1800, check=False, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "unmutated: pass" in proc.stdout
    for m in gm.MUTATIONS:
        assert re.search(rf"^{m.id}: killed \(", proc.stdout, re.M), proc.stdout
