"""The Go backend (go/): the contract suite through its conformance command, and its generated code.

The conformance command is built once per session (``go build`` into a temporary
directory) and run through the runner's own mechanism, ``CONFORMANCE_CMD`` with
``CONFORMANCE_NAME=go`` (``tests/test_contract.py``): every case, each input
format, every output the Go backend declares. Its section of
``contract/known_failures.yaml`` is empty, so any disagreement with the Python
reference fails. A copy of the module with one rule broken shows that the suite
notices.

Without a Go toolchain the Go tests skip (``make test`` installs one as root or
says once that the Go checks did not run); under ``CI=true`` they fail instead.
The checks of generated files need no Go toolchain and always run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import elastic_idl as ei
import test_contract as tc

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "go"
GEN_GO = GO_DIR / "gen"
GO_ENV = {"GOPROXY": "off", "GOFLAGS": "-mod=mod -p=1"}
#: Outputs the Go backend must declare (launch_spec is the Python runtime's).
GO_OUTPUTS = {"binary_hex", "custom", "violations", "pytorchjob", "pod_env"}
#: Its name in known_failures.yaml.
GO_IMPL = "go"
#: Names a propeller plugin already imports; the generated Go packages may not take them.
PROPELLER_IMPORT_NAMES = {"kubeflowv1", "plugins", "kfplugins", "core", "flyteIdlCore", "pluginsCore"}


def _pinned_protoc_gen_go() -> str:
    m = re.search(r"^PROTOC_GEN_GO_VERSION=(\S+)$", (REPO / "scripts" / "gen.sh").read_text(), re.M)
    assert m, "scripts/gen.sh pins PROTOC_GEN_GO_VERSION"
    return m.group(1)


def _go_env() -> dict[str, str]:
    return {**os.environ, **GO_ENV}


@pytest.fixture(scope="session")
def go_bin() -> str:
    """The go command, or a skip (a failure under CI=true, where the Go checks must run)."""
    go = shutil.which("go")
    ready = go is not None and os.environ.get("ELASTIC_IDL_GO") != "skip"
    if ready:
        probe = subprocess.run(
            [str(go), "list", "./..."], cwd=GO_DIR, env=_go_env(), capture_output=True, text=True, check=False
        )
        ready = probe.returncode == 0
    if not ready or go is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the Go checks must run, but the Go toolchain is missing (scripts/go_toolchain.sh)")
        pytest.skip("no Go toolchain (scripts/go_toolchain.sh ensure installs it)")
    return go


def _build(go: str, module: Path, out: Path) -> Path:
    binary = out / "elastic-conformance"
    proc = subprocess.run(
        [go, "build", "-o", str(binary), "./cmd/elastic-conformance"],
        cwd=module,
        env=_go_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return binary


@pytest.fixture(scope="session")
def go_conformance(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go conformance command, built once per session."""
    return _build(go_bin, GO_DIR, tmp_path_factory.mktemp("go-conformance"))


def _run_as_conformance_cmd(
    binary: Path, input_format: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, object], list[str]]:
    """The runner's own path: CONFORMANCE_CMD / CONFORMANCE_NAME, then its comparison."""
    monkeypatch.setenv("CONFORMANCE_CMD", str(binary))
    monkeypatch.setenv("CONFORMANCE_NAME", GO_IMPL)
    cmd, impl = tc._conformance_command()
    assert (cmd, impl) == ([str(binary)], GO_IMPL)
    return tc.conformance_problems(cmd, impl, input_format)


# ----------------------------------------------------------------- the contract, on the Go backend


@pytest.mark.parametrize("input_format", ["textproto", "json", "binary_hex"])
def test_go_backend_passes_the_contract(
    go_conformance: Path, input_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    response, problems = _run_as_conformance_cmd(go_conformance, input_format, monkeypatch)
    outputs = set(response["outputs"])  # type: ignore[arg-type]
    assert GO_OUTPUTS <= outputs, f"the Go backend declares too few outputs: {sorted(GO_OUTPUTS - outputs)} missing"
    assert not problems, f"go ({input_format}): {len(problems)} mismatches:\n" + "\n".join(problems)


def test_go_known_failures_stay_empty() -> None:
    """A disagreement between Go and Python is a failing test, never an entry."""
    assert GO_IMPL in tc.KNOWN_FAILURES, "known_failures.yaml has a go section"
    assert tc.KNOWN_FAILURES[GO_IMPL] == {}


def test_a_broken_go_rule_fails_the_suite(go_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the module whose min <= max rule never fires: the suite names every case that pins it."""
    module = tmp_path / "go"
    shutil.copytree(GO_DIR, module)
    validate = module / "elasticidl" / "validate.go"
    rule = "if e.GetMinReplicas() > e.GetMaxReplicas() {"
    text = validate.read_text()
    assert text.count(rule) == 1, "the rule this test breaks moved: update the test"
    validate.write_text(text.replace(rule, "if false && e.GetMinReplicas() > e.GetMaxReplicas() {"))
    binary = _build(go_bin, module, tmp_path)
    _, problems = _run_as_conformance_cmd(binary, "textproto", monkeypatch)
    pinning = {
        name
        for name in tc.TASK_CASES
        if any(v["rule"] == "elastic.min_le_max" for v in tc.EXPECTED[name].get("violations", []))
    }
    assert len(pinning) >= 2
    broken = {p.split(":", 1)[0] for p in problems}
    assert {f"{name}.violations" for name in pinning} <= broken, problems
    assert {b.split(".", 1)[0] for b in broken} == pinning, problems


def test_go_conformance_usage_and_bad_request(go_conformance: Path) -> None:
    ok = subprocess.run([str(go_conformance), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert ok.returncode == 0 and "usage" in ok.stdout
    for request in ('{"version": 99}', "not json", "[]", '{"version": 1, "cases": [{"name": "x"}]}'):
        bad = subprocess.run(
            [str(go_conformance)], input=request, capture_output=True, text=True, timeout=60, check=False
        )
        assert bad.returncode == 2, request
        assert bad.stderr.startswith("conformance: bad request: "), bad.stderr
        assert "panic" not in bad.stderr


# ----------------------------------------------------------------- generated Go (no toolchain needed)


def test_go_tables_are_fresh() -> None:
    """go/elasticidl/tables_gen.go is what scripts/gen_go_tables.py writes from the Python reference now."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_go_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_go_tables_hold_every_rule() -> None:
    text = (GO_DIR / "elasticidl" / "tables_gen.go").read_text()
    go_rules = re.findall(r'^\t\{"([a-z_.]+)", ', text[text.index("var Rules") :], re.M)
    assert go_rules[: len(ei.RULES)] == list(ei.RULES)


def test_generated_go_headers_and_packages() -> None:
    """Every generated file names the pinned protoc-gen-go; no package name clashes with a propeller import."""
    pin = _pinned_protoc_gen_go()
    files = sorted(GEN_GO.rglob("*.pb.go"))
    protos = sorted((REPO / "protos").rglob("*.proto"))
    assert len(files) == len(protos)
    module = re.search(r"^module (\S+)$", (GO_DIR / "go.mod").read_text(), re.M)
    assert module
    for f in files:
        text = f.read_text()
        assert text.startswith("// Code generated by protoc-gen-go. DO NOT EDIT.\n"), f
        assert f"// \tprotoc-gen-go {pin}\n" in text, f"{f}: not generated by protoc-gen-go {pin}"
        package = re.search(r"^package (\w+)$", text, re.M)
        assert package and package.group(1).startswith("eidl"), f
        assert package.group(1) not in PROPELLER_IMPORT_NAMES
        for imported in re.findall(r'"(github\.com/[^"]+)"', text):
            assert imported.startswith(module.group(1) + "/gen/"), imported


def test_gen_refuses_another_protoc_gen_go(tmp_path: Path) -> None:
    """One line, before anything is written, when protoc-gen-go is not the pinned version."""
    fake = tmp_path / "protoc-gen-go"
    fake.write_text("#!/bin/sh\necho protoc-gen-go v1.99.0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(REPO / "scripts" / "gen.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "v1.99.0" in lines[0] and f"pinned {_pinned_protoc_gen_go()}" in lines[0]
