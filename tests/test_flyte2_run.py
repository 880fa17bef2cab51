"""Running a Flyte 2 Elastic task (src/elastic_idl/flyte2/_run.py): local mode launches the workers.

flyteplugins-pytorch's local mode calls the function once; ours starts ``nproc_per_node`` workers
through elastic-idl's launcher and returns rank 0's value, each worker under the task's Flyte
context; so does a Flyte 2 pod outside a PyTorchJob (remote mode, no ``PET_*`` env). In hybrid mode
outside a pod the task raises ``NotBuiltError``. The pods of a job: tests/test_flyte2_pods.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import warnings
from typing import Any

import pytest

import elastic_idl as ei

pytest.importorskip("flyte")
pytest.importorskip("torch")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import flyte
    import flyte.io
    from flyte._context import internal_ctx
    from flyte.models import ActionID, RawDataPath, TaskContext
    from flyte.report import Report

from elastic_idl.flyte2 import Elastic, NotBuiltError

env = flyte.TaskEnvironment(name="ranks", plugin_config=Elastic(nnodes=1, nproc_per_node=2))
multi_node = flyte.TaskEnvironment(name="multi", plugin_config=Elastic(nnodes="1:2", nproc_per_node=1))
failing = flyte.TaskEnvironment(name="failing", plugin_config=Elastic(nnodes=1, nproc_per_node=2, max_restarts=0))
LOCK = threading.Lock()


@env.task
def ranks(base: int) -> str:
    """Every worker joins one gloo group and gathers (RANK, WORLD_SIZE, the Flyte run its context names)."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    seen: list[Any] = [None] * dist.get_world_size()
    ctx = flyte.ctx()
    dist.all_gather_object(seen, (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), ctx and ctx.action.run_name))
    dist.barrier()
    dist.destroy_process_group()
    return f"{base}+{os.environ['RANK']}: {sorted(seen)}"


@multi_node.task
async def one_node(n: int) -> str:
    """An async task function of a two-node task: run as one node here."""
    await asyncio.sleep(0)
    return f"{n} {os.environ['RANK']}/{os.environ['WORLD_SIZE']}"


@env.task
def locked(n: int) -> int:
    with LOCK:
        return n


def _run(task: Any, **inputs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # pydantic's, from flyte's local run
        return flyte.with_runcontext(mode="local", name="elastic-local").run(task, **inputs).outputs()[0]


def test_a_two_worker_task_returns_rank_0s_value_and_every_worker_ran() -> None:
    # Rank 0's value; both workers saw WORLD_SIZE 2, their own RANK, and the run's Flyte context.
    assert _run(ranks, base=7) == f"7+0: {[(0, 2, 'elastic-local'), (1, 2, 'elastic-local')]}"


def test_a_multi_node_async_task_runs_one_node_locally_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="elastic_idl"):
        value = _run(one_node, n=3)
    assert value == "3 0/1"
    assert "local run of a task with nnodes='1:2'" in caplog.text and "running 1 node" in caplog.text


def test_what_cold_workers_cannot_receive_fails_before_any_worker_starts() -> None:
    with pytest.raises(Exception, match="LOCK") as info:
        _run(locked, n=1)
    # Flyte 2's local run wraps the task's error; ours is the cause, naming the global.
    text = "".join(str(e) for e in _chain(info.value))
    assert "task ranks.locked: its workers cannot receive the global 'LOCK' it uses (a lock)" in text
    assert "start_method='fork'" in text


def _chain(exc: BaseException | None) -> list[BaseException]:
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _context(mode: str) -> TaskContext:
    return TaskContext(
        action=ActionID(name="a0", run_name="elastic-remote"),
        version="v1",
        raw_data_path=RawDataPath(path="/tmp/raw"),
        output_path="/tmp/out",
        run_base_dir="/tmp/base",
        report=Report(name="a0"),
        mode=mode,  # type: ignore[arg-type]
    )


def test_in_hybrid_mode_outside_a_pod_the_task_raises_not_built_naming_the_mode() -> None:
    with internal_ctx().replace_task_context(_context("hybrid")), pytest.raises(NotBuiltError) as info:
        asyncio.run(ranks.execute(base=1))
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, ei.ElasticIdlError)
    assert info.value.missing == "elastic_idl.flyte2 in Flyte 2 mode 'hybrid'"
    assert "outside a pod of a PyTorchJob" in str(info.value)


def test_in_remote_mode_outside_a_pytorchjob_the_task_runs_one_node_here() -> None:
    """A Flyte 2 pod that is no PyTorchJob's (no PET_* env: the python-task of nnodes=1) launches here."""
    assert not any(k.startswith("PET_") for k in os.environ)
    with internal_ctx().replace_task_context(_context("remote")):
        value = asyncio.run(ranks.execute(base=2))
    assert value == f"2+0: {[(0, 2, 'elastic-remote'), (1, 2, 'elastic-remote')]}"


@failing.task
def rank_1_fails(n: int) -> int:
    if os.environ["RANK"] == "1":
        raise ValueError(f"rank 1 fails with {n}")
    return n


def test_a_failure_is_the_failure_reports_root_cause_in_flytes_user_error() -> None:
    import flyte.errors

    with pytest.raises(flyte.errors.RuntimeUserError) as info:
        _run(rank_1_fails, n=5)
    text = str(info.value)
    assert "workers failed in 1 attempt(s) (max_restarts=0)" in text
    assert "root cause: rank 1 (local rank 1" in text and "ValueError: rank 1 fails with 5" in text
