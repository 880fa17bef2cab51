"""The flytekit task's run path (src/elastic_idl/flytekit/_run.py, _checkpoint.py) on its own:
the pickle check a local run makes for the cold path, the wait of a pod without rank 0 for rank
0's outcome, and where a worker group's checkpoint restores from."""

from __future__ import annotations

import gc
import importlib
import sys
import threading
import time
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

from elastic_idl.flytekit import _checkpoint, _run

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

    assert _run._culprit(closes, {}) == "the variable 'lock' it closes over (a lock)"
    assert _run._culprit(len, {"a": 1, "b": lock}) == "the input 'b' (a lock)"
    assert _run._pickles((closes, {"a": 1})) is not None
    assert _run._pickles((len, {"a": [1, 2]})) is None


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
