"""A 2-node elastic task on propeller: task type `pytorch`, which `make flyte-up` routes to
elastic-idl's plugin (FLYTE_PYTORCH_PLUGIN=pytorch routes it to flyteplugins' own), then a plain
task that consumes its output.

    make flyte-run FILE=flyte/examples/elastic.py WORKFLOW=wf INPUTS='{"x": 3}'   # {"o0": 73}
"""

import time
from datetime import timedelta

from flytekit import task, workflow

import elastic_idl as ei


@task(task_config=ei.Elastic(nnodes=2, nproc_per_node=1, rdzv_configs={"join_timeout": 120}))
def reduce_sum(x: int, hold: float) -> int:
    """Each worker contributes x + its rank; rank 0 returns 10 x the sum plus the world size (x=3: 72)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    time.sleep(hold)  # a window to disturb the formed group in (0: none)
    value = torch.tensor([float(x + dist.get_rank())])
    dist.all_reduce(value)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return int(value.item()) * 10 + world


@task
def plus_one(n: int) -> int:
    return n + 1


@workflow
def wf(x: int = 3, hold: float = 0.0) -> int:
    return plus_one(n=reduce_sum(x=x, hold=hold))
