"""Worker entrypoints for tests/test_launcher_faults.py: peers that vanish or fail for good.

Every process group here keeps torch's default timeout (30 minutes for gloo): a test that
passes cannot have been rescued by a collective timing out.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, NoReturn


def _mark(marker_dir: str, name: str, **data: Any) -> None:
    """Write ``name`` (atomically) with the time and ``data`` as JSON."""
    path = Path(marker_dir) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"t": time.time(), "pid": os.getpid(), **data}))
    tmp.replace(path)


def _all_reduce_forever(marker_dir: str, group_rank: int, rank: int) -> NoReturn:
    """Train until the agent stops this worker: an all_reduce every 50 ms, a step mark every 5th."""
    import torch
    import torch.distributed as dist

    step = 0
    while True:
        t = torch.ones(1)
        dist.all_reduce(t)
        step += 1
        if step % 5 == 0:
            _mark(marker_dir, f"step-g{group_rank}-r{rank}", step=step)
        time.sleep(0.05)


def train_until_peer_lost(marker_dir: str) -> dict[str, Any]:
    """all_reduce in a world of 2 until the agent restarts us alone; then return at once.

    Alone before any world of 2 was seen: wait for the peer (the agent restarts us when it
    comes). The all_reduce loop never ends by itself: a frozen peer blocks it for the
    process group timeout unless the agent notices.
    """
    import torch.distributed as dist

    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    group_rank = int(os.environ["GROUP_RANK"])
    _mark(marker_dir, f"world{world}-g{group_rank}-r{rank}-{os.getpid()}", world=world)
    if world == 1:
        if not any(Path(marker_dir).glob("world2-*")):
            while True:  # the agent restarts us when the peer arrives
                time.sleep(0.1)
        out = {"rank": rank, "world": world, "attempt": int(os.environ["TORCHELASTIC_RESTART_COUNT"])}
        dist.destroy_process_group()
        return {**out, "t": time.time()}
    _all_reduce_forever(marker_dir, group_rank, rank)


def fail_for_good_on_node(marker_dir: str, where: str) -> str:
    """The workers of node (group) rank 1 fail for good; those of node rank 0 wait for them.

    ``where``: "init", node 1 raises before init_process_group, so node 0's workers wait in it
    for ranks that never connect; "allreduce", node 1 raises after it while node 0's workers
    are in an all_reduce.
    """
    import torch
    import torch.distributed as dist

    group_rank = int(os.environ["GROUP_RANK"])
    if group_rank == 1 and where == "init":
        time.sleep(1.0)  # node 0's workers are in init_process_group by now
        _mark(marker_dir, f"failed-g{group_rank}-{os.getpid()}")
        raise RuntimeError("node 1 fails for good before init_process_group")
    _mark(marker_dir, f"init-g{group_rank}-{os.getpid()}")
    dist.init_process_group("gloo")
    if group_rank == 1:
        time.sleep(1.0)  # node 0's workers are in the all_reduce by now
        _mark(marker_dir, f"failed-g{group_rank}-{os.getpid()}")
        raise RuntimeError("node 1 fails for good instead of entering the all_reduce")
    _mark(marker_dir, f"allreduce-g{group_rank}-{os.getpid()}")
    dist.all_reduce(torch.ones(1))
    return "unreachable: node 1 never joins the all_reduce"


def train_through_a_freeze(marker_dir: str) -> dict[str, Any]:
    """all_reduce in a world of 2; after the agent re-formed the group alone, wait for the peer to
    come back; in the world of 2 formed after that, all_reduce once and return.
    """
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    group_rank = int(os.environ["GROUP_RANK"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    marks = Path(marker_dir)
    _mark(marker_dir, f"world{world}-g{group_rank}-r{rank}-{os.getpid()}", world=world)
    if world == 2 and any(marks.glob("alone-*")):
        t = torch.ones(1)
        dist.all_reduce(t)
        dist.destroy_process_group()
        return {"rank": rank, "world": world, "attempt": attempt, "sum": t.item(), "t": time.time()}
    if world == 1:
        if any(marks.glob("step-*")):
            _mark(marker_dir, f"alone-{os.getpid()}")
        while True:  # the agent restarts us when the peer (back) arrives
            time.sleep(0.1)
    _all_reduce_forever(marker_dir, group_rank, rank)


def finish_unevenly(marker_dir: str) -> dict[str, Any]:
    """One all_reduce in a world of 2; then node 1's worker returns at once (its agent waits in the
    exit barrier) and node 0's sleeps 120 s (the test freezes node 0, the store's host, meanwhile)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    group_rank = int(os.environ["GROUP_RANK"])
    _mark(marker_dir, f"done-g{group_rank}")
    if group_rank == 0:
        time.sleep(120)
    return {"group": group_rank, "sum": float(t.item())}


def stop_on_node_1(marker_dir: str) -> int:
    """all_reduce in a world of 2; node 1's worker SIGSTOPs itself at step 5 (alive but stuck).

    Node 0's worker is left in its all_reduce: only a collective timeout (the task's) ends it.
    """
    import signal

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    group_rank = int(os.environ["GROUP_RANK"])
    for step in range(1000):
        if step == 5 and group_rank == 1:
            _mark(marker_dir, "fault", rank=dist.get_rank())
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(torch.ones(1))
        time.sleep(0.05)
    return dist.get_rank()
