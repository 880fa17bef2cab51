"""Markdown pages whose code runs as written: the fenced blocks of a page and how to run them.

Shared by tests/test_readme.py (README.md and the site's guide and reference pages it moved to)
and tests/test_docs.py (the site's quickstarts), so both
read a page the same way: blocks by ``## `` section, shell lines without their trailing comments,
and the environment a reader has after ``make venv devtree`` (``.venv/bin`` first on PATH).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: What makes a shell line one that runs: our command line, as a reader types it.
RUNS = re.compile(r"^(elastic-idl|python -m elastic_idl)\b")


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    line: int
    text: str
    #: The block's ``title="..."`` (a file name the page tells the reader to save it as), else "".
    title: str = ""


INFO = re.compile(r'^(?P<language>[\w+-]*)\s*(?:title="(?P<title>[^"]*)")?\s*$')


def blocks(text: str, name: str = "README.md") -> list[Block]:
    """The fenced blocks of a markdown text, with the ``## `` section each is in."""
    out: list[Block] = []
    section = ""
    fence: tuple[str, int, str] | None = None
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("```"):
                info = INFO.match(line[3:].strip())
                assert info, f"{name}, line {number}: a fence info string this reader does not know: {line!r}"
                fence, body = (info["language"], number, info["title"] or ""), []
        elif line.startswith("```"):
            out.append(Block(section, fence[0], fence[1], "\n".join(body) + "\n", fence[2]))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{name}: the block opened on line {fence[1]} is not closed"
    return out


def command(line: str) -> str:
    """A shell line without its trailing comment and spaces."""
    return re.sub(r"\s+#.*$", "", line).strip()


def reader_env() -> dict[str, str]:
    """This process's environment with the running interpreter's bin directory first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
