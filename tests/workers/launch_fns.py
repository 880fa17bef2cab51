"""Worker entrypoints for the launcher tests (importable by spawned workers too)."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any


def _pg(timeout_s: float = 30.0) -> Any:
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
    return dist


def allreduce(tag: str = "") -> dict[str, Any]:
    """One gloo all_reduce; returns what the worker saw."""
    import torch

    dist = _pg()
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    out = {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "sum": t.item(),
        "tag": tag,
        "attempt": int(os.environ["TORCHELASTIC_RESTART_COUNT"]),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "pid": os.getpid(),
        "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "threads": torch.get_num_threads(),
    }
    dist.destroy_process_group()
    return out


def allreduce_for(seconds: float) -> dict[str, Any]:
    """All-reduces every 0.1 s for ``seconds`` (a job that outlives the rendezvous's keep-alive expiry)."""
    import torch

    dist = _pg()
    end, steps = time.monotonic() + float(seconds), 0
    while True:
        t = torch.ones(1)
        dist.all_reduce(t)
        steps += 1
        flag = torch.tensor([1.0 if time.monotonic() >= end else 0.0])
        dist.all_reduce(flag)  # every rank stops at the same step
        if flag.item() > 0:
            break
        time.sleep(0.1)
    out = {"rank": dist.get_rank(), "world": dist.get_world_size(), "steps": steps}
    out["attempt"] = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.destroy_process_group()
    return out


def fail_rank_in_attempts(rank: int, attempts: int, code: int = 0) -> dict[str, Any]:
    """Rank ``rank`` fails in the first ``attempts`` attempts (an exception, or exit ``code``)."""
    import torch

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist = _pg(20.0)
    if dist.get_rank() == rank and attempt < attempts:
        if code:
            os._exit(code)
        raise ValueError(f"rank {rank} fails in attempt {attempt}")
    t = torch.ones(1)
    dist.all_reduce(t)
    out = {"rank": dist.get_rank(), "attempt": attempt, "sum": t.item()}
    dist.destroy_process_group()
    return out


def block_in_cpp_unless_rank(rank: int) -> str:
    """Rank ``rank`` raises at once; the others wait in a C++ store call that never completes.

    A C++ call does not return on a signal, and this one does not notice the peer's death
    either: under a forked worker that kept the agent's Python SIGTERM handler, the blocked
    ranks would survive SIGTERM until torch's 30 s SIGKILL.
    """
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist = _pg(120.0)
    if attempt > 0:
        dist.barrier()
        dist.destroy_process_group()
        return "recovered"
    if dist.get_rank() == rank:
        time.sleep(0.5)  # let the others enter the wait
        raise RuntimeError("fail fast")
    store = dist.distributed_c10d._get_default_store()
    store.wait(["never-set"], timedelta(seconds=120))
    return "unreachable"


def sleep_forever(pid_dir: str) -> None:
    """Write this worker's pid, then sleep until killed."""
    Path(pid_dir, f"{os.getpid()}.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(1)


def world_then_return(pid_dir: str = "") -> dict[str, Any]:
    """Record the world we are in, then return (for multi-node tests)."""
    import torch

    dist = _pg(30.0)
    t = torch.ones(1)
    dist.all_reduce(t)
    out = {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "sum": t.item(),
        "group_rank": int(os.environ["GROUP_RANK"]),
    }
    dist.destroy_process_group()
    return out


def _mark(marker_dir: str, what: str) -> None:
    if marker_dir:
        Path(marker_dir, f"{what}-{os.getpid()}").write_text(os.environ.get("TORCHELASTIC_RESTART_COUNT", ""))


def wait_for_world(marker_dir: str, size: str) -> dict[str, Any]:
    """Stay alive until the world has ``size`` workers (the agent restarts us when a node joins).

    Leaves a file ``world<N>-<pid>`` in ``marker_dir`` for every world it starts in.
    """
    import torch

    dist = _pg(30.0)
    _mark(marker_dir, f"world{dist.get_world_size()}")
    if dist.get_world_size() < int(size):
        while True:  # killed by the agent on re-rendezvous
            time.sleep(0.2)
    t = torch.ones(1)
    dist.all_reduce(t)
    out = {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "sum": t.item(),
        "attempt": int(os.environ["TORCHELASTIC_RESTART_COUNT"]),
    }
    dist.destroy_process_group()
    return out


def loop_until_alone(marker_dir: str) -> dict[str, Any]:
    """Wait for a second node, all-reduce with it until it dies, then (restarted, alone) return."""
    import torch

    dist = _pg(10.0)
    world = dist.get_world_size()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    _mark(marker_dir, f"world{world}")
    if world == 1 and attempt == 0:
        while True:  # the agent restarts us when the second node arrives
            time.sleep(0.2)
    if world > 1:
        while True:
            t = torch.ones(1)
            dist.all_reduce(t)  # raises when the other node dies
            time.sleep(0.2)
    out = {"rank": dist.get_rank(), "world": world, "attempt": attempt}
    dist.destroy_process_group()
    return out


def returns_a_lock() -> Any:
    """A return value that cannot be pickled, so it cannot reach the launcher."""
    import threading

    return threading.Lock()


def closure_factory(value: int) -> Any:
    """A closure: not picklable, fine for workers forked from the warm server."""

    def inner() -> int:
        return value * 10 + int(os.environ["LOCAL_RANK"])

    return inner


def die_hard_at(how: str, step: int) -> str:
    """The last rank ends without a Python exception: ``how`` is a signal name ("SIGKILL") or
    "os._exit"; ``step`` -1 before the first collective (the others then wait in a barrier),
    else at that step of an all_reduce loop. Never returns on any rank: the peers fail too."""
    import torch

    dist = _pg(60.0)
    victim = dist.get_rank() == dist.get_world_size() - 1

    def die() -> None:
        if how == "os._exit":
            os._exit(7)
        os.kill(os.getpid(), getattr(signal, how))

    if step < 0:
        if victim:
            die()
        dist.barrier()
    for i in range(10**6):
        if victim and i == step:
            die()
        dist.all_reduce(torch.ones(1))
    return "unreachable"
