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
kept beside it. Rank 0 commits ``{step, acc, applied}`` every ``--every`` steps
and after the last one; a new attempt resumes from the last commit (the steps
after it are recomputed). :func:`reference` computes the fault-free result
without torch.

A commit is one line appended to ``<shared>/commits.jsonl`` (one ``write`` with
``O_APPEND``: the commit point), then ``checkpoint.json`` is replaced. The line
carries what a resumed or duplicate world could not forge: the world size, the
mask of the ranks whose shares went into each step since the previous commit
(every step's all_reduce also sums ``1 << rank``), the members (a random token per worker
process, gathered from every rank at the commit; ``members.jsonl`` names each
token's pod, local rank and pid), the previous commit's step and id (``parent``) and its own id (a hash
of all of it). The commits of a run form one chain: a step committed twice, two
worlds committing, or a resume from anything but the last commit breaks it.

``--poison FILE`` (the chaos harness's class 14): a JSON file naming a pod that
fails for good: ``{"pod": NAME, "at_step": K, "at_init": BOOL}``: that pod's
workers raise when they reach step K (inside the training loop, while the other
ranks are in the step's collective) and, with ``at_init``, at every start,
before ``init_process_group`` (while the other ranks are inside it).

``"kind": "oom"`` in that file (class 16) instead makes the pod's workers, once at step K
(a marker file beside it says it fired), allocate and touch memory until the kernel's OOM
killer ends them (the container's memory limit). ``--save-dir DIR`` writes ``checkpoint.json``
(the save after each commit) in DIR instead of the shared folder (class 17: a small
memory-backed emptyDir of each pod, which the harness fills: the next save fails with ENOSPC).

``run(*argv)`` is the same training for ``python -m elastic_idl.pod --call
chaos_train:run -- ARGS``: it returns ``{"step", "acc"}`` of the final state, the
value rank 0's pod writes as the task's output.

Rank 0 appends one JSON line per event to ``<shared>/events.jsonl`` (``start``
of an attempt with its world size and resume step, every ``step``), each naming
its attempt (rank 0's token: a world that trains beside another without
committing still shows in the log), and each
worker writes its pid to ``<shared>/pids/<pod>.<local rank>`` so that the harness
can kill a worker process inside a pod.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
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


ROOT = "root"  # the parent of a run's first commit


def commit_id(record: dict[str, Any]) -> str:
    """A commit's id: a hash of everything it records (its parent's id included)."""
    body = {k: v for k, v in record.items() if k not in ("id", "t")}
    return hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=12).hexdigest()


def read_commits(path: Path) -> list[dict[str, Any]]:
    """The commit records, in the order they were appended (a torn last line is no commit)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _poisoned(shared_poison: str | None, pod: str) -> dict[str, Any] | None:
    if not shared_poison or not Path(shared_poison).exists():
        return None
    poison = json.loads(Path(shared_poison).read_text())
    return poison if poison.get("pod") == pod else None


def _balloon(marker: Path) -> None:
    """Class 16: once per pod (the marker), allocate and touch memory, 32 MiB at a time, until
    the kernel's OOM killer ends this process at its container's memory limit."""
    if marker.exists():
        return
    marker.write_text(str(os.getpid()))
    held = []
    while True:
        held.append(bytearray(b"\x01") * (32 << 20))


def run(*argv: str) -> dict[str, Any]:
    """The training, for ``--call chaos_train:run``: the final state's step and accumulator."""
    state = train(list(argv))
    return {"step": state["step"], "acc": state["acc"]}


def main(argv: list[str] | None = None) -> int:
    train(argv)
    return 0


def train(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", required=True, help="the folder every pod shares")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    ap.add_argument("--step-time", type=float, default=0.05, help="seconds of 'compute' per step")
    ap.add_argument(
        "--poison", help="a JSON file naming a pod whose workers fail for good (class 14) or run out of memory (16)"
    )
    ap.add_argument("--save-dir", help="the folder of checkpoint.json (default: the shared folder)")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    shared = Path(args.shared)
    ckpt = (Path(args.save_dir) if args.save_dir else shared) / "checkpoint.json"
    events, commits = shared / "events.jsonl", shared / "commits.jsonl"
    pod = os.environ.get("HOSTNAME", "?")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    # This worker process, in every commit it joins: a random token, named in members.jsonl.
    member = secrets.randbits(62)
    (shared / "pids").mkdir(parents=True, exist_ok=True)
    _append(shared / "members.jsonl", {"member": f"{member:016x}", "pod": pod, "local_rank": local_rank,
                                       "pid": os.getpid(), "t": time.time()})  # fmt: skip
    (shared / "pids" / f"{pod}.{local_rank}").write_text(str(os.getpid()))
    poison = _poisoned(args.poison, pod)
    if poison is not None and poison.get("kind", "fail") == "fail" and poison.get("at_init"):
        raise RuntimeError(f"poison: {pod} fails for good before init_process_group")

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    # Rank 0 reads the last commit and tells every rank where to start: one view per attempt.
    state: dict[str, Any] = {"step": 0, "acc": 0, "applied": []}
    parent = ROOT
    if rank == 0:
        done = read_commits(commits)
        if done:
            last = done[-1]
            state = {"step": last["step"], "acc": last["acc"], "applied": last["applied"]}
            parent = last["id"]
        elif ckpt.exists():  # a checkpoint written without the commit log (an older run's folder)
            state = json.loads(ckpt.read_text())
    start = torch.tensor([state["step"]], dtype=torch.int64)
    dist.broadcast(start, src=0)
    if rank != 0:  # only rank 0 commits; the others need the step to run the same collectives
        state = {"step": int(start.item()), "acc": 0, "applied": []}
    attempt = f"{member:016x}"  # rank 0's token names the attempt in every event it writes
    if rank == 0:
        _append(
            events,
            {"event": "start", "t": time.time(), "world": world, "from": state["step"], "restart": restart, "pod": pod,
             "attempt": attempt},
        )  # fmt: skip
    since = state["step"]  # the first step since the last commit
    masks: list[int] = []
    for step in range(state["step"], args.steps):
        poison = _poisoned(args.poison, pod)
        if poison is not None and poison.get("at_step") is not None and step >= int(poison["at_step"]):
            if poison.get("kind") == "oom":
                _balloon(Path(str(args.poison)).with_name(f"oom-fired.{pod}"))
            else:
                raise RuntimeError(f"poison: {pod} fails for good at step {step}")
        t = torch.tensor([share(args.seed, step, args.batch, rank, world), 1 << rank], dtype=torch.int64)
        dist.all_reduce(t)
        masks.append(int(t[1].item()))
        state = {
            "step": step + 1,
            "acc": fold(state["acc"], step, int(t[0].item())),
            "applied": [*state["applied"], step],
        }
        if state["step"] % args.every == 0 or state["step"] == args.steps:
            gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
            dist.all_gather(gathered, torch.tensor([member], dtype=torch.int64))
            members = [f"{int(g.item()):016x}" for g in gathered]
            if rank == 0:
                mask = masks[0] if len(set(masks)) == 1 else -1  # -1: the steps had different contributors
                record = {"t": time.time(), "step": state["step"], "prev": since, "acc": state["acc"],
                          "applied": state["applied"], "world": world, "ranks": mask, "members": sorted(members),
                          "restart": restart, "pod": pod, "parent": parent}  # fmt: skip
                record["id"] = commit_id(record)
                _append(commits, record)
                _commit(ckpt, {k: state[k] for k in ("step", "acc", "applied")})
                parent = record["id"]
            since, masks = state["step"], []
        if rank == 0:
            _append(events, {"event": "step", "t": time.time(), "step": step + 1, "world": world, "pod": pod,
                             "attempt": attempt})  # fmt: skip
        time.sleep(args.step_time)
    dist.destroy_process_group()
    return state


if __name__ == "__main__":
    raise SystemExit(main())
