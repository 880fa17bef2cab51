"""README.md and the pages its chapters moved to run as written: their Python blocks, their command
lines, the names they use.

The pages (``PAGES``): README.md, the site's front page, its guides (docs/guide/) and the reference
pages written by hand (docs/reference/ schema, env, torchrun, security); the quickstarts are
tests/test_docs.py's, the generated reference pages scripts/docs_gen.py's.

- Every ```python block runs, from the repository root, in a fresh interpreter (as pasted
  into ``python`` there). The blocks of one unit run in order in one interpreter, so a block may
  use what an earlier block of its unit defined; helpers are defined in the text, never here. A
  unit is a ``## `` section of README.md, and a whole page of the site (each guide page was one
  README chapter, whose blocks shared an interpreter).
- Every line of a ```sh block that calls ``elastic-idl`` or ``python -m elastic_idl...``
  runs (with ``.venv/bin`` first on PATH) and must exit 0. Any other line, and any block
  in another language, must be exempted below by name, with the reason.
- Every ``ei.<name>`` the prose mentions is a public name of ``elastic_idl``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import elastic_idl
from markdown_blocks import RUNS, Block, blocks
from markdown_blocks import command as _command
from markdown_blocks import reader_env as _env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GUIDE = DOCS / "guide"
#: The site's pages that hold what the README held (the README's chapters, moved in issue 23).
PAGES = [
    README,
    DOCS / "index.md",
    *sorted(GUIDE.glob("*.md")),
    *(DOCS / "reference" / name for name in ("schema.md", "env.md", "torchrun.md", "security.md")),
]
#: Seconds a unit's Python or one command line may take (the launch page trains twice).
TIMEOUT = 300

#: Shell lines that do not run here (the command, without its trailing comment) -> why.
EXEMPT_LINES: dict[str, str] = {
    "source .venv/bin/activate": (
        "puts the venv on PATH; this test runs the lines after it with .venv/bin on PATH, and tests/test_docs.py "
        "follows the quickstarts, which say the same, in a new shell"
    ),
    "make demo": "sets up both venvs and trains for seconds; scripts/demo.sh is what it runs",
    "make test": "runs every check, this test suite included: it cannot run inside itself",
    "make docs": "builds the site; tests/test_docs.py builds it the same way (mkdocs build --strict)",
    "make docs-serve": "serves until Ctrl-C; tests/test_docs.py starts it on a free port, reads a page, stops it",
    ".venv/bin/pytest tests/test_contract.py tests/test_skew.py tests/test_contract_fuzz.py -q": (
        "runs part of this test suite, which runs those files itself"
    ),
    ".venv/bin/python scripts/regen_contract.py": (
        "rewrites the expectation files; tests/test_contract.py checks them against the reference"
    ),
    "(cd go && go build -o /tmp/ec ./cmd/elastic-conformance) && \\": (
        "needs the Go toolchain; tests/test_go.py builds the command and runs the contract through it"
    ),
    "CONFORMANCE_CMD=/tmp/ec CONFORMANCE_NAME=go .venv/bin/pytest tests/test_contract.py -k conformance": (
        "the second line of the Go command above (tests/test_go.py runs it)"
    ),
    "make cluster-up": "starts a Kubernetes control plane as root (minutes); tests/test_cluster.py starts one",
    "make cluster-down": "stops the cluster make cluster-up started; tests/test_cluster.py does so",
    "make cluster-test": "runs tests/test_cluster.py, which starts a cluster of its own",
    "make node-deps": "installs system packages as root (apt-get); make test runs it (the pytest target)",
    "$KUBECTL get nodes -o wide": "needs the cluster the line before starts; tests/test_cluster_real.py reads the Nodes",
    "make wheel": "builds the wheel; tests/test_packaging.py builds it the same way and checks its contents",
    'pip install "$(ls dist/elastic_idl-*.whl)[flytekit,torch]"': (
        "installs into the reader's environment; tests/test_flytekit_install.py installs the built wheel with "
        "these extras in a fresh venv"
    ),
    "pyflyte --pkgs wfmod package --image ghcr.io/acme/train:1 --output flyte-package.tgz": (
        "needs the reader's module; tests/test_flytekit_install.py runs this command on its own module"
    ),
}
#: Blocks in another language than python or sh, by (page, ``## `` section, language) -> why they do not run.
EXEMPT_BLOCKS: dict[tuple[str, str, str], str] = {
    ("README.md", "", "mermaid"): "a drawing of the two halves and the contract, not code",
    ("README.md", "One example per reader", "go"): (
        "Go for a propeller plugin; the package's Example (go test) runs that path, and docs/guide/go-backend.md "
        "shows it whole"
    ),
    ("docs/index.md", "The two commands", "text"): "the two commands, which README.md gives as sh and exempts above",
    ("docs/guide/architecture.md", "The repository", ""): "a listing of the repository's folders, not code",
    ("docs/guide/architecture.md", "Architecture", ""): "a listing of the runtime's packages, not code",
    ("docs/guide/go-backend.md", "The modules", ""): "a listing of the Go module's folders, not code",
    (
        "docs/guide/cluster.md",
        "What is real, and what stands in",
        "",
    ): "a drawing of which process talks to which, not code",
    ("docs/guide/cluster.md", "", "bash"): (
        "a session on a cluster it starts as root; tests/test_cluster.py renders and runs the same job"
    ),
    (
        "docs/guide/go-backend.md",
        "In a propeller plugin",
        "go",
    ): "Go for a propeller plugin; the package's Example (go test) runs that path",
    (
        "docs/guide/propeller.md",
        "",
        "go",
    ): "a propeller build's import; go/flyteplugin's tests register and run the plugin",
    ("docs/guide/targets.md", "", "go"): (
        "a fragment of Go; ExampleTask_RenderTarget (go test) runs the same calls and checks their output"
    ),
    (
        "docs/guide/propeller.md",
        "Until a release is served",
        "",
    ): "a propeller module's go.mod lines; scripts/go_release_check.sh builds such a consumer, test_go.py compares",
    (
        "docs/guide/propeller.md",
        "Enabling it in propeller",
        "yaml",
    ): "propeller's configuration, read by a propeller deployment",
    (
        "docs/guide/propeller.md",
        "Configuration",
        "yaml",
    ): (
        "the plugin's section of propeller's configuration; go/flyteplugin's TestConfigSectionFromPropellersYAML "
        "reads such a section with flytestdlib, and flyte/flyte.py writes it for the propeller on the cluster"
    ),
    (
        "docs/guide/propeller.md",
        "Configuration",
        "text",
    ): "the refusal a task above max-worst-case gets; go/flyteplugin's TestMaxWorstCase asserts the message",
    ("docs/guide/flyte2.md", "Moving from flyteplugins-pytorch", "text"): (
        "needs a clone of flyte-sdk, which CI cannot fetch (only package registries): the page gives the counts "
        "scripts/flyte2_peer_suite.py printed"
    ),
}
#: The message of our DeprecationWarnings (elastic_idl._errors.deprecated), as a warnings filter.
DEPRECATED = r".* is deprecated and will be removed in 0\.3"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _unit(page: Path, block: Block) -> str:
    """The README's ``## `` section; a site page is one unit."""
    return block.section if page == README else ""


BLOCKS = [(_name(page), _unit(page, b), b) for page in PAGES for b in blocks(page.read_text(), _name(page))]
UNITS = list(dict.fromkeys((name, unit) for name, unit, b in BLOCKS if b.language == "python"))
LINES = [
    (name, _command(line))
    for name, _, b in BLOCKS
    if b.language == "sh"
    for line in b.text.splitlines()
    if _command(line)
]


@pytest.mark.parametrize(("page", "unit"), UNITS)
def test_python_blocks_run(page: str, unit: str, tmp_path: Path) -> None:
    code = "\n".join(b.text for name, u, b in BLOCKS if (name, u) == (page, unit) and b.language == "python")
    # No page shows a deprecated name of ours (issue 18: the README called Elastic.to_custom()).
    code = f"import warnings\nwarnings.filterwarnings('error', {DEPRECATED!r}, DeprecationWarning)\n{code}"
    # From a file, as a user runs a script (flytekit reads a task function's source), with the
    # repository root as the working directory and first on sys.path, as `python -c` has it.
    script = tmp_path / "page_unit.py"
    script.write_text(code)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"{page} {unit!r}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize(("page", "command"), [line for line in LINES if RUNS.match(line[1])])
def test_command_lines_run(page: str, command: str) -> None:
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"{page}: {command}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


def test_every_line_and_block_runs_or_says_why_not() -> None:
    unexplained = [(p, c) for p, c in LINES if not RUNS.match(c) and c not in EXEMPT_LINES]
    assert unexplained == [], "a shell line that neither runs here nor is exempted (EXEMPT_LINES)"
    other = {(name, b.section, b.language) for name, _, b in BLOCKS if b.language not in ("python", "sh")}
    assert sorted(other - set(EXEMPT_BLOCKS)) == []
    # No stale exemption: each names something a page still says.
    assert sorted(set(EXEMPT_LINES) - {c for _, c in LINES}) == []
    assert sorted(set(EXEMPT_BLOCKS) - other) == []
    assert UNITS and any(RUNS.match(c) for _, c in LINES)
    assert any(name == "README.md" for name, _ in UNITS), "the README's flytekit example does not run"


def test_every_guide_page_is_here() -> None:
    """A guide page added later is run too: PAGES globs docs/guide/, and the site's nav lists each."""
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [p.name for p in GUIDE.glob("*.md") if f"guide/{p.name}" not in nav] == []
    assert all(p.exists() for p in PAGES)


def test_names_the_pages_use_are_public() -> None:
    for page in PAGES:
        text = page.read_text()
        used = set(re.findall(r"\bei\.([A-Za-z_]\w*)", text))
        used |= {n.strip() for m in re.findall(r"from elastic_idl import ([\w, ]+)", text) for n in m.split(",")}
        assert sorted(used - set(elastic_idl.__all__)) == [], page.name


def test_the_readme_is_a_front_page() -> None:
    """Issue 23: the README is what a visitor needs on the first screen, and links into the site."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "```mermaid" in text and re.search(r"^make demo\b", text, re.M) and re.search(r"^make test\b", text, re.M)
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert [
        link for link in local if not (ROOT / link).exists() and link not in ("CONTRIBUTING.md", "CHANGELOG.md")
    ] == []
    assert {str(p.relative_to(ROOT)) for p in GUIDE.glob("*.md")} <= set(local), "a guide page the README does not link"


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_bare_make_prints_the_help_and_runs_nothing() -> None:
    """Issue 18: a bare `make` ran the whole suite; now it lists the targets, each of which exists."""
    bare, help_ = _make(), _make("help")
    assert bare.returncode == 0 and bare.stdout == help_.stdout and bare.stdout.startswith("make help "), bare
    makefile = (ROOT / "Makefile").read_text()
    phony = set(" ".join(re.findall(r"^\.PHONY:((?:.*\\\n)*.*)$", makefile, re.M)).replace("\\", " ").split())
    listed = {
        w for line in bare.stdout.splitlines() for w in re.findall(r"(?:make |/ )(\w[\w-]*)", line.split("  ")[0])
    }
    assert listed and listed <= phony, listed - phony
    assert {"help", "test", "demo", "wheel", "chaos"} <= listed
    # CI names its target: .ci/run runs `make test`, not a bare make.
    assert re.search(r"^make test\b", (ROOT / ".ci" / "run").read_text(), re.M)


def test_the_chaos_duration_is_the_measured_one_everywhere() -> None:
    """Issue 18: make chaos took "about an hour", "about 45 minutes" and "28 minutes"; bench/README.md measured it."""
    measured = re.search(r"\*\*([\d.]+) minutes\*\* of wall time", (ROOT / "bench" / "README.md").read_text())
    assert measured, "bench/README.md, Chaos: the measured wall time"
    minutes = measured.group(1)
    # The pages that give the duration: the Makefile's help, and the site's Development and When pods die.
    for path in (ROOT / "Makefile", GUIDE / "development.md", GUIDE / "when-pods-die.md"):
        chaos_lines = [ln for ln in path.read_text().splitlines() if "make chaos" in ln]
        assert chaos_lines and all(f"{minutes} minutes" in ln for ln in chaos_lines if "minute" in ln), chaos_lines
        assert any(f"{minutes} minutes" in ln for ln in chaos_lines), (path, chaos_lines)
    for path in (ROOT / "Makefile", *PAGES, *DOCS.rglob("*.md")):
        assert not re.search(r"about an hour|about 45 minutes|\b28 minutes", path.read_text()), path
        chaos_lines = [ln for ln in path.read_text().splitlines() if "make chaos" in ln and "minute" in ln]
        assert all(f"{minutes} minutes" in ln for ln in chaos_lines), (path, chaos_lines)


def test_the_schema_page_lists_every_elastic_config_field() -> None:
    """docs/reference/schema.md's field table is ElasticConfig's fields, by number, name and order."""
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", (DOCS / "reference" / "schema.md").read_text(), re.M)
    fields = [(str(f.number), f.name) for f in elastic_idl.ElasticConfig.DESCRIPTOR.fields]
    assert rows == fields


def test_every_make_target_is_documented() -> None:
    """Each target `make help` lists has its row in docs/guide/development.md (the cluster's: cluster.md)."""
    listed = {
        w
        for line in _make("help").stdout.splitlines()
        for w in re.findall(r"(?:make |/ )(\w[\w-]*)", line.split("  ")[0])
    }
    pages = (GUIDE / "development.md").read_text() + (GUIDE / "cluster.md").read_text()
    assert listed and sorted(t for t in listed if f"`make {t}`" not in pages) == []


def _imports_flyte_when_collected(source: str) -> bool:
    """Whether a module imports ``flyte`` at import time (top level or a top-level block, not in a function)."""
    import ast

    def flyte(name: str | None) -> bool:
        return name is not None and (name == "flyte" or name.startswith("flyte."))

    todo = list(ast.parse(source).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import) and any(flyte(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and flyte(node.module):
            return True
        if isinstance(node, (ast.With, ast.If, ast.Try)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            args = node.value.args
            if getattr(node.value.func, "attr", None) == "importorskip" and args:
                if isinstance(args[0], ast.Constant) and flyte(str(args[0].value)):
                    return True
    return False


def test_make_test_runs_the_flyte2_modules_the_suite_leaves_out() -> None:
    """tests/conftest.py leaves Flyte 2's modules out of a plain pytest; the Makefile runs exactly those after it,
    and every test module that imports flyte when collected is one of them."""
    import conftest

    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^FLYTE2_TESTS := (.*)$", makefile, re.M)
    assert listed, "the Makefile's FLYTE2_TESTS"
    assert sorted(listed.group(1).split()) == sorted(f"tests/{m}" for m in conftest.FLYTE2_MODULES)
    assert sorted(conftest.collect_ignore) == sorted(conftest.FLYTE2_MODULES)
    at_collection = sorted(
        p.name for p in (ROOT / "tests").glob("test_*.py") if _imports_flyte_when_collected(p.read_text())
    )
    assert at_collection == sorted(conftest.FLYTE2_MODULES)
    assert not _imports_flyte_when_collected("def f():\n    import flyte\n")
    assert _imports_flyte_when_collected("import warnings\nwith warnings.catch_warnings():\n    import flyte.io\n")
