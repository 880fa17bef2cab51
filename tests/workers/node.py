"""One launcher process ("node") for the multi-process tests: launch a task and print the outcome as JSON.

    python node.py --fn NAME [--arg A ...] [--min 1 --max 2 --nproc 1 --restarts 0]
                   [--endpoint HOST:PORT --run-id ID --join-timeout S --read-timeout S --rdzv-option k=v ...]

Prints one JSON line: {"ok": value} or {"error": type name, "message": ..., "failures": [...]}.
Exit code: 0 ok, 3 launch failed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import launch_fns
from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration

from elastic_idl._errors import LaunchFailedError, LaunchInterruptedError
from elastic_idl._launch.launcher import launch
from elastic_idl._task.messages import LegacyTask


def _skew_rendezvous_clock(seconds: float) -> None:
    """Test equipment: the rendezvous's wall clock on this node is ``seconds`` off (a node whose clock is
    skewed: torch stamps heartbeats with it). Only the rendezvous module's view changes."""
    import datetime as _dt

    import torch.distributed.elastic.rendezvous.dynamic_rendezvous as dr

    class Skewed(_dt.datetime):
        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
            return _dt.datetime.now(tz) + _dt.timedelta(seconds=seconds)

    dr.datetime = Skewed  # type: ignore[misc]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fn", required=True)
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--int-arg", action="append", type=int, default=[])
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--max", type=int, default=1)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--restarts", type=int, default=0)
    ap.add_argument("--endpoint")
    ap.add_argument("--run-id")
    ap.add_argument("--join-timeout", type=int)
    ap.add_argument("--last-call-timeout", type=int)
    ap.add_argument("--read-timeout", type=int)
    ap.add_argument("--collective-timeout", type=int)
    ap.add_argument("--rdzv-option", action="append", default=[])
    ap.add_argument("--start-method")
    ap.add_argument(
        "--clock-skew",
        type=float,
        default=0.0,
        help="this node's wall clock, as the rendezvous reads it, off by S seconds",
    )
    args = ap.parse_args()
    if args.clock_skew:
        _skew_rendezvous_clock(args.clock_skew)

    task = LegacyTask()
    e = task.elastic_config
    e.rdzv_backend = "c10d"
    e.min_replicas, e.max_replicas, e.nproc_per_node, e.max_restarts = args.min, args.max, args.nproc, args.restarts
    if args.join_timeout:
        e.join_timeout.CopyFrom(Duration(seconds=args.join_timeout))
    if args.last_call_timeout:
        e.last_call_timeout.CopyFrom(Duration(seconds=args.last_call_timeout))
    if args.read_timeout:
        e.read_timeout.CopyFrom(Duration(seconds=args.read_timeout))
    if args.collective_timeout:
        e.collective_timeout.CopyFrom(Duration(seconds=args.collective_timeout))
    for kv in args.rdzv_option:
        opt = e.rdzv_options.add()
        opt.key, _, opt.value = kv.partition("=")
    fn = getattr(launch_fns, args.fn)
    try:
        out = launch(
            task,
            fn,
            *args.arg,
            *args.int_arg,
            return_all=True,
            rdzv_endpoint=args.endpoint,
            run_id=args.run_id,
            start_method=args.start_method,
        )
    except LaunchFailedError as exc:
        print(
            json.dumps(
                {
                    "error": type(exc).__name__,
                    "message": str(exc),
                    "failures": [json_format.MessageToDict(r) for r in exc.failures],
                }
            ),
            flush=True,
        )
        return 130 if isinstance(exc, LaunchInterruptedError) else 3
    print(json.dumps({"ok": {str(k): v for k, v in out.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
