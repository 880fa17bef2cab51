"""The training run of the chaos harness (bench/chaos.py): deterministic, checkpointed to a shared folder.

Every pod runs this script, through ``python -m elastic_idl.pod -- chaos_train.py ...``
or through stock ``torchrun chaos_train.py ...``. The folder given by ``--shared``
stands for a volume or an object store that every pod mounts: the checkpoint,
the event log the harness reads, and nothing else of the run lives there.

What a step does: the step's global batch (``--batch`` samples, each an integer
drawn from ``(seed, step, sample)``) is split over the ranks of the current world
(sample i goes to rank i % world); each rank sums its share and one gloo
``all_reduce`` adds the shares. The total is the same whatever the world size,
so the final state depends on the seed and the step count only. It is folded
into an accumulator that is sensitive to order and count (a step applied twice,
skipped or out of order gives another value), and the list of applied steps is
kept beside it. Rank 0 commits ``{step, acc, applied}`` to the checkpoint every
``--every`` steps and after the last one; a new attempt resumes from the
checkpoint (the steps after it are recomputed). :func:`reference` computes the
fault-free result without torch.

Rank 0 appends one JSON line per event to ``<shared>/events.jsonl`` (``start``
of an attempt with its world size and resume step, every ``step``), and each
worker writes its pid to ``<shared>/pids/<pod>.<local rank>`` so that the harness
can kill a worker process inside a pod.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

#: The accumulator's modulus (a Mersenne prime) and multiplier.
MOD = (1 << 61) - 1
MUL = 1_000_003


def sample(seed: int, step: int, i: int) -> int:
    """The integer value of sample ``i`` of step ``step`` (< 2**20, so a batch sum fits an int64)."""
    digest = hashlib.blake2b(f"{seed}:{step}:{i}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (1 << 20)


def share(seed: int, step: int, batch: int, rank: int, world: int) -> int:
    """What one rank contributes to a step: its samples (i % world == rank) summed."""
    return sum(sample(seed, step, i) for i in range(rank, batch, world))


def fold(acc: int, step: int, total: int) -> int:
    """The accumulator after ``step`` contributed ``total``: order- and count-sensitive."""
    return (acc * MUL + (step + 1) * 7919 + total) % MOD


def reference(seed: int, steps: int, batch: int) -> dict[str, Any]:
    """The committed state of a fault-free run (no torch)."""
    acc = 0
    for step in range(steps):
        acc = fold(acc, step, sum(sample(seed, step, i) for i in range(batch)))
    return {"step": steps, "acc": acc, "applied": list(range(steps))}


def _append(path: Path, record: dict[str, Any]) -> None:
    # One write of one line with O_APPEND: lines of concurrent writers do not interleave.
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _commit(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", required=True, help="the folder every pod shares")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    ap.add_argument("--step-time", type=float, default=0.05, help="seconds of 'compute' per step")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    shared = Path(args.shared)
    ckpt, events = shared / "checkpoint.json", shared / "events.jsonl"
    pod = os.environ.get("HOSTNAME", "?")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    (shared / "pids").mkdir(parents=True, exist_ok=True)
    (shared / "pids" / f"{pod}.{local_rank}").write_text(str(os.getpid()))

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    # Rank 0 reads the checkpoint and tells every rank where to start: one view per attempt.
    state: dict[str, Any] = {"step": 0, "acc": 0, "applied": []}
    if rank == 0 and ckpt.exists():
        state = json.loads(ckpt.read_text())
    start = torch.tensor([state["step"]], dtype=torch.int64)
    dist.broadcast(start, src=0)
    if rank != 0:  # only rank 0 commits; the others need the step to run the same collectives
        state = {"step": int(start.item()), "acc": 0, "applied": []}
    if rank == 0:
        _append(
            events,
            {"event": "start", "t": time.time(), "world": world, "from": state["step"], "restart": restart, "pod": pod},
        )
    for step in range(state["step"], args.steps):
        t = torch.tensor([share(args.seed, step, args.batch, rank, world)], dtype=torch.int64)
        dist.all_reduce(t)
        state = {"step": step + 1, "acc": fold(state["acc"], step, int(t.item())), "applied": [*state["applied"], step]}
        if rank == 0:
            if state["step"] % args.every == 0 or state["step"] == args.steps:
                _commit(ckpt, state)
            _append(events, {"event": "step", "t": time.time(), "step": step + 1, "world": world, "pod": pod})
        time.sleep(args.step_time)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
