"""A small DDP training job on synthetic data, for the demo.

Each worker trains a linear regression model on its shard of a synthetic data
set with DistributedDataParallel over gloo (CPU). Rank 0 prints the loss per
epoch and the final result, and writes a checkpoint after every epoch; a
restarted job resumes from the last checkpoint instead of starting over.

    python examples/train.py --epochs 5 --checkpoint-dir /tmp/ckpt [--fail-once-at-epoch 2]

`--fail-once-at-epoch N` makes rank 1 exit with code 3 at epoch N the first time
(a marker file in the checkpoint dir remembers it), to show a restart resuming.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--fail-once-at-epoch", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)

    # Synthetic data: y = X @ w_true + noise, sharded by rank.
    n, d = 2048, 16
    x = torch.randn(n, d)
    w_true = torch.arange(1.0, d + 1.0) / d
    y = x @ w_true + 0.01 * torch.randn(n)
    xs, ys = x[rank::world], y[rank::world]

    model = DistributedDataParallel(torch.nn.Linear(d, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = args.checkpoint_dir / "checkpoint.pt"
    start = 0
    if ckpt.exists():
        # weights_only: tensors and plain containers only, nothing arbitrary is unpickled.
        state = torch.load(ckpt, weights_only=True)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["epoch"]) + 1
        if rank == 0:
            print(f"[attempt {attempt}] resuming from checkpoint after epoch {start - 1}", flush=True)

    loss = torch.tensor(0.0)
    for epoch in range(start, args.epochs):
        marker = args.checkpoint_dir / "failed-once"
        if epoch == args.fail_once_at_epoch and rank == 1 and not marker.exists():
            marker.touch()
            print(f"[attempt {attempt}] rank 1 fails on purpose at epoch {epoch}", flush=True)
            sys.exit(3)
        for i in range(0, len(xs), 64):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xs[i : i + 64]).squeeze(1), ys[i : i + 64])
            loss.backward()
            opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            print(f"[attempt {attempt}] epoch {epoch}: loss {total.item() / world:.6f}", flush=True)
            tmp = ckpt.with_suffix(".tmp")
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, tmp)
            tmp.replace(ckpt)
        dist.barrier()

    if rank == 0:
        err = (model.module.weight.detach().squeeze(0) - w_true).abs().max().item()
        print(f"done: world size {world}, final loss {loss.item():.6f}, max weight error {err:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
