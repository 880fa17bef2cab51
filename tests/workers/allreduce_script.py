"""Script entrypoint: one gloo all_reduce; writes what it saw to OUT_DIR/<rank>.json, exits with argv code."""

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

if __name__ == "__main__":
    out_dir, code = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    t = torch.ones(1)
    dist.all_reduce(t)
    rank = dist.get_rank()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as fh:
        json.dump({"rank": rank, "sum": t.item(), "argv": sys.argv, "name": __name__, "local": sys.argv[3:]}, fh)
    dist.destroy_process_group()
    if code and rank == 1:
        sys.exit(code)
