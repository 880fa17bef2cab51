"""The pod entrypoint: task sources, env precedence, result/failure files, exit codes.

The launcher is replaced by a recording fake here (no processes); tests/test_pod_e2e.py
runs real pods.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import elastic_idl as ei
from elastic_idl import pod
from elastic_idl._backend.operator import pod_env
from elastic_idl._backend.pytorchjob import JobOptions, render_pytorchjob
from elastic_idl._task.messages import FailureReport, KubeflowTask, LegacyTask

CUSTOM = {
    "elasticConfig": {"maxReplicas": 2, "maxRestarts": 1, "minReplicas": 1, "nprocPerNode": 1, "rdzvBackend": "c10d"},
    "workerReplicas": {"replicas": 2},
}


def task() -> KubeflowTask:
    t = ei.from_custom(CUSTOM)
    assert isinstance(t, KubeflowTask)
    return t


def container_env(job: dict[str, Any]) -> dict[str, str]:
    c = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in c["env"]}


def operator_env(t: Any = None, version: int = 1, index: int = 0) -> dict[str, str]:
    """What a worker container sees in the cluster: its own env plus the operator's."""
    job = render_pytorchjob(
        t or task(), JobOptions(name="job", image="img:1", entrypoint=["t.py"]), task_type_version=version
    )
    return container_env(job) | pod_env(job, "Worker", index)


class FakeLauncher:
    """Stands in for elastic_idl._launch.launcher.launch_values: records the call, returns or raises what it is told."""

    def __init__(self, result: Any = None, error: BaseException | None = None, report: Any = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = {0: None} if result is None else result
        self.error = error
        self.report = report

    def launch(self, task: Any, entrypoint: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append({"task": task, "entrypoint": entrypoint, "args": args, **kwargs})
        if self.report is not None and kwargs.get("failure_path"):
            Path(kwargs["failure_path"]).write_text(json_format.MessageToJson(self.report))
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLauncher:
    f = FakeLauncher()
    module = types.ModuleType("elastic_idl._launch.launcher")
    module.launch_values = f.launch  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "elastic_idl._launch.launcher", module)
    return f


def run(argv: list[str], env: dict[str, str], tmp_path: Path, *, term: bool = True) -> int:
    files = ["--output", str(tmp_path / "result.json"), "--failure-path", str(tmp_path / "failure.json")]
    if term:
        files += ["--termination-log", str(tmp_path / "termination-log")]
    head, sep, tail = (
        (argv[: argv.index("--")], ["--"], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [], [])
    )
    return pod.pod_main([*head, *files, *sep, *tail], environ=env)


# --------------------------------------------------------------------------- task sources


def test_task_from_the_rendered_container_env(fake: FakeLauncher, tmp_path: Path) -> None:
    env = operator_env(index=1)
    assert run(["--", "train.py", "--epochs", "3"], env, tmp_path) == pod.EXIT_OK
    (call,) = fake.calls
    assert call["task"] == ei.view(task())  # the launcher gets the one view the pod made
    assert (call["entrypoint"], call["args"]) == ("train.py", ("--epochs", "3"))
    assert call["env"] == env  # the operator's PET_* reach the launch spec, which applies the precedence
    assert call["module"] is False
    assert call["rdzv_endpoint"] is None
    assert call["failure_path"] == str(tmp_path / "failure.json")


def test_legacy_task_from_env_keeps_its_shape(fake: FakeLauncher, tmp_path: Path) -> None:
    legacy = LegacyTask(workers=2, elastic_config=task().elastic_config)
    env = operator_env(legacy, version=0)
    assert env["ELASTIC_IDL_TASK_TYPE_VERSION"] == "0"
    assert run(["--", "t.py"], env, tmp_path) == 0
    assert fake.calls[0]["task"] == ei.view(legacy)


@pytest.mark.parametrize("fmt", ei.FORMATS)
def test_task_file_in_every_format(fake: FakeLauncher, tmp_path: Path, fmt: str) -> None:
    data = ei.encode(task(), fmt)  # type: ignore[arg-type]
    path = tmp_path / f"task.{fmt}"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    # A task file beats the env's task.
    env = {"ELASTIC_IDL_TASK": json.dumps({"workers": 1}), "ELASTIC_IDL_TASK_TYPE_VERSION": "1"}
    assert run(["--task-file", str(path), "--", "t.py"], env, tmp_path) == 0
    assert fake.calls[0]["task"] == ei.view(task())


def test_task_template_json_and_yaml(fake: FakeLauncher, tmp_path: Path) -> None:
    tpl = tmp_path / "template.json"
    tpl.write_text(json.dumps({"type": "pytorch", "custom": CUSTOM, "taskTypeVersion": 1}))
    assert run(["--task-template", str(tpl), "--", "t.py"], {}, tmp_path) == 0
    assert fake.calls[-1]["task"] == ei.view(task())
    # proto3 JSON leaves out taskTypeVersion 0: absent means the legacy shape.
    tpl = tmp_path / "template.yaml"
    tpl.write_text(
        "type: pytorch\ncustom:\n  workers: 2\n  elasticConfig: {minReplicas: 1, maxReplicas: 2, nprocPerNode: 1}\n"
    )
    assert run(["--task-template", str(tpl), "--", "t.py"], {}, tmp_path) == 0
    assert fake.calls[-1]["task"].task_type_version == 0


def test_task_template_version_mismatch_is_invalid(fake: FakeLauncher, tmp_path: Path, capsys: Any) -> None:
    tpl = tmp_path / "template.json"
    tpl.write_text(json.dumps({"custom": CUSTOM, "taskTypeVersion": 1}))
    code = run(["--task-template", str(tpl), "--task-type-version", "0", "--", "t.py"], {}, tmp_path)
    assert code == pod.EXIT_INVALID
    assert "taskTypeVersion" in capsys.readouterr().err
    # A custom that does not match its declared shape (flyteplugins#359) is refused, naming the field.
    tpl.write_text(json.dumps({"custom": CUSTOM, "taskTypeVersion": 0}))
    assert run(["--task-template", str(tpl), "--", "t.py"], {}, tmp_path) == pod.EXIT_INVALID
    assert "workerReplicas" in capsys.readouterr().err
    assert fake.calls == []


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"ELASTIC_IDL_TASK": "{not json"}, "malformed JSON"),
        (
            {"ELASTIC_IDL_TASK": json.dumps(CUSTOM), "ELASTIC_IDL_TASK_TYPE_VERSION": "7"},
            "ELASTIC_IDL_TASK_TYPE_VERSION",
        ),
        (
            {
                "ELASTIC_IDL_TASK": json.dumps(
                    {"elasticConfig": {"minReplicas": 3, "maxReplicas": 2, "nprocPerNode": 1}}
                )
            },
            "elastic.min_le_max",
        ),
        ({"ELASTIC_IDL_TASK": json.dumps(CUSTOM), "PET_RDZV_CONF": "no-equals-sign"}, "PET_RDZV_CONF"),
    ],
)
def test_invalid_input_exits_1_before_launching(
    fake: FakeLauncher, tmp_path: Path, capsys: Any, env: dict[str, str], needle: str
) -> None:
    assert run(["--", "t.py"], env, tmp_path) == pod.EXIT_INVALID
    assert needle in capsys.readouterr().err
    assert fake.calls == []


def test_missing_task_file_is_invalid(fake: FakeLauncher, tmp_path: Path) -> None:
    assert run(["--task-file", str(tmp_path / "nope"), "--", "t.py"], {}, tmp_path) == pod.EXIT_INVALID


@pytest.mark.parametrize(
    "argv",
    [
        ["t.py"],  # no "--"
        ["--"],  # nothing after it
        ["--bogus", "--", "t.py"],
        ["--task-file", "a", "--task-template", "b", "--", "t.py"],
        ["--module", "--call", "--", "x:y"],
        ["--call", "--", "no_colon"],
        ["--task-type-version", "2", "--", "t.py"],
    ],
)
def test_usage_errors_exit_2(fake: FakeLauncher, tmp_path: Path, argv: list[str]) -> None:
    env = {"ELASTIC_IDL_TASK": json.dumps(CUSTOM)}
    assert run(argv, env, tmp_path) == pod.EXIT_USAGE
    assert fake.calls == []


def test_no_task_anywhere_is_a_usage_error(fake: FakeLauncher, tmp_path: Path, capsys: Any) -> None:
    assert run(["--", "t.py"], {}, tmp_path) == pod.EXIT_USAGE
    assert "ELASTIC_IDL_TASK" in capsys.readouterr().err


def test_help(capsys: Any) -> None:
    assert pod.pod_main(["--help"], environ={}) == 0
    out = capsys.readouterr().out
    assert "--rdzv-endpoint" in out
    assert "Exit codes" in " ".join(out.split())  # argparse wraps at the terminal's width


# --------------------------------------------------------------------------- launch options


def test_endpoint_override_flag_beats_env(fake: FakeLauncher, tmp_path: Path) -> None:
    env = operator_env() | {pod.RDZV_ENDPOINT_OVERRIDE_ENV: "127.0.0.1:1111"}
    assert run(["--", "t.py"], env, tmp_path) == 0
    assert fake.calls[-1]["rdzv_endpoint"] == "127.0.0.1:1111"
    assert run(["--rdzv-endpoint", "127.0.0.1:2222", "--", "t.py"], env, tmp_path) == 0
    assert fake.calls[-1]["rdzv_endpoint"] == "127.0.0.1:2222"


def test_module_and_call_entrypoints(fake: FakeLauncher, tmp_path: Path) -> None:
    env = operator_env()
    assert run(["--module", "--", "pkg.train", "--lr", "1"], env, tmp_path) == 0
    assert (fake.calls[-1]["entrypoint"], fake.calls[-1]["module"]) == ("pkg.train", True)
    assert run(["--call", "--", "json:dumps", "x"], env, tmp_path) == 0
    assert fake.calls[-1]["entrypoint"] is json.dumps
    assert fake.calls[-1]["args"] == ("x",)
    assert run(["--call", "--", "json:no_such_function"], env, tmp_path) == pod.EXIT_INVALID
    assert run(["--call", "--", "no_such_module_xyz:f"], env, tmp_path) == pod.EXIT_INVALID


# --------------------------------------------------------------------------- on exit


def test_rank0_pod_writes_the_result(fake: FakeLauncher, tmp_path: Path) -> None:
    fake.result = {0: {"loss": 0.5, "world": 2}, 1: None}
    env = operator_env() | {"PET_RDZV_ID": "exec-7"}
    assert run(["--", "t.py"], env, tmp_path) == 0
    data = json.loads((tmp_path / "result.json").read_text())
    assert data == {"run_id": "exec-7", "rank": 0, "return_value": {"loss": 0.5, "world": 2}}
    assert not (tmp_path / "failure.json").exists()


def test_other_pods_publish_nothing(fake: FakeLauncher, tmp_path: Path) -> None:
    fake.result = {2: 1.0, 3: 1.0}
    assert run(["--", "t.py"], operator_env(index=1), tmp_path) == pod.EXIT_OK
    assert not (tmp_path / "result.json").exists()


def test_result_that_json_cannot_hold_is_written_as_repr(fake: FakeLauncher, tmp_path: Path) -> None:
    fake.result = {0: {1, 2}}
    assert run(["--", "t.py"], operator_env(), tmp_path) == 0
    assert json.loads((tmp_path / "result.json").read_text())["return_value"] == "{1, 2}"


def test_default_paths_come_from_the_env(fake: FakeLauncher, tmp_path: Path) -> None:
    fake.result = {0: 3}
    env = operator_env() | {
        pod.OUTPUT_ENV: str(tmp_path / "out" / "r.json"),
        pod.FAILURE_PATH_ENV: str(tmp_path / "f.json"),
    }
    assert pod.pod_main(["--", "t.py"], environ=env) == 0
    assert json.loads((tmp_path / "out" / "r.json").read_text())["return_value"] == 3
    assert fake.calls[-1]["failure_path"] == str(tmp_path / "f.json")


def _report() -> Any:
    rep = FailureReport(run_id="exec-1", attempts=2, summary="rank 1 exited with code 3 in attempt 1 of 2")
    rec = rep.failures.add(rank=1, local_rank=0, node="job-worker-1", attempt=0, exit_code=3)
    rec.message = "ValueError: bad batch"
    return rep


def _failures() -> Any:
    return pytest.importorskip("elastic_idl._errors")


def test_job_failure_exits_3_with_report_and_termination_log(fake: FakeLauncher, tmp_path: Path, capsys: Any) -> None:
    failures = _failures()
    rep = _report()
    fake.error = failures.LaunchFailedError(rep.summary, rep)
    fake.report = rep
    assert run(["--", "t.py"], operator_env(), tmp_path) == pod.EXIT_JOB_FAILED
    back = json_format.Parse((tmp_path / "failure.json").read_text(), FailureReport())
    assert back == rep
    term = (tmp_path / "termination-log").read_text()
    assert term.splitlines()[:2] == [
        "rank 1 exited with code 3 in attempt 1 of 2",
        "root cause: rank 1 on job-worker-1: ValueError: bad batch",
    ]
    assert not (tmp_path / "result.json").exists()
    assert "job failed" in capsys.readouterr().err


def test_failure_report_is_written_when_the_launcher_did_not(fake: FakeLauncher, tmp_path: Path) -> None:
    failures = _failures()
    fake.error = failures.RendezvousIncompleteError(
        "1 of 2 nodes joined", FailureReport(), joined=1, needed=2, timeout_s=5.0
    )
    env = operator_env() | {"PET_RDZV_ID": "exec-2"}
    assert run(["--", "t.py"], env, tmp_path) == pod.EXIT_RENDEZVOUS
    back = json_format.Parse((tmp_path / "failure.json").read_text(), FailureReport())
    assert (back.run_id, back.summary) == ("exec-2", "1 of 2 nodes joined")


@pytest.mark.parametrize(("signum", "code"), [(2, 130), (15, 143)])
def test_signal_exit_codes(fake: FakeLauncher, tmp_path: Path, signum: int, code: int) -> None:
    failures = _failures()
    fake.error = failures.LaunchInterruptedError("stopped", FailureReport(), signum=signum, stopped_pids=[])
    assert run(["--", "t.py"], operator_env(), tmp_path) == code


def test_losing_the_store_host_exits_with_a_retryable_code_that_is_no_signal(
    fake: FakeLauncher, tmp_path: Path
) -> None:
    failures = _failures()
    fake.error = failures.RendezvousStoreLostError("lost the rendezvous store at job-worker-0:23456", FailureReport())
    assert run(["--", "t.py"], operator_env(index=1), tmp_path) == pod.EXIT_STORE_LOST
    # The operator's ExitCode policy recreates pods that exit >= 128; 128+N for signal N ends at SIGRTMAX.
    assert pod.EXIT_STORE_LOST >= 128
    assert pod.EXIT_STORE_LOST - 128 > signal.SIGRTMAX
    assert "failure report" in (tmp_path / "termination-log").read_text()


def test_termination_log_is_capped(fake: FakeLauncher, tmp_path: Path) -> None:
    failures = _failures()
    rep = _report()
    rep.summary = "é" * 5000
    fake.error, fake.report = failures.LaunchFailedError(rep.summary, rep), rep
    assert run(["--", "t.py"], operator_env(), tmp_path) == pod.EXIT_JOB_FAILED
    assert len((tmp_path / "termination-log").read_bytes()) <= pod.TERMINATION_LOG_MAX_BYTES


def test_a_failure_folder_keeps_one_report_per_pod_incarnation(fake: FakeLauncher, tmp_path: Path) -> None:
    # A restarted container (OnFailure) or a recreated pod (ExitCode, a drain) runs the
    # same command with the same env: a folder on a volume keeps every incarnation's report.
    failures = _failures()
    folder = tmp_path / "volume" / "failures"
    folder.mkdir(parents=True)  # the fake launcher writes the report without making its folder
    env = operator_env(index=1) | {pod.FAILURE_PATH_ENV: f"{folder}/", "HOSTNAME": "job-worker-1"}
    reports = []
    for attempt in range(2):
        rep = _report()
        rep.summary = f"incarnation {attempt}"
        fake.error, fake.report = failures.LaunchFailedError(rep.summary, rep), rep
        assert pod.pod_main(["--termination-log", str(tmp_path / "t"), "--", "t.py"], environ=env) == 3
        reports.append(rep)
    files = sorted(folder.iterdir())
    assert [f.name.split(".")[0] for f in files] == ["job-worker-1", "job-worker-1"]
    assert [json_format.Parse(f.read_text(), FailureReport()) for f in files] == reports
    assert f"failure report: {files[-1]}" in (tmp_path / "t").read_text()


# --------------------------------------------------------------------------- as a program


def test_module_entrypoint_help_and_no_torch_before_launch() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys, elastic_idl.pod; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    out = subprocess.run([sys.executable, "-m", "elastic_idl.pod", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "ENTRYPOINT" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "elastic_idl.pod", "--", "t.py"], capture_output=True, text=True, env={}
    )
    assert out.returncode == pod.EXIT_USAGE


def test_cli_pod_subcommand(fake: FakeLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from elastic_idl import cli

    for key, value in operator_env().items():
        monkeypatch.setenv(key, value)
    fake.result = {0: "ok"}
    out = tmp_path / "r.json"
    monkeypatch.setenv(pod.OUTPUT_ENV, str(out))
    assert cli.main(["pod", "--", "t.py"]) == 0
    assert json.loads(out.read_text())["return_value"] == "ok"


# --------------------------------------------------------------------------- issue #9


def test_module_and_call_take_their_name_as_written_in_the_docs(fake: FakeLauncher, tmp_path: Path) -> None:
    env = operator_env()
    assert run(["--module", "pkg.train"], env, tmp_path) == pod.EXIT_OK
    assert (fake.calls[-1]["entrypoint"], fake.calls[-1]["args"], fake.calls[-1]["module"]) == ("pkg.train", (), True)
    assert run(["--module", "pkg.train", "--", "--lr", "1"], env, tmp_path) == pod.EXIT_OK
    assert (fake.calls[-1]["entrypoint"], fake.calls[-1]["args"]) == ("pkg.train", ("--lr", "1"))
    assert run(["--call", "json:dumps", "--", "x"], env, tmp_path) == pod.EXIT_OK
    assert (fake.calls[-1]["entrypoint"], fake.calls[-1]["args"]) == (json.dumps, ("x",))
    # the rendered container's form (pod_args=["--module"]): the name first after --
    assert run(["--module", "--", "pkg.train", "a"], env, tmp_path) == pod.EXIT_OK
    assert (fake.calls[-1]["entrypoint"], fake.calls[-1]["args"]) == ("pkg.train", ("a",))
    assert run(["--module", "a", "--call", "b:c"], env, tmp_path) == pod.EXIT_USAGE


def test_call_finds_a_package_in_the_working_directory(
    fake: FakeLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ei_pod_pkg_9").mkdir()
    (tmp_path / "ei_pod_pkg_9" / "__init__.py").write_text("def fn(*a):\n    return a\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "ei_pod_pkg_9", raising=False)
    assert run(["--call", "ei_pod_pkg_9:fn"], operator_env(), tmp_path) == pod.EXIT_OK
    assert fake.calls[-1]["entrypoint"].__name__ == "fn"
    assert str(tmp_path) not in sys.path  # only while importing


def test_unwritable_output_paths_are_refused_before_launching(fake: FakeLauncher, tmp_path: Path, capsys: Any) -> None:
    env = operator_env()
    argv = ["--output", "/proc/nope/r.json", "--failure-path", str(tmp_path / "f.json"), "--", "t.py"]
    assert pod.pod_main(argv, environ=env) == pod.EXIT_INVALID
    assert "/proc/nope/r.json: cannot write the result file" in capsys.readouterr().err
    argv = ["--output", str(tmp_path / "r.json"), "--failure-path", "/proc/nope/f.json", "--", "t.py"]
    assert pod.pod_main(argv, environ=env) == pod.EXIT_INVALID
    assert fake.calls == []


def test_the_fallback_failure_report_keeps_zero_values(fake: FakeLauncher, tmp_path: Path) -> None:
    failures = _failures()
    rep = FailureReport(run_id="r")
    rep.failures.add(rank=0, local_rank=0, attempt=0, exit_code=1, message="boom")
    fake.error = failures.LaunchFailedError("boom", rep)  # the launcher wrote no file
    assert run(["--", "t.py"], operator_env(), tmp_path) == pod.EXIT_JOB_FAILED
    data = json.loads((tmp_path / "failure.json").read_text())
    assert data["attempts"] == 0 and data["failures"] == []  # summary-only, zeros written


def test_launch_time_env_values_are_checked(fake: FakeLauncher, tmp_path: Path, capsys: Any) -> None:
    env = operator_env() | {"PET_RDZV_ENDPOINT": "job-worker-0:99999"}
    assert run(["--", "t.py"], env, tmp_path) == pod.EXIT_INVALID
    assert "PET_RDZV_ENDPOINT: elastic.rdzv_port.range" in capsys.readouterr().err
    assert run(["--run-id", "a b", "--", "t.py"], operator_env(), tmp_path) == pod.EXIT_INVALID
    assert fake.calls == []


def test_argv_as_one_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="list of strings"):
        pod.pod_main("--task-file t.yaml -- t.py", environ={})  # type: ignore[arg-type]


def test_version_and_verbose(capsys: Any, fake: FakeLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    assert pod.pod_main(["--version"], environ={}) == 0
    assert capsys.readouterr().out.strip() == f"elastic-idl {ei.__version__}"
    logger = logging.getLogger("elastic_idl")
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    assert run(["-v", "--", "t.py"], operator_env(), tmp_path) == pod.EXIT_OK
    assert logger.level == logging.DEBUG
    assert run(["-v", "-q", "--", "t.py"], operator_env(), tmp_path) == pod.EXIT_USAGE


def test_an_sdk_plugins_task_reads_its_pod_env_once_and_takes_the_run_id_by_precedence() -> None:
    """elastic_idl.pod.pod_env_here and elastic_idl._sdk.in_pod.run_id, what both SDK plugins use in a pod."""
    from elastic_idl._sdk import in_pod

    here = pod.pod_env_here(
        {"PET_NNODES": "2:2", pod.RDZV_ENDPOINT_OVERRIDE_ENV: "127.0.0.1:1111", "FLYTE_INTERNAL_EXECUTION_ID": "e1"}
    )
    assert here.in_pytorchjob and here.env is not None and here.env["PET_NNODES"] == "2:2"
    assert (here.rdzv_endpoint, here.execution_id) == ("127.0.0.1:1111", "e1")
    nowhere = pod.pod_env_here({"HOME": "/root", "FLYTE_INTERNAL_EXECUTION_ID": "e1"})
    assert not nowhere.in_pytorchjob and nowhere.env is None
    config = ei.Elastic(nnodes=2)
    assert in_pod.run_id(config, here, "run-7") == "run-7"  # the SDK's run
    assert in_pod.run_id(config, here, None) == "e1"  # else the Flyte execution id
    assert in_pod.run_id(config, nowhere, "run-7") is None  # outside a job: the launch decides
    assert in_pod.run_id(ei.Elastic(nnodes=2, rdzv_id="mine"), here, "run-7") is None  # the task's wins
    with_id = pod.pod_env_here({"PET_RDZV_ENDPOINT": "w-0:23456", "PET_RDZV_ID": "op"})
    assert in_pod.run_id(config, with_id, "run-7") is None  # PET_RDZV_ID wins (the launch spec reads it)
