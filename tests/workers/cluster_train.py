"""Script entrypoint for the cluster end-to-end jobs (tests/test_cluster.py): STEPS gloo all_reduce
steps of STEP_SECONDS each, resumable.

    cluster_train.py OUT_DIR STEPS STEP_SECONDS

OUT_DIR is shared by every pod (a host folder: /var/tmp). Each worker process writes what it saw
of its pod to OUT_DIR/seen/<hostname>.<pid>.<rank>.json (hostname, FQDN, the pod's PID 1, its
addresses, the rendezvous' MASTER_ADDR, rank and world). Rank 0 appends one line per step to
OUT_DIR/steps (wall time, step, world size, restart count) and keeps OUT_DIR/checkpoint.json
(the next step), so a re-formed job resumes where the last one stopped.
"""

import json
import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist


def addresses() -> list[str]:
    """The IPv4 addresses of this network namespace's interfaces (lo excluded)."""
    out: list[str] = []
    # The local addresses are fib_trie's "/32 host LOCAL" entries (the line before names the address).
    trie = Path("/proc/net/fib_trie").read_text().splitlines()
    for i, line in enumerate(trie):
        if "/32 host LOCAL" in line and i > 0:
            addr = trie[i - 1].split()[-1]
            if not addr.startswith("127.") and addr not in out:
                out.append(addr)
    return out


if __name__ == "__main__":
    out_dir, steps, step_seconds = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    seen = {
        "hostname": socket.gethostname(),
        "fqdn": socket.getfqdn(),
        "pid1": [p.decode() for p in Path("/proc/1/cmdline").read_bytes().split(b"\0")[:4]],
        "addresses": addresses(),
        "master_addr": os.environ.get("MASTER_ADDR"),
        "rank": rank,
        "world": world,
        "restart": restart,
        "pod": os.environ.get("HOSTNAME"),
    }
    (out_dir / "seen").mkdir(exist_ok=True)
    (out_dir / "seen" / f"{seen['hostname']}.{os.getpid()}.{rank}.json").write_text(json.dumps(seen))
    ckpt = out_dir / "checkpoint.json"
    step = json.loads(ckpt.read_text())["next"] if ckpt.exists() else 0
    while step < steps:
        value = torch.ones(1)
        dist.all_reduce(value)
        assert value.item() == world
        if rank == 0:
            with open(out_dir / "steps", "a") as fh:
                fh.write(f"{time.time():.3f} {step} {world} {restart}\n")
            tmp = ckpt.with_suffix(".tmp")
            tmp.write_text(json.dumps({"next": step + 1}))
            tmp.replace(ckpt)
        step += 1
        time.sleep(step_seconds)
    dist.barrier()
    dist.destroy_process_group()
