"""Every private torch name the launcher touches, in one list, and the check that torch still has them.

torch has no public way to do what these do (the list says what each is for): the agent
(`elastic_idl._launch.agent`) subclasses torch's elastic agent and wraps its rendezvous
handler, so it overrides and reads torch's underscored methods and attributes. The module-level
names are read through :func:`get` (a missing one is a :class:`TorchPrivateAPIError` naming the
torch version); the methods and instance attributes are used in place by the agent and listed
here so that :func:`missing` (and ``tests/test_torch_private.py``, on every torch of the matrix)
notices when a torch release renames or drops one.

Torch-free at import: names are resolved when asked for (the agent is the one module that
imports torch at import time).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from elastic_idl._errors import TorchPrivateAPIError

__all__ = [
    "BARRIER_NONBLOCKING",
    "DEFAULT_TIMEOUT",
    "NUM_MEMBERS",
    "PRIVATE",
    "RENDEZVOUS_DELAY",
    "TERMINAL_STATE_SYNC_ID",
    "PrivateName",
    "check",
    "get",
    "missing",
    "set_module_attribute",
]

Kind = Literal["module", "method", "attribute"]


@dataclass(frozen=True)
class PrivateName:
    """One private torch name: where it lives, what it is and what the launcher uses it for.

    ``owner`` is a module (``torch.distributed.elastic.utils.store``) or a class in one
    (``torch.distributed.elastic.agent.server.api:SimpleElasticAgent``). ``kind``: a module
    attribute, a method of the class (looked up on it) or an attribute its instances set
    (``self.<name> =`` in the source of the class or a base).
    """

    owner: str
    name: str
    kind: Kind
    use: str

    def __str__(self) -> str:
        return f"{self.owner}.{self.name}"


_API = "torch.distributed.elastic.agent.server.api"
_LOCAL = "torch.distributed.elastic.agent.server.local_elastic_agent"
_MP = "torch.distributed.elastic.multiprocessing.api"
_DR = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
_C10D = "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend"
_STORE = "torch.distributed.elastic.utils.store"

TERMINAL_STATE_SYNC_ID = PrivateName(
    _API, "_TERMINAL_STATE_SYNC_ID", "module", "key prefix of torch's exit barrier, which the agent's own barrier keeps"
)
NUM_MEMBERS = PrivateName(_STORE, "_NUM_MEMBERS", "module", "suffix of the exit barrier's arrival counter key")
BARRIER_NONBLOCKING = PrivateName(
    _STORE, "_barrier_nonblocking", "module", "the exit barrier's arrival, waited for in 1 s slices"
)
RENDEZVOUS_DELAY = PrivateName(
    _DR, "_delay", "module", "the rendezvous' start-up jitter, skipped for a one-node job (patched while it runs)"
)
#: Read by name in the workers by `elastic_idl._launch.collective` (which stays light: it does not import
#: this module; a test checks the two agree).
DEFAULT_TIMEOUT = PrivateName(
    "torch.distributed.distributed_c10d",
    "_get_default_timeout",
    "module",
    "replaced in each worker: a process group created without a timeout gets the task's collective_timeout",
)

PRIVATE: tuple[PrivateName, ...] = (
    TERMINAL_STATE_SYNC_ID,
    NUM_MEMBERS,
    BARRIER_NONBLOCKING,
    RENDEZVOUS_DELAY,
    DEFAULT_TIMEOUT,
    # the agent (a LocalElasticAgent subclass): the hooks it overrides and the state it reads
    PrivateName(f"{_LOCAL}:LocalElasticAgent", "_start_workers", "method", "wraps the worker-exit event"),
    PrivateName(f"{_LOCAL}:LocalElasticAgent", "_shutdown", "method", "ends finished workers first"),
    PrivateName(f"{_LOCAL}:LocalElasticAgent", "_monitor_workers", "method", "stuck workers, void rounds"),
    PrivateName(f"{_LOCAL}:LocalElasticAgent", "_stop_workers", "method", "honours shutdown_timeout"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_exit_barrier", "method", "a barrier that handles signals"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_assign_worker_ranks", "method", "bounded store calls"),
    PrivateName(f"{_LOCAL}:LocalElasticAgent", "_pcontext", "attribute", "the worker processes"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_worker_group", "attribute", "the running group"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_remaining_restarts", "attribute", "the attempt number"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_store", "attribute", "the round's store (exit barrier)"),
    PrivateName(f"{_API}:SimpleElasticAgent", "_exit_barrier_timeout", "attribute", "the exit barrier's bound"),
    # the worker processes torch starts (multiprocessing.api)
    PrivateName(f"{_MP}:MultiprocessContext", "_pc", "attribute", "the worker processes' exit codes"),
    PrivateName(f"{_MP}:MultiprocessContext", "_ret_vals", "attribute", "return values of finished workers"),
    PrivateName(f"{_MP}:MultiprocessContext", "_worker_finished_event", "attribute", "bounded when every worker died"),
    PrivateName(f"{_MP}:DefaultLogsSpecs", "_root_log_dir", "attribute", "the log directory, made lazily"),
    # the rendezvous handler the agent wraps (dynamic_rendezvous, c10d backend)
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_this_node", "attribute", "unique node identity"),
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_op_executor", "attribute", "unique node identity"),
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_state_holder", "attribute", "the round watch reads the state"),
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_heartbeat_lock", "attribute", "the round watch's reads"),
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_store", "attribute", "the rendezvous store's host check"),
    PrivateName(f"{_DR}:DynamicRendezvousHandler", "_stop_heartbeats", "method", "abandoning a lost store"),
    PrivateName(f"{_DR}:_DistributedRendezvousOpExecutor", "_node", "attribute", "unique node identity"),
    PrivateName(f"{_DR}:_BackendRendezvousStateHolder", "_state", "attribute", "the round watch's view"),
    PrivateName(f"{_DR}:_BackendRendezvousStateHolder", "_sanitize", "method", "liveness on this node's clock"),
    PrivateName(f"{_DR}:_BackendRendezvousStateHolder", "_backend", "attribute", "bounding store calls"),
    PrivateName(f"{_C10D}:C10dRendezvousBackend", "_call_store", "method", "bounding store calls"),
)


def _torch_version(import_module: Callable[[str], ModuleType]) -> str:
    try:
        return str(getattr(import_module("torch"), "__version__", "unknown"))
    except ImportError:
        return "(not installed)"


def _has(entry: PrivateName, import_module: Callable[[str], ModuleType]) -> bool:
    module_name, _, qualname = entry.owner.partition(":")
    try:
        owner: Any = import_module(module_name)
    except ImportError:
        return False
    for part in filter(None, qualname.split(".")):
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    if entry.kind != "attribute":
        return hasattr(owner, entry.name)
    # An instance attribute: assigned as ``self.<name>`` in the class or one of its bases.
    assigned = re.compile(rf"\bself\.{re.escape(entry.name)}\s*(?::[^=\n]*)?=(?!=)")
    for cls in inspect.getmro(owner):
        if cls.__module__.startswith("torch"):
            try:
                if assigned.search(inspect.getsource(cls)):
                    return True
            except (OSError, TypeError):
                continue
    return False


def missing(
    names: tuple[PrivateName, ...] = PRIVATE, import_module: Callable[[str], ModuleType] = importlib.import_module
) -> list[PrivateName]:
    """The listed names the installed torch (as ``import_module`` finds it) lacks, in list order."""
    return [entry for entry in names if not _has(entry, import_module)]


def check(
    names: tuple[PrivateName, ...] = PRIVATE, import_module: Callable[[str], ModuleType] = importlib.import_module
) -> None:
    """Raise :class:`TorchPrivateAPIError`, naming the torch version and every missing name, if any is."""
    gone = missing(names, import_module)
    if gone:
        raise TorchPrivateAPIError(_torch_version(import_module), [str(entry) for entry in gone])


def get(entry: PrivateName, import_module: Callable[[str], ModuleType] = importlib.import_module) -> Any:
    """A module-level private name's current value (:class:`TorchPrivateAPIError` when torch lacks it)."""
    if entry.kind != "module":
        raise ValueError(f"{entry}: only module-level names are read through get()")
    value = getattr(import_module(entry.owner), entry.name, _MISSING)
    if value is _MISSING:
        raise TorchPrivateAPIError(_torch_version(import_module), [str(entry)])
    return value


def set_module_attribute(entry: PrivateName, value: Any) -> None:
    """Replace a module-level private name (the agent patches the rendezvous delay while it runs)."""
    get(entry)  # the name must exist: patching a name torch no longer reads would do nothing
    setattr(importlib.import_module(entry.owner), entry.name, value)


_MISSING = object()
