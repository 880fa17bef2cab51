"""The flytekit task's run path (src/elastic_idl/flytekit/_run.py, _worker.py, _checkpoint.py) on its
own: the pickle check a local run makes for the cold path, what a worker sends back and how a cold
worker loads the task, the wait of a pod without rank 0 for rank 0's outcome, and where a worker
group's checkpoint restores from."""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import subprocess
import sys
import threading
import time
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flytekit")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import flytekit
    from flytekit.core.checkpointer import SyncCheckpoint
    from flytekit.core.context_manager import ExecutionParameters, FlyteContextManager

from elastic_idl._sdk import local
from elastic_idl.flytekit import _checkpoint, _run
from elastic_idl.flytekit._worker import TaskEntry, WorkerResult, import_root, send

LOCKED = """
import threading

from flytekit import task, workflow

import elastic_idl as ei

LOCK = threading.Lock()


@task(task_config=ei.Elastic(nnodes=1, nproc_per_node=2))
def count(n: int) -> int:
    with LOCK:
        return n + 1


@workflow
def wf(n: int) -> int:
    return count(n=n)


@task(task_config=ei.Elastic(nnodes=1, nproc_per_node=1, start_method="fork"))
def count_forked(n: int) -> int:
    with LOCK:
        return n + 1
"""


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "fk_run_locked.py").write_text(LOCKED)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("fk_run_locked")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("fk_run_locked", None)


# flytekit's local sandbox makes a SyncCheckpoint whose TemporaryDirectory is never cleaned up; the
# traceback keeps it in a reference cycle, so it is collected (with a ResourceWarning) here, as in
# tests/test_flytekit_plugin.py's test_worker_failures_become_flytekits_exceptions.
@pytest.mark.filterwarnings("ignore:Implicitly cleaning up <TemporaryDirectory:ResourceWarning")
def test_a_local_run_fails_where_every_pod_would_naming_the_global_and_the_way_out(locked: Any) -> None:
    pytest.importorskip("torch")
    with pytest.raises(TypeError) as info:
        locked.wf(n=1)
    text = str(info.value)
    assert "task count: its workers cannot receive the global 'LOCK' it uses (a lock)" in text
    assert "cannot pickle '_thread.lock' object" in text
    assert "s3://" in text and "inside the task function" in text and "module.name" in text
    assert "Define it at module level" not in text  # the launcher's hint, wrong here
    del info
    gc.collect()


def test_fork_never_pickles_so_the_same_task_runs(locked: Any) -> None:
    pytest.importorskip("torch")
    assert locked.count_forked(n=1) == 2


def test_the_culprit_is_named_for_an_input_and_a_closure() -> None:
    lock = threading.Lock()

    def closes() -> None:
        with lock:
            pass

    assert local.culprit(closes, {}) == "the variable 'lock' it closes over (a lock)"
    assert local.culprit(len, {"a": 1, "b": lock}) == "the input 'b' (a lock)"
    assert local.pickles((closes, {"a": 1})) is not None
    assert local.pickles((len, {"a": [1, 2]})) is None


# --------------------------------------------------------------------------- worker <-> task process


def _run_without_pythonpath(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` as a user runs it: nothing added to the import path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def _script_module(name: str) -> types.ModuleType:
    """A module that is in sys.modules but cannot be imported again (like a script run as __main__)."""
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses looks the module up
    exec(
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class Out:\n"
        "    loss: float\n"
        "def train(x: int) -> 'Out':\n"
        "    return Out(x / 2)\n",
        module.__dict__,
    )
    return module


#: A cold worker, as far as the result goes: the function arrives by cloudpickle, its value leaves by torch's pickle
#: (which fails) or as the plugin sends it.
COLD_WORKER = """
import pickle, sys
import cloudpickle
from elastic_idl.flytekit._worker import WorkerResult, send
fn, kwargs = cloudpickle.loads(sys.stdin.buffer.read())
value = fn(**kwargs)
try:
    pickle.dumps(value)
except pickle.PicklingError as exc:
    print("torch's pickle:", exc, file=sys.stderr)
sys.stdout.buffer.write(pickle.dumps(send(WorkerResult(value, []), "train", by_value=True)))
"""


def test_a_cold_workers_value_comes_back_as_the_tasks_own_class() -> None:
    import cloudpickle

    script = _script_module("fk_run_script")
    cloudpickle.register_pickle_by_value(script)  # as cloudpickle treats __main__
    try:
        payload = cloudpickle.dumps((script.train, {"x": 3}))  # what TaskEntry sends
        proc = subprocess.run(
            [sys.executable, "-c", COLD_WORKER], input=payload, capture_output=True, timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        # The old path: torch pickled the value by reference, which a worker cannot (no recorded cause).
        assert "torch's pickle: Can't pickle <class 'fk_run_script.Out'>" in proc.stderr.decode()
        back = pickle.loads(proc.stdout)  # what torch's queue does with it in the task's process
        assert isinstance(back, WorkerResult)
        assert type(back.value) is script.Out  # the task's own class, not a copy
        assert back.value == script.Out(1.5)
    finally:
        cloudpickle.unregister_pickle_by_value(script)
        del sys.modules["fk_run_script"]


def test_a_value_that_cannot_be_sent_is_a_typeerror_naming_it_with_its_cause() -> None:
    lock = threading.Lock()
    for by_value, pickler in ((True, "cloudpickle"), (False, "pickle")):
        with pytest.raises(TypeError) as info:
            send(WorkerResult(lock, []), "train", by_value=by_value)
        assert str(info.value).startswith(
            f"task train: the value it returned (a lock) cannot be sent from the worker to the task's process: "
            f"{pickler} fails with TypeError: cannot pickle '_thread.lock' object. "
        )
        assert "defined at the top level of a module" in str(info.value)
        assert isinstance(info.value.__cause__, TypeError)
    with pytest.raises(TypeError, match="the decks or output metadata it made cannot be sent"):
        send(WorkerResult(1, [lock]), "train", by_value=False)
    # What pickles goes through torch's pickle as it is: ForkingPickler's reductions (tensors in shared memory).
    warm = send(WorkerResult({"loss": 0.5}, []), "train", by_value=False)
    assert pickle.loads(pickle.dumps(warm)) == WorkerResult({"loss": 0.5}, [])


def test_a_cold_worker_loads_the_task_when_called_and_says_what_is_missing(tmp_path: Path) -> None:
    """The entry is unpacked inside the worker's recorded call, with the module's directory on sys.path."""
    pkg = tmp_path / "fkproj" / "fk_run_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def top():\n    pass\n")
    (pkg / "tasks.py").write_text("def helper(x):\n    return x * 2\n\ndef train(x):\n    return helper(x)\n")
    root = str(tmp_path / "fkproj")
    sys.path.insert(0, root)
    try:
        module = importlib.import_module("fk_run_pkg.tasks")
        assert import_root(module.train) == root
        assert import_root(importlib.import_module("fk_run_pkg").top) == root  # a package's __init__
        payload = pickle.dumps(TaskEntry(module.train, {"x": 4}, str(tmp_path), {}, sys_path=[root]))
    finally:
        sys.path.remove(root)
        for name in ("fk_run_pkg.tasks", "fk_run_pkg"):
            sys.modules.pop(name, None)
    assert import_root(len) is None  # no module file
    # In a fresh interpreter without that directory on sys.path (pyflyte run removes it after its import).
    code = f"""
import pickle, sys
from unittest import mock
entry = pickle.loads({payload!r})  # unpacked only when called: nothing imported yet
assert "fk_run_pkg" not in sys.modules
with mock.patch("flytekit.bin.entrypoint.setup_execution"):
    entry._unpack()
print(entry._fn(**entry._kwargs))
"""
    proc = _run_without_pythonpath(tmp_path, sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["8"]
    # Without the directory (an old entry, or a module that is nowhere): an ImportError that says what to do.
    broken = pickle.loads(payload)
    broken._sys_path = ()
    with pytest.raises(ImportError) as info:
        broken._unpack()
    assert str(info.value).startswith(
        "task train: a worker cannot load the task function and its inputs: "
        "ModuleNotFoundError: No module named 'fk_run_pkg'. "
    )
    assert "PYTHONPATH" in str(info.value)


#: A workflow whose task returns a dataclass defined in the script and uses a helper of its own module.
SCRIPT = """
import dataclasses
import sys

from flytekit import task, workflow

from elastic_idl import Elastic


@dataclasses.dataclass
class Out:
    loss: float
    world: int


def helper(x: int) -> float:
    return x / 2


@task(task_config=Elastic(nproc_per_node=2, start_method=START_METHOD))
def train(x: int) -> Out:
    import os

    return Out(helper(x), int(os.environ["WORLD_SIZE"]))


@workflow
def wf(x: int = 3) -> Out:
    return train(x=x)


if __name__ == "__main__":
    out = wf(x=3)
    print("RESULT", type(out) is Out, out)
"""


def _flytekit_script(tmp_path: Path, start_method: str) -> Path:
    path = tmp_path / "fk_run_wf.py"
    path.write_text(SCRIPT.replace("START_METHOD", repr(start_method)))
    return path


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_a_dataclass_defined_in_the_script_comes_back(tmp_path: Path, start_method: str) -> None:
    """``python wf.py``: kfpytorch (spawn) fails with a PicklingError; ours failed with no recorded cause."""
    pytest.importorskip("torch")
    script = _flytekit_script(tmp_path, start_method)
    proc = _run_without_pythonpath(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "RESULT True Out(loss=1.5, world=2)" in proc.stdout


def test_pyflyte_run_finds_the_tasks_own_module_in_cold_workers(tmp_path: Path) -> None:
    """``pyflyte run wf.py wf`` without PYTHONPATH: the module was importable only while pyflyte loaded it."""
    pytest.importorskip("torch")
    _flytekit_script(tmp_path, "spawn")
    proc = _run_without_pythonpath(
        tmp_path, str(Path(sys.executable).parent / "pyflyte"), "run", "fk_run_wf.py", "wf", "--x", "5"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Out(loss=2.5, world=2)" in proc.stdout


@pytest.fixture
def ctx() -> Any:
    return FlyteContextManager.current_context()


def test_a_pod_without_rank_0_waits_until_outputs_pb_is_written(ctx: Any, tmp_path: Path) -> None:
    prefix = tmp_path / "outputs"
    prefix.mkdir()
    (prefix / "deck.html").write_text("not an outcome")
    timer = threading.Timer(1.5, (prefix / "outputs.pb").write_bytes, args=(b"",))
    started = time.monotonic()
    timer.start()
    try:
        assert _run._await_rank_0(ctx, str(prefix), timeout_s=30) is True
    finally:
        timer.cancel()
    assert 1.4 <= time.monotonic() - started < 10


def test_an_error_document_is_an_outcome_too_even_before_the_prefix_exists(ctx: Any, tmp_path: Path) -> None:
    prefix = tmp_path / "later"

    def write() -> None:
        prefix.mkdir()
        (prefix / "error-0a1b.pb").write_bytes(b"")

    timer = threading.Timer(1.0, write)
    timer.start()
    try:
        assert _run._await_rank_0(ctx, str(prefix), timeout_s=30) is True
    finally:
        timer.cancel()


def test_the_wait_is_bounded(ctx: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    started = time.monotonic()
    assert _run._await_rank_0(ctx, str(tmp_path), timeout_s=1.5) is False
    assert 1.5 <= time.monotonic() - started < 5
    assert "rank 0's outcome is not under" in caplog.text


def test_restore_source_prefers_what_this_attempt_saved(ctx: Any, tmp_path: Path) -> None:
    dest, prev = tmp_path / "dest", tmp_path / "prev"
    dest.mkdir()
    fa = ctx.file_access
    assert _checkpoint.restore_source(fa, str(dest), str(prev)) == str(prev)  # empty: flytekit makes it
    assert _checkpoint.restore_source(fa, str(tmp_path / "none"), None) is None
    (dest / "sub").mkdir()
    (dest / "sub" / "model.pt").write_bytes(b"w")
    assert _checkpoint.restore_source(fa, str(dest), str(prev)) == str(dest)
    assert _checkpoint.restore_source(fa, str(dest), None) == str(dest)


def test_checkpoint_paths_reads_flytekits_sync_checkpoint(tmp_path: Path) -> None:
    builder = ExecutionParameters.new_builder()
    assert _checkpoint.checkpoint_paths(builder.build()) == (None, None)  # no checkpoint at all
    builder.checkpoint = SyncCheckpoint(checkpoint_dest=str(tmp_path / "d"), checkpoint_src=str(tmp_path / "s"))
    assert _checkpoint.checkpoint_paths(builder.build()) == (str(tmp_path / "d"), str(tmp_path / "s"))
    builder.checkpoint = SyncCheckpoint(checkpoint_dest=str(tmp_path / "d"))
    assert _checkpoint.checkpoint_paths(builder.build()) == (str(tmp_path / "d"), None)


def test_a_worker_group_sees_the_checkpoint_an_earlier_group_saved(tmp_path: Path) -> None:
    dest, prev = tmp_path / "dest", tmp_path / "prev"
    dest.mkdir()
    base = ExecutionParameters.new_builder()
    base.checkpoint = SyncCheckpoint(checkpoint_dest=str(dest))
    ctx = FlyteContextManager.current_context()
    state = ctx.execution_state
    with FlyteContextManager.with_context(ctx.with_execution_state(state.with_params(user_space_params=base.build()))):
        with _checkpoint.this_attempts_checkpoint(str(dest), None):
            cp = flytekit.current_context().checkpoint
            assert cp.prev_exists() is False and cp.read() is None  # attempt 0: nothing yet
            cp.write(b"step 7")
        with _checkpoint.this_attempts_checkpoint(str(dest), str(prev)):
            cp = flytekit.current_context().checkpoint
            assert cp.prev_exists() is True and cp.read() == b"step 7"  # the restarted group
