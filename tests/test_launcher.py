"""launch() on one node, in this process: entrypoints, start methods, restarts, failure records.

Real worker processes (gloo on loopback). Every test checks that no worker and no
helper process outlives the launch, and that the launcher's own threads are gone.
"""

from __future__ import annotations

import json
import multiprocessing.util
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from elastic_idl._launch.forkserver import settled_thread_count
from elastic_idl._launch.launcher import (
    LaunchFailedError,
    RendezvousIncompleteError,
    launch,
)
from elastic_idl._task.messages import KubeflowTask, LegacyTask

WORKERS = Path(__file__).resolve().parent / "workers"
sys.path.insert(0, str(WORKERS))

import launch_fns  # noqa: E402  (tests/workers, importable by spawned workers through sys.path)

#: Variables the launcher sets for its workers while it runs (and must restore).
LAUNCH_ENV = (
    "TORCHELASTIC_SIGNALS_TO_HANDLE",
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
    "OMP_NUM_THREADS",
    "GLOO_SOCKET_IFNAME",
)


def task(
    *,
    nnodes: tuple[int, int] = (1, 1),
    nproc: int = 2,
    max_restarts: int = 0,
    join_timeout_s: int | None = None,
    kubeflow: bool = False,
    **extra: Any,
) -> Any:
    t = KubeflowTask() if kubeflow else LegacyTask()
    e = t.elastic_config
    e.min_replicas, e.max_replicas = nnodes
    e.nproc_per_node = nproc
    e.max_restarts = max_restarts
    e.rdzv_backend = "c10d"
    if join_timeout_s is not None:
        e.join_timeout.CopyFrom(Duration(seconds=join_timeout_s))
    for key, value in extra.items():
        opt = e.rdzv_options.add()
        opt.key, opt.value = key, str(value)
    if kubeflow:
        t.worker_replicas.common.replicas = nnodes[1]
    return t


def _children() -> set[int]:
    """Live (non-zombie) child processes of this process.

    CPython's multiprocessing resource tracker is left out: one per process, shared
    by every multiprocessing user, it exits when this process does.
    """
    me = os.getpid()
    out = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == me and fields[0] not in ("Z", "X"):
            if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.add(int(pid))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(autouse=True)
def _no_leftovers(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every launch leaves this process as it found it: no child, no thread, same handlers, no temp file."""
    # Made once per process, before the switch below: pytest's and CPython's own temp dirs.
    tmp_path_factory.getbasetemp()
    multiprocessing.util.get_temp_dir()
    tmp = tempfile.mkdtemp(prefix="ei-", dir="/tmp")  # short: a fork server's socket path lives here
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    before_children = _children()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
    env_before = {k: os.environ.get(k) for k in LAUNCH_ENV}
    yield
    assert _children() - before_children == set()
    assert settled_thread_count() == 1, [
        Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")
    ]
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert {k: os.environ.get(k) for k in LAUNCH_ENV} == env_before
    assert os.listdir(tmp) == []  # logs, error files, torch's traceback pickles: all gone
    os.rmdir(tmp)


def test_function_returns_rank0_value_by_default() -> None:
    out = launch(task(), launch_fns.allreduce, "x")
    assert out["rank"] == 0
    assert out["world"] == 2
    assert out["sum"] == 3.0  # 1 + 2: both workers took part
    assert out["tag"] == "x"


def test_return_all_gives_every_local_rank_and_workers_are_clean() -> None:
    out = launch(task(), launch_fns.allreduce, "${local_rank}", return_all=True)
    assert sorted(out) == [0, 1]
    for rank, value in out.items():
        assert value["rank"] == rank
        assert value["tag"] == str(value["local_rank"])  # torchrun's ${local_rank} macro
        assert value["sigterm"] is True  # default SIGTERM disposition, not the agent's handler
        assert value["omp"] == "1"  # torchrun's default for nproc > 1 ...
        assert value["threads"] == 1  # ... applied even though torch was imported before the fork
        assert not _alive(value["pid"])


def test_default_start_method_forks_from_the_warm_server_so_closures_work() -> None:
    # A closure cannot be pickled: only workers forked from a copy of this process can run it.
    out = launch(task(), launch_fns.closure_factory(4), return_all=True)
    assert out == {0: 40, 1: 41}


def test_a_launcher_with_threads_falls_back_to_a_cold_fork_server(caplog: pytest.LogCaptureFixture) -> None:
    # Forking a process that runs other threads could copy a held lock: not from here.
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, daemon=True)
    busy.start()
    try:
        out = launch(task(), launch_fns.allreduce, "cold", return_all=True)
        with pytest.raises(TypeError, match="cannot be sent to forkserver workers"):
            launch(task(), launch_fns.closure_factory(2))  # a closure needs the warm server
    finally:
        stop.set()
        busy.join()
    seen = [(v["rank"], v["sum"], v["tag"], v["sigterm"]) for v in out.values()]
    assert seen == [(0, 3.0, "cold", True), (1, 3.0, "cold", True)]
    assert "cold fork server (slower): the launcher process runs 2 threads" in caplog.text


def test_kubeflow_shape_and_spawn_start_method() -> None:
    out = launch(task(kubeflow=True), launch_fns.allreduce, "s", start_method="spawn")
    assert (out["world"], out["sum"], out["tag"], out["sigterm"]) == (2, 3.0, "s", True)


def test_spawn_refuses_an_unpicklable_entrypoint_before_starting_anything() -> None:
    with pytest.raises(TypeError, match="cannot be sent to spawn workers"):
        launch(task(), launch_fns.closure_factory(1), start_method="spawn")


@pytest.mark.parametrize("start_method", ["forkserver", "spawn", "fork"])
def test_a_return_value_that_cannot_be_sent_is_the_workers_recorded_error(start_method: str) -> None:
    """Issue 29 (7c, the launcher's sibling): torch pickles a worker's return value after the function, outside
    what it records: the worker ended with "exited with code 1 (no Python exception recorded)"."""
    with pytest.raises(LaunchFailedError) as info:
        launch(task(nproc=1), launch_fns.returns_a_lock, start_method=start_method)
    root = info.value.failures[0]
    assert root.message == (
        "TypeError: the value returns_a_lock returned (a lock) cannot be sent from the worker to the launcher: "
        "pickle fails with TypeError: cannot pickle '_thread.lock' object. Return values that pickle: numbers, "
        "strings, tensors, and classes defined at the top level of a module (not inside a function)"
    )
    assert "cannot pickle '_thread.lock' object" in root.traceback


def test_fork_start_method_resets_the_inherited_signal_handlers() -> None:
    out = launch(task(), launch_fns.allreduce, return_all=True, start_method="fork")
    assert all(v["sigterm"] for v in out.values())


def test_script_entrypoint_runs_as_main_with_argv(tmp_path: Path) -> None:
    script = WORKERS / "allreduce_script.py"
    assert launch(task(), str(script), str(tmp_path), "0", "--local=${local_rank}") is None
    seen = {int(p.stem): json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert sorted(seen) == [0, 1]
    for rank, data in seen.items():
        assert data["name"] == "__main__"
        assert data["sum"] == 2.0
        assert data["argv"][0] == str(script)
        assert data["local"] == [f"--local={rank}"]


def test_spawned_script_workers_end_without_finalizer_tracebacks(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 18 item 2: a spawned worker is a fresh interpreter; its atexit handlers are its own.

    Dropping them (as a forked copy of the launcher must) dropped weakref.finalize's hook:
    torch.library's finalizers then ran during module teardown and printed
    ``Exception ignored in: <finalize ...> TypeError`` blocks on a run that succeeded.
    The script's own atexit handler still runs.
    """
    script = tmp_path / "train.py"
    script.write_text(
        "import atexit, os, sys\n"
        "import torch.distributed as dist\n"
        "atexit.register(lambda: open(os.path.join(sys.argv[1], os.environ['RANK'] + '.exit'), 'w').close())\n"
        "dist.init_process_group('gloo')\n"
        "dist.barrier()\n"
        "dist.destroy_process_group()\n"
    )
    capfd.readouterr()
    assert launch(task(), str(script), str(tmp_path), start_method="spawn") is None
    err = capfd.readouterr().err
    assert "Exception ignored" not in err, err[-2000:]
    assert sorted(p.name for p in tmp_path.glob("*.exit")) == ["0.exit", "1.exit"]


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_ctrl_c_lets_the_workers_exit_handlers_finish(tmp_path: Path, start_method: str) -> None:
    """Issue 18 item 3: Ctrl-C sends SIGINT to the whole process group, and the agent sends the
    workers a second one when it stops them. That one used to land in the script's atexit
    handlers: ``Exception ignored in atexit callback ... KeyboardInterrupt``, the handler cut short.
    """
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(
        "import atexit, os, sys, time\n"
        "import torch.distributed as dist\n"
        "out = sys.argv[1]\n"
        "def slow_exit():\n"
        "    time.sleep(1.0)  # the agent's SIGINT arrives in here\n"
        "    open(os.path.join(out, os.environ['RANK'] + '.exit'), 'w').close()\n"
        "atexit.register(slow_exit)\n"
        "dist.init_process_group('gloo')\n"
        "dist.barrier()\n"
        "open(os.path.join(out, os.environ['RANK'] + '.ready'), 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    command = [sys.executable, "-m", "elastic_idl.cli", "torchrun", "--standalone", "--nproc-per-node=2"]
    proc = subprocess.Popen(
        [*command, f"--start-method={start_method}", str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal gives it
    )
    try:
        deadline = time.monotonic() + 240
        while len(list(tmp_path.glob("*.ready"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out[-3000:]
    assert "Exception ignored" not in out, out[-3000:]
    assert "launch interrupted by SIGINT" in out
    assert sorted(p.name for p in tmp_path.glob("*.exit")) == ["0.exit", "1.exit"]  # the handlers finished
    workers = [int(p.read_text()) for p in tmp_path.glob("*.ready")]
    assert len(workers) == 2 and not any(_alive(pid) for pid in workers)


def test_workers_get_the_thread_count_torchrun_gives_them(tmp_path: Path) -> None:
    """Issue 18 item 10: torch fixes its thread count at import, and an MKL build caps
    OMP_NUM_THREADS at the physical cores. torchrun's workers are fresh interpreters; ours,
    forked with torch loaded, must end up with the same count, not OMP_NUM_THREADS as given."""
    import subprocess

    wanted = str((os.cpu_count() or 1) + 1)  # more than the machine has: where a cap shows
    env = {**os.environ, "OMP_NUM_THREADS": wanted}
    fresh = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    script = tmp_path / "threads.py"
    script.write_text(
        "import os, sys, torch\n"
        "open(os.path.join(sys.argv[1], os.environ['RANK']), 'w').write(str(torch.get_num_threads()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "elastic_idl.cli", "torchrun", "--nproc-per-node=2", str(script), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.name in ("0", "1")} == {
        "0": fresh.stdout.strip(),
        "1": fresh.stdout.strip(),
    }


def test_script_exit_code_is_kept_and_explained(tmp_path: Path) -> None:
    with pytest.raises(LaunchFailedError) as info:
        launch(task(), WORKERS / "allreduce_script.py", str(tmp_path), "7")
    root = info.value.failures[0]
    assert (root.rank, root.exit_code) == (1, 7)
    assert "exited with exit code 7" in root.message


def test_module_entrypoint_like_python_dash_m(tmp_path: Path) -> None:
    assert launch(task(nproc=1), "ei_demo_mod", str(tmp_path), "a", "b", module=True) is None
    assert (tmp_path / "0.txt").read_text() == "__main__ a b"
    (tmp_path / "0.txt").unlink()
    assert launch(task(nproc=1), "-m", "ei_demo_mod", str(tmp_path), "c") is None
    assert (tmp_path / "0.txt").read_text() == "__main__ c"


def test_bad_entrypoints_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        launch(task(), str(tmp_path / "missing.py"))
    with pytest.raises(ModuleNotFoundError):
        launch(task(), "no_such_module_xyz", module=True)
    with pytest.raises(TypeError):
        launch(task(), 42)  # type: ignore[arg-type]


def test_worker_failing_once_recovers_on_attempt_1() -> None:
    out = launch(task(max_restarts=1), launch_fns.fail_rank_in_attempts, 1, 1, return_all=True)
    assert out == {0: {"rank": 0, "attempt": 1, "sum": 2.0}, 1: {"rank": 1, "attempt": 1, "sum": 2.0}}


def test_fork_restart_does_not_wait_for_blocked_workers() -> None:
    # Rank 1 fails while rank 0 is blocked in a C++ store wait. With the agent's SIGTERM
    # handler inherited (torch's fork), rank 0 would survive SIGTERM until torch's
    # 30 s SIGKILL; shutdown_timeout=... is irrelevant to that path. With the
    # default disposition restored, attempt 1 starts at once and succeeds.
    started = time.monotonic()
    out = launch(task(max_restarts=1), launch_fns.block_in_cpp_unless_rank, 1, return_all=True, start_method="fork")
    assert out == {0: "recovered", 1: "recovered"}
    # Not a benchmark: with the inherited handler this takes torch's 30 s grace period at least.
    assert time.monotonic() - started < 25


def test_permanent_failure_lists_every_attempt_root_cause_first(tmp_path: Path) -> None:
    report_path = tmp_path / "failures" / "report.json"
    with pytest.raises(LaunchFailedError) as info:
        launch(task(max_restarts=1), launch_fns.fail_rank_in_attempts, 1, 5, failure_path=report_path)
    err = info.value
    rank1 = [r for r in err.failures if r.rank == 1]
    assert [r.attempt for r in rank1] == [0, 1]  # both attempts, not only the last one
    root = err.failures[0]
    assert (root.rank, root.attempt, root.exit_code) == (1, 0, 1)
    assert root.message == "ValueError: rank 1 fails in attempt 0"
    assert "fail_rank_in_attempts" in root.traceback
    assert root.pid > 0 and root.role == "default" and root.node
    assert [r.attempt for r in err.failures] == sorted(r.attempt for r in err.failures)
    assert err.report.attempts == 2
    assert "root cause: rank 1" in str(err)
    assert "ValueError: rank 1 fails in attempt 0" in str(err)
    written = json.loads(report_path.read_text())
    assert written["attempts"] == 2
    assert written["failures"][0]["message"] == "ValueError: rank 1 fails in attempt 0"
    assert written["runId"] == err.report.run_id


def test_worker_killed_by_exit_code_without_exception() -> None:
    with pytest.raises(LaunchFailedError) as info:
        launch(task(), launch_fns.fail_rank_in_attempts, 0, 1, 3)
    root = info.value.failures[0]
    assert (root.rank, root.exit_code) == (0, 3)
    assert "exited with code 3" in root.message


@pytest.mark.parametrize(
    ("nproc", "step", "how"),
    [
        pytest.param(2, -1, "SIGKILL", id="2-workers-SIGKILL-before-the-first-collective"),
        pytest.param(3, 50, "SIGKILL", id="3-workers-SIGKILL-in-an-all_reduce-loop"),
        pytest.param(3, -1, "SIGKILL", id="3-workers-SIGKILL-before-the-first-collective"),
        pytest.param(2, 50, "SIGKILL", id="2-workers-SIGKILL-in-an-all_reduce-loop"),
        pytest.param(3, 50, "SIGSEGV", id="3-workers-SIGSEGV-in-a-loop"),
        pytest.param(2, -1, "os._exit", id="2-workers-os._exit"),
    ],
)
def test_a_worker_that_dies_without_an_exception_is_the_root_cause(
    tmp_path: Path, nproc: int, step: int, how: str
) -> None:
    """Issue 18 item 1: the last rank dies hard (the OOM killer's SIGKILL, a crash, os._exit) and the
    peers' collectives fail with "Connection closed by peer". With a poll every 2 s the peers
    have ended too when the agent looks, and torch names the lowest failed rank, a peer; the
    report must still hold the dead rank, first, with its signal."""
    t = task(nproc=nproc)
    t.elastic_config.monitor_interval.CopyFrom(Duration(seconds=2))
    report_path = tmp_path / "report.json"
    with pytest.raises(LaunchFailedError) as info:
        launch(t, launch_fns.die_hard_at, how, step, failure_path=report_path)
    err = info.value
    victim = nproc - 1
    root = err.failures[0]
    if how == "os._exit":
        assert (root.rank, root.WhichOneof("termination"), root.exit_code) == (victim, "exit_code", 7)
        assert root.message == "exited with code 7 (no Python exception recorded)"
    else:
        assert (root.rank, root.WhichOneof("termination"), root.signal) == (victim, "signal", getattr(signal, how))
        assert root.message == f"killed by {how}"
    assert [r.rank for r in err.failures].count(victim) == 1  # the peers follow, each once at most
    assert f"root cause: rank {victim} " in str(err)
    first = json.loads(report_path.read_text())["failures"][0]
    assert (first["rank"], first.get("signal", 0), first.get("exitCode", 0)) == (
        victim,
        root.signal,
        root.exit_code,
    )


def test_rendezvous_that_cannot_fill_says_how_many_joined(tmp_path: Path) -> None:
    with pytest.raises(RendezvousIncompleteError) as info:
        launch(
            task(nnodes=(2, 2), join_timeout_s=2),
            launch_fns.allreduce,
            rdzv_endpoint="127.0.0.1:0",
            failure_path=tmp_path / "r.json",
        )
    err = info.value
    assert (err.joined, err.needed, err.timeout_s) == (1, 2, 2)
    assert "1 of the 2 node(s) needed joined" in str(err)
    assert "join_timeout=2s" in str(err)
    assert json.loads((tmp_path / "r.json").read_text())["summary"] == str(err)


def test_a_second_launch_in_the_same_process_is_as_good_as_the_first() -> None:
    first = launch(task(), launch_fns.allreduce, return_all=True)
    second = launch(task(), launch_fns.allreduce, return_all=True)
    assert [v["sum"] for v in first.values()] == [v["sum"] for v in second.values()] == [3.0, 3.0]


# ---------------------------------------------------------------- issue #9


def test_a_module_in_the_working_directory_launches_from_a_script_elsewhere(tmp_path: Path) -> None:
    """``ei.launch(task, "-m", "pkg.mod")`` finds what ``python -m pkg.mod`` finds, in the launcher and the workers."""
    import subprocess

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "ei_cwd_pkg").mkdir(parents=True)
    elsewhere.mkdir()
    (work / "ei_cwd_pkg" / "__init__.py").write_text("")
    (work / "ei_cwd_pkg" / "train.py").write_text(
        "import os, sys\nopen(f\"{os.environ['RANK']}-{sys.argv[1]}.txt\", 'w').close()\n"
    )
    driver = elsewhere / "driver.py"  # python puts elsewhere/, not work/, first on sys.path
    driver.write_text(
        "import elastic_idl as ei\n"
        "from elastic_idl._task.messages import LegacyTask\n"
        "t = LegacyTask()\n"
        "e = t.elastic_config\n"
        "e.min_replicas = e.max_replicas = 1\n"
        "e.nproc_per_node, e.rdzv_backend = 2, 'c10d'\n"
        "if __name__ == '__main__':\n"
        "    for method in ('forkserver', 'spawn'):\n"
        "        ei.launch(t, '-m', 'ei_cwd_pkg.train', method, start_method=method)\n"
    )
    out = subprocess.run([sys.executable, str(driver)], cwd=work, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in work.glob("*.txt")) == [
        "0-forkserver.txt",
        "0-spawn.txt",
        "1-forkserver.txt",
        "1-spawn.txt",
    ]
