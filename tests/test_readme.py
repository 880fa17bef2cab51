"""README.md runs as written: its Python blocks, its command lines, the names it uses.

- Every ```python block runs, from the repository root, in a fresh interpreter (as pasted
  into ``python`` there). The blocks of one ``## `` section run in order in one interpreter,
  so a block may use what an earlier block of its section defined; helpers are defined in
  the text, never here.
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
from dataclasses import dataclass
from pathlib import Path

import pytest

import elastic_idl

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: Seconds a section's Python or one command line may take (the launch section trains twice).
TIMEOUT = 300

#: Shell lines that do not run here (the command, without its trailing comment) -> why.
EXEMPT_LINES: dict[str, str] = {
    "make demo": "sets up both venvs and trains for seconds; scripts/demo.sh is what it runs",
    "make test": "runs every check, this test suite included: it cannot run inside itself",
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
    "make wheel": "builds the wheel; tests/test_packaging.py builds it the same way and checks its contents",
    'pip install "$(ls dist/elastic_idl-*.whl)[flytekit,torch]"': (
        "installs into the reader's environment; tests/test_flytekit_install.py installs the built wheel with "
        "these extras in a fresh venv"
    ),
    "pyflyte --pkgs wfmod package --image ghcr.io/acme/train:1 --output flyte-package.tgz": (
        "needs the reader's module; tests/test_flytekit_install.py runs this command on its own module"
    ),
}
#: Blocks in another language than python or sh, by section -> why they do not run.
EXEMPT_BLOCKS: dict[tuple[str, str], str] = {
    ("What is in the box", ""): "a listing of the repository's folders, not code",
    ("Architecture", ""): "a listing of the runtime's packages, not code",
    ("The Go backend (`go/`)", ""): "a listing of the Go module's folders, not code",
    ("A cluster on one machine", ""): "a drawing of which process talks to which, not code",
    ("A cluster on one machine", "bash"): (
        "a session on a cluster it starts as root; tests/test_cluster.py renders and runs the same job"
    ),
    ("The Go backend (`go/`)", "go"): "Go for a propeller plugin; the package's Example (go test) runs that path",
    ("For propeller", "go"): "a propeller build's import; go/flyteplugin's tests register and run the plugin",
    ("For propeller", ""): "a propeller build's go get; scripts/go_release_check.sh builds such a consumer",
    ("For propeller", "yaml"): "propeller's configuration, read by a propeller deployment",
}
#: The message of our DeprecationWarnings (elastic_idl._errors.deprecated), as a warnings filter.
DEPRECATED = r".* is deprecated and will be removed in 0\.3"
#: What makes a shell line one that runs.
RUNS = re.compile(r"^(elastic-idl|python -m elastic_idl)\b")


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    line: int
    text: str


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text, with the ``## `` section each is in."""
    out: list[Block] = []
    section = ""
    fence: tuple[str, int] | None = None
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("```"):
                fence, body = (line[3:].strip(), number), []
        elif line.startswith("```"):
            out.append(Block(section, fence[0], fence[1], "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"README.md: the block opened on line {fence[1]} is not closed"
    return out


def _command(line: str) -> str:
    """A shell line without its trailing comment and spaces."""
    return re.sub(r"\s+#.*$", "", line).strip()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


BLOCKS = blocks(README.read_text())
SECTIONS = sorted({b.section for b in BLOCKS if b.language == "python"}, key=[b.section for b in BLOCKS].index)
LINES = [
    (b.section, _command(line)) for b in BLOCKS if b.language == "sh" for line in b.text.splitlines() if _command(line)
]


@pytest.mark.parametrize("section", SECTIONS)
def test_python_blocks_run(section: str, tmp_path: Path) -> None:
    code = "\n".join(b.text for b in BLOCKS if b.section == section and b.language == "python")
    # The README shows no deprecated name of ours (issue 18: it called Elastic.to_custom()).
    code = f"import warnings\nwarnings.filterwarnings('error', {DEPRECATED!r}, DeprecationWarning)\n{code}"
    # From a file, as a user runs a script (flytekit reads a task function's source), with the
    # repository root as the working directory and first on sys.path, as `python -c` has it.
    script = tmp_path / "readme_section.py"
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
    assert proc.returncode == 0, f"README section {section!r}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize(("section", "command"), [line for line in LINES if RUNS.match(line[1])])
def test_command_lines_run(section: str, command: str) -> None:
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"README section {section!r}: {command}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


def test_every_line_and_block_runs_or_says_why_not() -> None:
    unexplained = [c for _, c in LINES if not RUNS.match(c) and c not in EXEMPT_LINES]
    assert unexplained == [], "a README shell line that neither runs here nor is exempted (EXEMPT_LINES)"
    other = [(b.section, b.language) for b in BLOCKS if b.language not in ("python", "sh")]
    assert sorted(set(other) - set(EXEMPT_BLOCKS)) == []
    # No stale exemption: each names something the README still says.
    assert sorted(set(EXEMPT_LINES) - {c for _, c in LINES}) == []
    assert sorted(set(EXEMPT_BLOCKS) - set(other)) == []
    assert SECTIONS and any(RUNS.match(c) for _, c in LINES)


def test_names_the_readme_uses_are_public() -> None:
    text = README.read_text()
    used = set(re.findall(r"\bei\.([A-Za-z_]\w*)", text))
    used |= {n.strip() for m in re.findall(r"from elastic_idl import ([\w, ]+)", text) for n in m.split(",")}
    assert sorted(used - set(elastic_idl.__all__)) == []


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
    for path in (ROOT / "Makefile", README):
        chaos_lines = [ln for ln in path.read_text().splitlines() if "make chaos" in ln]
        assert chaos_lines and all(f"{minutes} minutes" in ln for ln in chaos_lines if "minute" in ln), chaos_lines
        assert any(f"{minutes} minutes" in ln for ln in chaos_lines), (path, chaos_lines)
        assert not re.search(r"about an hour|about 45 minutes|\b28 minutes", path.read_text()), path
