"""The documentation site (mkdocs.yml, docs/): it builds with --strict, loads nothing from the
network, its generated pages and charts are what the code and bench/results say, and a reader can
follow each of the four quickstarts as written.

A quickstart is followed as a reader follows it (``walkthrough``): in a new shell (a login PATH, no
venv active, nothing else on PATH), from the page's first line to its last, every line of every
```sh block in one bash, in order, so that `cd`, `export` and `source .venv/bin/activate` carry
over; a block with a ``title="FILE"`` is saved as FILE where the reader is; a ```text block right
after a sh block is what those commands print, compared line by line (``...`` elides). The page's
`git clone` line is the one step done otherwise: the test copies this checkout, whose `.venv`
borrows the packages already installed (``_stage`` says how). Any other block is exempted below by
name, with the reason, or checked against the file it shows.

The site is built with the docs venv (.venv-docs, ``make venv-docs``). Without it the build tests
skip, saying so, unless ELASTIC_IDL_DOCS=run (set where make has set the venv up), where they fail.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import venv
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import pytest

import elastic_idl
from docs_site import ENV as MKDOCS_ENV
from docs_site import require_mkdocs
from elastic_idl.exit_codes import ExitCode
from markdown_blocks import Block, blocks, command

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTARTS = sorted((DOCS / "quickstart").glob("*.md"))
#: Seconds a quickstart's commands may take together, at most (a local flytekit run trains twice).
TIMEOUT = 600

#: The shell a reader opens: a login shell's PATH (no venv, no Go), the home folder (pip's and Go's
#: caches) and the locale. GOFLAGS=-p=1 keeps Go to one build at a time on the shared 2-core machine.
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KEPT_ENV = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TERM", "CI")
#: Where Go's installer puts Go, which the propeller page puts on PATH.
GO_BIN = Path("/usr/local/go/bin/go")
#: The page's clone line: the test does the equivalent, a copy of this checkout (see _stage).
CLONE = re.compile(r"^git clone (?P<url>https://\S+?)(?:\.git)?(?: (?P<dir>\S+))?$")
#: A line of shown output that stands for any number of lines; inside a line, for any text.
ELIDED = "..."
#: (page, section, language) -> why the block is not run.
EXEMPT_BLOCKS: dict[tuple[str, str, str], str] = {
    ("propeller-go.md", "4. The plugin in a propeller build", "go"): (
        "a propeller build's import; go/flyteplugin's tests register and run the plugin"
    ),
    ("propeller-go.md", "4. The plugin in a propeller build", "yaml"): "propeller's configuration, read by propeller",
}
#: (page, section, language) -> the file the block shows (compared without its comment lines).
SHOWN_FILES: dict[tuple[str, str, str], Path] = {
    ("ml-engineer.md", "2. Describe the job", "yaml"): ROOT / "examples" / "demo.yaml",
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


def _shell_lines(text: str) -> list[str]:
    """A sh block's commands: continuation lines joined, trailing comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [c for c in (command(line) for line in joined.splitlines()) if c]


@dataclass
class Walk:
    """A quickstart as a reader follows it: one bash script, and what each output block expects."""

    script: str
    #: (the commands of the sh block before it, the lines it shows)
    shown: list[tuple[list[int], list[str]]]
    commands: list[str]
    files: list[str]
    #: The folders the page's clone lines make.
    clones: list[str]


def walkthrough(page: Path) -> Walk:
    """The page in order: a titled block is saved under its title, each line of a sh block runs in one
    bash (cd, export and source carry over); a text block right after a sh block is that block's
    output. The clone line only checks that its folder is there: the test makes it (``_stage``)."""
    out = ["exec 2>&1"]
    shown: list[tuple[list[int], list[str]]] = []
    commands: list[str] = []
    files: list[str] = []
    clones: list[str] = []
    last_sh: list[int] | None = None
    for b in _blocks(page):
        key = (page.name, b.section, b.language)
        if b.language == "sh":
            last_sh = []
            for line in _shell_lines(b.text):
                clone = CLONE.match(line)
                run = line
                if clone:
                    clones.append(clone["dir"] or clone["url"].rsplit("/", 1)[1])
                    run = f"test -d {shlex.quote(clones[-1])}"
                n = len(commands)
                commands.append(line)
                last_sh.append(n)
                out += [
                    f"printf '\\n@@step {n}\\n'",
                    run,
                    f'rc=$?; printf \'\\n@@rc {n} %s\\n\' "$rc"; [ "$rc" = 0 ] || exit "$rc"',
                ]
            continue
        if b.language == "text" and last_sh is not None:
            shown.append((last_sh, b.text.splitlines()))
        elif b.title:
            files.append(b.title)
            out += [
                f"cat > {shlex.quote(b.title)} <<'ELASTIC_IDL_QUICKSTART_EOF'",
                b.text.rstrip("\n"),
                "ELASTIC_IDL_QUICKSTART_EOF",
            ]
        elif key not in EXEMPT_BLOCKS and key not in SHOWN_FILES:
            raise AssertionError(
                f"{page.name}, line {b.line}: a {b.language or 'plain'} block that is neither run, "
                "nor saved (title=...), nor a shown output, nor exempted"
            )
        last_sh = None
    return Walk("\n".join(out) + "\n", shown, commands, files, clones)


def _stage(stage: Path) -> Path:
    """What the clone line gives a reader, made from this checkout in ``stage``: its files (tracked, and
    new ones not ignored, as they are now). A fresh clone's `make venv` downloads torch and the rest
    (minutes, gigabytes); instead ``.venv`` here is a venv of its own whose site-packages borrow this
    checkout's installed packages (a .pth file) and which holds the stamp `make venv` writes, so
    `make venv` finds it set up; `make devtree` and everything after run for real."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        src, dst = ROOT / name, stage / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    borrowed = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    assert borrowed, "no .venv: make venv"
    for venv_dir, lock, kind in ((".venv", "dev.txt", "dev"), (".venv-gen", "gen.txt", "gen")):
        venv.create(stage / venv_dir, with_pip=False, symlinks=True)
        digest = hashlib.sha256((stage / "requirements" / lock).read_bytes()).hexdigest()[:16]
        (stage / venv_dir / f".stamp-{kind}-{digest}").touch()  # after the copy: newer than the lock
    (site,) = (stage / ".venv" / "lib").glob("python3*/site-packages")
    (site / "borrowed_from_checkout.pth").write_text(f"{borrowed[0]}\n")
    return stage


def _clean_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env["PATH"] = CLEAN_PATH
    env["GOFLAGS"] = "-p=1"
    return env


def _expected(shown: list[str]) -> re.Pattern[str]:
    """The shown lines as a pattern over the output's lines: ``...`` alone skips lines, inside a line any
    text; whitespace runs compare as one space; output may come before and after."""
    parts = []
    for line in shown:
        text = " ".join(line.split())
        if text == ELIDED:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("".join(".*?" if p == ELIDED else re.escape(p) for p in re.split(r"(\.\.\.)", text)) + r"\n")
    return re.compile("^" + "".join(parts), re.M)


def _outputs(log: str) -> tuple[dict[int, str], dict[int, int]]:
    """Each step's output and exit code, from the markers the script prints."""
    outputs: dict[int, str] = {}
    codes: dict[int, int] = {}
    step = None
    for line in log.splitlines():
        if m := re.fullmatch(r"@@step (\d+)", line):
            step = int(m[1])
            outputs[step] = ""
        elif m := re.fullmatch(r"@@rc (\d+) (\d+)", line):
            codes[int(m[1])] = int(m[2])
            step = None
        elif step is not None:
            outputs[step] += " ".join(line.split()) + "\n"
    return outputs, codes


def test_there_are_four_quickstarts() -> None:
    assert [p.name for p in QUICKSTARTS] == ["flyte2.md", "flytekit.md", "ml-engineer.md", "propeller-go.md"]


@pytest.mark.parametrize("page", [p.name for p in QUICKSTARTS])
def test_a_reader_follows_the_quickstart_in_a_new_shell(page: str, tmp_path: Path) -> None:
    """Issue 29: the first command of the first quickstart was "command not found" in a new shell."""
    path = DOCS / "quickstart" / page
    walk = walkthrough(path)
    if any("/usr/local/go/bin" in c for c in walk.commands) and not GO_BIN.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {page} needs Go in /usr/local/go, which is missing")
        pytest.skip(f"{page} needs Go in /usr/local/go (https://go.dev/doc/install)")
    home = tmp_path / "reader"
    home.mkdir()
    for folder in walk.clones:
        _stage(home / folder)
    script = tmp_path / "quickstart.sh"
    script.write_text(walk.script)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", str(script)],
        cwd=home,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
    )
    outputs, codes = _outputs(proc.stdout)
    failed = [(walk.commands[n], rc) for n, rc in codes.items() if rc != 0]
    assert proc.returncode == 0 and not failed and len(codes) == len(walk.commands), (
        f"{page}: {failed or 'the script'} failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}"
    )
    for steps, lines in walk.shown:
        got = "".join(outputs[n] for n in steps)
        assert _expected(lines).search(got), (
            f"{page}: the output shown after `{walk.commands[steps[-1]]}` is not what it prints.\n"
            "shown:\n" + "\n".join(lines) + f"\nprinted:\n{got[-4000:]}"
        )
    # Every file the page has the reader save is run by one of its commands.
    assert [f for f in walk.files if not any(f in c.split() for c in walk.commands)] == []


def test_the_output_check_finds_a_wrong_line() -> None:
    printed = "elastic-idl: started\n[attempt 0] epoch 0: loss 0.1\ndone: world size 2\n"
    assert _expected(["[attempt 0] epoch 0: loss ...", "done: world size 2"]).search(printed)
    assert _expected(["...", "done: world size 2"]).search(printed)
    assert not _expected(["[attempt 0] epoch 0: loss ...", "done: world size 3"]).search(printed)
    # Lines shown one after the other must be printed one after the other.
    assert not _expected(["elastic-idl: started", "done: world size 2"]).search(printed)


def test_every_quickstart_says_how_to_get_the_code_and_run_it() -> None:
    for page in QUICKSTARTS:
        walk = walkthrough(page)
        assert CLONE.match(walk.commands[0]), f"{page.name}: the first command is not a clone line"
        assert walk.commands[1].startswith("cd "), page.name
        assert "source .venv/bin/activate" in walk.commands, f"{page.name}: no activation of the venv"
        assert walk.shown, f"{page.name}: no output shown"
        sections = [b for b in re.findall(r"^## (\d+)\. ", page.read_text(), re.M)]
        assert sections == [str(i) for i in range(1, len(sections) + 1)], (page.name, sections)


@pytest.mark.parametrize(("key", "path"), SHOWN_FILES.items())
def test_a_shown_file_is_the_file(key: tuple[str, str, str], path: Path) -> None:
    page, section, language = key
    shown = [b.text for b in _blocks(DOCS / "quickstart" / page) if (b.section, b.language) == (section, language)]
    body = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert shown == ["\n".join(body) + "\n"], f"{page}, {section!r}: the block is not {path.relative_to(ROOT)}"


def test_no_exemption_is_stale() -> None:
    other = {
        (page.name, b.section, b.language)
        for page in QUICKSTARTS
        for b in _blocks(page)
        if b.language not in ("sh", "text") and not b.title
    }
    assert sorted((set(EXEMPT_BLOCKS) | set(SHOWN_FILES)) - other) == []


def test_no_page_quotes_a_wheel_glob() -> None:
    """Issue 29: `pip install "dist/elastic_idl-*.whl[...]"` passes the `*` to pip, which refuses it."""
    quoted_glob = re.compile(r"""pip install[^\n]*(["'])(?:(?!\1)[^$\n])*\*(?:(?!\1).)*\1""")
    assert quoted_glob.search('pip install "dist/elastic_idl-*.whl[flytekit,torch]"')
    assert not quoted_glob.search('pip install "$(ls dist/elastic_idl-*.whl)[flytekit,torch]"')
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    assert [str(p.relative_to(ROOT)) for p in pages if quoted_glob.search(p.read_text())] == []


def test_nothing_says_to_install_elastic_idl_from_an_index() -> None:
    """Issue 29: a page that says elastic-idl is not on PyPI quoted a warning saying
    `pip install 'elastic-idl[flytekit]'`; the warning (and torch's missing-extra error) now point at the
    wheel. No page and no message of the runtime names an index install of elastic-idl."""
    index_install = re.compile(r"""pip install ["']?elastic[-_]idl\b""")
    files = [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "src" / "elastic_idl").rglob("*.py")]
    assert [str(p.relative_to(ROOT)) for p in files if index_install.search(p.read_text())] == []


def test_the_flytekit_quickstart_names_the_defaults_that_differ_from_kfpytorch() -> None:
    """Issue 29: "with the same defaults" was wrong for three arguments; the page names them, checked
    against kfpytorch's Elastic as installed (flytekitplugins-kfpytorch 1.16.31)."""
    kfpytorch = pytest.importorskip("flytekitplugins.kfpytorch")
    ours, theirs = elastic_idl.Elastic(), kfpytorch.Elastic()
    differ = {f.name for f in dataclasses.fields(theirs) if getattr(theirs, f.name) != getattr(ours, f.name)}
    text = " ".join((DOCS / "quickstart" / "flytekit.md").read_text().split())
    sentence = re.search(r"The defaults are kfpytorch's except (\w+): (.+?\)) and (.+?\))", text)
    assert sentence, "the sentence naming the defaults that differ"
    named = set(re.findall(r"`(\w+)` \(", sentence.group(2) + " " + sentence.group(3)))
    assert named == differ and sentence.group(1) == {1: "one", 2: "two", 3: "three", 4: "four"}[len(differ)]
    assert "same defaults" not in text


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
    drawn = charts._chaos({"runs": runs})
    svg, table = drawn.svg, drawn.table
    assert table.splitlines()[2:] == ["| 1 | kill-nonhost | 1 / 1 | not run |", "| 2 | kill-host | 1 / 2 | 0 / 1 |"]
    assert svg == charts._chaos({"runs": list(reversed(runs))}).svg, "the order of the runs changes the chart"
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="([\d.]+)" height="13"', svg)]
    assert widths == [300.0, 150.0, 0.0], widths  # 100 %, 50 %, 0 %; class 1's torchrun bar is a note
    assert "not run" in svg


def test_the_defaults_chart_counts_recovered_and_failed_runs_per_class_and_defaults() -> None:
    charts = _script("docs_charts")

    def run(c: int, name: str, defaults: str, passed: bool, outcome: str | None) -> dict[str, object]:
        return {"class": c, "name": name, "defaults": defaults, "passed": passed, "outcome": outcome,
                "date": "2026-12-05T03:00:00Z", "source": "abcdef1234"}  # fmt: skip

    runs = [
        run(2, "kill-host", "ours", True, "Succeeded"),
        run(2, "kill-host", "ours", False, "Succeeded"),  # a wrong state: not recovered
        run(2, "kill-host", "flytekit", True, "Failed"),
        run(1, "kill-nonhost", "flyte2", False, "Failed"),  # failed, a pod left running
        run(1, "kill-nonhost", "ours", False, None),  # a hang
    ]
    about = {"defaults": {"flytekit": "flytekit 1.x X", "ours": "elastic-idl Y"}, "cluster": "K", "job": "J"}
    drawn = charts._chaos_defaults({"about": about, "runs": runs})
    assert drawn.table.splitlines()[0].count("recovered / failed / runs") == 3
    assert drawn.table.splitlines()[2:] == [
        "| 1 | kill-nonhost | not run | 0 / 1 / 1 | 0 / 0 / 1 |",
        "| 2 | kill-host | 0 / 1 / 1 | not run | 1 / 0 / 2 |",
    ]
    assert drawn.svg == charts._chaos_defaults({"about": about, "runs": runs[::-1]}).svg
    for fact in (
        "flytekit defaults: flytekit 1.x X",
        "elastic-idl defaults: elastic-idl Y",
        "2026-12-05",
        "`abcdef1234`",
    ):
        assert fact in drawn.caption, (fact, drawn.caption)


def test_a_chart_says_what_ran_where_and_when() -> None:
    """Issue 29: the chaos chart had no caption; "(7, 14: must fail)" and "10 runs against 5" were explained
    on another page. The caption comes from the data file: cluster, job, dates, commits, runs per side."""
    charts = _script("docs_charts")
    runs = [
        {"class": c, "name": n, "side": s, "passed": True, "seed": seed, "date": d, "source": src}
        for c, n in ((1, "kill-nonhost"), (7, "exceed"))
        for s, seeds in (("ours", (1000, 1001, 1002)), ("torchrun", (1000,)))
        for seed, d, src in zip(
            seeds,
            ("2026-12-01T10:00:00Z", "2026-12-02T09:00:00Z", "2026-12-02T11:00:00Z"),
            ("abc1234", "abc1234", "def5678"),
            strict=False,  # torchrun's one run takes the first date and source
        )
    ]
    about = {"cluster": "Kubernetes v9.9", "job": "2 Worker pods, 100 steps", "must_fail": ["exceed"]}
    caption = charts._chaos({"about": about, "runs": runs}).caption
    for fact in (
        "Kubernetes v9.9",
        "2 Worker pods, 100 steps",
        "3 (seeds 1000-1002) runs",
        "1 (seed 1000) with stock torchrun",
        "7 (exceed)",
        "must end Failed",
        "2026-12-01 to 2026-12-02",
        "`abc1234` (6 runs)",
        "`def5678` (2 runs)",
    ):
        assert fact in caption, (fact, caption)
    page = (DOCS / "benchmarks.md").read_text()
    figures = re.findall(
        r"<figure markdown=\"span\">\n  !\[[^]]*\]\(figures/([\w-]+\.svg)\)\n  <figcaption>(.+)</figcaption>", page
    )
    assert sorted(f for f, _ in figures) == sorted(p.name for p in charts.FIGURES.glob("*.svg"))
    assert all(len(text) > 80 for _, text in figures), figures
    # The launch chart's y axis has a title, on the axis (rotated).
    launch = (charts.FIGURES / "launch-vs-workers.svg").read_text()
    assert re.search(r'transform="rotate\(-90[^"]*"[^>]*>seconds, launch to exit<', launch)


def test_chart_text_is_legible_on_a_phone() -> None:
    """Issue 29: on a 390 px phone the charts' text was 5-7 px. A chart is WIDTH wide and shown at most
    about 355 px wide there (the browser test measures the page); its smallest text is FONT_PX."""
    charts = _script("docs_charts")
    for svg in charts.FIGURES.glob("*.svg"):
        text = svg.read_text()
        width = float(re.search(r'viewBox="0 0 ([\d.]+) ', text).group(1))  # type: ignore[union-attr]
        sizes = [float(s) for s in re.findall(r"font-size:([\d.]+)px", text)]
        assert width <= charts.WIDTH and min(sizes) * 355 / width >= 11, (svg.name, width, min(sizes))


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
    drawn = charts._launch({**meta, "results": rows})
    svg, table = drawn.svg, drawn.table
    assert table.splitlines()[2:4] == ["| 1 | 1.00 | 2.50 | 0.50 | 1 / 0 |", "| 4 | 3.00 | 8.00 | 0.38 | 0 / 0 |"]
    assert svg == charts._launch({**meta, "results": rows[::-1]}).svg, "the order of the rows changes the chart"
    assert "2026-12-03 03:00 UTC" in drawn.caption and "`0000000`" in drawn.caption
    assert svg.count("<circle ") == 4 and svg.count("<polyline ") == 2
    assert re.findall(r">([\d.]+ s)</text>", svg) == ["1.00 s", "2.50 s", "3.00 s", "8.00 s"]
    # No run of ours succeeded at 8 workers: no point, "-" in the table, the ratio row says "-" too.
    none = _sweep_row(8, [5.0], [6.0], [1])
    drawn = charts._launch({**meta, "results": [none]})
    svg, table = drawn.svg, drawn.table
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
    assert (charts.FIGURES / chart.figure).read_text() == chart.draw(data).svg, "run `make docs` and commit the chart"


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


#: A Sphinx role left in a docstring (mkdocstrings renders Google style and Markdown, not these).
SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):`")


def test_the_api_page_is_the_public_api_by_topic(site: Path) -> None:
    """Issue 29: the API page opened with a private module, showed 54 raw Sphinx roles and a `view = of`
    entry, and listed no protobuf fields. Now: the groups in order, every public name once under
    `elastic_idl.NAME`, no private path, every role rendered, every message's fields in a table."""
    gen = _script("docs_gen")
    html = (site / "reference" / "api" / "index.html").read_text()
    text = _text(html)
    assert SPHINX_ROLE.search(text) is None, SPHINX_ROLE.search(text)
    assert "view = of" not in text and "::" not in re.sub(r"https?://", "", text)
    h2 = re.findall(r"<h2 id=\"([^\"]+)\"", html)
    assert h2[: len(gen.API_GROUPS)] == [gen._slug(title) for title, _, _ in gen.API_GROUPS], h2
    headings = re.findall(r'<h[34] id="(elastic_idl\.[^"]+)"', html)
    first = gen.API_GROUPS[0][2][0]
    assert headings[0] == f"elastic_idl.{first}", headings[:3]
    renamed = {n for n in elastic_idl.__all__ if getattr(getattr(elastic_idl, n), "__name__", n) != n}
    private = [
        h
        for h in headings
        if "._" in h and not any(h.endswith(f".{getattr(elastic_idl, n).__name__}") for n in renamed)
    ]
    assert private == [], private
    anchors = set(re.findall(r'id="(elastic_idl\.\w+)"', html))
    assert sorted(f"elastic_idl.{n}" for n in elastic_idl.__all__ if n != "__version__") == sorted(
        a for a in anchors if a.split(".")[1] in elastic_idl.__all__
    )
    for name in ("ElasticConfig", "KubeflowTask", "LegacyTask", "FailureReport", "FailureRecord"):
        section = html.split(f'id="elastic_idl.{name}"', 1)[1].split("<h3", 1)[0]
        fields = re.findall(r"<tr>\s*<td><code>(\w+)</code></td>", section)
        assert fields == [f.name for f in getattr(elastic_idl, name).DESCRIPTOR.fields], (name, fields)


def test_docstrings_of_the_public_api_are_google_style_markdown() -> None:
    """The same, at the source: no public object's docstring (nor its public members') holds a Sphinx role
    or an RST literal block (``::``)."""
    import inspect

    found = []
    for name in elastic_idl.__all__:
        obj = getattr(elastic_idl, name)
        members = [obj]
        if inspect.isclass(obj) and obj.__module__.startswith("elastic_idl._"):
            members += [m for k, m in vars(obj).items() if not k.startswith("_")]
        for member in members:
            doc = inspect.getdoc(member) if callable(member) or inspect.isclass(member) else None
            if doc and (SPHINX_ROLE.search(doc) or re.search(r"::\s*$", doc, re.M)):
                found.append(f"{name}.{getattr(member, '__name__', '')}")
    assert found == []


def test_the_cli_page_is_a_section_and_a_table_per_command() -> None:
    """Issue 29: the CLI page was raw --help in code blocks, 101 lines over 80 columns, one paragraph
    repeated 7 times. Now each command has its section, its options in a table, usage lines wrapped."""
    from elastic_idl import cli, pod

    page = (DOCS / "reference" / "cli.md").read_text()
    parser = cli.build_parser()
    sub = parser._subparsers
    assert sub is not None
    choices = next(a for a in sub._group_actions if hasattr(a, "choices")).choices  # type: ignore[attr-defined]
    for name, subparser in choices.items():
        section = page.split(f"## {name} {{#{name}}}", 1)[1].split("\n## ", 1)[0]
        parsed = pod.build_parser() if name == "pod" else subparser
        if name == "torchrun":
            from elastic_idl._sdk.torchrun import FLAGS

            flags = [f.options[0] for f in FLAGS]
        else:
            flags = [
                a.option_strings[-1]
                for a in parsed._actions
                if a.option_strings and a.help != argparse.SUPPRESS and not a.option_strings[0] == "-h"
            ]
        missing = [f for f in flags if not re.search(rf"^\| [^\n]*`{re.escape(f)}`", section, re.M)]
        assert flags and missing == [], (name, missing)
    code = [ln for block in re.findall(r"```text\n(.*?)```", page, re.S) for ln in block.splitlines()]
    assert code and max(len(ln) for ln in code) <= 80, max(code, key=len)
    paragraphs = [p for p in page.split("\n\n") if len(p) > 200]
    assert len(paragraphs) == len(set(paragraphs)), "a paragraph repeated"


def test_every_rule_has_a_linkable_section_with_a_breaking_and_a_keeping_task(site: Path) -> None:
    """Issue 29: the rules page was one table (ids broken mid-word, nothing linkable, no example). Each
    rule's two tasks are judged by the validator (docs_gen.rule_examples fails otherwise), and here the
    command the page names is run on both: the breaking one exits 1, the keeping one 0."""
    gen = _script("docs_gen")
    examples = gen.rule_examples()
    assert [e.rule for e in examples] == list(elastic_idl.RULES)
    for ex in examples:
        assert ex.rule in ex.broken and not ex.kept, ex
        assert gen.run_cli(ex, keeping=True).returncode == 0, ex.rule
        assert gen.run_cli(ex, keeping=False).returncode == 1, ex.rule
    html = (site / "reference" / "rules" / "index.html").read_text()
    for rule in elastic_idl.RULES:
        section = html.split(f'<h2 id="{rule}">', 1)
        assert len(section) == 2, f"no section #{rule}"
        assert section[1].split("<h2", 1)[0].count('<div class="highlight">') >= 3, rule  # breaks, says, keeps


def test_mermaid_loads_only_on_pages_with_a_diagram(site: Path) -> None:
    """Issue 29: the 3.5 MB Mermaid script loaded on all 31 pages; one has diagrams."""
    loads = {str(p.relative_to(site)): "mermaid.min.js" in p.read_text() for p in site.rglob("*.html")}
    draws = {str(p.relative_to(site)): 'class="mermaid"' in p.read_text() for p in site.rglob("*.html")}
    assert loads == draws and sum(draws.values()) >= 1, {k for k in loads if loads[k] != draws[k]}


def _site_path() -> str:
    url = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert url, "mkdocs.yml has no site_url"
    return urllib.parse.urlparse(url.group(1)).path


SITE_PATH = _site_path()


def test_the_sitemap_lists_every_page(site: Path) -> None:
    """Issue 29: the sitemap was empty (no site_url)."""
    locs = re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text())
    pages = {str(p.parent.relative_to(site)) for p in site.rglob("index.html") if p.parent.name != "search"}
    listed = {urllib.parse.urlparse(u).path.removeprefix(SITE_PATH).rstrip("/") or "." for u in locs}
    assert listed == pages, listed ^ pages


def test_the_404_page_links_under_the_site_path(site: Path) -> None:
    """The 404 page is served at any depth, so its links are root-absolute: under site_url's path, which is
    where a host serves the site (tests/test_docs_browser.py opens it there)."""
    html = (site / "404.html").read_text()
    links = re.findall(r'(?:href|src)="(/[^"]*)"', html)
    assert links and [u for u in links if not u.startswith(SITE_PATH)] == [], links[:5]


def test_every_page_links_to_the_previous_and_the_next(site: Path) -> None:
    order = [p for p in re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)]
    html = {
        p: (site / (p.removesuffix(".md").removesuffix("index") + "/index.html").lstrip("/")).read_text() for p in order
    }
    for i, page in enumerate(order):
        assert ("md-footer__link--prev" in html[page]) == (i > 0), page
        assert ("md-footer__link--next" in html[page]) == (i < len(order) - 1), page


def test_the_palette_follows_the_system_and_has_a_toggle(site: Path) -> None:
    html = (site / "index.html").read_text()
    media = re.findall(r'data-md-color-media="([^"]+)"', html)
    assert media == ["(prefers-color-scheme)", "(prefers-color-scheme: light)", "(prefers-color-scheme: dark)"]
    assert html.count('class="md-header__button md-icon" title="Colours') == 3


#: Text that rots in front of readers: a date something was checked, the machine's Go, an issue number.
ROT = re.compile(r"checked \d{4}-\d\d-\d\d|this machine runs|[Ii]ssue #\d|^## This site", re.M)
#: Where maintainers' notes belong.
MAINTAINERS = {"guide/development.md", "contributing.md", "changelog.md"}


def test_reader_pages_hold_no_maintainers_notes() -> None:
    """Issue 29: the home page's "This site" note on the theme's end of life, "checked 2026-12-02", "this
    machine runs Go 1.26"; they live in docs/guide/development.md now."""
    found = {
        str(p.relative_to(DOCS)): ROT.findall(p.read_text())
        for p in DOCS.rglob("*.md")
        if str(p.relative_to(DOCS)) not in MAINTAINERS
    }
    assert {k: v for k, v in found.items() if v} == {}
    assert "Zensical" in (DOCS / "guide" / "development.md").read_text()


def test_the_guides_topics_are_headings() -> None:
    """Issue 29: the Go guide's six topics were bold paragraphs (its table of contents had one entry); so
    were other guides'. A paragraph opening with a bold title is a heading now."""
    bold_topic = re.compile(r"(?:\A|\n\n)\*\*[A-Z][^*\n]{0,60}?[.:]?\*\*[ .:(]")
    found = {str(p.relative_to(DOCS)): bold_topic.findall(p.read_text()) for p in DOCS.rglob("*.md")}
    assert {k: v for k, v in found.items() if v and k not in ("changelog.md",)} == {}
    assert len(re.findall(r"^## ", (DOCS / "guide" / "go-backend.md").read_text(), re.M)) >= 8


def test_make_docs_prints_no_banner(tmp_path: Path) -> None:
    """Issue 29: every build printed Material's 8-line end-of-life banner. The mkdocs line of `make docs`,
    run as make runs it (without the variable in the environment), prints nothing."""
    require_mkdocs()
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "docs"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    (line,) = [ln for ln in dry.stdout.splitlines() if "mkdocs build" in ln]
    env = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}
    proc = subprocess.run(
        ["bash", "-c", f"{line} --site-dir {shlex.quote(str(tmp_path / 'site'))}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


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
                url = f"http://127.0.0.1:{port}{SITE_PATH}quickstart/ml-engineer/"
                with urllib.request.urlopen(url, timeout=5) as r:
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
