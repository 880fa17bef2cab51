"""The documentation site (mkdocs.yml, docs/): it builds with --strict, loads nothing from the
network, its generated pages and charts are what the code and bench/results say, and every command
and code block of the three quickstarts runs as written.

The quickstarts are read as tests/test_readme.py reads the README (tests/markdown_blocks.py): the
```python blocks of one ``## `` section run in order in one fresh interpreter, from the repository
root; each line of a ```sh block that calls ``elastic-idl`` or ``python -m elastic_idl`` runs and must
exit 0, and so does a ``(cd go && go ...)`` line when Go is on PATH; any other line or block is
exempted below by name, with the reason, or checked against the file it shows.

The site is built with the docs venv (.venv-docs, ``make venv-docs``). Without it the build tests
skip, saying so, unless ELASTIC_IDL_DOCS=run (set where make has set the venv up), where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import pytest

import elastic_idl
from docs_site import ENV as MKDOCS_ENV
from docs_site import require_mkdocs
from elastic_idl.exit_codes import ExitCode
from markdown_blocks import RUNS, Block, blocks, command, reader_env

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTARTS = sorted((DOCS / "quickstart").glob("*.md"))
#: Seconds a section's Python or one command line may take (a local flytekit run trains twice).
TIMEOUT = 300
#: Go lines of the propeller quickstart, run when Go is on PATH.
GO_LINE = re.compile(r"^\(cd go && go (test|build) ")

#: (page, shell line) -> why it does not run here.
EXEMPT_LINES: dict[tuple[str, str], str] = {
    ("ml-engineer.md", "make venv devtree"): "sets up .venv, which is what runs this test",
    (
        "propeller-go.md",
        "CONFORMANCE_CMD=build/elastic-conformance CONFORMANCE_NAME=go .venv/bin/pytest tests/test_contract.py "
        "-k conformance -q",
    ): "runs part of this test suite; tests/test_go.py builds the command and runs the contract through it",
}
#: (page, section, language) -> why the block does not run.
EXEMPT_BLOCKS: dict[tuple[str, str, str], str] = {
    ("propeller-go.md", "3. The plugin in a propeller build", "go"): (
        "a propeller build's import; go/flyteplugin's tests register and run the plugin"
    ),
    ("propeller-go.md", "3. The plugin in a propeller build", "yaml"): "propeller's configuration, read by propeller",
}
#: (page, section, language) -> the file the block shows (compared without its comment lines).
SHOWN_FILES: dict[tuple[str, str, str], Path] = {
    ("ml-engineer.md", "1. Describe the job", "yaml"): ROOT / "examples" / "demo.yaml",
}


def _blocks(page: Path) -> list[Block]:
    return blocks(page.read_text(), page.name)


def _script(name: str) -> ModuleType:
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _run(args: list[str], *, what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        args, cwd=ROOT, env=env or reader_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0, f"{what}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


SECTIONS = [
    (page.name, section)
    for page in QUICKSTARTS
    for section in dict.fromkeys(b.section for b in _blocks(page) if b.language == "python")
]
LINES = [
    (page.name, command(line))
    for page in QUICKSTARTS
    for b in _blocks(page)
    if b.language == "sh"
    for line in b.text.splitlines()
    if command(line)
]


def test_there_are_three_quickstarts_and_each_runs_something() -> None:
    assert [p.name for p in QUICKSTARTS] == ["flytekit.md", "ml-engineer.md", "propeller-go.md"]
    for page in QUICKSTARTS:
        runs = [c for p, c in LINES if p == page.name and (RUNS.match(c) or GO_LINE.match(c))]
        assert runs, f"{page.name}: no command line that a test runs"


@pytest.mark.parametrize(("page", "section"), SECTIONS)
def test_quickstart_python_runs(page: str, section: str, tmp_path: Path) -> None:
    code = "\n".join(
        b.text for b in _blocks(DOCS / "quickstart" / page) if b.section == section and b.language == "python"
    )
    script = tmp_path / "quickstart_section.py"
    script.write_text(code)
    env = reader_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    _run([sys.executable, str(script)], what=f"{page}, section {section!r}", env=env)


@pytest.mark.parametrize(("page", "line"), [x for x in LINES if RUNS.match(x[1])])
def test_quickstart_command_runs(page: str, line: str) -> None:
    _run(["bash", "-c", line], what=f"{page}: {line}")


@pytest.mark.parametrize(("page", "line"), [x for x in LINES if GO_LINE.match(x[1])])
def test_quickstart_go_command_runs(page: str, line: str) -> None:
    if shutil.which("go") is None or os.environ.get("ELASTIC_IDL_GO") == "skip":
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the Go checks must run, but go is not on PATH (scripts/go_toolchain.sh)")
        pytest.skip("no go on PATH (scripts/go_toolchain.sh ensure installs it)")
    env = reader_env()
    env.setdefault("GOFLAGS", "-p=1")
    _run(["bash", "-c", line], what=f"{page}: {line}", env=env)


@pytest.mark.parametrize(("key", "path"), SHOWN_FILES.items())
def test_a_shown_file_is_the_file(key: tuple[str, str, str], path: Path) -> None:
    page, section, language = key
    shown = [b.text for b in _blocks(DOCS / "quickstart" / page) if (b.section, b.language) == (section, language)]
    body = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert shown == ["\n".join(body) + "\n"], f"{page}, {section!r}: the block is not {path.relative_to(ROOT)}"


def test_every_line_and_block_runs_or_says_why_not() -> None:
    runs = [(p, c) for p, c in LINES if RUNS.match(c) or GO_LINE.match(c)]
    assert sorted({x for x in LINES if x not in runs} - set(EXEMPT_LINES)) == []
    other = {
        (page.name, b.section, b.language)
        for page in QUICKSTARTS
        for b in _blocks(page)
        if b.language not in ("python", "sh")
    }
    assert sorted(other - set(EXEMPT_BLOCKS) - set(SHOWN_FILES)) == []
    # No stale exemption: each names something a page still says.
    assert sorted(set(EXEMPT_LINES) - set(LINES)) == []
    assert sorted((set(EXEMPT_BLOCKS) | set(SHOWN_FILES)) - other) == []


# ---------------------------------------------------------------- generated pages and charts


def test_reference_pages_are_what_the_code_says() -> None:
    gen = _script("docs_gen")
    stale = [str(p.relative_to(ROOT)) for p, text in gen.pages().items() if not p.exists() or p.read_text() != text]
    assert stale == [], "run `make docs` and commit the pages"


def test_charts_are_what_bench_results_say() -> None:
    charts = _script("docs_charts")
    want = charts.outputs()
    stale = [str(p.relative_to(ROOT)) for p, text in want.items() if not p.exists() or p.read_text() != text]
    extra = [str(p.relative_to(ROOT)) for p in charts.FIGURES.glob("*.svg") if p not in want]
    assert (stale, extra) == ([], []), "run `make docs` and commit docs/figures and docs/benchmarks.md"
    assert any(p.suffix == ".svg" for p in want), "no chart at all: bench/results holds no committed result"


def test_the_chaos_chart_counts_runs_per_class_and_side() -> None:
    charts = _script("docs_charts")
    runs = [
        {"class": 2, "name": "kill-host", "side": "ours", "passed": True},
        {"class": 2, "name": "kill-host", "side": "ours", "passed": False},
        {"class": 2, "name": "kill-host", "side": "torchrun", "passed": False},
        {"class": 1, "name": "kill-nonhost", "side": "ours", "passed": True},
    ]
    svg, table = charts._chaos({"runs": runs})
    assert table.splitlines()[2:] == ["| 1 | kill-nonhost | 1 / 1 | not run |", "| 2 | kill-host | 1 / 2 | 0 / 1 |"]
    assert svg == charts._chaos({"runs": list(reversed(runs))})[0], "the order of the runs changes the chart"
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="([\d.]+)" height="12"', svg)]
    assert widths == [330.0, 165.0, 0.0], widths  # 100 %, 50 %, 0 %; class 1's torchrun bar is a note
    assert "not run" in svg


def _sweep_row(workers: int, ours: list[float], theirs: list[float], codes: list[int]) -> dict[str, object]:
    ok = [t for t, c in zip(ours, codes, strict=True) if c == 0]
    ratios = [o / t for o, t, c in zip(ours, theirs, codes, strict=True) if c == 0]
    return {
        "workers": workers,
        "ours": {
            "samples_s": ours,
            "exit_codes": codes,
            "median_s": statistics.median(ok) if ok else None,
            "failed": codes.count(1),
        },
        "torchrun": {
            "samples_s": theirs,
            "exit_codes": [0] * len(theirs),
            "median_s": statistics.median(theirs),
            "failed": 0,
        },
        "ratios": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
    }


def test_the_launch_chart_plots_each_worker_count_once() -> None:
    charts = _script("docs_charts")
    meta = {
        "rounds": 2,
        "date": "2026-12-03T03:00:00Z",
        "finished": "2026-12-03T03:10:00Z",
        "commit": "0" * 40,
        "loadavg_1m_start": 1.0,
        "loadavg_1m_end": 2.0,
        "machine": {"arch": "x86_64", "cpus": 2, "cpu_model": "cpu", "python": "3.11.7", "torch": "2.13.0"},
    }
    rows = [_sweep_row(4, [2.0, 4.0], [8.0, 8.0], [0, 0]), _sweep_row(1, [1.0, 9.0], [2.0, 3.0], [0, 1])]
    svg, table = charts._launch({**meta, "results": rows})
    assert table.splitlines()[2:4] == ["| 1 | 1.00 | 2.50 | 0.50 | 1 / 0 |", "| 4 | 3.00 | 8.00 | 0.38 | 0 / 0 |"]
    assert svg == charts._launch({**meta, "results": rows[::-1]})[0], "the order of the rows changes the chart"
    assert svg.count("<circle ") == 4 and svg.count("<polyline ") == 2
    assert re.findall(r">([\d.]+ s)</text>", svg) == ["1.00 s", "2.50 s", "3.00 s", "8.00 s"]
    # No run of ours succeeded at 8 workers: no point, "-" in the table, the ratio row says "-" too.
    none = _sweep_row(8, [5.0], [6.0], [1])
    svg, table = charts._launch({**meta, "results": [none]})
    assert table.splitlines()[2] == "| 8 | - | 6.00 | - | 1 / 0 |"
    assert svg.count("<circle ") == 1 and ">-</text>" in svg
    assert [charts.nice_top(v) for v in (18.12, 5.0, 0.9)] == [(20.0, 5.0), (5.0, 1.0), (1.0, 0.2)]


def test_the_launch_table_is_the_committed_sweep() -> None:
    """bench/results/launch.json's medians and ratios are what its samples give; benchmarks.md and bench/README.md
    show them."""
    charts = _script("docs_charts")
    data = json.loads((ROOT / "bench" / "results" / "launch.json").read_text())
    pages = [(DOCS / "benchmarks.md").read_text(), (ROOT / "bench" / "README.md").read_text()]
    for row in data["results"]:
        ours, theirs = row["ours"], row["torchrun"]
        medians = []
        for side in (ours, theirs):
            ok = [t for t, code in zip(side["samples_s"], side["exit_codes"], strict=True) if code == 0]
            assert len(side["samples_s"]) == data["rounds"] and side["failed"] == len(side["samples_s"]) - len(ok)
            assert side["median_s"] == pytest.approx(statistics.median(ok), abs=0.002)
            medians.append(side["median_s"])
        pairs = zip(ours["samples_s"], ours["exit_codes"], theirs["samples_s"], theirs["exit_codes"], strict=True)
        ratio = statistics.median([o / t for o, oc, t, tc in pairs if oc == tc == 0])
        assert row["ratio_median"] == pytest.approx(ratio, abs=0.002)
        line = f"| {row['workers']} | {medians[0]:.2f} | {medians[1]:.2f} | {row['ratio_median']:.2f} |"
        assert all(line in page for page in pages), line
    chart = next(c for c in charts.CHARTS if c.source == "launch.json")
    assert chart.rerun.split("   #")[0] == data["command"], "the page's rerun command is not the one measured"
    assert (charts.FIGURES / chart.figure).read_text() == chart.draw(data)[0], "run `make docs` and commit the chart"


# ---------------------------------------------------------------- the built site


class _Assets(HTMLParser):
    """Every URL a page loads by itself (scripts, styles, images, frames, fonts), not the links it shows."""

    LOADS: ClassVar[dict[str, str]] = {
        "script": "src",
        "img": "src",
        "iframe": "src",
        "source": "src",
        "embed": "src",
        "object": "data",
    }

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "link" and a.get("href") and not {"canonical", "alternate"} & set((a.get("rel") or "").split()):
            self.urls.append(a["href"] or "")
        elif tag in self.LOADS and a.get(self.LOADS[tag]):
            self.urls.append(a[self.LOADS[tag]] or "")
        if a.get("style"):
            self.urls += re.findall(r"url\(['\"]?([^'\")]+)", a["style"] or "")


REMOTE = re.compile(r"^(https?:)?//", re.I)


def remote_assets(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return [u for u in parser.urls if REMOTE.match(u)]


def test_the_asset_check_finds_a_cdn_reference() -> None:
    html = (
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        '<script src="//unpkg.com/mermaid@11/dist/mermaid.min.js"></script>'
        '<a href="https://flyte.org">a link is fine</a><link rel="canonical" href="https://x.org/">'
        '<script src="assets/vendor/mermaid.min.js"></script>'
    )
    assert remote_assets(html) == [
        "https://fonts.googleapis.com/css?family=Roboto",
        "//unpkg.com/mermaid@11/dist/mermaid.min.js",
    ]


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 10, pages
    found = {str(p.relative_to(site)): remote_assets(p.read_text()) for p in pages}
    assert {k: v for k, v in found.items() if v} == {}
    for css in site.rglob("*.css"):
        text = css.read_text()
        assert not re.search(r"@import\s+(url\()?['\"]?(https?:)?//", text), css
        assert not re.search(r"url\(['\"]?(https?:)?//", text), css


def test_mermaid_is_served_by_the_site(site: Path) -> None:
    concepts = (site / "concepts" / "index.html").read_text()
    assert concepts.count('class="mermaid"') >= 3
    assert re.search(r'<script src="\.\./assets/vendor/mermaid\.min\.js"', concepts), "the page does not load it"
    # The file the pinned, hash-checked npm tarball holds (scripts/docs_vendor.py), byte for byte.
    vendor = _script("docs_vendor")
    (pinned,) = [p for p in vendor.provide() if p.name == "mermaid.min.js"]
    served = site / "assets" / "vendor" / "mermaid.min.js"
    assert served.stat().st_size > 1_000_000 and served.read_bytes() == pinned.read_bytes()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_built_reference_shows_every_fact(site: Path) -> None:
    exit_page = _text((site / "reference" / "exit-codes" / "index.html").read_text())
    for member in ExitCode:
        assert re.search(rf"\b{int(member)}\b", exit_page) and f"ExitCode.{member.name}" in exit_page, member
    rules_page = _text((site / "reference" / "rules" / "index.html").read_text())
    assert [r for r in elastic_idl.RULES if r not in rules_page] == []
    cli_html = (site / "reference" / "cli" / "index.html").read_text()
    from elastic_idl.cli import build_parser

    sub = build_parser()._subparsers
    assert sub is not None
    commands = [name for action in sub._group_actions for name in getattr(action, "choices", {})]
    assert commands and [c for c in commands if f'id="{c}"' not in cli_html] == []
    api = (site / "reference" / "api" / "index.html").read_text()
    missing = [
        n for n in elastic_idl.__all__ if n != "__version__" and not re.search(rf'id="[^"]*\b{re.escape(n)}"', api)
    ]
    assert missing == []


def test_every_page_is_in_the_nav_and_every_figure_is_shown(site: Path) -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")]
    assert [p for p in pages if p not in nav] == []
    bench = (site / "benchmarks" / "index.html").read_text()
    for svg in (DOCS / "figures").glob("*.svg"):
        assert f'src="../figures/{svg.name}"' in bench, svg.name
        assert (site / "figures" / svg.name).read_bytes() == svg.read_bytes()


def _listeners(port: int) -> list[str]:
    """The local IPv4 addresses of the sockets listening on ``port`` (from /proc/net/tcp)."""
    out = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            out.append(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return out


def test_make_docs_serve_serves_the_site_on_loopback_only() -> None:

    require_mkdocs()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "docs-serve", f"DOCS_PORT={port}"],
        cwd=ROOT,
        env=MKDOCS_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, page = time.monotonic() + 180, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/quickstart/ml-engineer/", timeout=5) as r:
                    page = r.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert page, f"make docs-serve answered nothing on 127.0.0.1:{port} (exit {proc.poll()})"
        assert "<title>" in page and "elastic-idl" in page
        assert _listeners(port) == ["127.0.0.1"], _listeners(port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
