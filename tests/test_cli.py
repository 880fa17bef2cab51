"""The elastic-idl CLI, run as a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    assert out.returncode == 0 and b"128+N stopped by signal N (130 SIGINT, 143 SIGTERM)" in b" ".join(
        out.stdout.split()
    )
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
    assert lossy.stderr.startswith(b"elastic-idl: warning: dropped for upstream readers:")


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
    bad = cli("torchrun", "--logs-specs", "custom", str(script))
    assert bad.returncode == 1 and b"--logs-specs" in bad.stderr


def test_torchrun_drop_in_writes_a_failure_report_with_its_own_option(tmp_path: Path) -> None:
    """Issue 18 item 9: ``--elastic-idl-failure-file PATH`` right after ``torchrun``; torchrun's
    flags follow, and everything after the script stays the script's."""
    script = tmp_path / "fail.py"
    script.write_text(
        "import os, sys\n"
        "import torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 1:\n"
        "    raise ValueError(f'rank 1 fails with {sys.argv[1:]}')\n"
        "dist.barrier()\n"
    )
    report = tmp_path / "out" / "report.json"
    line = ("--nproc-per-node=2", str(script), "--elastic-idl-failure-file", "mine")
    out = cli("torchrun", "--elastic-idl-failure-file", str(report), *line)
    assert out.returncode == 3, out.stderr.decode()[-2000:]
    first = json.loads(report.read_text())["failures"][0]
    assert first["rank"] == 1
    assert first["message"] == "ValueError: rank 1 fails with ['--elastic-idl-failure-file', 'mine']"
    # the same option among torchrun's flags, torchrun's own spelling, or an unknown one: usage, with the way
    for argv in (
        ("--nproc-per-node=2", "--elastic-idl-failure-file", str(report), str(script)),
        ("--failure-file", str(report), str(script)),
        ("--elastic-idl-failure", str(report), str(script)),
        ("--elastic-idl-failure-file=", str(script)),
    ):
        bad = cli("torchrun", *argv)
        assert bad.returncode == 2, (argv, bad.stderr)
        assert b"--elastic-idl-failure-file PATH" in bad.stderr, (argv, bad.stderr)
    assert b"--elastic-idl-failure-file PATH" in cli("torchrun", "--help").stdout


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
    code, out, _ = _main(capsys, "validate", str(path))
    assert (code, out.splitlines()[0]) == (0, "valid")
    assert "not computed (no elastic_config" in out.splitlines()[1]  # the worst case is the launcher's
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


# ---------------------------------------------------------------- issue #9: the CLI

#: The installed console script: unlike ``python -m elastic_idl.cli``, it does not put the
#: working directory on sys.path (what users run).
CONSOLE = Path(sys.executable).parent / "elastic-idl"


def console(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return subprocess.run(
        [str(CONSOLE), *args], capture_output=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})}
    )


def test_torchrun_help_prints_the_drop_ins_help_and_exits_0() -> None:
    for flag in ("--help", "-h"):
        out = cli("torchrun", flag)
        assert out.returncode == 0, out.stderr
        text = out.stdout.decode()
        assert text.startswith("usage: elastic-idl torchrun")
        for needle in ("--nnodes", "--node-rank", "--log-dir", "Refused", "--logs-specs", "Exit codes"):
            assert needle in text, needle
    # after the script, -h is the script's: torchrun's rule
    assert cli("torchrun", "--nnodes=3:1", "t.py", "-h").returncode == 1


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        ([], 2),  # no script: torchrun's parser rejects it
        (["--nproc-per-node=2"], 2),
        (["--bogus", "t.py"], 2),
        (["--use-env", "t.py"], 2),  # torch.distributed.launch's flag, not torchrun's
        (["--max-restarts=x", "t.py"], 2),
        (["--nnodes=3:1", "t.py"], 1),  # torchrun parses it; the task breaks a rule
        (["--logs-specs=custom", "t.py"], 1),  # torchrun takes it; the schema cannot hold it
        (["--no-python", "t.sh"], 1),  # torchrun runs it; the drop-in cannot
    ],
)
def test_torchrun_usage_is_2_and_invalid_input_is_1(argv: list[str], code: int) -> None:
    out = cli("torchrun", *argv)
    assert out.returncode == code, out.stderr
    assert b"Traceback" not in out.stderr
    if code == 2:
        assert out.stderr.startswith(b"usage: elastic-idl torchrun")


#: Every command that reads FILE, with what else it needs.
FILE_COMMANDS = [
    ["validate"],
    ["validate", "--strict"],
    ["convert", "--to", "json"],
    ["launch-config"],
    ["render", "--name", "j", "--image", "i", "--", "t.py"],
    ["env", "--name", "j", "--image", "i"],
    ["run", "--", "t.py"],
]


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("typo.yaml", b"elastic_config:\n  max_restart: 1\n", "elastic_config.max_restart: unknown field"),
        ("typo.json", b'{"elasticConfig": {"maxRestart": 1}}', "elastic_config.maxRestart: unknown field"),
        ("typo.textproto", b"elastic_config { max_restart: 1 }", 'has no field named "max_restart"'),
        # a binary task of a newer schema: field 150 of ElasticConfig
        ("newer.pb", bytes.fromhex("220f0a0463313064100118022001b00907"), "elastic_config.150: a field number"),
        ("enum.yaml", b"elastic_config:\n  start_method: START_METHOD_THREAD\n", "unknown StartMethod"),
    ],
    ids=["yaml-key", "json-key", "textproto-key", "binary-field-number", "enum-name"],
)
def test_a_file_gets_one_verdict_from_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, error: str
) -> None:
    """Issue 29 item 8: validate refused nothing the others refuse (it warned and said valid)."""
    path = tmp_path / name
    path.write_bytes(content)
    for command in FILE_COMMANDS:
        code, out, err = _main(capsys, command[0], str(path), *command[1:])
        assert (code, out) == (1, ""), (command, err)
        assert err.startswith("elastic-idl: error: ") and error in err and err.count("\n") == 1, (command, err)
    if name.startswith("typo"):
        assert "did you mean 'max_restarts'?" in err or "did you mean 'maxRestarts'?" in err, err


def test_torchrun_rule_breaks_name_the_flag_with_the_error_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 item 7: the drop-in names the flag (or PET_ variable) the user wrote, keeps the rule id, says error."""
    code, out, err = _main(capsys, "torchrun", "--nnodes=2:1", "--nproc_per_node", "0", "t.py")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "elastic-idl: error: --nnodes=2:1: elastic.min_le_max: max_replicas 1 is below min_replicas 2 "
        "(elastic_config.max_replicas)",
        "elastic-idl: error: --nproc_per_node=0: elastic.nproc.min: must be >= 1 (or set nproc_policy auto/cpu/gpu), "
        "got 0 (elastic_config.nproc_per_node)",
    ]
    out = console("torchrun", "t.py", env={"PET_NNODES": "2:1"})
    assert out.returncode == 1
    assert out.stderr.startswith(b"elastic-idl: error: PET_NNODES='2:1' (--nnodes): elastic.min_le_max: "), out.stderr


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        (
            ["validate", "{demo}", "-v"],
            "-v is an option of elastic-idl itself and goes before the subcommand: elastic-idl -v validate {demo}",
        ),
        (
            ["validate", "-v", "{demo}"],
            "-v is an option of elastic-idl itself and goes before the subcommand: elastic-idl -v validate {demo}",
        ),
        (
            ["run", "{demo}", "train.py", "--epochs", "3"],
            "what the workers run goes after --: elastic-idl run {demo} -- train.py --epochs 3",
        ),
        (
            ["render", "{demo}", "--name", "j", "--image", "i", "train.py", "--run-id", "x"],
            "what the workers run goes after --: elastic-idl render {demo} --name j --image i -- train.py --run-id x",
        ),
        (
            ["run", "{demo}", "--verbose", "train.py"],
            "--verbose is an option of elastic-idl itself and goes before the subcommand and what the workers "
            "run goes after --: elastic-idl --verbose run {demo} -- train.py",
        ),
        (["run", "{demo}", "--run_id", "x", "--", "train.py"], "did you mean '--run-id'?"),
        (
            ["convert", "{demo}", "--to", "json", "-v", "--upstrem"],
            "-v is an option of elastic-idl itself and goes before the subcommand; did you mean '--upstream'?",
        ),
        (
            ["torchrun", "--nnodes", "1", "-v", "train.py"],
            "-v is an option of elastic-idl itself and goes before the subcommand: "
            "elastic-idl -v torchrun --nnodes 1 train.py",
        ),
    ],
    ids=[
        "v-after-file",
        "v-before-file",
        "no-dashes",
        "no-dashes-render",
        "verbose-and-no-dashes",
        "typo",
        "v-and-typo",
        "torchrun-v",
    ],
)
def test_unrecognized_arguments_say_exactly_what_to_type(line: list[str], hint: str) -> None:
    """Issue 29 item 10: -v after the subcommand, or no -- before the script's args, got no hint."""
    argv = [a.replace("{demo}", str(DEMO)) for a in line]
    out = cli(*argv)
    assert out.returncode == 2
    last = out.stderr.decode().strip().splitlines()[-1]
    assert last.endswith(hint.replace("{demo}", str(DEMO))), last
    if ": elastic-idl " in hint and line[0] == "validate":  # the line the hint gives works
        fixed = shlex.split(last.rsplit(": elastic-idl ", 1)[1])
        assert cli(*fixed).returncode == 0


def test_global_verbose_before_any_command_and_version() -> None:
    assert cli("-v", "torchrun", "--help").returncode == 0
    assert cli("--verbose", "pod", "--help").returncode == 0
    assert cli("-v", "validate", str(DEMO)).returncode == 0
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.decode().strip() == f"elastic-idl {ei.__version__}"


def _package(where: Path) -> None:
    (where / "pkg").mkdir()
    (where / "pkg" / "__init__.py").write_text("")
    (where / "pkg" / "train.py").write_text(
        "import os, sys\nsys.stdout.write(f\"pkg.train rank {os.environ['RANK']} {sys.argv[1:]}\\n\")\n"
    )


def test_modules_are_found_as_python_dash_m_finds_them(tmp_path: Path) -> None:
    _package(tmp_path)
    (tmp_path / "task.yaml").write_text(DEMO.read_text())
    run = console("run", "task.yaml", "-m", "pkg.train", "x", cwd=tmp_path)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert "pkg.train rank 1 ['x']" in run.stdout.decode()
    tr = console("torchrun", "--nproc-per-node=2", "-m", "pkg.train", "y", cwd=tmp_path)
    assert tr.returncode == 0, tr.stderr.decode()[-2000:]
    assert "pkg.train rank 0 ['y']" in tr.stdout.decode()
    missing = console("run", "task.yaml", "-m", "pkg.nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert b"Traceback" not in missing.stderr and b"no module named 'pkg.nope'" in missing.stderr


def test_an_unwritable_failure_file_is_refused_before_launching(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    out = cli("run", str(DEMO), "--failure-file", "/proc/nope/f.json", "--", str(script), "--fail")
    assert out.returncode == 1
    assert b"/proc/nope/f.json: cannot write the failure report" in out.stderr
    assert b"started" not in out.stderr  # nothing was launched


def test_launch_time_overrides_obey_the_rules_of_the_fields_they_replace(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    # Issue 29 item 7's sibling: a flag's (or a PET_ variable's) violation is an error that names the flag.
    port = cli("run", str(DEMO), "--rdzv-endpoint", "127.0.0.1:99999", "--", str(script))
    assert port.returncode == 1
    assert port.stderr.startswith(b"elastic-idl: error: --rdzv-endpoint: elastic.rdzv_port.range: "), port.stderr
    rid = cli("run", str(DEMO), "--run-id", "a b", "--", str(script))
    assert rid.returncode == 1
    assert rid.stderr.startswith(b"elastic-idl: error: --run-id: elastic.rdzv_id.format: "), rid.stderr
    addr = cli("run", str(DEMO), "--local-addr", "a b", "--", str(script))
    assert addr.returncode == 1
    assert addr.stderr.startswith(b"elastic-idl: error: --local-addr: elastic.rdzv_host.format: "), addr.stderr
    env = cli("launch-config", str(DEMO), "--env", "PET_RDZV_ID=x,y")
    assert env.returncode == 1 and env.stderr.startswith(b"elastic-idl: error: PET_RDZV_ID: elastic.rdzv_id.format")


def test_an_endpoint_host_that_does_not_resolve_fails_at_once(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    started = time.monotonic()
    out = cli("run", str(DEMO), "--rdzv-endpoint", "no-such-host.invalid:29400", "--", str(script), timeout=30)
    assert time.monotonic() - started < 20
    assert out.returncode == 1
    lines = out.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "'no-such-host.invalid'" in lines[0] and "does not resolve" in lines[0], lines


SLEEPER = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
open(os.path.join(sys.argv[1], f"{os.getpid()}.pid"), "w").close()
time.sleep(600)
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_run_exits_128_plus_n_and_says_so_once(tmp_path: Path, sig: int, code: int) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_idl.cli", "run", str(DEMO), "--", str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err.decode()[-2000:]
    assert err.decode().count("launch interrupted by") == 1, err.decode()[-2000:]


FAIL_FIRST = """
import sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise ValueError("rank 1 fails first")
dist.all_reduce(torch.ones(1))  # rank 0: a collateral failure once rank 1 is gone
"""


def test_failure_output_puts_the_first_failure_first_and_hides_torchs_tracebacks(tmp_path: Path) -> None:
    script = tmp_path / "fail_first.py"
    script.write_text(FAIL_FIRST)
    task = tmp_path / "task.yaml"
    task.write_text(DEMO.read_text().replace("max_restarts: 1", "max_restarts: 0"))
    out = cli("run", str(task), "--", str(script))
    assert out.returncode == 3, out.stderr.decode()[-3000:]
    err = out.stderr.decode()
    assert "failed (exitcode" not in err  # torch's own log record of a failed worker
    (line,) = [ln for ln in err.splitlines() if "attempt 0 failed" in ln]
    first = line.split("left): ", 1)[1]
    assert first.startswith("rank 1 "), line
    if "rank 0 " in line:
        assert "[collateral: failed after rank 1] rank 0 " in line
    assert err.count("ValueError: rank 1 fails first") >= 2  # the attempt line and the error's traceback
    verbose = cli("-v", "run", str(task), "--", str(script))
    assert verbose.returncode == 3
    assert "failed (exitcode" in verbose.stderr.decode()


def test_the_cli_and_the_pod_share_one_exit_code_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import types

    from elastic_idl import cli as cli_module
    from elastic_idl import pod
    from elastic_idl._errors import LaunchInterruptedError, RendezvousIncompleteError
    from elastic_idl.exit_codes import ExitCode

    assert pod.ExitCode is ExitCode
    assert (cli_module.EXIT_RENDEZVOUS, cli_module.EXIT_INTERRUPTED) == (pod.EXIT_RENDEZVOUS, pod.EXIT_INTERRUPTED)
    errors = {
        ExitCode.RENDEZVOUS: RendezvousIncompleteError("1 of 2", ei.FailureReport(), joined=1, needed=2, timeout_s=1),
        ExitCode.SIGTERM: LaunchInterruptedError("stopped", ei.FailureReport(), signum=15, stopped_pids=[]),
        ExitCode.SIGINT: LaunchInterruptedError("stopped", ei.FailureReport(), signum=2, stopped_pids=[]),
    }
    for code, error in errors.items():

        def raising(*args: Any, error: BaseException = error, **kwargs: Any) -> None:
            raise error

        fake = types.ModuleType("elastic_idl._launch.launcher")
        fake.launch = fake.launch_values = raising  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "elastic_idl._launch.launcher", fake)
        assert cli_module.main(["run", str(DEMO), "--", "t.py"]) == code
        monkeypatch.setenv("ELASTIC_IDL_TASK", json.dumps(ei.to_custom(ei.decode(DEMO.read_bytes()))))
        paths = ["--output", str(tmp_path / "r.json"), "--failure-path", str(tmp_path / "f.json")]
        assert pod.pod_main([*paths, "--termination-log", str(tmp_path / "t"), "--", "t.py"]) == code


def test_a_static_multi_node_launch_takes_the_node_rank_at_launch_time(tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text(
        "import os, sys\nsys.stdout.write(f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\\n\")\n"
    )
    port = _free_port()
    common = ["--nnodes=2", "--master-addr=127.0.0.1", f"--master-port={port}"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "elastic_idl.cli", "torchrun", *common, f"--node-rank={rank}", str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for rank in (0, 1)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1].decode()[-2000:] for o in outs]
    assert "rank 0 of 2" in outs[0][0].decode() and "rank 1 of 2" in outs[1][0].decode()
    # torchrun's default line with an ambient PET_NODE_RANK: one local node, the variable ignored
    ambient = console("torchrun", str(script), env={"PET_NODE_RANK": "1"})
    assert ambient.returncode == 0, ambient.stderr.decode()[-2000:]
    assert b"rank 0 of 1" in ambient.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- issue #18: reading, operands, one-line errors


def _in_thread(capsys: pytest.CaptureFixture[str], *args: str, release: Path | None = None) -> tuple[int, str, str]:
    """main() in a thread, given 20 s; a FIFO it is stuck opening (the old code) is released, then the test fails."""
    import threading

    from elastic_idl.cli import main

    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(main(list(args))), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive() and release is not None:
        with open(release, "w"):  # a writer, so the blocked open returns and the thread ends
            pass
        worker.join(20)
        pytest.fail(f"main{args} did not return while {release} had no writer")
    out = capsys.readouterr()
    return result[0], out.out, out.err


def test_a_fifo_without_a_writer_ends_in_one_bounded_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_idl._task import codec

    monkeypatch.setattr(codec, "MAX_PIPE_WAIT_S", 0.5)
    fifo = tmp_path / "task.yaml"
    os.mkfifo(fifo)
    err = _one_line_error(_in_thread(capsys, "validate", str(fifo), release=fifo), "nothing was written within 0.5 s")
    assert err.startswith(f"elastic-idl: error: {fifo}: ")
    # The pod entrypoint reads its --task-file the same way.
    from elastic_idl.pod import pod_main

    assert pod_main(["--task-file", str(fifo), "--", "train.py"], environ={}) == 1
    assert "nothing was written within 0.5 s" in capsys.readouterr().err


def test_a_fifo_with_a_writer_is_read_to_its_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    fifo = tmp_path / "task.yaml"
    os.mkfifo(fifo)

    def write() -> None:
        time.sleep(0.3)  # after the reader opened it: the reader waits for the writer, then for the end
        with open(fifo, "w") as fh:
            fh.write(DEMO.read_text())

    threading.Thread(target=write, daemon=True).start()
    code, out = _in_thread(capsys, "validate", str(fifo), release=fifo)[:2]
    assert (code, out.splitlines()[0]) == (0, "valid")


def test_a_directory_and_a_closed_stdin_are_one_line_naming_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _one_line_error(_main(capsys, "validate", str(tmp_path)), "is a directory")
    assert err.startswith(f"elastic-idl: error: {tmp_path}: ")
    for command in (f"{CONSOLE} validate - <&-", f"{sys.executable} -m elastic_idl.cli validate - <&-"):
        out = subprocess.run(["bash", "-c", command], capture_output=True, timeout=60)
        _one_line_error(out, "elastic-idl: error: stdin: closed: there is no standard input to read")


def test_a_file_name_with_a_line_break_stays_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = str(tmp_path / "a\nb.yaml")
    _one_line_error(_main(capsys, "validate", name), f"{name!r}: No such file or directory")


def test_output_errors_name_stdout() -> None:
    out = subprocess.run(["bash", "-c", f"{CONSOLE} validate {DEMO} > /dev/full"], capture_output=True, timeout=60)
    _one_line_error(out, "elastic-idl: error: stdout: No space left on device")


def test_a_path_below_a_file_names_the_file(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print(1)\n")
    out = cli("run", str(DEMO), "--log-dir", "/dev/null", "--", str(script))
    _one_line_error(out, "elastic-idl: error: /dev/null: cannot write the log directory: not a directory")
    out = cli("run", str(DEMO), "--failure-file", "/dev/null/f.json", "--", str(script))
    _one_line_error(out, "elastic-idl: error: /dev/null: cannot write the failure report: not a directory")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "s.json",
            '{"elasticConfig": {"minReplicas": 1, "maxReplicas": 1, "rdzvId": "\\ud800"}}',
            "elastic_config.rdzv_id: not valid UTF-8 (a lone surrogate): '\\ud800' (json)",
        ),
        (
            "s.textproto",
            'elastic_config { min_replicas: 1 rdzv_id: "x\\N{SNOWMAN}" }',
            "rdzv_id: bad textproto: a string holds an escape protobuf's text format does not have",
        ),
        (
            "inf.json",
            '{"elasticConfig": {"minReplicas": 1e400}}',
            "min_replicas: expected an integer, got 1e400 (json)",
        ),
        ("inf.yaml", "elastic_config:\n  min_replicas: 1.0e+400\n", "expected an integer, got 1.0e+400 (yaml"),
        ("half.json", '{"elasticConfig": {"minReplicas": 1.50}}', "expected an integer, got 1.50 (json)"),
    ],
    ids=["json-surrogate", "textproto-named-escape", "json-1e400", "yaml-1e400", "json-1.50"],
)
def test_errors_say_the_input_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    err = _one_line_error(_main(capsys, "validate", str(path)), expected)
    assert "Unpaired" not in err and "latin-1" not in err and "inf" not in err.split(": error: ", 1)[1]


def test_double_dash_is_posix_for_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dashed = tmp_path / "-x.yaml"
    dashed.write_text(DEMO.read_text())
    os.chdir(tmp_path)
    try:
        code, out, _ = _main(capsys, "validate", "--", "-x.yaml")
        assert (code, out.splitlines()[0]) == (0, "valid")
        code, out, _ = _main(capsys, "convert", "--to", "json", "--", "-x.yaml")
        assert code == 0 and json.loads(out)["elasticConfig"]["maxReplicas"] == 1
        code, out, _ = _main(capsys, "render", "--name", "j", "--image", "i:1", "--", "-x.yaml", "train.py", "-v")
        assert code == 0 and yaml.safe_load(out)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"][
            "containers"
        ][0]["args"] == ["--", "train.py", "-v"]
    finally:
        os.chdir(ROOT)
    name_image = ["--name", "j", "--image", "i:1"]
    for command, options in (
        ("validate", []),
        ("convert", ["--to", "json"]),
        ("launch-config", []),
        ("env", name_image),
    ):
        out = cli(command, str(DEMO), *options, "--", "extra")
        assert out.returncode == 2, (command, out.stderr)
        err = out.stderr.decode()
        assert err.startswith(f"usage: elastic-idl {command}") and "unrecognized arguments: extra" in err, err
    missing = cli("validate", "--")
    assert missing.returncode == 2 and b"the following arguments are required: FILE" in missing.stderr
    assert b"[FILE]" not in missing.stderr  # required, though it may come after --


@pytest.mark.parametrize("entry", [[""], ["-m"], ["--epochs", "3"], ["-m", ""], ["-m", "-x"]])
@pytest.mark.parametrize("command", ["render", "run"])
def test_one_entrypoint_rule_for_render_and_run(command: str, entry: list[str]) -> None:
    options = ["--name", "j", "--image", "i:1"] if command == "render" else []
    out = cli(command, str(DEMO), *options, "--", *entry)
    err = out.stderr.decode()
    assert out.returncode == 2 and "Traceback" not in err, err
    assert err.startswith(f"usage: elastic-idl {command} FILE"), err  # the command's own usage
    assert f"elastic-idl {command}: error: " in err and "what the workers run" in err
    if command == "render":  # the library says the same (JobOptions), and so does the pod entrypoint
        with pytest.raises(ei.RenderError, match=r"^entrypoint: "):
            ei.render_pytorchjob(ei.decode(DEMO.read_bytes()), ei.JobOptions(name="j", image="i:1", entrypoint=entry))
        pod = cli("pod", "--", *entry)
        assert pod.returncode == 2 and b"ENTRYPOINT: " in pod.stderr, pod.stderr


def test_render_shows_its_entrypoint_as_required_and_takes_a_module() -> None:
    help_text = cli("render", "--help").stdout.decode()
    assert "-- script.py args..." in help_text and "[-- script.py" not in help_text
    missing = cli("render", str(DEMO), "--name", "j", "--image", "i:1")
    err = missing.stderr.decode()
    assert missing.returncode == 2 and err.startswith("usage: elastic-idl render FILE"), err
    out = cli("render", str(DEMO), "--name", "j", "--image", "i:1", "-m", "pkg.train", "--lr", "1")
    assert out.returncode == 0, out.stderr
    container = yaml.safe_load(out.stdout)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--", "-m", "pkg.train", "--lr", "1"]


def test_convert_allow_loss_is_a_flag_of_upstream_and_warns_in_one_line() -> None:
    lossy = cli("convert", str(DEMO), "--to", "custom", "--upstream", "--allow-loss")
    assert lossy.returncode == 0, lossy.stderr
    assert lossy.stderr.decode().splitlines() == [
        "elastic-idl: warning: dropped for upstream readers: elastic_config.monitor_interval, elastic_config.join_timeout"
    ]
    refused = cli("convert", str(DEMO), "--to", "yaml", "--upstream")
    assert (
        refused.returncode == 1 and b"add --allow-loss" in refused.stderr and b"allow_loss=True" not in refused.stderr
    )
    alone = cli("convert", str(DEMO), "--to", "json", "--allow-loss")
    assert alone.returncode == 2 and b"--allow-loss applies only with --upstream" in alone.stderr


def test_python_dash_m_elastic_idl_is_the_command_line() -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, check=False)

    module, cli = run("-m", "elastic_idl", "--version"), run("-m", "elastic_idl.cli", "--version")
    assert (module.returncode, module.stdout) == (cli.returncode, cli.stdout) == (0, f"elastic-idl {ei.__version__}\n")
    bad = run("-m", "elastic_idl", "validate", "--no-such-flag")
    assert bad.returncode == 2 and bad.stderr.startswith("usage: elastic-idl validate")
