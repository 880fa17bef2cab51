"""The launcher's parts, without a launch: failure records, entrypoints, the warm fork server, imports."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from google.protobuf import json_format

from elastic_idl._launcher import _entrypoint
from elastic_idl._launcher_failures import FailureLog, WorkerExit, write_report
from elastic_idl._launcher_worker import KIND_CALLABLE, KIND_MODULE, KIND_SCRIPT, WorkerMain, _substitute
from elastic_idl._launcher_zygote import Zygote, cpython_forkserver, fork_hazard
from elastic_idl._messages import FailureReport

WORKERS = Path(__file__).resolve().parent / "workers"


def _error_file(path: Path, message: str, tb: str, mtime_ns: int) -> str:
    path.write_text(json.dumps({"message": {"message": message, "extraInfo": {"py_callstack": tb, "timestamp": "1"}}}))
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return str(path)


def test_records_are_root_cause_first_then_by_attempt_and_time(tmp_path: Path) -> None:
    t = 1_700_000_000 * 10**9
    log = FailureLog(run_id="r1", role="trainer", node="node-a")
    peer = _error_file(tmp_path / "a0r0.json", "RuntimeError: Connection closed by peer", "tb0", t + 5_000_000)
    # rank 1 died hard (no error file) after the last healthy poll at t: dated t, before the peer's error
    log.add(
        0,
        [
            WorkerExit(0, 0, 100, 1, peer, t + 9_000_000),
            WorkerExit(1, 1, 101, 3, str(tmp_path / "missing.json"), t),
        ],
    )
    root1 = _error_file(
        tmp_path / "a1r1.json", "ValueError: bad batch", "Traceback...\nValueError: bad batch", t + 10**9
    )
    log.add(1, [WorkerExit(1, 1, 201, -9, root1, t + 2 * 10**9)])
    recs = log.records
    assert [(r.attempt, r.rank) for r in recs] == [(0, 1), (0, 0), (1, 1)]
    first = recs[0]
    assert first.WhichOneof("termination") == "exit_code" and first.exit_code == 3
    assert first.message == "exited with code 3 (no Python exception recorded)"
    assert (first.node, first.role, first.pid, first.local_rank) == ("node-a", "trainer", 101, 1)
    assert first.time.ToNanoseconds() == t
    assert (recs[1].message, recs[1].traceback) == ("RuntimeError: Connection closed by peer", "tb0")
    last = recs[2]
    assert last.WhichOneof("termination") == "signal" and last.signal == 9
    assert last.message == "ValueError: bad batch"  # the recorded exception beats "killed by SIGKILL"
    assert "rank 1 (local rank 1, pid 101) in attempt 0, exit code 3" in log.describe_root()
    rep = log.report("why", attempts=2)
    assert (rep.run_id, rep.attempts, rep.summary, len(rep.failures)) == ("r1", 2, "why", 3)


def test_a_signal_without_error_file_says_which_signal(tmp_path: Path) -> None:
    log = FailureLog(run_id="r", role="default", node="n")
    (rec,) = log.add(0, [WorkerExit(0, 0, 5, -15, "", 1)])
    assert (rec.signal, rec.message) == (15, "killed by SIGTERM")
    (rec,) = log.add(0, [WorkerExit(1, 1, 6, None, "", 2, note="unhealthy: stuck")])
    assert rec.WhichOneof("termination") is None and rec.message == "unhealthy: stuck"
    assert log.attempts_seen == 1


def test_the_report_file_is_protobuf_json_and_written_atomically(tmp_path: Path) -> None:
    log = FailureLog(run_id="run-7", role="default", node="n")
    log.add(0, [WorkerExit(3, 1, 42, 2, "", 10**18)])
    target = tmp_path / "deep" / "dir" / "failures.json"
    write_report(log.report("rank 3 exited with code 2"), target)
    back = json_format.Parse(target.read_text(), FailureReport())
    assert back == log.report("rank 3 exited with code 2")
    assert json.loads(target.read_text())["failures"][0]["exitCode"] == 2
    assert [p.name for p in target.parent.iterdir()] == ["failures.json"]  # no temp file left


def _module_level(x: int) -> int:
    return x


def test_entrypoints_are_resolved_like_torchrun_before_anything_starts(tmp_path: Path) -> None:
    fn = _entrypoint(_module_level, (1,), False)
    assert (fn.kind, fn.target, fn.args, fn.__name__) == (KIND_CALLABLE, _module_level, (1,), "_module_level")
    script = WORKERS / "allreduce_script.py"
    s = _entrypoint(script, ("a", 2), False)  # a PathLike; arguments become strings
    assert (s.kind, s.target, s.args) == (KIND_SCRIPT, str(script), ("a", "2"))
    m = _entrypoint("-m", ("json.tool", "--sort-keys"), False)
    assert (m.kind, m.target, m.args) == (KIND_MODULE, "json.tool", ("--sort-keys",))
    assert _entrypoint("json.tool", (), True).kind == KIND_MODULE
    with pytest.raises(FileNotFoundError):
        _entrypoint(str(tmp_path / "nope.py"), (), False)
    with pytest.raises(ModuleNotFoundError):
        _entrypoint("not_a_module_at_all", (), True)
    with pytest.raises(TypeError):
        _entrypoint(_module_level, (), True)
    with pytest.raises(TypeError):
        _entrypoint("-m", (), False)


def test_worker_mains_pickle_for_spawned_workers_and_substitute_the_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    for main in (
        WorkerMain(KIND_CALLABLE, _module_level, (3,)),
        WorkerMain(KIND_SCRIPT, "/x/train.py", ("--lr", "0.1")),
        WorkerMain(KIND_CALLABLE, None, stash_key="k", name="closure"),
    ):
        back = pickle.loads(pickle.dumps(main))
        assert (back.kind, back.target, back.args, back.stash_key) == (
            main.kind,
            main.target,
            main.args,
            main.stash_key,
        )
        assert back.__qualname__ == main.__name__
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert _substitute(("--rank=${local_rank}", 5, "$HOME")) == ("--rank=3", 5, "$HOME")


def test_fork_hazard_sees_other_threads() -> None:
    assert fork_hazard() is None  # pytest runs single-threaded
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        hazard = fork_hazard()
        assert hazard is not None and "runs 2 threads" in hazard
    finally:
        stop.set()
        t.join()


def test_the_warm_fork_server_stands_in_for_cpythons_and_stops_cleanly() -> None:
    server = cpython_forkserver()
    before = (server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid)
    z = Zygote()
    z.start()
    pid = z.pid
    assert pid is not None and z.alive()
    address = z._address
    assert address is not None and Path(address).exists()
    with z.installed():
        assert server._forkserver_pid == pid
    assert (server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid) == before
    started = time.monotonic()
    z.stop()
    assert time.monotonic() - started < 5
    assert not z.alive() and not Path(f"/proc/{pid}").exists()
    assert not Path(address).exists()


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_importing_the_launcher_does_not_import_torch() -> None:
    code = "import sys, elastic_idl._launcher; print('torch' in sys.modules)"
    assert _python(code) == "False"


def test_logging_a_worker_failure_does_not_import_torch_dynamo() -> None:
    # torch's log formatter imports torch._dynamo (~2 s) for any record with exc_info;
    # the launcher pre-formats such records, which is what makes restarts cheap.
    code = """
import logging, sys
import elastic_idl._torch as t
from torch._logging._internal import TorchLogsFormatter
logger = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(TorchLogsFormatter())
logger.addHandler(handler)
with t._plain_tracebacks():
    try:
        raise ValueError("worker died")
    except ValueError:
        logger.exception("failed")
print("torch._dynamo" in sys.modules)
"""
    assert _python(code) == "False"
