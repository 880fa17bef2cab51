"""The worst case from a fault to the job's end (issue 30 item 2): contract/worst_case.json, which the Go
backend passes too (go/elasticidl/worst_case_test.go), the formula recomputed from the terms, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_idl._backend.pytorchjob import ELASTIC_WORKER_RESTART_POLICY, worker_restart_policy
from elastic_idl._backend.worst_case import (
    STUCK_MARGIN_S,
    crash_loop_backoff_s,
    format_seconds,
    parse_ceiling,
    worst_case,
    worst_case_line,
)
from elastic_idl._errors import ValidationError
from elastic_idl._task.codec import decode
from elastic_idl._task.view import TaskView, of

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.yaml"
VECTORS: list[dict[str, Any]] = json.loads((ROOT / "contract" / "worst_case.json").read_text("utf-8"))["vectors"]


def _task(vector: dict[str, Any]) -> TaskView:
    return of(decode(vector["input"], format="json", task_type_version=vector["task_type_version"]))


def test_the_vectors_cover_every_term_and_branch() -> None:
    assert len(VECTORS) >= 20
    cases = [v["worst_case"] for v in VECTORS if v.get("worst_case")]
    assert {w["restart_policy"] for w in cases} == {"Never", "OnFailure", "Always", "ExitCode"}
    assert {w["terms"]["detected_by"] for w in cases} == {"stuck", "peer", "store"}
    assert {w["bounded"] for w in cases} == {True, False}
    assert any(w["terms"]["capped_by_deadline"] and w["per_incarnation_s"] > w["seconds"] for w in cases)
    assert any(w["terms"]["crash_loop_backoff_s"] > 310 for w in cases), "the crash-loop cap"
    assert {v["task_type_version"] for v in VECTORS} == {0, 1}
    assert any(v.get("worst_case", 0) is None for v in VECTORS) and any("error" in v for v in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_worst_case_vectors(vector: dict[str, Any]) -> None:
    """contract/worst_case.json: the Worker's policy the renderer writes, and the worst case with its terms."""
    t = _task(vector)
    policy = worker_restart_policy(t, vector.get("elastic_worker_restart_policy", ELASTIC_WORKER_RESTART_POLICY))
    assert policy == vector["restart_policy"]
    if "error" in vector:
        with pytest.raises(ValidationError) as caught:
            worst_case(t, policy)
        v = caught.value.violations[0]
        assert {"field": v.field, "rule": v.rule} == vector["error"]
        return
    w = worst_case(t, policy)
    assert (None if w is None else w.as_dict()) == vector["worst_case"]


def formula(terms: dict[str, Any], policy: str) -> tuple[float | None, float]:
    """The formula of docs/guide/when-pods-die.md, written again from the inputs among the terms: (T, P)."""
    mon, ka_i, ka_n = terms["monitor_interval_s"], terms["keep_alive_interval_s"], terms["keep_alive_max_attempt"]
    d = max(
        terms["collective_timeout_s"] + mon + STUCK_MARGIN_S,
        ka_i * (ka_n + 1) + mon,
        terms["read_timeout_s"] + ka_i * ka_n + 1 + mon,
    )
    assert terms["leave_s"] == pytest.approx(1.0 + terms["monitor_interval_s"] + terms["stop_s"], rel=1e-12)
    assert terms["rendezvous_s"] == pytest.approx(terms["join_timeout_s"] + terms["cas_backoff_max_s"], rel=1e-12)
    p = terms["rounds"] * (d + terms["stop_s"] + terms["rendezvous_s"]) + terms["leave_s"]
    bl, deadline = terms["backoff_limit"] or 0, terms["active_deadline_s"] or 0
    t: float | None = None
    if policy == "Never":
        t = p
    elif policy in ("OnFailure", "Always") and bl:
        t = (bl + 1) * p + sum(min(10 * 2**i, 300) for i in range(bl))
    if deadline:
        t = deadline if t is None else min(t, deadline)
    return t, p


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.get("worst_case")], ids=lambda v: v["name"])
def test_vector_expectations_follow_the_formula(vector: dict[str, Any]) -> None:
    w = vector["worst_case"]
    t, p = formula(w["terms"], w["restart_policy"])
    assert w["per_incarnation_s"] == pytest.approx(p, rel=1e-12)
    assert w["seconds"] == (None if t is None else pytest.approx(t, rel=1e-12))
    assert w["bounded"] is (t is not None)


def test_crash_loop_backoff_doubles_up_to_the_cap() -> None:
    assert [crash_loop_backoff_s(n) for n in range(8)] == [0, 10, 30, 70, 150, 310, 610, 910]
    assert crash_loop_backoff_s(2**31 - 1) == 310 + 300 * (2**31 - 1 - 5)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("3600s", 3600), ("1h", 3600), ("1h30m", 5400), ("2.5h", 9000), ("600", 600), (" 45s ", 45)],
)
def test_parse_ceiling(text: str, seconds: float) -> None:
    assert parse_ceiling(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "1x", "m", "30m1h", "1h1h", "5 m", "-5s", "1e3", "1h 30m"])
def test_parse_ceiling_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_ceiling(text)


def test_format_seconds() -> None:
    assert [format_seconds(x) for x in (0, 0.2, 59, 60, 3725, 1390.2, 7200)] == [
        "0s",
        "1s",
        "59s",
        "1m",
        "1h 2m 5s",
        "23m 11s",
        "2h",
    ]


def test_an_unknown_restart_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="'Sometimes' is not one of Never, OnFailure, Always, ExitCode"):
        worst_case(_task(VECTORS[0]), "Sometimes")


def test_the_line_says_each_branch() -> None:
    by_name = {v["name"]: v for v in VECTORS}

    def line(name: str) -> str:
        v = by_name[name]
        return worst_case_line(worst_case(_task(v), v["restart_policy"]))

    assert line("defaults_never") == (
        "worst case from a fault to the job's end: 21m 7s "
        "(1 round x (detect 605.1 s + stop 30 s + rendezvous 600 s) + leave 31.1 s; restartPolicy Never)"
    )
    assert line("defaults_exit_code").startswith(
        "worst case from a fault to the job's end: unbounded (restartPolicy ExitCode re-creates a pod that exits "
        ">= 128 without a count; per pod incarnation 21m 7s: 1 round x (detect 605.1 s"
    )
    assert "restarts a pod in place without a limit" in line("on_failure_no_backoff")
    assert line("on_failure_backoff_1") == (
        "worst case from a fault to the job's end: 2h 4m 43s (2 pod incarnations x (3 rounds x (detect 605.1 s + "
        "stop 30 s + rendezvous 600 s) + leave 31.1 s) + crash-loop back-off 10 s; restartPolicy OnFailure with "
        "backoff_limit 1)"
    )
    assert line("exit_code_deadline").startswith(
        "worst case from a fault to the job's end: 2h (run_policy.active_deadline_seconds; 4 rounds x"
    )
    assert "not computed (no elastic_config" in line("not_elastic")


# ------------------------------------------------------------------------------------------- the CLI


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from elastic_idl.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _write(tmp_path: Path, name: str) -> Path:
    v = next(v for v in VECTORS if v["name"] == name)
    path = tmp_path / f"{name}.json"
    path.write_text(v["input"])
    return path


def test_validate_prints_valid_then_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "validate", str(DEMO))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "valid" and len(lines) == 2
    assert lines[1].startswith("worst case from a fault to the job's end: unbounded (restartPolicy ExitCode")
    assert "2 rounds x (detect 605.1 s + stop 30 s + rendezvous 60 s)" in lines[1]


def test_validate_json_carries_the_terms(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, "on_failure_backoff_5")
    code, out, _ = _main(capsys, "validate", "--json", str(path))
    assert code == 0
    doc = json.loads(out)
    expected = next(v for v in VECTORS if v["name"] == "on_failure_backoff_5")["worst_case"]
    assert doc == {"valid": True, "worst_case": expected}


def test_max_worst_case_refuses_above_the_ceiling(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, "defaults_exit_code")  # unbounded: above any ceiling
    code, out, err = _main(capsys, "validate", str(path), "--max-worst-case", "90m")
    assert (code, out) == (1, "")
    assert err == (
        "worst_case.max: the worst case from a fault to the job's end is unbounded under restartPolicy ExitCode, "
        "above the ceiling 90m (5400 s, --max-worst-case)\n"
    )
    bounded = _write(tmp_path, "on_failure_backoff_1")  # 7482.8 s
    assert _main(capsys, "validate", str(bounded), "--max-worst-case", "2h")[0] == 1
    code, out, _ = _main(capsys, "validate", str(bounded), "--max-worst-case", "7483s")
    assert code == 0 and out.startswith("valid\n")


def test_max_worst_case_that_is_no_duration_is_a_bad_option_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "validate", str(DEMO), "--max-worst-case", "ten minutes")
    assert (code, out) == (1, "")
    assert err.startswith("elastic-idl: error: --max-worst-case: 'ten minutes' is not a duration")


def test_render_prints_the_line_on_stderr_and_the_manifest_stays_yaml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write(tmp_path, "on_failure_backoff_1")
    code, out, err = _main(capsys, "render", str(path), "--name", "job", "--image", "img:1", "--", "train.py")
    assert code == 0
    assert yaml.safe_load(out)["kind"] == "PyTorchJob"
    assert err.startswith("worst case from a fault to the job's end: 2h 4m 43s (2 pod incarnations")
    assert err.count("\n") == 1


def test_render_reads_stdin_once_and_refuses_above_the_ceiling(tmp_path: Path) -> None:
    path = _write(tmp_path, "defaults_never")
    base = [
        sys.executable,
        "-m",
        "elastic_idl.cli",
        "render",
        "-",
        "--format",
        "json",
        "--name",
        "job",
        "--image",
        "i:1",
    ]
    ok = subprocess.run([*base, "--", "train.py"], input=path.read_bytes(), capture_output=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert yaml.safe_load(ok.stdout)["kind"] == "PyTorchJob"
    refused = subprocess.run(
        [*base, "--max-worst-case", "20m", "--", "train.py"], input=path.read_bytes(), capture_output=True, timeout=120
    )
    # The renderer writes ExitCode for the zero value: unbounded, above 20m; nothing on stdout.
    assert (refused.returncode, refused.stdout) == (1, b"")
    assert refused.stderr.decode().startswith(
        "worst_case.max: the worst case from a fault to the job's end is unbounded under restartPolicy ExitCode"
    )


def test_a_keep_alive_option_torch_cannot_read_is_not_computed_and_refused_under_a_ceiling(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The task is valid by the rules (validate exits 0) but its worst case cannot be computed: the line says why;
    under --max-worst-case it cannot be shown to be below the ceiling, so it is refused with that violation."""
    path = _write(tmp_path, "keep_alive_not_a_number")
    why = "elastic_config.rdzv_options[keep_alive_interval]: worst_case.keep_alive: '5s' is not a whole number"
    code, out, _ = _main(capsys, "validate", str(path))
    assert code == 0 and out.startswith(f"valid\nworst case from a fault to the job's end: not computed ({why}")
    code, out, _ = _main(capsys, "validate", "--json", str(path))
    doc = json.loads(out)
    assert code == 0 and doc["worst_case"] is None and doc["worst_case_not_computed"].startswith(why)
    code, out, err = _main(capsys, "validate", str(path), "--max-worst-case", "1h")
    assert (code, out) == (1, "")
    assert err.startswith(why)


def test_the_lines_the_docs_show_are_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """docs/guide/when-pods-die.md quotes validate's line for the demo and an OnFailure task, and the refusal."""
    page = (ROOT / "docs" / "guide" / "when-pods-die.md").read_text()
    shown = " ".join(page.split())  # the page wraps its lines
    demo = _main(capsys, "validate", str(DEMO))[1].splitlines()[1]
    assert f"`{demo}`" in shown
    task = tmp_path / "on_failure.yaml"
    task.write_text(
        "worker_replicas: {replicas: 2, restart_policy: OnFailure}\nrun_policy: {backoff_limit: 3}\n"
        "elastic_config: {min_replicas: 2, max_replicas: 2, nproc_per_node: 1, max_restarts: 1, join_timeout: 900s}\n"
    )
    line = _main(capsys, "validate", str(task))[1].splitlines()[1]
    assert f"`{line.split(': ', 1)[1]}`" in shown
    err = _main(capsys, "validate", str(DEMO), "--max-worst-case", "90m")[2]
    assert f"`{err.strip()}`" in shown
