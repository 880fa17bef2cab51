"""The launcher's parts, without a launch: failure records, entrypoints, the warm fork server, imports."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import elastic_idl as ei
from elastic_idl._launch.failures import FailureLog, WorkerExit, write_report
from elastic_idl._launch.forkserver import Zygote, cpython_forkserver, fork_hazard, settled_thread_count, thread_count
from elastic_idl._launch.launcher import worker_main_of
from elastic_idl._launch.worker import KIND_CALLABLE, KIND_MODULE, KIND_SCRIPT, WorkerMain, _substitute
from elastic_idl._task.messages import FailureReport

WORKERS = Path(__file__).resolve().parent / "workers"
DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.yaml"


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


def test_at_the_same_time_a_hard_exit_comes_before_a_recorded_error(tmp_path: Path) -> None:
    """Issue 18 item 1: a file's mtime comes from the kernel's coarse clock, so a peer's error can
    carry the very time of the last healthy poll the hard exit is dated at: the hard exit is first."""
    from elastic_idl._launch.failures import describe_attempt, file_clock_ns

    before = file_clock_ns()
    probe = tmp_path / "probe"
    probe.write_text("")
    assert before <= probe.stat().st_mtime_ns  # never later than a file written afterwards
    t = 1_700_000_000 * 10**9
    log = FailureLog(run_id="r", role="default", node="n")
    peer = _error_file(tmp_path / "0.json", "RuntimeError: Connection closed by peer", "tb", t)
    records = log.add(0, [WorkerExit(0, 0, 10, 1, peer, t), WorkerExit(1, 1, 11, -9, "", t)])
    assert [(r.rank, r.signal) for r in log.records] == [(1, 9), (0, 0)]
    assert describe_attempt(records).startswith("rank 1 (local rank 1, pid 11) in attempt 0, signal SIGKILL")


def test_a_worker_stopped_while_writing_its_error_file_is_dated_by_that_file(tmp_path: Path) -> None:
    """Issue 30, 3b (2 workers per node, rank 1 raised): torch's poll stopped rank 0 (SIGTERM) while rank 0
    wrote the error of its broken collective. The empty file said nothing, and rank 0 was dated at the last
    healthy poll, before rank 1's ValueError: "killed by SIGTERM" became the root cause in 1 run of 20."""
    t = 1_700_000_000 * 10**9
    log = FailureLog(run_id="r", role="default", node="n")
    raised = _error_file(tmp_path / "1.json", "ValueError: bad batch", "Traceback...\nValueError: bad batch", t + 10**6)
    torn = tmp_path / "0.json"
    torn.write_text("")  # opened, not yet written
    os.utime(torn, ns=(t + 2 * 10**6, t + 2 * 10**6))
    log.add(0, [WorkerExit(1, 1, 11, 1, raised, t), WorkerExit(0, 0, 10, -15, str(torn), t)])
    assert [(r.rank, r.message) for r in log.records] == [(1, "ValueError: bad batch"), (0, "killed by SIGTERM")]
    assert log.records[1].time.ToNanoseconds() == t + 2 * 10**6


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
    fn = worker_main_of(_module_level, (1,), False)
    assert (fn.kind, fn.target, fn.args, fn.__name__) == (KIND_CALLABLE, _module_level, (1,), "_module_level")
    script = WORKERS / "allreduce_script.py"
    s = worker_main_of(script, ("a", 2), False)  # a PathLike; arguments become strings
    assert (s.kind, s.target, s.args) == (KIND_SCRIPT, str(script), ("a", "2"))
    m = worker_main_of("-m", ("json.tool", "--sort-keys"), False)
    assert (m.kind, m.target, m.args) == (KIND_MODULE, "json.tool", ("--sort-keys",))
    assert worker_main_of("json.tool", (), True).kind == KIND_MODULE
    with pytest.raises(FileNotFoundError):
        worker_main_of(str(tmp_path / "nope.py"), (), False)
    with pytest.raises(ModuleNotFoundError):
        worker_main_of("not_a_module_at_all", (), True)
    with pytest.raises(TypeError):
        worker_main_of(_module_level, (), True)
    with pytest.raises(TypeError):
        worker_main_of("-m", (), False)


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


def test_a_thread_that_is_ending_is_given_a_moment_and_a_running_one_is_not() -> None:
    # A joined thread may still be listed by the kernel for a moment (join returns before the OS
    # thread exits): the fork check waits that out instead of taking the cold path for nothing.
    ending = threading.Thread(target=time.sleep, args=(0.05,), daemon=True)
    ending.start()
    assert thread_count() == 2
    assert settled_thread_count() == 1
    stop = threading.Event()
    running = threading.Thread(target=stop.wait, daemon=True)
    running.start()
    try:
        started = time.monotonic()
        assert settled_thread_count(grace_s=0.1) == 2
        assert time.monotonic() - started >= 0.1
    finally:
        stop.set()
        running.join()
    assert settled_thread_count() == 1


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
    code = "import sys, elastic_idl._launch.launcher; print('torch' in sys.modules)"
    assert _python(code) == "False"


def test_logging_a_worker_failure_does_not_import_torch_dynamo() -> None:
    # torch's log formatter imports torch._dynamo (~2 s) for any record with exc_info;
    # the launcher pre-formats such records, which is what makes restarts cheap.
    code = """
import logging, sys
import elastic_idl._launch.agent as t
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


# ---------------------------------------------------------------- issue #9


def _legacy(backend: str = "c10d", nodes: int = 1) -> Any:
    from elastic_idl._task.messages import LegacyTask

    t = LegacyTask()
    e = t.elastic_config
    e.min_replicas = e.max_replicas = nodes
    e.nproc_per_node, e.rdzv_backend = 1, backend
    if backend == "static":
        e.rdzv_host, e.rdzv_port = "127.0.0.1", 29500
    return t


def test_report_json_always_has_rank_local_rank_and_attempt(tmp_path: Path) -> None:
    rep = FailureReport(run_id="r", attempts=1, summary="s")
    rep.failures.add(rank=0, local_rank=0, attempt=0, exit_code=1, message="m")
    write_report(rep, tmp_path / "r.json")
    (rec,) = json.loads((tmp_path / "r.json").read_text())["failures"]
    assert (rec["rank"], rec["localRank"], rec["attempt"]) == (0, 0, 0)
    assert json_format.Parse((tmp_path / "r.json").read_text(), FailureReport()) == rep


def test_the_zero_value_option_follows_the_installed_protobuf(monkeypatch: pytest.MonkeyPatch) -> None:
    from elastic_idl._launch import failures as lf

    def old(message: Any, including_default_value_fields: bool = False, indent: int = 2) -> str:
        return ""  # protobuf 4.21's spelling

    def new(message: Any, indent: int = 2, always_print_fields_with_no_presence: bool = False) -> str:
        return ""  # protobuf 5.26+ (7.x)

    monkeypatch.setattr(lf.json_format, "MessageToJson", old)
    assert lf._zero_fields_option() == {"including_default_value_fields": True}
    monkeypatch.setattr(lf.json_format, "MessageToJson", new)
    assert lf._zero_fields_option() == {"always_print_fields_with_no_presence": True}


def test_the_attempt_line_puts_the_first_failure_first_and_marks_the_others(tmp_path: Path) -> None:
    from elastic_idl._launch.failures import describe_attempt

    log = FailureLog(run_id="r", role="default", node="n0")
    late = _error_file(tmp_path / "0.json", "RuntimeError: Connection closed by peer", "tb0", 2_000_000_000)
    early = _error_file(tmp_path / "1.json", "ValueError: boom", "tb1", 1_000_000_000)
    records = log.add(0, [WorkerExit(0, 0, 10, 1, late, 0), WorkerExit(1, 1, 11, 1, early, 0)])
    line = describe_attempt(records)
    first, second = line.split("; ")
    assert first.startswith("rank 1 (local rank 1, pid 11) in attempt 0, exit code 1: ValueError: boom")
    assert second.startswith("[collateral: failed after rank 1] rank 0 ")


def test_a_rank_that_failed_on_its_own_is_not_called_collateral(tmp_path: Path) -> None:
    """Issue 29 item 6: every later failure of an attempt was marked collateral, even a rank that
    raised its own error; only one whose collective or store broke under it, or that the agent
    stopped, is a consequence of the first."""
    from elastic_idl._launch.failures import describe_attempt, is_collateral

    log = FailureLog(run_id="r", role="default", node="n0")
    first = _error_file(tmp_path / "1.json", "ValueError: bad shard 1", "tb1", 1_000_000_000)
    own = _error_file(tmp_path / "0.json", "KeyError: 'label'", "tb0", 2_000_000_000)
    peer = _error_file(
        tmp_path / "2.json", "DistBackendError: [../third_party/gloo/x.cc:81] Timed out", "tb2", 3_000_000_000
    )
    records = log.add(
        0,
        [
            WorkerExit(0, 0, 10, 1, own, 0),
            WorkerExit(1, 1, 11, 1, first, 0),
            WorkerExit(2, 2, 12, 1, peer, 0),
            WorkerExit(3, 3, 13, -15, "", 4_000_000_000),
        ],
    )
    lines = describe_attempt(records).split("; ")
    assert lines[0].startswith("rank 1 ")
    assert lines[1].startswith("[failed on its own, after rank 1] rank 0 ")
    assert lines[2].startswith("[collateral: failed after rank 1] rank 2 ")
    assert lines[3].startswith("[collateral: failed after rank 1] rank 3 ")  # stopped by the agent
    assert [is_collateral(r) for r in sorted(records, key=lambda r: r.rank)] == [False, False, True, True]


def test_a_report_that_cannot_be_written_never_replaces_the_launch_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from elastic_idl._launch.failures import check_writable, save_report

    with pytest.raises(OSError, match="cannot write the failure report") as info:
        check_writable("/proc/nope/f.json", "failure report")
    assert info.value.filename == "/proc/nope/f.json"
    check_writable(tmp_path / "new" / "f.json", "failure report")  # creates the directory, leaves nothing
    assert list((tmp_path / "new").iterdir()) == []
    save_report(FailureReport(summary="s"), "/proc/nope/f.json")  # logs, does not raise
    assert "cannot write the failure report to /proc/nope/f.json" in caplog.text


def test_launch_checks_files_and_the_endpoint_before_anything_starts(tmp_path: Path) -> None:
    from elastic_idl._errors import HostNotFoundError
    from elastic_idl._launch.launcher import launch

    script = tmp_path / "t.py"
    script.write_text("")
    with pytest.raises(OSError, match="cannot write the failure report"):
        launch(_legacy(), str(script), failure_path="/proc/nope/f.json")
    with pytest.raises(HostNotFoundError, match=r"'no-such-host.invalid'.*does not resolve") as info:
        launch(_legacy(), str(script), rdzv_endpoint="no-such-host.invalid:29400")
    assert isinstance(info.value, ValueError)
    with pytest.raises(ei.ValidationError, match=r"rdzv_endpoint: elastic.rdzv_port.range"):
        launch(_legacy(), str(script), rdzv_endpoint="127.0.0.1:99999")
    with pytest.raises(ei.ValidationError, match=r"local_addr: elastic.rdzv_host.format"):
        launch(_legacy(), str(script), local_addr="a b")
    code = f"""
import sys
import elastic_idl as ei
try:
    ei.launch(ei.decode(open({str(DEMO)!r}, "rb").read()), {str(script)!r}, rdzv_endpoint="no-such-host.invalid:1")
except ValueError:
    print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"  # refused before torch was even imported


def test_node_rank_fits_the_backend() -> None:
    from elastic_idl._launch.launcher import _overrides
    from elastic_idl._launch.spec import to_launch_spec

    static = to_launch_spec(_legacy("static", nodes=2))
    assert _overrides(static, node_rank=None, local_addr=None).rdzv_configs["rank"] == 0  # torchrun's default
    assert _overrides(static, node_rank=1, local_addr="10.0.0.2").rdzv_configs["rank"] == 1
    with pytest.raises(ValueError, match=r"node_rank: 2 is not in 0\.\.1"):
        _overrides(static, node_rank=2, local_addr=None)
    c10d = to_launch_spec(_legacy())
    assert "rank" not in _overrides(c10d, node_rank=0, local_addr=None).rdzv_configs
    with pytest.raises(ValueError, match="only the static rendezvous backend takes a node rank"):
        _overrides(c10d, node_rank=1, local_addr=None)
    with pytest.raises(TypeError):
        _overrides(c10d, node_rank="1", local_addr=None)  # type: ignore[arg-type]


def test_fresh_store_is_an_argument_that_switches_only_the_store_handler() -> None:
    """The stress bench's two arms differ in this one argument: the env switch and the handler wrap."""
    from elastic_idl._launch import agent  # imports torch (quietly: before any torch module here)
    from elastic_idl._launch import launcher as _launcher
    from elastic_idl._launch.spec import to_launch_spec

    assert not hasattr(agent, "FRESH_STORE_PER_ROUND")  # no module global to flip
    spec = to_launch_spec(_legacy())
    fixed = _launcher._launch_env(spec, 1, False, True)
    stock = _launcher._launch_env(spec, 1, False, False)
    assert fixed == {**stock, agent.DISABLE_SHARED_STORE_ENV: "1"}
    handlers = {}
    for fresh in (True, False):
        params = agent.RendezvousParameters(
            backend="c10d", endpoint="127.0.0.1:0", run_id="r", min_nodes=1, max_nodes=1, local_addr="127.0.0.1"
        )
        handler, endpoint = agent._rendezvous_handler(params, loopback=True, fresh_store=fresh, read_timeout=5)
        handlers[fresh] = handler
        assert endpoint.startswith("127.0.0.1:") and not endpoint.endswith(":0")
        handler.shutdown()
        if isinstance(handler, agent.FreshStoreHandler):
            handler.release()
    assert isinstance(handlers[True], agent.FreshStoreHandler)
    assert not isinstance(handlers[False], agent.FreshStoreHandler)


def test_a_pod_waits_for_the_rendezvous_host_within_join_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    from elastic_idl._errors import RendezvousIncompleteError
    from elastic_idl._launch import launcher as _launcher
    from elastic_idl._launch.spec import to_launch_spec

    answers = iter(["Name or service not known", "Name or service not known", ""])
    monkeypatch.setattr(_launcher, "_resolve", lambda host: next(answers))
    monkeypatch.setattr(_launcher, "_RESOLVE_RETRY_S", 0.01)
    spec = to_launch_spec(_legacy(), env={"PET_RDZV_ENDPOINT": "job-worker-0:23456"})
    log = FailureLog(run_id="r", role="default")
    _launcher._wait_for_host(spec, "job-worker-0", log)  # resolves on the third look-up
    monkeypatch.setattr(_launcher, "_resolve", lambda host: "Name or service not known")
    short = dataclasses.replace(spec, rdzv_configs={"join_timeout": 0.05})
    with pytest.raises(RendezvousIncompleteError, match=r"did not resolve within join_timeout=0.05s"):
        _launcher._wait_for_host(short, "job-worker-0", log)


def test_modules_are_looked_up_in_the_working_directory_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ei_cwd_pkg_9").mkdir()
    (tmp_path / "ei_cwd_pkg_9" / "__init__.py").write_text("")
    (tmp_path / "ei_cwd_pkg_9" / "train.py").write_text("")
    (tmp_path / "ei_bad_pkg_9").mkdir()
    (tmp_path / "ei_bad_pkg_9" / "__init__.py").write_text("raise RuntimeError('package init failed')")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    main = worker_main_of("ei_cwd_pkg_9.train", (), True)
    assert (main.kind, main.target) == (KIND_MODULE, "ei_cwd_pkg_9.train")
    assert str(tmp_path) not in sys.path
    with pytest.raises(ImportError, match="RuntimeError: package init failed"):
        worker_main_of("ei_bad_pkg_9.train", (), True)
    with pytest.raises(ModuleNotFoundError, match=f"looked in {tmp_path} first"):
        worker_main_of("ei_nope_pkg_9", (), True)


def test_torchs_worker_tracebacks_are_logged_only_when_verbose() -> None:
    code = """
import logging, sys
from elastic_idl._launch import agent as _torch
flt = _torch._PlainTraceback()
try:
    raise RuntimeError("x")
except RuntimeError:
    info = sys.exc_info()
def rec(name):
    return logging.LogRecord(name, logging.ERROR, "f", 1, "failed (exitcode: 1)", (), info)
quiet = flt.filter(rec("torch.distributed.elastic.multiprocessing.api"))
other = rec("torch.distributed.elastic.agent.server.api")
kept = flt.filter(other) and other.exc_info is None and "RuntimeError" in other.exc_text
logging.getLogger("elastic_idl").setLevel(logging.DEBUG)
loud = flt.filter(rec("torch.distributed.elastic.multiprocessing.api"))
print(quiet, kept, loud)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True", "True"]


def test_the_root_cause_traceback_starts_at_the_users_code() -> None:
    from elastic_idl._launch.failures import user_traceback

    tb = (
        "Traceback (most recent call last):\n"
        '  File "/venv/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper\n'
        "    return f(*args, **kwargs)\n"
        "           ^^^^^^^^^^^^^^^^^^\n"
        '  File "/venv/elastic_idl/_launch/worker.py", line 211, in __call__\n'
        "    _run_as_main(...)\n"
        '  File "<frozen runpy>", line 88, in _run_code\n'
        '  File "/home/me/train.py", line 5, in <module>\n'
        '    raise ValueError("boom")\n'
        "ValueError: boom\n"
    )
    internal = ("/venv/torch/", "/venv/elastic_idl/")
    assert user_traceback(tb, internal) == (
        "Traceback (most recent call last):\n"
        '  File "/home/me/train.py", line 5, in <module>\n'
        '    raise ValueError("boom")\n'
        "ValueError: boom\n"
    )
    only_internal = tb.split('  File "/home/me/train.py"')[0] + "ValueError: boom\n"
    assert user_traceback(only_internal, internal) == only_internal  # nothing of the user's: unchanged
    assert user_traceback("not a traceback", internal) == "not a traceback"


def test_launch_return_type_follows_return_all() -> None:
    """typing overloads: ``return_all=True`` is typed as the dict of values by rank, else rank 0's value."""
    import typing

    from elastic_idl._launch.launcher import launch

    by_flag = {
        typing.get_type_hints(o)["return_all"]: typing.get_type_hints(o)["return"] for o in typing.get_overloads(launch)
    }
    assert by_flag == {typing.Literal[False]: Any, typing.Literal[True]: dict[int, Any], bool: Any}


def test_a_worker_whose_parent_is_pid_1_is_no_orphan_when_pid_1_is_the_launcher() -> None:
    """In a pod the launcher is PID 1 and spawns its workers itself: their parent of 1 is the
    launcher. On the host, PID 1 is init, which adopts orphans."""
    from elastic_idl._launch.worker import _pid1_is_a_launcher

    assert not _pid1_is_a_launcher()  # this machine's PID 1 is not Python
    code = "from elastic_idl._launch.worker import _pid1_is_a_launcher as f; print(f())"
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (r.returncode, r.stdout.strip()) == (0, "True"), r.stderr


class _DeadStore:
    def check(self, keys: list[str]) -> bool:
        raise RuntimeError("Connection closed by peer")


def _failed_run(tmp_path: Path, message: str) -> tuple[Any, Any]:
    """A run of one node whose only worker failed with ``message``, and whose store no longer answers."""
    from types import SimpleNamespace

    from elastic_idl._launch import agent

    log = FailureLog(run_id="r", role="default", node="pod-1")
    log.add(0, [WorkerExit(1, 0, 11, 1, _error_file(tmp_path / "1.json", message, "Traceback ...", 1), 0)])
    config = SimpleNamespace(run_id="r", max_restarts=0, rdzv_endpoint="job-worker-0:23456")
    run = agent._Run(config, log, 600)  # type: ignore[arg-type]
    run.agent = SimpleNamespace(attempt=lambda: 0)  # type: ignore[assignment]
    run.handler = SimpleNamespace(_store=_DeadStore())  # type: ignore[assignment]
    result = SimpleNamespace(is_failed=lambda: True)
    return agent._outcome(result, run)[0], run  # type: ignore[arg-type]


def test_a_node_whose_own_worker_raised_reports_that_not_a_lost_store(tmp_path: Path) -> None:
    """Issue 30 item 3b: rank 1 raised ValueError (max_restarts 0); worker-0's pod then ended the job and
    its store stopped answering, and this pod exited 200 ('the rendezvous store is gone': the operator
    recreates pods under ExitCode) with no error document. Its own error is the root cause."""
    from elastic_idl.exit_codes import ExitCode, exit_code_of

    error, run = _failed_run(tmp_path, "ValueError: bad batch")
    assert type(error) is ei.LaunchFailedError
    assert "root cause: rank 1" in str(error) and "ValueError: bad batch" in str(error)
    assert "store" not in str(error).split("root cause")[0]
    assert exit_code_of(error) != ExitCode.STORE_LOST
    # The same node whose worker only lost its peers when the store's host went: a lost store (200).
    (tmp_path / "b").mkdir()
    error, run = _failed_run(tmp_path / "b", "RuntimeError: Connection closed by peer")
    assert isinstance(error, ei.RendezvousStoreLostError)
    assert exit_code_of(error) == ExitCode.STORE_LOST and run.shutdown_rdzv is False


_DEAD_SLEEPERS = """
import multiprocessing as mp, os, signal, sys, threading, time
from elastic_idl._launch.agent import _BoundedEvent

ctx = mp.get_context("fork")
event = ctx.Event()
procs = [ctx.Process(target=event.wait) for _ in range(2)]
for p in procs:
    p.start()
time.sleep(0.5)  # both asleep on the event, as torch's workers are once their values are handed over
for p in procs:
    os.kill(p.pid, signal.SIGABRT)
    p.join()
setter = event.set if sys.argv[1] == "plain" else _BoundedEvent(event, lambda: procs).set
started = time.monotonic()
t = threading.Thread(target=setter, daemon=True)
t.start()
t.join(5.0)
print("hangs" if t.is_alive() else f"returned {time.monotonic() - started:.2f}")
os._exit(0)
"""


@pytest.mark.parametrize("how", ["plain", "bounded"])
def test_setting_the_values_read_event_does_not_hang_on_workers_that_died_asleep(how: str) -> None:
    """Issue 30 item 7: torch's agent sets the event its workers sleep on once their values are read;
    a worker that died asleep (SIGABRT) never acknowledges the wake-up and multiprocessing's set()
    waited forever (plain: reproduced). The agent's event acknowledges for the dead (bounded)."""
    out = subprocess.run([sys.executable, "-c", _DEAD_SLEEPERS, how], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    if how == "plain":
        assert out.stdout.strip() == "hangs"
    else:
        verdict, seconds = out.stdout.split()
        assert verdict == "returned" and float(seconds) < 2.0, out.stdout
