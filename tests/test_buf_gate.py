"""The schema gates work: `buf breaking` (FILE rules, against the committed
baseline image) and `buf lint` (STANDARD + COMMENTS), tried on a temporary copy
of the buf module with one edit each."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ELASTIC = "protos/elastic_idl/plugins/v1/elastic.proto"
KUBEFLOW = "protos/elastic_idl/plugins/kubeflow/v1/pytorch.proto"
COMMON = "protos/elastic_idl/plugins/kubeflow/v1/common.proto"
BASELINE = "buf/baseline.binpb"


@pytest.fixture
def module(tmp_path: Path, repo_root: Path) -> Path:
    """A copy of the buf workspace (buf.yaml + protos/) to edit."""
    shutil.copytree(repo_root / "protos", tmp_path / "protos")
    shutil.copy(repo_root / "buf.yaml", tmp_path / "buf.yaml")
    return tmp_path


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not found once in {rel}"
    path.write_text(text.replace(old, new))


def _buf(buf_bin: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([buf_bin, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _breaking(buf_bin: str, module: Path, repo_root: Path) -> tuple[int, list[dict[str, object]]]:
    proc = _buf(buf_bin, module, "breaking", "--against", str(repo_root / BASELINE), "--error-format", "json")
    issues = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0 or issues, proc.stderr
    return proc.returncode, issues


def test_baseline_is_committed_and_current_schema_passes(buf_bin: str, module: Path, repo_root: Path) -> None:
    assert (repo_root / BASELINE).stat().st_size > 1000
    code, issues = _breaking(buf_bin, module, repo_root)
    assert (code, issues) == (0, [])


def test_renumbering_a_field_is_caught_and_named(buf_bin: str, module: Path, repo_root: Path) -> None:
    _edit(module, ELASTIC, "int32 max_replicas = 3;", "int32 max_replicas = 30;")
    assert _buf(buf_bin, module, "build").returncode == 0  # still a valid schema: only the gate objects
    code, issues = _breaking(buf_bin, module, repo_root)
    assert code != 0
    messages = [str(i["message"]) for i in issues]
    assert any('"max_replicas"' in m and '"ElasticConfig"' in m and '"3"' in m for m in messages), messages
    assert {i["path"] for i in issues} == {ELASTIC}
    # The human-readable form names it as well (what `make test` prints).
    text = _buf(buf_bin, module, "breaking", "--against", str(repo_root / BASELINE))
    assert text.returncode != 0
    assert "max_replicas" in text.stdout


BREAKS = [
    # (id, file, old, new, buf rule expected)
    ("rename_field", ELASTIC, "int32 min_replicas = 2;", "int32 min_nodes = 2;", "FIELD_SAME_NAME"),
    ("change_type", ELASTIC, "int32 max_restarts = 5;", "int64 max_restarts = 5;", "FIELD_SAME_TYPE"),
    ("delete_field", KUBEFLOW, "  RunPolicy run_policy = 3;\n", "", "FIELD_NO_DELETE"),
    ("renumber_enum_value", COMMON, "CLEANPOD_POLICY_ALL = 2;", "CLEANPOD_POLICY_ALL = 3;", "ENUM_VALUE_NO_DELETE"),
]


@pytest.mark.parametrize(("file", "old", "new", "rule"), [b[1:] for b in BREAKS], ids=[b[0] for b in BREAKS])
def test_other_breaking_changes_are_caught(
    buf_bin: str, module: Path, repo_root: Path, file: str, old: str, new: str, rule: str
) -> None:
    _edit(module, file, old, new)
    code, issues = _breaking(buf_bin, module, repo_root)
    assert code != 0
    assert rule in {i["type"] for i in issues}, issues


def test_compatible_addition_passes(buf_bin: str, module: Path, repo_root: Path) -> None:
    _edit(
        module,
        ELASTIC,
        "  bool virtual_local_rank = 118;\n",
        "  bool virtual_local_rank = 118;\n\n"
        "  // A new setting for the gate test. Default false.\n"
        "  bool gate_test_flag = 900;\n",  # a number no field has (new fields take the next ones)
    )
    assert (module / ELASTIC).read_text().count("= 900;") == 1
    code, issues = _breaking(buf_bin, module, repo_root)
    assert (code, issues) == (0, [])
    assert _buf(buf_bin, module, "lint").returncode == 0


def test_reserving_a_deleted_field_still_breaks_under_file_rules(buf_bin: str, module: Path, repo_root: Path) -> None:
    # FILE rules are strict on purpose: a removed field must go through a new
    # baseline (a release), even when its number and name are reserved.
    _edit(module, KUBEFLOW, "  RunPolicy run_policy = 3;\n", '  reserved 3;\n  reserved "run_policy";\n')
    code, issues = _breaking(buf_bin, module, repo_root)
    assert code != 0
    assert "FIELD_NO_DELETE" in {i["type"] for i in issues}


def test_current_schema_is_lint_clean_and_formatted(buf_bin: str, module: Path) -> None:
    lint = _buf(buf_bin, module, "lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _buf(buf_bin, module, "format", "-d", "--exit-code")
    assert fmt.returncode == 0, fmt.stdout


def _drop_comment_above(root: Path, rel: str, anchor: str) -> None:
    """Remove the `//` lines right above the line that holds ``anchor``."""
    path = root / rel
    lines = path.read_text().splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if anchor in line]
    top = at
    while top > 0 and lines[top - 1].lstrip().startswith("//"):
        top -= 1
    assert top < at, f"no comment above {anchor!r}"
    path.write_text("".join(lines[:top] + lines[at:]))


def _lint_issues(buf_bin: str, module: Path) -> list[dict[str, object]]:
    lint = _buf(buf_bin, module, "lint", "--error-format", "json")
    assert lint.returncode != 0
    return [json.loads(line) for line in lint.stdout.splitlines() if line.strip()]


def test_lint_fails_when_a_field_comment_is_removed(buf_bin: str, module: Path) -> None:
    _drop_comment_above(module, ELASTIC, "string role = 111;")
    issues = _lint_issues(buf_bin, module)
    assert [(i["type"], i["path"]) for i in issues] == [("COMMENT_FIELD", ELASTIC)]
    assert '"role"' in str(issues[0]["message"])


def test_lint_fails_when_a_message_comment_is_removed(buf_bin: str, module: Path) -> None:
    _drop_comment_above(module, COMMON, "message RunPolicy {")
    issues = _lint_issues(buf_bin, module)
    assert [(i["type"], i["path"]) for i in issues] == [("COMMENT_MESSAGE", COMMON)]
    assert '"RunPolicy"' in str(issues[0]["message"])


def test_lint_fails_when_an_enum_value_comment_is_removed(buf_bin: str, module: Path) -> None:
    _drop_comment_above(module, ELASTIC, "START_METHOD_FORK = 2;")
    issues = _lint_issues(buf_bin, module)
    assert [(i["type"], i["path"]) for i in issues] == [("COMMENT_ENUM_VALUE", ELASTIC)]


def test_format_check_fails_on_misformatted_file(buf_bin: str, module: Path) -> None:
    _edit(module, ELASTIC, "  int32 max_restarts = 5;", "  int32   max_restarts=5;")
    fmt = _buf(buf_bin, module, "format", "-d", "--exit-code")
    assert fmt.returncode != 0
    assert "max_restarts" in fmt.stdout
