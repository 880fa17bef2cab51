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
