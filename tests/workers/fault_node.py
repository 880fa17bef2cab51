"""``node.py`` for tests/test_launcher_faults.py: its worker functions, timestamped logs, a pod's identity.

    python fault_node.py NODE.PY-ARGS...

Env (set by the test):
    EI_FAULT_IDENTITY=ADDR:PID   torch makes this launcher's rendezvous node ``ADDR_PID_0``, what
                                 it makes for PID 1 of a pod named ADDR, for every incarnation
    EI_FAULT_TORCH_IDENTITY=1    keep torch's node identity (the launcher's fix switched off)
    EI_FAULT_NO_WATCH=1          no round watch: torch's own num_nodes_waiting (for checking by hand
                                 that the fault tests hang without the fix)

Logs: the ``elastic_idl`` logger at WARNING and torch's rendezvous "joined round" lines, each
prefixed with the wall-clock time, on stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_fns
import launch_fns
import node


def _simulate_identity(spec: str) -> None:
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr

    addr, _, pid = spec.rpartition(":")
    generator = dr.DynamicRendezvousHandler._node_desc_generator
    generator.generate = lambda local_addr=None: dr._NodeDesc(addr, int(pid), 0)  # type: ignore[method-assign]


def _setup() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(created).3f %(name)s %(levelname)s %(message)s"))
    ei_log = logging.getLogger("elastic_idl")
    ei_log.addHandler(handler)
    ei_log.setLevel(logging.WARNING)
    rdzv_log = logging.getLogger("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    rdzv_log.addHandler(handler)
    rdzv_log.setLevel(logging.INFO)
    rdzv_log.propagate = False
    for name in (
        "train_until_peer_lost",
        "fail_for_good_on_node",
        "train_through_a_freeze",
        "finish_unevenly",
        "stop_on_node_1",
    ):
        setattr(launch_fns, name, getattr(fault_fns, name))
    if os.environ.get("EI_FAULT_IDENTITY"):
        _simulate_identity(os.environ["EI_FAULT_IDENTITY"])
    if os.environ.get("EI_FAULT_TORCH_IDENTITY") == "1":
        from elastic_idl._launch import agent

        agent._unique_node_identity = lambda handler: None  # type: ignore[assignment]
    if os.environ.get("EI_FAULT_NO_WATCH") == "1":
        from elastic_idl._launch import agent

        agent._RoundWatch.nodes_waiting = lambda self: int(self._inner.num_nodes_waiting())  # type: ignore[method-assign]


if __name__ == "__main__":
    _setup()
    raise SystemExit(node.main())
