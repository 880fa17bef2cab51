"""Worker entrypoints for the collective_timeout tests: rank 1 skips (sleeps past) a collective.

Torch is imported inside the functions: spawned workers import this module first.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

#: How long rank 1 sleeps instead of entering the collective: far past every timeout under test.
SKIP_S = 60.0


def skip_a_collective(init_timeout_s: float = 0.0, group_timeout_s: float = 0.0, delay_s: float = SKIP_S) -> float:
    """Rank 1 enters the all_reduce ``delay_s`` late; returns how long rank 0 waited in it.

    ``init_timeout_s``/``group_timeout_s``: the ``timeout=`` given to ``init_process_group`` and to
    a ``new_group`` the all_reduce runs on (0: none given, so the task's collective_timeout applies).
    """
    import torch
    import torch.distributed as dist

    if init_timeout_s:
        dist.init_process_group("gloo", timeout=timedelta(seconds=init_timeout_s))
    else:
        dist.init_process_group("gloo")
    group: Any = None
    if group_timeout_s:
        group = dist.new_group(timeout=timedelta(seconds=group_timeout_s))
    elif init_timeout_s:
        group = dist.new_group()
    if dist.get_rank() == 1:
        time.sleep(delay_s)
    start = time.monotonic()
    dist.all_reduce(torch.ones(1), group=group)
    waited = time.monotonic() - start
    dist.destroy_process_group()
    return waited


def failure_budget_env() -> dict[str, str | None]:
    """The failure-detection budget's variables as this worker sees them."""
    import os

    names = (
        "ELASTIC_IDL_COLLECTIVE_TIMEOUT_S",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_ENABLE_MONITORING",
    )
    return {name: os.environ.get(name) for name in names}


def stop_at_step(step: int = 5, steps: int = 50, only_attempt: int | None = None, how: str = "sigstop") -> int:
    """all_reduce ``steps`` times; rank 1 stops progressing before ``step``; returns the steps done.

    ``how``: "sigstop" (the process stops itself), "sleep" (sleeps past every timeout) or "fifo"
    (blocks opening a FIFO nobody writes: hung I/O). ``only_attempt``: only in that attempt
    (TORCHELASTIC_RESTART_COUNT), so a restart can succeed.
    """
    import os
    import signal
    import tempfile

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    done = 0
    for i in range(steps):
        if i == step and dist.get_rank() == 1 and (only_attempt is None or attempt == only_attempt):
            if how == "sigstop":
                os.kill(os.getpid(), signal.SIGSTOP)
            elif how == "sleep":
                time.sleep(SKIP_S)
            else:
                path = os.path.join(tempfile.mkdtemp(prefix="ei-fifo-"), "fifo")
                os.mkfifo(path)
                with open(path, "rb") as fh:  # blocks: no writer ever comes
                    fh.read()
        dist.all_reduce(torch.ones(1))
        done += 1
    dist.destroy_process_group()
    return done


def stop_then_peer_raises(marker: str) -> int:
    """Rank 1 SIGSTOPs itself (after writing ``marker``); rank 0 waits for the marker and raises.

    No collective is waited in: the stop and the failure are independent, so the launcher's only
    way to end the stopped rank is the failure of its peer (collective_timeout is long).
    """
    import os
    import signal
    from pathlib import Path

    rank = int(os.environ["RANK"])
    if rank == 1:
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(60)
        return 1
    deadline = time.monotonic() + 60
    while not Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # rank 1 is stopped by now (it stops right after writing the marker)
    raise ValueError("rank 0 failed while rank 1 was stopped")
