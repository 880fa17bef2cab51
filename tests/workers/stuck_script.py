"""A training script whose rank 1 stops progressing at step 5 (for the stuck-worker tests).

argv: HOW OUT_DIR. HOW: sigstop (the process stops itself), sleep (sleeps past every timeout),
fifo (blocks opening a FIFO nobody writes). Each rank writes its pid to OUT_DIR/pid-<rank>
and ``step-<rank>`` as it goes; rank 1 writes the time it stops progressing to OUT_DIR/fault.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    how, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    (out / f"pid-{rank}").write_text(str(os.getpid()))
    for step in range(50):
        if step == 5 and rank == 1:
            (out / "fault").write_text(repr(time.time()))  # when rank 1 stops progressing
            if how == "sigstop":
                os.kill(os.getpid(), signal.SIGSTOP)
            elif how == "sleep":
                time.sleep(3600)
            else:
                fifo = out / "fifo"
                os.mkfifo(fifo)
                with open(fifo, "rb") as fh:  # blocks: no writer ever comes
                    fh.read()
        dist.all_reduce(torch.ones(1))
        (out / f"step-{rank}").write_text(str(step))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
