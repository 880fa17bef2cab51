"""A 2-node elastic training task with a checkpoint, then a task consuming its output (issue 31 item 6).

    make flyte-run FILE=flyte/examples/train.py WORKFLOW=wf INPUTS='{"steps": 3}'      # {"o0": "trained 3 steps in a world of 2"}
    make flyte-run FILE=flyte/examples/train.py WORKFLOW=wf_kf ARGS='--plugin pytorch=pytorch'   # flytekitplugins-kfpytorch's Elastic

`train` (elastic_idl's `Elastic`) and `train_kf` (flytekitplugins-kfpytorch's) run the same body:
gloo all-reduces in a world of 2, one per step; each rank prints `first training step at <unix
time>` (bench/flyte_times.py reads it from the pod's log); rank 0 writes the number of steps done
as the task's checkpoint (flytekit's `current_context().checkpoint`) and reads the previous
attempt's, if any, to start from there. `fail_rank` >= 0 makes that rank raise a ValueError at the
first step; `hold` keeps the formed group waiting that many seconds before it trains (a window to
disturb it in).
"""

import time
from datetime import timedelta

from flytekit import current_context, task, workflow
from flytekit.exceptions.user import FlyteDataNotFoundException
from flytekitplugins.kfpytorch import Elastic as KfElastic

import elastic_idl as ei


def _train(steps: int, hold: float, fail_rank: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpoint = current_context().checkpoint
    try:
        prev = checkpoint.read() if checkpoint is not None else None
    except FlyteDataNotFoundException:
        # propeller names the previous attempt's checkpoint even when that attempt wrote none
        # (it was killed first): flytekit's read() then raises instead of returning None.
        prev = None
    start = int(prev.decode()) if prev else 0
    time.sleep(hold)
    done = start
    for step in range(start, steps):
        if step == start:
            print(f"first training step at {time.time():.3f} rank {rank}", flush=True)
        if rank == fail_rank:
            raise ValueError(f"rank {rank} refuses step {step}")
        grad = torch.tensor([float(rank + 1)])
        dist.all_reduce(grad)
        done = step + 1
        if rank == 0 and checkpoint is not None:
            checkpoint.write(str(done).encode())
    dist.barrier()
    dist.destroy_process_group()
    return done * 10 + world


_CONFIG = {"nnodes": 2, "nproc_per_node": 1, "rdzv_configs": {"join_timeout": 120}}


@task(task_config=ei.Elastic(**_CONFIG))
def train(steps: int, hold: float, fail_rank: int) -> int:
    """Returns 10 x the steps done plus the world size (3 steps: 32)."""
    return _train(steps, hold, fail_rank)


@task(task_config=KfElastic(**_CONFIG))
def train_kf(steps: int, hold: float, fail_rank: int) -> int:
    return _train(steps, hold, fail_rank)


@task(task_config=ei.Elastic(**_CONFIG), retries=1)
def train_retry(steps: int, hold: float, fail_rank: int) -> int:
    """`train` with one retry: a second attempt (a new PyTorchJob) after a retryable failure."""
    return _train(steps, hold, fail_rank)


@task
def report(n: int) -> str:
    return f"trained {n // 10} steps in a world of {n % 10}"


@workflow
def wf(steps: int = 3, hold: float = 0.0, fail_rank: int = -1) -> str:
    return report(n=train(steps=steps, hold=hold, fail_rank=fail_rank))


@workflow
def wf_kf(steps: int = 3, hold: float = 0.0, fail_rank: int = -1) -> str:
    return report(n=train_kf(steps=steps, hold=hold, fail_rank=fail_rank))


@workflow
def wf_retry(steps: int = 3, hold: float = 0.0, fail_rank: int = -1) -> str:
    return report(n=train_retry(steps=steps, hold=hold, fail_rank=fail_rank))
