"""The elastic-idl CLI, run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import elastic_idl as ei

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.yaml"


def cli(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "elastic_idl.cli", *args], input=stdin, capture_output=True, timeout=timeout
    )


def test_help_for_every_command() -> None:
    out = cli("--help")
    assert out.returncode == 0 and b"130 interrupted" in out.stdout
    for command in ("validate", "convert", "launch-config", "render", "env", "run"):
        sub = cli(command, "--help")
        assert sub.returncode == 0, command
        assert b"usage: elastic-idl " + command.encode() in sub.stdout


def test_validate_ok_and_violations(tmp_path: Path) -> None:
    assert cli("validate", str(DEMO)).returncode == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"elasticConfig": {"minReplicas": 3, "maxReplicas": 2, "nprocPerNode": 0}}))
    out = cli("validate", str(bad))
    assert out.returncode == 1
    lines = out.stderr.decode().strip().splitlines()
    assert lines == [
        "elastic_config.max_replicas: elastic.min_le_max: max_replicas 2 is below min_replicas 3",
        "elastic_config.nproc_per_node: elastic.nproc.min: must be >= 1 (or set nproc_policy auto/cpu/gpu), got 0",
    ]


def test_usage_and_decode_errors(tmp_path: Path) -> None:
    assert cli("validate").returncode == 2
    assert cli("frobnicate").returncode == 2
    garbled = tmp_path / "x.json"
    garbled.write_text('{"elasticConfig": {"maxReplicas": "three"}}')
    out = cli("validate", str(garbled))
    assert out.returncode == 1
    assert out.stderr.decode().startswith("elastic-idl: error: elastic_config.max_replicas: expected an integer")
    assert b"Traceback" not in out.stderr
    missing = cli("validate", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and b"nope.yaml" in missing.stderr and b"Traceback" not in missing.stderr


@pytest.mark.parametrize("fmt", ["json", "textproto", "binary", "yaml", "custom"])
def test_convert_round_trips_through_stdin(fmt: str) -> None:
    task = ei.decode(DEMO.read_bytes())
    out = cli("convert", str(DEMO), "--to", fmt)
    assert out.returncode == 0, out.stderr
    back_fmt = "json" if fmt == "custom" else fmt
    back = cli("convert", "-", "--format", back_fmt, "--to", "binary", stdin=out.stdout)
    assert back.returncode == 0, back.stderr
    assert ei.decode(back.stdout, format="binary") == task


def test_convert_upstream_refuses_extensions() -> None:
    out = cli("convert", str(DEMO), "--to", "custom", "--upstream")
    assert out.returncode == 1 and b"elastic_config.join_timeout" in out.stderr
    lossy = cli("convert", str(DEMO), "--to", "custom", "--upstream", "--allow-loss")
    assert lossy.returncode == 0
    assert "joinTimeout" not in json.loads(lossy.stdout)["elasticConfig"]
    assert b"SkewWarning" in lossy.stderr


def test_launch_config_with_operator_env() -> None:
    out = cli("launch-config", str(DEMO), "--env", "PET_RDZV_ENDPOINT=demo-worker-0:23456", "--env", "PET_NNODES=1:1")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["rdzv_endpoint"] == "demo-worker-0:23456"
    assert data["nproc_per_node"] == 2 and data["rdzv_configs"] == {"join_timeout": 60}
    assert b"note: rdzv_endpoint: env wins" in out.stderr


def test_render_and_env() -> None:
    assert cli("render", str(DEMO), "--name", "demo", "--image", "img:1").returncode == 2  # no entrypoint
    out = cli("render", str(DEMO), "--name", "demo", "--image", "img:1", "--", "train.py", "--epochs", "3")
    assert out.returncode == 0, out.stderr
    job = yaml.safe_load(out.stdout)
    assert job["kind"] == "PyTorchJob"
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 1
    env = cli("env", str(DEMO), "--name", "demo", "--image", "img:1", "--replica", "0")
    assert env.returncode == 0, env.stderr
    pairs = dict(line.split("=", 1) for line in env.stdout.decode().splitlines())
    assert pairs["PET_RDZV_ENDPOINT"] == "demo-worker-0:23456"
    assert pairs["PET_NNODES"] == "1:1"
    bad = cli("render", str(DEMO), "--name", "Not_A_DNS_Name", "--image", "img:1", "--", "train.py")
    assert bad.returncode == 1 and b"name" in bad.stderr


ALLREDUCE = """
import sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {int(t.item())} args {sys.argv[1:]}", flush=True)
if dist.get_rank() == 1 and "--fail" in sys.argv:
    sys.exit(7)
dist.destroy_process_group()
"""


def test_run_launches_locally_and_reports(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    out = cli("run", str(DEMO), "--", str(script), "--lr", "0.1")
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    text = out.stdout.decode()
    assert "rank 0 of 2 sum 3 args ['--lr', '0.1']" in text
    assert "rank 1 of 2 sum 3" in text
    assert b"attempt 0: started 2 workers" in out.stderr


def test_run_failure_exits_3_with_a_failure_report(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    task = tmp_path / "task.yaml"
    task.write_text(DEMO.read_text().replace("max_restarts: 1", "max_restarts: 0"))
    report = tmp_path / "failure.json"
    out = cli("run", str(task), "--failure-file", str(report), "--", str(script), "--fail")
    assert out.returncode == 3, out.stderr.decode()[-2000:]
    message = out.stderr.split(b"elastic-idl: error:")[-1]
    assert b"root cause: rank 1" in message and b"exit code 7" in message
    assert b"SystemExit: 7" in message  # the worker's own traceback comes with it
    failures = json.loads(report.read_text())["failures"]
    assert failures[0]["rank"] == 1 and failures[0]["exitCode"] == 7


def test_torchrun_drop_in(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    out = cli("torchrun", "--nproc_per_node=2", "--max-restarts", "0", str(script), "x")
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert "rank 0 of 2 sum 3 args ['x']" in out.stdout.decode()
    bad = cli("torchrun", "--log-dir", str(tmp_path), str(script))
    assert bad.returncode == 1 and b"--log-dir" in bad.stderr


# --------------------------------------------------------------------------- hostile and malformed input (issue #9)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in-process (same entry point as the console script); (exit code, stdout, stderr)."""
    from elastic_idl.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _alias_bomb(levels: int = 7) -> str:
    anchors = ["&a0 [" + ", ".join(["lol"] * 9) + "]"]
    anchors += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "elastic_config:\n  min_replicas: [" + ", ".join(anchors) + "]\n"


def _one_line_error(out: subprocess.CompletedProcess[bytes] | tuple[int, str, str], expected: str) -> str:
    if isinstance(out, tuple):
        code, _, err = out
    else:
        code, err = out.returncode, out.stderr.decode()
    assert code == 1, err[-2000:]
    assert "Traceback" not in err and err.count("\n") == 1 and len(err) < 700, err[-2000:]
    assert err.startswith("elastic-idl: error: ") and expected in err, err
    return err


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bomb.yaml", _alias_bomb(), "aliases expand to more than 1000 nodes (yaml, line 2, column"),
        (
            "deep.json",
            '{"elasticConfig": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested deeper than 100 levels (json",
        ),
        (
            "deep.yaml",
            "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 1000)),
            "nested deeper than 100 levels (yaml",
        ),
    ],
    ids=["alias-bomb", "deep-json", "deep-yaml"],
)
def test_hostile_files_are_one_line_and_exit_1(tmp_path: Path, name: str, content: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    _one_line_error(cli("validate", str(path), timeout=60), expected)


def test_unbounded_sources_are_capped(tmp_path: Path) -> None:
    _one_line_error(cli("validate", "/dev/zero", timeout=60), "larger than 1,048,576 bytes")
    _one_line_error(cli("validate", "-", stdin=b" " * (2 << 20), timeout=60), "larger than 1,048,576 bytes")
    out = cli("pod", "--task-file", "/dev/zero", "--", "train.py", timeout=60)
    assert out.returncode == 1 and out.stderr.count(b"\n") == 1 and b"larger than 1,048,576 bytes" in out.stderr
    template = tmp_path / "template.yaml"
    template.write_text("custom:\n  " + _alias_bomb().replace("\n  ", "\n    "))
    out = cli("pod", "--task-template", str(template), "--", "train.py", timeout=60)
    assert out.returncode == 1 and b"aliases expand" in out.stderr and b"Traceback" not in out.stderr


def test_pod_env_task_is_capped(capsys: pytest.CaptureFixture[str]) -> None:
    from elastic_idl.pod import pod_main

    env = {"ELASTIC_IDL_TASK": '{"elasticConfig": {}}' + " " * (1 << 20)}
    assert pod_main(["--", "train.py"], environ=env) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ELASTIC_IDL_TASK" not in err and "larger than 1,048,576 bytes" in err


# (file name, content, the error: the real parser's, with its position)
REAL_ERRORS = [
    ("syntax.yaml", "elastic_config:\n  min_replicas: [1, 2\n", "malformed YAML: while parsing a flow sequence"),
    (
        "tabs.yaml",
        "elastic_config:\n\tmin_replicas: 1\n",
        "found character '\\t' that cannot start any token (yaml, line 2, column 1)",
    ),
    ("two.yaml", "a: 1\n---\nb: 2\n", "but found another document (yaml, line 2, column 1)"),
    ("list.json", "[1, 2, 3]", "expected an object of task fields at the top level, got list (json)"),
    ("num.json", "42", "got int (json)"),
    ("null.json", "null", "got null (json)"),
    (
        "comma.json",
        '{"elasticConfig": {"minReplicas": 1,}}',
        "malformed JSON: Expecting property name enclosed in double quotes (json, line 1, column 37)",
    ),
    (
        "task.textproto",
        "elastic_config {\n  min_replicas: x\n}\n",
        "bad textproto: Couldn't parse integer: x (textproto, line 2, column 17)",
    ),
    ("tabs.txtpb", "elastic_config:\n\tmin_replicas: 1\n", "bad textproto:"),
    ("task.pb", "\x0f", "wire type 7 does not exist (garbled, or not protobuf) (binary, byte 0)"),
    ("noext", "elastic_config:\n\tmin_replicas: 1\n", "(yaml, line 2, column 1)"),
]


@pytest.mark.parametrize(("name", "content", "expected"), REAL_ERRORS, ids=[r[0] for r in REAL_ERRORS])
def test_errors_name_the_real_parser_and_the_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    _one_line_error(_main(capsys, "validate", str(path)), expected)


def test_extension_format_flag_and_encodings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    yaml_text = "elastic_config:\n  min_replicas: 1\n  max_replicas: 2\n  nproc_per_node: 1\n"
    as_textproto = tmp_path / "task.textproto"
    as_textproto.write_text(yaml_text)
    # the extension says textproto: textproto's error, not a guess
    _one_line_error(_main(capsys, "validate", str(as_textproto)), "bad textproto:")
    # --format wins over the extension
    assert _main(capsys, "validate", str(as_textproto), "--format", "yaml")[0] == 0
    utf16 = tmp_path / "task.yaml"
    utf16.write_bytes(yaml_text.encode("utf-16"))
    _one_line_error(_main(capsys, "validate", str(utf16)), "the input is UTF-16 text")
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"elastic_config:\n  rdzv_id: caf\xe9\n")
    _one_line_error(_main(capsys, "validate", str(latin1)), "not valid UTF-8: byte 0xe9 (invalid continuation byte")
    _one_line_error(_main(capsys, "validate", str(latin1), "--format", "json"), "(json, line 2, column 15, byte 30)")


@pytest.mark.parametrize(
    ("content", "rules"),
    [
        (b"", ["task.not_empty", "replicas.workers_required"]),
        (b"{}", ["task.not_empty", "replicas.workers_required"]),
        (b"worker_replicas { replicas: 0 }", ["replicas.workers_required"]),
        (b"master_replicas { replicas: 1 }", ["replicas.workers_required"]),
        (b"worker_replicas { replicas: 1 image: 'a b' }", ["replicas.image.format"]),
    ],
    ids=["empty", "empty-object", "zero-workers", "master-only", "image"],
)
def test_validate_rejects_what_render_refuses(content: bytes, rules: list[str], tmp_path: Path) -> None:
    path = tmp_path / "task"
    path.write_bytes(content)
    for args in (("validate", str(path)), ("render", str(path), "--name", "j", "--image", "i", "--", "t.py")):
        out = cli(*args)
        assert out.returncode == 1 and b"Traceback" not in out.stderr, out.stderr
        lines = out.stderr.decode().splitlines()
        assert len(lines) == len(rules) and all(f"{rule}: " in line for rule, line in zip(rules, lines, strict=True))
    assert cli("validate", "/dev/null").returncode == 1


def test_run_of_a_valid_task_without_elastic_config_says_it_is_a_launch_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "task.json"
    path.write_text('{"workerReplicas": {"replicas": 2}}')
    assert _main(capsys, "validate", str(path))[:2] == (0, "valid\n")
    code, _, err = _main(capsys, "run", str(path), "--", "train.py")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("elastic_config: launch.elastic_required:") and "not a validity rule" in err


def test_many_violations_are_listed_up_to_a_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "task.textproto"
    options = 'rdzv_options { key: "" } ' * 5000
    path.write_text(f"elastic_config {{ min_replicas: 1 max_replicas: 1 nproc_per_node: 1 {options}}}")
    code, _, err = _main(capsys, "validate", str(path))
    lines = err.splitlines()
    assert code == 1 and len(lines) == 21 and lines[-1] == "... and 4980 more violations"


def test_pod_task_template_reads_json_with_tabs_and_bounded_yaml(tmp_path: Path) -> None:
    from elastic_idl.pod import build_parser, load_task

    custom = {"workerReplicas": {"replicas": 2}}
    template = tmp_path / "template.json"
    template.write_text(json.dumps({"custom": custom, "taskTypeVersion": 1}, indent="\t"))  # YAML refuses tabs
    task, version = load_task(build_parser().parse_args(["--task-template", str(template)]), {})
    assert (task, version) == (ei.from_custom(custom), 1)
    recursive = tmp_path / "template.yaml"
    recursive.write_text("custom: &c\n  workerReplicas: *c\n")
    with pytest.raises(ei.DecodeError, match="recursive"):
        load_task(build_parser().parse_args(["--task-template", str(recursive)]), {})
