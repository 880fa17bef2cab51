"""Everything that touches torch: the LaunchConfig builder and the elastic agent the launcher runs.

The only module of elastic-idl that imports torch. Nothing imports it at
package import time: :mod:`elastic_idl._launch.launcher` imports it inside functions,
so ``import elastic_idl`` stays torch-free.

What the agent changes compared with ``torch.distributed.launcher.api.launch_agent``:

- Workers of every rendezvous round get a fresh TCPStore owned by the agent of
  node rank 0 (see :class:`FreshStoreHandler`). torch 2.13 shares one store
  across rounds, so keys of attempt 0 are still there in attempt 1
  (pytorch/pytorch#135712): restarts and late joiners fail at random.
- For a loopback endpoint the rendezvous store and the worker stores listen on
  the loopback address only (torch's TCPStore binds every interface).
- Every failed worker of every attempt is reported to a
  :class:`~elastic_idl._launch.failures.FailureLog` before a restart wipes it.
- Stopping workers for a restart honours ``shutdown_timeout`` (torch uses a fixed 30 s).
- A rendezvous timeout says how many nodes joined out of how many were needed.
- The exit barrier waits in 1 s slices, so a signal is handled within a second.
- torch's own traceback of a failed worker (often a collateral rank's) is not logged
  unless the ``elastic_idl`` logger is at DEBUG; other log records with a traceback are
  pre-formatted: torch's formatter would import ``torch._dynamo`` (~2 s) to print them.
- A one-node job skips the rendezvous' random start-up delay (0-0.3 s).
- While the workers run, the agent watches the round they were started for
  (:class:`_RoundWatch`): a node of the round that is dead by torch's keep-alive rule
  starts a new round, as a node waiting to join does; so does this node finding itself
  dropped from the round (it was frozen or cut off), and workers that fail once their
  round is void that way use no restart; a rendezvous closed by another node stops the
  workers and ends the launch (unless every other node had finished). See "Dead peers" below.
- Each launch's rendezvous node identity is unique (:func:`_unique_node_identity`).

Dead peers. torch's agent leaves a running round only when a local worker fails or
``num_nodes_waiting() > 0``. A peer that vanishes without closing its sockets (its
processes frozen, a partition, its machine lost) fails nothing locally: the workers wait
in ``init_process_group`` or a collective for the process group timeout (gloo: 30 min).
A peer that fails for good closes the rendezvous; workers waiting in
``init_process_group`` for its ranks (whose processes never connected) wait just as long.
Three ways to notice, and why the keep-alive:

- the rendezvous keep-alive: every agent already renews its heartbeat in the rendezvous
  state every ``keep_alive_interval``, and torch already judges a node dead when its
  heartbeat is older than ``keep_alive_interval x keep_alive_max_attempt`` (the state
  holder's ``sync`` drops it). Reading that state costs one store read per second at
  most (torch caches it for 1 s) and needs no change in the workers; the verdict is the
  one torch applies at the next rendezvous, so both sides agree on who is alive, and a
  frozen agent is caught along with its workers. The closed flag is in the same state.
- the store: a store connection does not break when its peer freezes (no FIN, no RST)
  and the workers' store belongs to node rank 0, so the other nodes' stores say nothing
  about each other; a key-based liveness protocol would duplicate the keep-alive.
- a watchdog on collective progress: it needs the user's code to report steps (or
  hooks in every collective), cannot tell a slow step from a hung one without a timeout
  the user must tune, and sees nothing while a worker waits in ``init_process_group``.

The detection bound is torch's expiry plus one read: a peer's last heartbeat is written
before it stops (and at most ``keep_alive_interval`` before: it is renewed once it is that
old), it expires ``keep_alive_interval x keep_alive_max_attempt`` after it was written, and
a fresh read of the state comes within ``1 s + monitor_interval`` (torch caches it for 1 s):
at most ``keep_alive_interval x keep_alive_max_attempt + 1 s + monitor_interval`` after the
peer stopped, which is ``keep_alive_interval x (keep_alive_max_attempt + 1) +
monitor_interval`` or less (the interval is whole seconds), plus the clock skew between the
nodes (heartbeats are wall-clock times); at least ``keep_alive_interval x
(keep_alive_max_attempt - 1)``. A closed rendezvous is seen within ``1 s +
monitor_interval``. Then the workers are stopped (SIGTERM, SIGKILL after
``shutdown_timeout``), and the new round forms like any other (``last_call_timeout`` when
fewer than ``max_nodes`` come), or fails after ``join_timeout`` with a
:class:`~elastic_idl.PeerLostError` when fewer than ``min_nodes`` do.
A lost node that hosts the rendezvous store: the state cannot be read at all. torch's store
client, once a read times out after ``read_timeout``, waits with no timeout for the host to
confirm the cancelled read (a frozen host: indefinitely; a machine that is gone: until TCP
gives up), and torch's heartbeat thread holds the state's lock through its own such read.
The watch reads in a thread of its own (:func:`_within`) and gives up after ``read_timeout +
keep_alive_interval x keep_alive_max_attempt``: the workers are stopped and the launch ends
with a ``RendezvousStoreLostError`` (exit 200 in a pod, retried under the ExitCode policy;
the host's replacement starts a new store). Bound after the host stopped: that deadline plus
``1 s + monitor_interval`` (75-76 s at torch's defaults), plus ``shutdown_timeout`` at worst
for the workers to stop. The exit barrier (this node's workers succeeded, the others' not yet)
waits on the same store: each of its store calls is bounded by ``read_timeout + 5 s``, after
which this node leaves the barrier, its success standing, and abandons the rendezvous instead
of closing it (closing writes to the store, and torch's shutdown joins the heartbeat thread).
So is every store call of the rendezvous itself (`_bound_rendezvous_store_calls`: the join, the
keep-alive, the close), connecting to the store and the rank assignment (two such deadlines
each): a host frozen mid-rendezvous ends the launch with a ``RendezvousStoreLostError``.

Leaving. A node that ends with an error counts itself out of its last round's store and
waits, ``1 s + monitor_interval + shutdown_timeout`` at most, until every node of the round
has (`_RoundWatch.leave`): a node whose workers failed asks the store whether its host is lost,
and a store host that simply ended first (its own workers failed for good) must not look lost.

Workers alive but stuck. A worker that stops progressing (stopped by a signal or a debugger,
blocked in I/O, asleep outside a collective its peers wait in) is alive to torch and to the
keep-alive. Its peers' collective times out after the task's ``collective_timeout``, which the
launcher gives every process group created without a timeout (`_launch/collective.py`); the
agent ends a worker stopped for that long itself (a stopped process on a node of its own would
never be ended otherwise), and records either as the rank that stopped progressing
(`_Agent._end_stopped_workers`, `_Agent._not_progressing`). Stopping a group sends SIGCONT
after the signal, so a stopped worker ends at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import runpy
import secrets
import signal
import socket
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta, timezone
from typing import Any, cast

with warnings.catch_warnings():
    # torch 2.13 warns at import when numpy is absent; harmless for elastic launches.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    import torch
    import torch.distributed as dist
    from torch.distributed.elastic import metrics
    from torch.distributed.elastic.agent.server.api import (
        RunResult,
        WorkerGroup,
        WorkerSpec,
        WorkerState,
    )
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, LogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing import errors as torch_errors
    from torch.distributed.elastic.multiprocessing.api import LogsDest
    from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousParameters
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as _dr
    from torch.distributed.elastic.rendezvous import registry as rdzv_registry
    from torch.distributed.elastic.rendezvous.api import (
        RendezvousClosedError,
        RendezvousConnectionError,
        RendezvousInfo,
        RendezvousStoreInfo,
        RendezvousTimeoutError,
    )
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler, create_handler
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
    from torch.distributed.launcher.api import LaunchConfig
    from torch.numa.binding import AffinityMode, NumaOptions

from elastic_idl import _torch_private as private
from elastic_idl._errors import (
    LaunchFailedError,
    LaunchInterruptedError,
    PeerLostError,
    RendezvousIncompleteError,
    RendezvousStoreLostError,
)
from elastic_idl._errors import RendezvousClosedError as ClosedByAnotherNodeError
from elastic_idl._launch.failures import (
    STUCK_MARK,
    FailureLog,
    SignalEnricher,
    WorkerExit,
    describe_attempt,
    file_clock_ns,
    timed_out_at,
    user_traceback,
)
from elastic_idl._launch.spec import LaunchSpec, check_torch_support
from elastic_idl._sdk.torchrun import TorchrunSurface
from elastic_idl._task.names import (
    C10D,
    DEFAULT_JOIN_TIMEOUT_S,
    DEFAULT_PORTS,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    JOIN_TIMEOUT,
    READ_TIMEOUT,
    bind_host,
)

__all__ = [
    "DISABLE_SHARED_STORE_ENV",
    "FreshStoreHandler",
    "LazyLogsSpecs",
    "SignalException",
    "build_launch_config",
    "installed_torchrun_surface",
    "interrupted_error",
    "resolve_nproc",
    "run_agent",
    "scoped_signal_handlers",
]

_log = logging.getLogger("elastic_idl")

#: torch's opt-out of its shared rendezvous store; the launcher sets it to "1" (see FreshStoreHandler).
DISABLE_SHARED_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
#: Key, in the per-round rendezvous store, under which node rank 0 publishes its worker store port.
_WORKER_STORE_KEY = "elastic_idl/worker_store"


def resolve_nproc(spec: LaunchSpec) -> int:
    """Worker count on this node: the number, or the policy resolved like torchrun does.

    "auto" = accelerators when there are any, else CPUs; "cpu" = CPUs available
    to this process (affinity-aware); "gpu" = CUDA devices, an error without any.
    """
    if spec.nproc_per_node is not None:
        return spec.nproc_per_node
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if spec.nproc_policy == "cpu":
        return cpus
    if spec.nproc_policy == "gpu":
        if not torch.cuda.is_available():
            raise ValueError("nproc_per_node policy 'gpu' needs CUDA, and no CUDA device is available on this node")
        return int(torch.cuda.device_count())
    if spec.nproc_policy == "auto":
        if torch.accelerator.is_available():
            return int(torch.accelerator.device_count())
        return cpus
    raise ValueError(f"unknown nproc_per_node policy {spec.nproc_policy!r}")


def _rdzv_configs(spec: LaunchSpec) -> dict[str, Any]:
    """A new dict: LaunchConfig writes ``timeout`` into the one it gets.

    The typed timeouts are whole seconds already (rule elastic.duration.whole_seconds):
    torch reads every c10d timeout with ``int()``.
    """
    return dict(spec.rdzv_configs)


class LazyLogsSpecs(DefaultLogsSpecs):
    """torch's DefaultLogsSpecs, except that without a ``log_dir`` the temp dir is made on first use.

    DefaultLogsSpecs(log_dir=None) calls ``tempfile.mkdtemp`` in its constructor: every
    LaunchConfig built that way leaves an empty ``torchelastic_*`` dir in /tmp, launched or not.
    """

    def __init__(
        self,
        log_dir: str | None = None,
        redirects: Std | dict[int, Std] = Std.NONE,
        tee: Std | dict[int, Std] = Std.NONE,
        local_ranks_filter: set[int] | None = None,
    ) -> None:
        if log_dir:
            super().__init__(log_dir, redirects, tee, local_ranks_filter)
            return
        LogsSpecs.__init__(self, None, redirects, tee, local_ranks_filter)
        self._run_log_dir = None

    def _ensure_root(self) -> str:
        if not self._root_log_dir:
            self._root_log_dir = tempfile.mkdtemp(prefix="torchelastic_")
        return str(self._root_log_dir)

    @property
    def root_log_dir(self) -> str:
        return self._ensure_root()

    def reify(self, envs: dict[int, dict[str, str]]) -> LogsDest:
        self._ensure_root()
        return super().reify(envs)


def signal_failure_enricher() -> SignalEnricher | None:
    """torch's hook that enriches the message of a worker a signal killed, where the installed torch has it.

    torch's ``@record`` failure rendering (2.14.1, 2.15) passes such a worker's message and error file through
    ``get_error_handler().maybe_enrich_signal_failure_message`` (public API of
    ``torch.distributed.elastic.multiprocessing.errors``; the stock handler returns the message unchanged,
    a torch build may swap in one that adds GPU fault context). The FailureReport does the same: the handler
    is looked up at each failure, as torch does. None on a torch without the hook (2.13).
    """
    if not hasattr(torch_errors.ErrorHandler, "maybe_enrich_signal_failure_message"):
        return None

    def enrich(message: str, error_file: str) -> str:
        handler: Any = torch_errors.get_error_handler()  # typed by the installed torch, which may predate the hook
        return str(handler.maybe_enrich_signal_failure_message(message, error_file))

    return enrich


def installed_torch_version() -> str:
    """The installed torch's version without its local part (``2.13.0``, not ``2.13.0+cu130``)."""
    return torch.__version__.split("+", 1)[0]


def check_installed_torch(spec: LaunchSpec) -> None:
    """Refuse a spec with a field the installed torch cannot apply (`TorchVersionError`, naming the field and
    the version): ``${hostname}`` in the log-line prefix template before torch 2.14, a cas backoff before 2.15."""
    check_torch_support(spec, installed_torch_version())


def installed_torchrun_surface() -> TorchrunSurface:
    """The flags of the installed torch's torchrun, read from its own parser (``get_args_parser()``).

    torch's parser reads the ``PET_*`` variables when it is built (and a bad boolean one raises),
    so it is built with them set aside: only the flags are read here, the values are the
    drop-in's to resolve (`elastic_idl._sdk.torchrun.parse_torchrun`).
    """
    from torch.distributed import run

    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("PET_")]}
    try:
        parser = run.get_args_parser()
    finally:
        os.environ.update(saved)
    options: set[str] = set()
    switches: set[str] = set()
    for action in parser._actions:  # argparse's list of the parser's arguments (the standard library's)
        options.update(action.option_strings)
        if action.option_strings and action.nargs == 0:
            switches.update(action.option_strings)
    return TorchrunSurface(installed_torch_version(), frozenset(options), frozenset(switches))


def build_launch_config(
    spec: LaunchSpec,
    *,
    nproc_per_node: int | None = None,
    start_method: str | None = None,
    log_dir: str | None = None,
    local_addr: str | None = None,
) -> LaunchConfig:
    """torch's LaunchConfig for a LaunchSpec, every field set explicitly.

    Args:
        spec: The resolved spec (see :func:`elastic_idl.to_launch_spec`).
        nproc_per_node: Overrides the spec's count (the launcher passes the resolved policy).
        start_method: Overrides the spec's start method.
        log_dir: Root of torch's per-attempt log and error files (None: a temp dir torch creates).
        local_addr: This node's address as the other nodes should see it.

    The prefix of tee'd log lines is the spec's log_line_prefix_template (None: torch's default).
    """
    nproc = nproc_per_node if nproc_per_node is not None else resolve_nproc(spec)
    numa = None
    if spec.numa_binding is not None:
        numa = NumaOptions(affinity_mode=AffinityMode(spec.numa_binding))
    logs = LazyLogsSpecs(
        log_dir=log_dir,
        redirects=Std.from_str(spec.redirects),
        tee=Std.from_str(spec.tee),
        local_ranks_filter=set(spec.local_ranks_filter) or None,
    )
    return LaunchConfig(
        min_nodes=spec.min_nodes,
        max_nodes=spec.max_nodes,
        nproc_per_node=nproc,
        logs_specs=logs,
        run_id=spec.run_id,
        role=spec.role,
        rdzv_endpoint=spec.rdzv_endpoint,
        rdzv_backend=spec.rdzv_backend,
        rdzv_configs=_rdzv_configs(spec),
        max_restarts=spec.max_restarts,
        monitor_interval=spec.monitor_interval,
        start_method=start_method or spec.start_method,
        log_line_prefix_template=spec.log_line_prefix_template,
        metrics_cfg={},
        local_addr=local_addr if local_addr is not None else spec.local_addr,
        event_log_handler="null",
        numa_options=numa,
        signals_to_handle=spec.signals_to_handle,
        duplicate_stdout_filters=None,
        duplicate_stderr_filters=None,
        virtual_local_rank=spec.virtual_local_rank,
        shutdown_timeout=spec.shutdown_timeout if spec.shutdown_timeout is not None else DEFAULT_SHUTDOWN_TIMEOUT_S,
    )


def _wait_for_key(store: dist.Store, key: str, timeout_s: float, *, call_deadline_s: float | None = None) -> bool:
    """Wait until ``key`` exists, in slices of at most 1 s so that signal handlers run; False on timeout.

    With ``call_deadline_s``, a slice that has not returned by then raises :class:`_StoreUnreachable`
    (see :func:`_within`: a frozen host never confirms a timed-out wait).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        wait = timedelta(seconds=min(1.0, left))
        try:
            if call_deadline_s is None:
                store.wait([key], wait)
            else:
                _within(functools.partial(store.wait, [key], wait), call_deadline_s, "a wait on the rendezvous store")
            return True
        except dist.DistStoreError:
            continue


def _listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); port 0 picks a free one. Raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = bind_host(host)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    return sock


def _server_store(host: str, port: int, timeout_s: float) -> tuple[dist.TCPStore, int]:
    """A TCPStore server that listens on ``host`` only (torch's own binds every interface)."""
    sock = _listen_socket(host, port)
    actual = int(sock.getsockname()[1])
    fd = sock.detach()  # the store owns the descriptor from here on
    try:
        store = dist.TCPStore(
            host,
            actual,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout_s),
            master_listen_fd=fd,
            use_libuv=True,
        )
    except BaseException:
        os.close(fd)
        raise
    return store, actual


#: Key prefix of torch's exit barrier in a round's rendezvous store (private in torch: `elastic_idl._torch_private`).
_EXIT_BARRIER_PREFIX: str = private.get(private.TERMINAL_STATE_SYNC_ID)
#: The exit barrier's arrival counter, in a round's rendezvous store (torch's agent adds 1 per node).
_EXIT_BARRIER_COUNT_KEY = _EXIT_BARRIER_PREFIX + private.get(private.NUM_MEMBERS)
#: torch's exit barrier arrival that does not wait (private in torch, like the two keys above).
_barrier_nonblocking: Callable[..., Any] = private.get(private.BARRIER_NONBLOCKING)
#: Key prefix, in a round's rendezvous store, of the count of nodes that ended with an error (:meth:`_RoundWatch.leave`).
_LEFT_KEY_PREFIX = "elastic_idl/left"


class _ClosedWhileRunning(RendezvousClosedError):
    """The round watch found the rendezvous closed while this node's workers ran."""


class _StoreUnreachable(RendezvousConnectionError):
    """A call to the rendezvous store did not return within its deadline: its host is lost."""


#: What one call to the rendezvous store may take beyond ``read_timeout`` before its host counts as
#: lost (seconds): the client's own timeout fires at read_timeout; a frozen host never answers after.
STORE_CALL_SLACK_S = 5.0


def store_call_deadline(read_timeout_s: float) -> float:
    """The deadline of one rendezvous-store call of the launcher: ``read_timeout + STORE_CALL_SLACK_S``."""
    return read_timeout_s + STORE_CALL_SLACK_S


def _bound_rendezvous_store_calls(inner: RendezvousHandler, deadline_s: float) -> None:
    """Give every store call of the rendezvous itself (join, keep-alive, close) a deadline.

    torch's c10d backend sends each through ``_call_store``; its store client times a call out
    after ``read_timeout`` and then waits, with no timeout, for the host to confirm the
    cancelled read: a store host frozen mid-rendezvous held every other node in its join
    forever. Past the deadline the call raises :class:`_StoreUnreachable` (a
    RendezvousConnectionError, which torch's rendezvous passes on as it does a broken store).
    """
    backend: Any = getattr(getattr(inner, "_state_holder", None), "_backend", None)
    call = getattr(type(backend), "_call_store", None)
    if backend is None or call is None:  # not the c10d backend (etcd's calls have their own timeouts)
        return
    # A weak reference: the backend holds this function, and a cycle through it would keep the
    # backend's store (and its socket and libuv thread) alive until a garbage collection.
    ref = weakref.ref(backend)

    def bounded(store_op: str, *args: Any, **kwargs: Any) -> Any:
        owner = ref()
        if owner is None:
            raise RendezvousConnectionError("the rendezvous backend was released")
        return _within(
            functools.partial(call, owner, store_op, *args, **kwargs), deadline_s, f"the rendezvous store's {store_op}"
        )

    backend._call_store = bounded


def _within(call: Callable[[], Any], deadline_s: float, what: str) -> Any:
    """``call()``'s result (or its exception), or :class:`_StoreUnreachable` after ``deadline_s``.

    The call runs in a daemon thread; one that never returns is left behind (it holds no
    lock of this module's, and the launch that raised ends). Why a thread: torch's store
    client, once a read times out, waits with no timeout for the host to confirm the cancelled
    read, and a frozen or lost host never does. The wait is in slices, so signals are handled.
    """
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"elastic-idl: {what}", daemon=True).start()
    if not done.wait(deadline_s):
        raise _StoreUnreachable(f"{what} did not return within {deadline_s:.0f} s: the store's host is lost or frozen")
    ok, value = box[0]
    if not ok:
        raise value
    return value


@dataclasses.dataclass(frozen=True)
class _StateView:
    """What the watch reads from one sync of torch's rendezvous state."""

    round: int
    closed: bool
    participants: frozenset[Any]
    queued: frozenset[Any]  # the wait list and the redundancy list: nodes that want the next round
    waiting: int


class _RoundWatch:
    """While the workers run, watch the rendezvous round they were started for (see the module docs).

    Reads torch's own rendezvous state the way torch's ``num_nodes_waiting`` does (the
    state holder's ``sync`` under the heartbeat lock), and applies torch's own verdict on
    dead nodes: the sync drops every node whose heartbeat is older than
    ``keep_alive_interval x keep_alive_max_attempt``. :meth:`nodes_waiting` answers for
    the handler's ``num_nodes_waiting``: torch's agent starts a new round, without using
    a restart, when it is positive.
    """

    def __init__(self, inner: RendezvousHandler, *, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> None:
        self._inner: Any = inner
        holder = getattr(inner, "_state_holder", None)
        lock = getattr(inner, "_heartbeat_lock", None)
        settings = getattr(inner, "settings", None)
        #: Whether this torch has what the watch reads; without it, only torch's own check runs.
        self.usable = (
            isinstance(inner, DynamicRendezvousHandler)
            and holder is not None
            and lock is not None
            and settings is not None
        )
        self.expiry_s = 0.0
        if self.usable:
            assert settings is not None
            self.expiry_s = settings.keep_alive_interval.total_seconds() * settings.keep_alive_max_attempt
        #: How long one read of the state may take before the store's host counts as lost:
        #: ``read_timeout`` (the store client's own bound for a read) plus the keep-alive expiry
        #: (the heartbeat thread may hold the state's lock through a read of its own).
        self.deadline_s = float(read_timeout_s) + self.expiry_s
        #: Set once a read missed its deadline: the store's host is lost; nothing may wait on it.
        self.unreachable = False
        self._round: int | None = None
        self._store: Any = None
        self._world_size = 0
        self._benign_close = False
        #: The members of the last round this node completed (None before the first one).
        self.last_members: frozenset[Any] | None = None
        #: The rendezvous store of that round (its key space).
        self.last_store: Any = None
        #: Nodes of a running round found dead (their descriptors), since the last completed round.
        self.lost: list[str] = []

    def _me(self) -> Any:
        return getattr(self._inner, "_this_node", None)

    def _read(self, *, sync: bool) -> _StateView:
        holder = self._inner._state_holder
        with self._inner._heartbeat_lock:
            if sync:
                holder.sync()
            state = holder.state
            return _StateView(
                round=int(state.round),
                closed=bool(state.closed),
                participants=frozenset(state.participants),
                queued=frozenset(state.wait_list) | frozenset(state.redundancy_list),
                waiting=len(state.wait_list),
            )

    def _read_within_deadline(self) -> _StateView:
        """A synced read of the state, or :class:`_StoreUnreachable` after :attr:`deadline_s`."""
        try:
            view: _StateView = _within(lambda: self._read(sync=True), self.deadline_s, "a read of the rendezvous state")
        except _StoreUnreachable:
            self.unreachable = True
            _log.warning(
                "elastic-idl: the rendezvous store did not answer within %.0f s (read_timeout + keep-alive "
                "expiry): its host is lost; stopping this node's workers",
                self.deadline_s,
            )
            raise
        return view

    def round_started(self, store: Any, world_size: int) -> None:
        """Note the round the agent just completed (call right after ``next_rendezvous``)."""
        self._store, self._world_size = store, world_size
        self.last_store = store
        self.lost = []
        self._benign_close = False
        if not self.usable:
            return
        view = self._read(sync=False)  # the state the join just synced
        self._round = view.round
        self.last_members = view.participants

    def round_left(self) -> None:
        """The workers of the round are stopped: nothing to watch until the next round."""
        self._round, self._store = None, None

    def nodes_waiting(self) -> int:
        """torch's ``num_nodes_waiting``, or at least 1 when this node must leave the running round.

        Raises:
            RendezvousClosedError: Another node closed the rendezvous without finishing its part
                (its workers failed with no restart left): the job is over.
        """
        if not self.usable:
            return int(self._inner.num_nodes_waiting())
        view = self._read_within_deadline()
        if self._round is None:
            return view.waiting
        if view.closed:
            if self._benign_close or self._others_finished():
                self._benign_close = True  # they succeeded and gave up waiting for us in the exit barrier
                return view.waiting
            _log.warning(
                "elastic-idl: another node closed rendezvous round %d while this node's workers ran "
                "(it failed for good); stopping them",
                self._round,
            )
            raise _ClosedWhileRunning(
                "another node closed the rendezvous while this node's workers ran (it failed for good)"
            )
        reason, void = self._leave_reason(view)
        if reason is None:
            return view.waiting
        _log.log(
            logging.WARNING if void else logging.INFO,
            "elastic-idl: %s; restarting this node's workers in a new round",
            reason,
        )
        return max(view.waiting, 1)

    def _leave_reason(self, view: _StateView) -> tuple[str | None, bool]:
        """Why this node must leave the running round, or None; and whether the round is void.

        Void: a node of it is dead, or this node was dropped from it. A node that left the round
        to join the next one (its workers failed) leaves it valid: failures it caused here count.
        """
        if view.round != self._round or self._me() not in view.participants:
            reason = (
                f"this node is no longer a participant of rendezvous round {self._round} (its heartbeat "
                f"expired: it was frozen or cut off for {self.expiry_s:.0f} s or more)"
            )
            return reason, True
        assert self.last_members is not None  # set with the round
        gone = self.last_members - view.participants
        if not gone:
            return None, False
        dead = sorted(repr(node) for node in gone if node not in view.queued)
        if not dead:
            return f"node(s) of rendezvous round {self._round} left it to join the next one", False
        self.lost = dead
        reason = (
            f"node(s) {', '.join(dead)} of rendezvous round {self._round} lost: no heartbeat for "
            f"{self.expiry_s:.0f} s (keep_alive_interval x keep_alive_max_attempt)"
        )
        return reason, True

    def round_void(self) -> str | None:
        """After the workers failed: why the round they ran in is void (see :meth:`_leave_reason`), or None.

        A node dropped from its round (frozen, then thawed: its workers' peers are gone) sees its
        workers fail as a consequence; so may the survivors of a lost node. Never raises: when the
        state cannot be read, the failure stands.
        """
        if not self.usable or self._round is None:
            return None
        try:
            view = self._read_within_deadline()
        except _StoreUnreachable:
            raise  # the launch ends: a lost store host is not a failure of these workers
        except Exception:
            return None
        if view.closed:
            return None
        reason, void = self._leave_reason(view)
        return reason if void else None

    def _others_finished(self) -> bool:
        """Whether every other node of the round has reached the exit barrier (its workers succeeded)."""
        store, size = self._store, self._world_size
        if store is None or size < 1:
            return False
        try:
            arrived = int(store.add(_EXIT_BARRIER_COUNT_KEY, 0))
        except Exception:
            return False
        return arrived >= size - 1

    def leave(self, wait_s: float) -> None:
        """Count this node out of its last round, then wait, ``wait_s`` at most, until every node of it is out.

        Called by a node that ended with an error, once it has decided how. A node whose workers
        failed asks the rendezvous store whether its host is lost (`_store_gone`); the host that
        simply ended first (its own workers failed for good: a peer's failure is a consequence)
        must not look lost, so no node's process ends, taking its store along, before the others
        have decided. Never raises: a store that stops answering ends the wait.
        """
        store, members = self.last_store, self.last_members
        if store is None or members is None or len(members) < 2 or self.unreachable:
            return
        try:
            key = _within(
                lambda: _barrier_nonblocking(store=store, world_size=len(members), key_prefix=_LEFT_KEY_PREFIX),
                self.deadline_s,
                "counting this node out of the round",
            )
            _wait_for_key(store, key, wait_s, call_deadline_s=self.deadline_s)
        except Exception:  # the store is gone, or a signal: nobody to wait for, or no time to
            return

    def missing(self) -> list[str] | None:
        """After a rendezvous that timed out: the last round's nodes that did not rejoin.

        None when no round completed before (the job never gathered its nodes).
        """
        if self.last_members is None:
            return None
        if self.lost:
            return list(self.lost)
        if not self.usable or self.unreachable:
            return []
        view = self._read(sync=False)
        back = view.participants | view.queued | {self._me()}
        return sorted(repr(node) for node in self.last_members - back)


class _LocalClockLiveness:
    """torch's dead-node check, judged on this node's clock.

    torch writes each node's heartbeat as that node's wall-clock time and drops a node whose
    heartbeat is older than ``keep_alive_interval x keep_alive_max_attempt`` by the reading
    node's wall clock: a node whose clock is 10 s behind looked dead to the others while it
    heartbeated, and every round it joined was voided (restart rounds that used no restart).
    Here a heartbeat counts by its progress: a node is dead when its heartbeat value has not
    changed for that long as this node's monotonic clock measures it. torch's own check then
    runs on those local times; the state keeps the values the nodes wrote.

    A node seen for the first time gets the full expiry from then, so a node that died before
    this one started is found dead up to one expiry later than torch would.
    """

    def __init__(self, holder: Any) -> None:
        self._holder = holder
        self._sanitize = holder._sanitize  # torch's bound method
        #: node -> (the heartbeat value last seen, this node's monotonic time when it last changed)
        self._seen: dict[Any, tuple[Any, float]] = {}

    def sanitize(self) -> None:
        state = self._holder._state
        written = dict(state.last_heartbeats)
        # The wall clock torch's check reads (its module's datetime: the same clock on a real node).
        now_mono, now_wall = time.monotonic(), _dr.datetime.now(timezone.utc)
        for node in list(self._seen):
            if node not in written:
                del self._seen[node]
        for node, value in written.items():
            seen = self._seen.get(node)
            if seen is None or seen[0] != value:
                self._seen[node] = seen = (value, now_mono)
            state.last_heartbeats[node] = now_wall - timedelta(seconds=now_mono - seen[1])
        try:
            self._sanitize()
        finally:
            for node in list(state.last_heartbeats):
                state.last_heartbeats[node] = written[node]


class FreshStoreHandler(RendezvousHandler):
    """A rendezvous handler whose every round gives the workers a brand-new TCPStore.

    Why: since mid-2024 torch's c10d handler shares one TCPStore between the
    agent and the workers of *every* round (``use_agent_store``). Keys the
    workers of attempt 0 wrote (gloo's peer addresses, barrier counters) are
    still there when attempt 1 starts, so a new worker may read a dead peer's
    address: gloo ``connectFullMesh`` times out or hangs (~1 restart in 5 here).
    When a node joins later, the old node keeps its cached store while the new
    rank 0 creates another: the two halves never meet (pytorch/pytorch#135712).

    Fix: torch's sharing is switched off (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``,
    set by the launcher), and after each completed round the agent of node rank 0
    starts a fresh store on a port the OS picks, publishes it in that round's own
    key space of the rendezvous store, and every node points its workers at it as
    an agent-owned store. Nothing stale can be read, no port is raced for, and the
    store still outlives the worker processes (the point of torch's sharing).

    Its ``num_nodes_waiting`` also answers for the round watch (:class:`_RoundWatch`,
    ``watch``): a dead node of the running round, or this node dropped from it, makes
    torch's agent start a new round; a rendezvous closed by another node ends the launch.
    """

    def __init__(self, inner: RendezvousHandler, *, bind_host: str | None, read_timeout_s: float) -> None:
        self._inner = inner
        self._bind_host = bind_host
        self._read_timeout_s = read_timeout_s
        self._server: dist.TCPStore | None = None
        self.max_participants_seen = 0
        self._probed: Any = None
        self._install_participant_probe()
        _bound_rendezvous_store_calls(inner, store_call_deadline(read_timeout_s))
        holder = getattr(inner, "_state_holder", None)
        if holder is not None and hasattr(holder, "_sanitize") and hasattr(holder, "_state"):
            holder._sanitize = _LocalClockLiveness(holder).sanitize
        #: Watches the running round for dead nodes and a closed rendezvous.
        self.watch = _RoundWatch(inner, read_timeout_s=read_timeout_s)

    def _install_participant_probe(self) -> None:
        """Count the nodes seen in the current round (for the rendezvous-timeout message)."""
        holder = getattr(self._inner, "_state_holder", None)
        sync = getattr(holder, "sync", None)
        if holder is None or sync is None:
            return

        def probed_sync() -> Any:
            result = sync()
            with contextlib.suppress(Exception):
                self.max_participants_seen = max(self.max_participants_seen, len(holder.state.participants))
            return result

        holder.sync = probed_sync
        self._probed = holder

    def _remove_participant_probe(self) -> None:
        # The probe closes over the holder: drop it so the stores are freed now, not by a later GC.
        holder, self._probed = self._probed, None
        if holder is not None:
            with contextlib.suppress(AttributeError):
                del holder.sync
            with contextlib.suppress(AttributeError):
                del holder._sanitize

    @property
    def inner(self) -> RendezvousHandler:
        return self._inner

    def get_backend(self) -> str:
        return self._inner.get_backend()

    @property
    def use_agent_store(self) -> bool:
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        self._drop_server()  # the previous round's workers are stopped by now
        self.watch.round_left()
        self.max_participants_seen = 0
        info = self._inner.next_rendezvous()
        self.watch.round_started(info.store, info.world_size)
        store = info.store
        per_call = store_call_deadline(self._read_timeout_s)
        master_addr = info.bootstrap_store_info.master_addr if info.bootstrap_store_info else None
        if info.rank == 0:
            host = self._bind_host or master_addr or socket.getfqdn()
            if self._bind_host:
                self._server, port = _server_store(self._bind_host, 0, self._read_timeout_s)
            else:
                self._server = dist.TCPStore(
                    host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=self._read_timeout_s)
                )
                port = int(self._server.port)
            _within(
                functools.partial(store.set, _WORKER_STORE_KEY, f"{host}:{port}"),
                per_call,
                "publishing the worker store",
            )
        elif not _wait_for_key(store, _WORKER_STORE_KEY, self._read_timeout_s, call_deadline_s=per_call):
            raise RendezvousConnectionError(
                f"node rank 0 published no worker store within read_timeout={self._read_timeout_s}s"
            )
        address = _within(
            functools.partial(store.get, _WORKER_STORE_KEY), per_call, "reading the worker store's address"
        )
        addr, _, port_s = address.decode().rpartition(":")
        return RendezvousInfo(store, info.rank, info.world_size, RendezvousStoreInfo(addr, int(port_s)))

    def is_closed(self) -> bool:
        return self._inner.is_closed()

    def set_closed(self) -> None:
        inner: Any = self._inner  # torch leaves this method unannotated
        inner.set_closed()

    def num_nodes_waiting(self) -> int:
        """Nodes waiting to join, or at least 1 when a node of the running round is dead (see :class:`_RoundWatch`).

        Raises:
            RendezvousClosedError: Another node closed the rendezvous while this node's workers ran.
        """
        return self.watch.nodes_waiting()

    def get_run_id(self) -> str:
        return self._inner.get_run_id()

    def shutdown(self) -> bool:
        try:
            return self._inner.shutdown()
        finally:
            self._drop_server()
            self._remove_participant_probe()

    def abandon(self) -> None:
        """Stop heart-beating and drop the stores without closing the rendezvous (after a signal).

        Closing would end the rendezvous for every node for good; a node that got
        SIGTERM (preempted) must leave that decision to the others.
        """
        stop = getattr(self._inner, "_stop_heartbeats", None)
        if stop is not None and self.watch.unreachable:
            # torch's stop joins the heartbeat thread, which may wait on the lost host forever:
            # stop it from a thread of its own (the stop flag is set at once) and go on.
            threading.Thread(target=stop, name="elastic-idl: stop heartbeats", daemon=True).start()
        elif stop is not None:
            with contextlib.suppress(Exception):
                stop()
        self._drop_server()
        self._remove_participant_probe()

    def _drop_server(self) -> None:
        self._server = None  # the C++ destructor stops the server and closes its socket

    def release(self) -> None:
        """Let go of the inner handler and its store (call after shutdown/abandon).

        A traceback of the launch (kept by a logging handler, a debugger, pytest)
        reaches this object through the agent; without this, the store's server
        thread and socket would live as long as that traceback.
        """
        self._drop_server()
        self._remove_participant_probe()
        self._inner = _ReleasedHandler(self._inner.get_backend(), self._inner.get_run_id())
        # the old one holds the inner handler and a round's store
        self.watch = _RoundWatch(self._inner, read_timeout_s=self._read_timeout_s)


class _ReleasedHandler(RendezvousHandler):
    """Stands in for a handler after the launch ended: answers names, refuses the rest."""

    def __init__(self, backend: str, run_id: str) -> None:
        self._backend, self._run_id = backend, run_id

    def get_backend(self) -> str:
        return self._backend

    def get_run_id(self) -> str:
        return self._run_id

    def next_rendezvous(self) -> RendezvousInfo:
        raise RendezvousClosedError("the launch is over")

    def is_closed(self) -> bool:
        return True

    def set_closed(self) -> None:
        pass

    def num_nodes_waiting(self) -> int:
        return 0

    def shutdown(self) -> bool:
        return True


def _make_handler(params: RendezvousParameters, *, loopback: bool) -> tuple[RendezvousHandler, str]:
    """The rendezvous handler, and the endpoint as other nodes should use it.

    A c10d rendezvous on a loopback endpoint gets its store from here, bound to
    the loopback address (port 0 = a free port); otherwise torch's registry builds it.
    """
    read_timeout = params.get_as_int(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_S) or DEFAULT_READ_TIMEOUT_S
    endpoint = params.endpoint
    if params.backend == C10D and loopback and params.get("store_type", "tcp").strip().lower() == "tcp":
        host, port = parse_rendezvous_endpoint(params.endpoint, default_port=DEFAULT_PORTS[C10D])
        is_host = params.get_as_bool("is_host")
        store: dist.Store | None = None
        if is_host is not False:
            try:
                store, port = _server_store(host, port, read_timeout)
                _log.info("elastic-idl: this launcher hosts the rendezvous store on %s:%d", host, port)
            except OSError as exc:
                if is_host is True or port == 0:
                    raise RendezvousConnectionError(
                        f"cannot listen on {host}:{port} for the rendezvous: {exc}"
                    ) from exc
        if store is None:
            try:
                store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=read_timeout))
            except (RuntimeError, ValueError, TimeoutError) as exc:
                raise RendezvousConnectionError(f"cannot reach the rendezvous store at {host}:{port}: {exc}") from exc
        endpoint = f"{host}:{port}"
        params.endpoint = endpoint
        backend = C10dRendezvousBackend(store, params.run_id)
        handler: RendezvousHandler = create_handler(store, backend, params)
    else:
        handler = rdzv_registry.get_rendezvous_handler(params)
    _unique_node_identity(handler)
    return handler, endpoint


def _unique_node_identity(handler: RendezvousHandler) -> None:
    """Give this launch's rendezvous node an identity no earlier incarnation of it had.

    torch names a node ``(addr, pid, local_id)``: the FQDN (or ``local_addr``), the agent's
    pid and a per-process counter from 0. A pod recreated under the same name has the same
    hostname, its entrypoint is PID 1 again and its first handler gets 0 again: exactly the
    dead pod's identity, so the rendezvous takes the new node for the old participant (its
    exit step removes the old entry as its own, and a frozen old incarnation that comes back
    heartbeats for the new one). The counter is replaced by a random 63-bit token, so every
    launch is a new node. ``addr`` stays as torch made it: torch publishes it as
    ``MASTER_ADDR`` of node rank 0 and the launcher hosts the workers' store on it; and
    ``addr`` then ``pid`` still order the node ranks (ranks sort by the identity), so node
    ranks follow host names as before. A handler that is not torch's dynamic one is left as is.
    """
    if not isinstance(handler, DynamicRendezvousHandler):
        return
    node: Any = getattr(handler, "_this_node", None)
    executor: Any = getattr(handler, "_op_executor", None)
    is_node_desc = dataclasses.is_dataclass(node) and not isinstance(node, type) and hasattr(node, "local_id")
    if not is_node_desc or getattr(executor, "_node", None) is not node:
        _log.warning("elastic-idl: this torch's rendezvous handler has no node identity to renew; kept torch's")
        return
    unique: Any = dataclasses.replace(cast(Any, node), local_id=secrets.randbits(63))
    handler._this_node = unique
    executor._node = unique


#: Exit codes of a worker still running when torch stopped its group (SIGTERM, then SIGKILL), or of one that ended well.
_STOPPED_BY_AGENT = (None, 0, -int(signal.SIGTERM), -int(signal.SIGKILL))


#: How often a blocked "values read" event is checked for waiters that died (seconds).
_EVENT_POLL_S = 0.1


class _BoundedEvent:
    """The workers' "values read" event, whose ``set`` cannot hang on a dead worker.

    A worker started as a function hands its value to the agent and then sleeps on this
    event (a multiprocessing Condition underneath); torch's agent sets it once every value
    is read. Setting it wakes each sleeper and waits for each to say it woke: a worker that
    died while asleep (SIGABRT from NCCL's watchdog, any signal) never says so, and the agent
    hung for good (reproduced in tests/test_launcher_unit.py; flyteplugins-pytorch ships a
    zombie watchdog for it). Here the set runs in a helper thread, and every worker found
    dead meanwhile has its wake-up acknowledged on its behalf, so the set returns within
    about :data:`_EVENT_POLL_S` of the last death.
    """

    def __init__(self, event: Any, processes: Callable[[], list[Any]]) -> None:
        self._event = event
        self._processes = processes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._event, name)

    def set(self) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                self._event.set()
            finally:
                done.set()

        threading.Thread(target=run, name="elastic-idl-values-read", daemon=True).start()
        acknowledged: set[int] = set()
        while not done.wait(_EVENT_POLL_S):
            for proc in self._processes():
                if proc.pid in acknowledged or proc.is_alive():
                    continue
                acknowledged.add(proc.pid)
                _log.warning(
                    "elastic-idl: worker pid %s ended (exit code %s) while waiting for the agent to read its "
                    "value; not waiting for it",
                    proc.pid,
                    proc.exitcode,
                )
                self._event._cond._woken_count.release()  # CPython's Condition: the dead sleeper's "woke"


class _Agent(LocalElasticAgent):
    """torch's LocalElasticAgent, reporting every failed worker of every attempt."""

    def __init__(
        self,
        spec: WorkerSpec,
        logs_specs: DefaultLogsSpecs,
        *,
        start_method: str,
        exit_barrier_timeout: float,
        shutdown_timeout: int,
        failure_log: FailureLog,
        stuck_after_s: float | None = None,
        log_line_prefix_template: str | None = None,
    ) -> None:
        super().__init__(
            spec=spec,
            logs_specs=logs_specs,
            start_method=start_method,
            exit_barrier_timeout=exit_barrier_timeout,
            log_line_prefix_template=log_line_prefix_template,
            shutdown_timeout=shutdown_timeout,
        )
        self._failure_log = failure_log
        self.current_pids: dict[int, int] = {}
        self._last_healthy_ns = file_clock_ns()
        self.all_pids: set[int] = set()
        self.rounds = 0
        #: A worker stopped (SIGSTOP, SIGTSTP, a debugger) this long is ended (collective_timeout).
        self._stuck_after_s = stuck_after_s
        #: local rank -> (monotonic time, file-clock time) it was first seen stopped
        self._stopped_since: dict[int, tuple[float, int]] = {}
        #: local rank -> (note, file-clock time) of the workers ended for not progressing
        self._stuck: dict[int, tuple[str, int]] = {}
        #: local rank -> /proc state of the workers running just before torch's last poll
        self._running_before: dict[int, str] = {}

    def attempt(self) -> int:
        """Restarts used so far: the attempt number of the running worker group."""
        return self._worker_group.spec.max_restarts - self._remaining_restarts

    def _start_workers(self, worker_group: WorkerGroup) -> dict[int, Any]:
        self._drop_traceback_files()  # of the previous attempt
        pids: dict[int, Any] = super()._start_workers(worker_group)
        pc = self._pcontext
        event = getattr(pc, "_worker_finished_event", None)
        if event is not None and hasattr(getattr(event, "_cond", None), "_woken_count"):
            pc._worker_finished_event = _BoundedEvent(event, self._processes)  # type: ignore[union-attr]
        self.rounds += 1
        self._failure_log.attempt_started(self.attempt())
        self.current_pids = {int(k): int(v) for k, v in pids.items()}
        self._last_healthy_ns = file_clock_ns()
        self._stopped_since.clear()
        self._stuck.clear()
        self.all_pids.update(self.current_pids.values())
        _log.info(
            "elastic-idl: attempt %d: started %d workers (pids %s), world size %s",
            self.attempt(),
            len(pids),
            sorted(self.current_pids.values()),
            worker_group.workers[0].world_size if worker_group.workers else "?",
        )
        return pids

    def _drop_traceback_files(self) -> None:
        """Delete torch.multiprocessing's per-worker traceback pickles (it never does; we read error.json)."""
        pc = getattr(self._pcontext, "_pc", None)
        for path in getattr(pc, "error_files", None) or []:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def release(self) -> None:
        """Drop the stores and the process context (see FreshStoreHandler.release)."""
        self._drop_traceback_files()
        self._store = None
        self._worker_group.store = None
        self._pcontext = None

    def _exit_barrier(self) -> None:
        """torch's exit barrier (same keys, same bound), waited for in 1 s slices.

        torch waits in one C++ call of up to ``exit_barrier_timeout``; a signal's
        Python handler cannot run until it returns. Here it runs within a second.
        """
        store: Any = self._store
        size: Any = self._worker_group.group_world_size
        if store is None or size is None:  # never rendezvoused: nobody to wait for
            return
        handler = self._worker_group.spec.rdzv_handler
        # One store call may take read_timeout; one that takes longer waits on a lost host (see _within).
        per_call = store_call_deadline(_read_timeout_of(handler))
        self._in_exit_barrier = True
        try:
            key = _within(
                lambda: _barrier_nonblocking(store=store, world_size=size, key_prefix=_EXIT_BARRIER_PREFIX),
                per_call,
                "the exit barrier's count",
            )
            if not _wait_for_key(store, key, self._exit_barrier_timeout, call_deadline_s=per_call):
                _log.warning(
                    "elastic-idl: other nodes did not finish within %s s; leaving the exit barrier",
                    self._exit_barrier_timeout,
                )
        except SignalException:
            raise
        except _StoreUnreachable as exc:
            _log.warning("elastic-idl: leaving the exit barrier (this node's workers succeeded): %s", exc)
            if isinstance(handler, FreshStoreHandler):
                handler.watch.unreachable = True  # nothing may wait on that store again (see _release)
        except Exception:
            _log.exception("elastic-idl: error in the exit barrier")
        finally:
            self._in_exit_barrier = False

    def _assign_worker_ranks(self, store: Any, group_rank: int, group_world_size: int, spec: WorkerSpec) -> Any:
        """torch's rank assignment (a few calls to the rendezvous store), within a deadline.

        Each of its calls may take ``read_timeout``; the slowest (a wait for node rank 0's
        answer) two of them: a store host that froze after the round formed is noticed
        after that, not never.
        """
        assign = functools.partial(super()._assign_worker_ranks, store, group_rank, group_world_size, spec)
        return _within(
            assign, 2 * store_call_deadline(_read_timeout_of(spec.rdzv_handler)), "the worker rank assignment"
        )

    def _stop_workers(self, worker_group: WorkerGroup) -> None:
        self._shutdown(timeout=self._shutdown_timeout)

    def _shutdown(self, death_sig: signal.Signals = signal.SIGTERM, timeout: int = 30) -> None:
        """torch's shutdown, except that a worker whose code has ended is not waited for.

        A worker started as a function (every start method here) hands its return value
        to the agent and then waits for the agent's "read" event, which a shutdown never
        sets: a worker that caught the signal, saved its state and exited 0 would be
        SIGKILLed only after the whole ``timeout`` (torchrun's workers, plain processes,
        end at once). Here the signal goes out as torch sends it, and each worker that has
        handed over its value (its code is over, nothing of it is lost) is ended at once.
        """
        self._end_finished_workers(death_sig, timeout)
        super()._shutdown(death_sig, timeout)

    def _end_finished_workers(self, death_sig: signal.Signals, timeout: float) -> None:
        procs = self._processes()
        queues: Mapping[int, Any] = getattr(self._pcontext, "_ret_vals", None) or {}
        if not procs:
            return
        for proc in procs:
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, death_sig)
                    # A stopped worker (SIGSTOP, SIGTSTP) would hold the signal pending until SIGKILL.
                    os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = [(lr, p) for lr, p in enumerate(procs) if p.is_alive()]
            if not alive:
                return
            for lr, proc in alive:
                queue = queues.get(lr)
                if queue is not None and not queue.empty():
                    with contextlib.suppress(Exception):
                        queue.get()  # a large value blocks its writer until read
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    proc.join(1.0)
            time.sleep(0.02)
        for proc in procs:  # torch would send the signal again and wait another timeout
            if proc.is_alive():
                _log.warning(
                    "elastic-idl: worker pid %s did not end within %s s of %s: SIGKILL",
                    proc.pid,
                    timeout,
                    death_sig.name,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.join(5.0)

    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:
        polled_ns = file_clock_ns()
        # Which workers had ended before torch looks: torch names one failed worker and then
        # stops the others, so afterwards a worker killed by SIGKILL (the OOM killer) cannot
        # be told from one torch stopped.
        # Each running worker's /proc state, read once a poll: for the stopped-worker check, and
        # because torch's poll stops the other workers as soon as one failed, so what each was
        # doing must be read before it (`_not_progressing`).
        states = {lr: _process_state(p.pid) for lr, p in enumerate(self._processes()) if p.exitcode is None}
        self._end_stopped_workers(states)
        self._continue_stopped_workers_if_a_worker_failed(states)
        ended = self._ended_workers()
        self._running_before = {lr: state or "?" for lr, state in states.items() if lr not in ended}
        result: RunResult = super()._monitor_workers(worker_group)
        if result.state == WorkerState.HEALTHY:
            self._last_healthy_ns = polled_ns
        elif result.state in (WorkerState.FAILED, WorkerState.UNHEALTHY):
            void = self._void_round(worker_group)
            if void is not None:
                # torch's loop asks num_nodes_waiting next, which says the same: a new round, no restart used.
                _log.warning(
                    "elastic-idl: attempt %d: workers ended (%s) after %s; not a failure: "
                    "restarting them in a new round",
                    self.attempt(),
                    ", ".join(f"rank {r}: exit code {f.exitcode}" for r, f in sorted(result.failures.items())),
                    void,
                )
                return RunResult(state=WorkerState.HEALTHY)
            self._capture(worker_group, result, ended)
        return result

    def _end_stopped_workers(self, states: Mapping[int, str | None]) -> None:
        """SIGKILL each worker that has been stopped for ``stuck_after_s`` (collective_timeout).

        ``states``: the /proc state of each running worker, by local rank.

        A stopped process (SIGSTOP, SIGTSTP, a debugger's stop) is alive to torch and to
        every peer's launcher, and makes no progress: its peers wait in their collective
        until it times out, and on a node of its own (one worker, or peers that are not in
        a collective) nothing ever times out. The kill makes it a failed worker like any
        other, recorded as one that stopped progressing (see `_capture`).
        """
        if self._stuck_after_s is None:
            return
        now = time.monotonic()
        for lr, proc in enumerate(self._processes()):
            state = states.get(lr)
            if state not in _STOPPED_STATES:
                self._stopped_since.pop(lr, None)
                continue
            since, since_ns = self._stopped_since.setdefault(lr, (now, file_clock_ns()))
            if lr in self._stuck or now - since < self._stuck_after_s:
                continue
            self._stuck[lr] = (
                f"{STUCK_MARK}: its process was stopped (state {state}: SIGSTOP, SIGTSTP or a debugger) for "
                f"{now - since:.0f} s, collective_timeout is {self._stuck_after_s:g} s; the launcher killed it",
                since_ns,
            )
            _log.warning("elastic-idl: worker pid %s (local rank %d): %s", proc.pid, lr, self._stuck[lr][0])
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.join(5.0)

    def _continue_stopped_workers_if_a_worker_failed(self, states: Mapping[int, str | None]) -> None:
        """SIGCONT each stopped worker when another worker of this node has failed.

        torch's poll (next) then stops the group: SIGTERM to each worker, and a SIGKILL only after
        ``shutdown_timeout`` (30 s) for one that has not ended. A stopped worker would hold that
        SIGTERM until the SIGKILL: continued, it takes it at once. This is the race where a
        peer's collective times out on the stopped worker just before `_end_stopped_workers`
        would end it (both wait collective_timeout); the stopped worker is still recorded from
        its state before the poll (`_not_progressing`).
        """
        procs = self._processes()
        if not any(p.exitcode not in (None, 0) for p in procs):
            return
        for lr, proc in enumerate(procs):
            if states.get(lr) in _STOPPED_STATES and proc.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)

    def _not_progressing(self, worker_group: WorkerGroup, exits: list[WorkerExit]) -> list[WorkerExit]:
        """This node's workers that were still running, error-free, when a failed worker's collective timed out.

        Each waited in no collective that timed out (it would have raised too), or entered
        it late: it was blocked, sleeping, busy or stopped. When this node is the whole world
        the timed-out collective was among these workers, so such a worker stopped
        progressing no later than when its peer entered the collective, ``collective_timeout``
        before the timeout: it is dated so, and is the root cause. With other nodes the peer
        may have waited for a rank elsewhere: the worker is listed, dated when it was stopped.
        """
        timed_out = [found for found in (timed_out_at(e.error_file) for e in exits) if found is not None]
        if not timed_out:
            return []
        message, when_ns = min(timed_out, key=lambda found: found[1])
        whole_world = bool(worker_group.workers) and worker_group.workers[0].world_size == len(worker_group.workers)
        waited_ns = int((self._stuck_after_s or 0.0) * 1e9)
        seen = {e.local_rank for e in exits}
        procs = self._processes()
        late: list[WorkerExit] = []
        for worker in worker_group.workers:
            lr = worker.local_rank
            state = self._running_before.get(lr)
            if lr in seen or state is None or lr >= len(procs) or procs[lr].exitcode not in _STOPPED_BY_AGENT:
                continue
            how = (
                f"its process was stopped (state {state}: SIGSTOP, SIGTSTP or a debugger)"
                if state in _STOPPED_STATES
                else f"it was running without an error (state {state}): it never entered that collective, or "
                "entered it late (blocked, sleeping or busy)"
            )
            late.append(
                WorkerExit(
                    rank=worker.global_rank,
                    local_rank=lr,
                    pid=int(worker.id or 0),
                    exitcode=None,
                    error_file="",
                    detected_ns=max(when_ns - waited_ns, 0) if whole_world else file_clock_ns(),
                    note=f"{STUCK_MARK}: when a peer's collective timed out ({message.splitlines()[0][:160]}), {how}",
                )
            )
        return late

    def _void_round(self, worker_group: WorkerGroup) -> str | None:
        """Why the round of the failed workers is void (their failure is the membership change's), or None."""
        handler = worker_group.spec.rdzv_handler
        return handler.watch.round_void() if isinstance(handler, FreshStoreHandler) else None

    def _processes(self) -> list[Any]:
        """The worker processes of the running attempt (torch's multiprocessing context), by local rank."""
        return list(getattr(getattr(self._pcontext, "_pc", None), "processes", None) or [])

    def _ended_workers(self) -> dict[int, int]:
        """Exit codes of the workers that have ended, by local rank (a poll: reaps, never waits)."""
        ended: dict[int, int] = {}
        for lr, proc in enumerate(self._processes()):
            code = proc.exitcode
            if code is not None:
                ended[lr] = int(code)
        return ended

    def _capture(self, worker_group: WorkerGroup, result: RunResult, ended: Mapping[int, int]) -> None:
        # A worker that recorded no error died some time after the last healthy poll: date it
        # then, the earliest it can have happened. A peer's "connection closed" error, caused
        # by that death, is always later, so the root cause sorts first.
        now = self._last_healthy_ns
        pc = self._pcontext
        error_files: Mapping[int, str] = getattr(pc, "error_files", None) or {}
        procs = self._processes()
        exits: list[WorkerExit] = []
        seen: set[int] = set()
        for global_rank, failure in result.failures.items():
            seen.add(failure.local_rank)
            note, when = self._stuck.get(failure.local_rank, ("", now))
            exits.append(
                WorkerExit(
                    rank=int(global_rank),
                    local_rank=failure.local_rank,
                    pid=int(failure.pid or 0),
                    exitcode=failure.exitcode,
                    error_file=error_files.get(failure.local_rank, ""),
                    detected_ns=when,
                    note=note,
                )
            )
        # torch names only the first failed worker of a function launch. The others that
        # failed on their own count too: those that raised (e.g. a peer's collective failing)
        # left an error file; those that ended without one (a signal, os._exit) had ended
        # before torch stopped the rest, or ended with a code torch's stop cannot give.
        for worker in worker_group.workers:
            lr = worker.local_rank
            if lr in seen:
                continue
            path = error_files.get(lr, "")
            unhealthy = result.state == WorkerState.UNHEALTHY
            exitcode = procs[lr].exitcode if lr < len(procs) else None
            if ended.get(lr, 0) != 0:
                exitcode = ended[lr]
            own_end = ended.get(lr, 0) != 0 or exitcode not in _STOPPED_BY_AGENT or lr in self._stuck
            if not (unhealthy or own_end or (path and os.path.isfile(path))):
                continue
            note, when = self._stuck.get(
                lr, ("unhealthy: stuck in uninterruptible sleep (D state)" if unhealthy else "", now)
            )
            exits.append(
                WorkerExit(
                    rank=worker.global_rank,
                    local_rank=lr,
                    pid=int(worker.id or 0),
                    exitcode=exitcode,
                    error_file=path,
                    detected_ns=when,
                    note=note,
                )
            )
        exits.extend(self._not_progressing(worker_group, exits))
        records = self._failure_log.add(self.attempt(), exits)
        # Say which ranks failed as it happens, the first failure first; the summary comes
        # only when the job gives up.
        _log.warning(
            "elastic-idl: attempt %d failed (%d restart(s) left): %s",
            self.attempt(),
            self._remaining_restarts,
            describe_attempt(records) or "no worker record",
        )


#: The range of the c10d handler's random delay before its first round (torch 2.13-2.15), in seconds.
_START_JITTER_S = (0, 0.3)


@contextlib.contextmanager
def _no_start_jitter(enabled: bool) -> Iterator[None]:
    """Skip the c10d handler's random 0-0.3 s delay before the first round, for a one-node job.

    The delay spreads many nodes' first store requests; with a single node it only
    adds 0.15 s on average to every launch. torch makes it once, before anything else of
    the first round, so only the first call of that range is skipped. The 1 s polling delay
    is kept, and so is every other random delay: torch 2.15's backoff after a failed
    compare-and-set (``cas_backoff_max_seconds``) goes through the same function with a range
    of its own, which may be the same range (a bound of 0.3 s) and is then kept too.
    """
    original = private.get(private.RENDEZVOUS_DELAY)
    if not enabled:
        yield
        return
    to_skip: set[float | tuple[float, float]] = {_START_JITTER_S}  # once

    def delay(seconds: float | tuple[float, float]) -> None:
        if seconds in to_skip:
            to_skip.discard(seconds)
            return
        original(seconds)

    private.set_module_attribute(private.RENDEZVOUS_DELAY, delay)
    try:
        yield
    finally:
        private.set_module_attribute(private.RENDEZVOUS_DELAY, original)


#: torch loggers whose tracebacks are about worker processes: the launcher reports those failures itself.
_WORKER_FAILURE_LOGGERS = "torch.distributed.elastic.multiprocessing"


class _PlainTraceback(logging.Filter):
    """Keep torch's internal tracebacks out of the way, and cheap to print.

    - torch logs a worker failure with its own traceback (``failed (exitcode: 1) ...``)
      for the lowest local rank that failed, which is often a collateral one ("Connection
      closed by peer"), before the launcher says which rank failed first. Such records
      are dropped unless the ``elastic_idl`` logger is enabled for DEBUG (``elastic-idl -v``):
      the launcher's per-attempt line and the final error carry the root cause.
    - Any other record's exception is pre-formatted: torch's ``TorchLogsFormatter``
      imports ``torch._dynamo`` (about 2 s here) to format a record with ``exc_info``,
      which delayed every first restart. The text is unchanged.
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            if record.name.startswith(_WORKER_FAILURE_LOGGERS) and not _log.isEnabledFor(logging.DEBUG):
                return False
            if not record.exc_text:
                record.exc_text = self._formatter.formatException(record.exc_info)
            record.exc_info = None
        return True


@contextlib.contextmanager
def _plain_tracebacks() -> Iterator[None]:
    """Install :class:`_PlainTraceback` on torch's elastic loggers for the launch."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.startswith("torch.distributed.elastic")]
    loggers = [logging.getLogger(n) for n in names]
    flt = _PlainTraceback()
    for lg in loggers:
        lg.addFilter(flt)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(flt)


def _read_timeout_of(handler: RendezvousHandler) -> float:
    """The read_timeout of the rendezvous store behind ``handler`` (torch's default when it is not ours)."""
    return handler._read_timeout_s if isinstance(handler, FreshStoreHandler) else DEFAULT_READ_TIMEOUT_S


#: /proc states of a stopped process: stopped by a signal, stopped by a tracer.
_STOPPED_STATES = ("T", "t")


def _process_state(pid: int) -> str | None:
    """The one-letter /proc state of ``pid`` (R, S, D, T, t, Z, ...), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _pid_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (zombies count as gone)."""
    state = _process_state(pid)
    if state is not None:
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


@contextlib.contextmanager
def scoped_signal_handlers(names: str) -> Iterator[None]:
    """While the launch runs, turn the given signals into torch's SignalException; restore after.

    torch installs these handlers only when workers start, and never removes them:
    a SIGTERM during the rendezvous would kill the launcher without cleanup, and
    one after ``launch()`` returned would raise in unrelated code.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[signal.Signals, Any] = {}
    try:
        for name in names.split(","):
            sig = getattr(signal, name.strip(), None)
            if isinstance(sig, signal.Signals) and sig not in saved:
                saved[sig] = signal.signal(sig, _raise_signal_exception)
        yield
    finally:
        for sig, handler in saved.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, handler)


def _raise_signal_exception(signum: int, frame: Any) -> None:
    """A signal handler raising torch's public SignalException, as torch's own launcher's handler does."""
    sig = signal.Signals(signum)
    raise SignalException(f"Process {os.getpid()} got signal: {sig}", sigval=sig)


def run_agent(
    config: LaunchConfig,
    entrypoint: Callable[..., Any],
    *,
    failure_log: FailureLog,
    loopback: bool,
    fresh_store: bool = True,
    on_endpoint: Callable[[str], None] | None = None,
    stuck_after_s: float | None = None,
) -> dict[int, Any]:
    """Run the elastic agent for one node until the job succeeds or fails for good.

    Returns the return values of this node's workers by global rank. ``fresh_store``:
    every round gets a fresh worker store (:class:`FreshStoreHandler`); False keeps
    torch's shared store (bench/stress_restart.py's "stock" arm). ``stuck_after_s``: a worker
    stopped this long is ended as one that stopped progressing (the task's collective_timeout).

    Raises:
        LaunchFailedError: workers failed and no restart is left (or the rendezvous broke).
        RendezvousIncompleteError: too few nodes joined within join_timeout.
        LaunchInterruptedError: a termination signal arrived; every worker has been stopped.
    """
    params = _rendezvous_parameters(config)
    join_timeout, read_timeout = _timeouts(params)
    run = _Run(config, failure_log, join_timeout)
    try:
        run.handler, run.endpoint = _rendezvous_handler(
            params, loopback=loopback, fresh_store=fresh_store, read_timeout=read_timeout
        )
        if on_endpoint is not None:
            on_endpoint(run.endpoint)
        run.agent = _build_agent(config, entrypoint, run.handler, failure_log, join_timeout, stuck_after_s)
        run.error, run.values = _outcome(_run(run.agent, config), run)
    except SignalException as exc:
        run.shutdown_rdzv = False
        run.error = interrupted_error(exc.sigval, run.agent, failure_log)
    except (RendezvousTimeoutError, RendezvousClosedError, RendezvousConnectionError) as exc:
        run.shutdown_rdzv = isinstance(exc, RendezvousClosedError)
        run.error = _rendezvous_error(exc, run)
    finally:
        _release(run)
    # Raised here, outside the except clauses, so that the error carries no __context__:
    # torch's exception would keep every frame of the agent (and its stores) alive.
    if run.error is not None:
        raise run.error
    return run.values


class _Run:
    """What one run_agent call holds: the handler and agent to release, and how it ended."""

    def __init__(self, config: LaunchConfig, failure_log: FailureLog, join_timeout: int) -> None:
        self.config = config
        self.failure_log = failure_log
        self.join_timeout = join_timeout
        self.endpoint = config.rdzv_endpoint
        self.handler: RendezvousHandler | None = None
        self.agent: _Agent | None = None
        self.shutdown_rdzv = True
        self.error: LaunchFailedError | None = None
        self.values: dict[int, Any] = {}


def _rendezvous_parameters(config: LaunchConfig) -> RendezvousParameters:
    """torch's rendezvous parameters for the config."""
    configs = dict(config.rdzv_configs)
    configs.pop("timeout", None)  # LaunchConfig's legacy key; c10d reads join_timeout
    return RendezvousParameters(
        backend=config.rdzv_backend,
        endpoint=config.rdzv_endpoint,
        run_id=config.run_id,
        min_nodes=config.min_nodes,
        max_nodes=config.max_nodes,
        local_addr=config.local_addr,
        **configs,
    )


def _timeouts(params: RendezvousParameters) -> tuple[int, int]:
    """(join_timeout, read_timeout) in seconds, as torch reads them."""
    join_timeout = params.get_as_int(JOIN_TIMEOUT, DEFAULT_JOIN_TIMEOUT_S) or DEFAULT_JOIN_TIMEOUT_S
    read_timeout = params.get_as_int(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_S) or DEFAULT_READ_TIMEOUT_S
    return join_timeout, read_timeout


def _rendezvous_handler(
    params: RendezvousParameters, *, loopback: bool, fresh_store: bool, read_timeout: int
) -> tuple[RendezvousHandler, str]:
    """The rendezvous handler (a FreshStoreHandler for c10d unless ``fresh_store`` is off) and its endpoint.

    Making it connects to the store and writes to it (torch's c10d backend initialises the
    state's key): two store calls, each within `store_call_deadline` (a frozen store host
    accepts the connection in its kernel and never answers).
    """
    handler, endpoint = _within(
        functools.partial(_make_handler, params, loopback=loopback),
        2 * store_call_deadline(read_timeout),
        "connecting to the rendezvous store",
    )
    if fresh_store and params.backend == C10D:
        handler = FreshStoreHandler(
            handler, bind_host=params.local_addr if loopback else None, read_timeout_s=read_timeout
        )
    return handler, endpoint


def _build_agent(
    config: LaunchConfig,
    entrypoint: Callable[..., Any],
    handler: RendezvousHandler,
    failure_log: FailureLog,
    join_timeout: int,
    stuck_after_s: float | None = None,
) -> _Agent:
    """The worker spec and the agent that runs it."""
    spec = WorkerSpec(
        role=config.role,
        local_world_size=config.nproc_per_node,
        entrypoint=entrypoint,
        args=(),
        rdzv_handler=handler,
        max_restarts=config.max_restarts,
        monitor_interval=config.monitor_interval,
        master_addr=None,
        master_port=None,
        local_addr=config.local_addr,
        event_log_handler=config.event_log_handler,
        numa_options=config.numa_options,
        duplicate_stdout_filters=config.duplicate_stdout_filters,
        duplicate_stderr_filters=config.duplicate_stderr_filters,
        virtual_local_rank=config.virtual_local_rank,
    )
    assert isinstance(config.logs_specs, DefaultLogsSpecs)  # a LazyLogsSpecs, set by build_launch_config
    return _Agent(
        spec,
        config.logs_specs,
        start_method=config.start_method,
        exit_barrier_timeout=join_timeout,
        shutdown_timeout=int(config.shutdown_timeout or DEFAULT_SHUTDOWN_TIMEOUT_S),
        failure_log=failure_log,
        stuck_after_s=stuck_after_s,
        log_line_prefix_template=config.log_line_prefix_template,
    )


def _run(agent: _Agent, config: LaunchConfig) -> RunResult | None:
    """Run the agent: metrics off, no start-up jitter for one node, plain tracebacks."""
    metrics.initialize_metrics(metrics.MetricsConfig(config.metrics_cfg))
    with _no_start_jitter(config.max_nodes == 1), _plain_tracebacks():
        result: RunResult | None = agent.run()
    return result


def _outcome(result: RunResult | None, run: _Run) -> tuple[LaunchFailedError | None, dict[int, Any]]:
    """The error of a run that did not succeed, or this node's workers' values by global rank."""
    config, failure_log = run.config, run.failure_log
    if result is None:  # torch: RendezvousGracefulExitError, the rendezvous was closed under us
        summary = (
            f"rendezvous {config.run_id!r} at {run.endpoint} was closed by another node before this one could join"
        )
        return ClosedByAnotherNodeError(summary, failure_log.report(summary)), {}
    if result.is_failed():
        assert run.agent is not None
        root = failure_log.describe_root()
        attempts = min(run.agent.attempt() + 1, config.max_restarts + 1)
        summary = (
            f"workers failed in {attempts} attempt(s) (max_restarts={config.max_restarts}); "
            f"root cause: {root or 'no failure recorded'}"
        )
        if not failure_log.raised_in(run.agent.attempt()) and _store_gone(run.handler):
            # The failures came with the store host's loss: only a restart of that host helps. Not when a
            # worker of this node raised an error of its own: that is the root cause, and the store's host
            # may simply have ended the job because of it (a finished worker-0 looks like a lost one).
            run.shutdown_rdzv = False
            summary += f"; the rendezvous store at {run.endpoint} is gone (its host was lost)"
            rep = failure_log.report(summary, attempts=attempts)
            return RendezvousStoreLostError(_with_traceback(summary, rep), rep), {}
        rep = failure_log.report(summary, attempts=attempts)
        return LaunchFailedError(_with_traceback(summary, rep), rep), {}
    return None, {int(k): v for k, v in result.return_values.items()}


def _store_gone(handler: RendezvousHandler | None) -> bool:
    """Whether the rendezvous store has stopped answering (its host is gone); False when it cannot tell."""
    inner = handler.inner if isinstance(handler, FreshStoreHandler) else handler
    store = getattr(inner, "_store", None)  # torch's DynamicRendezvousHandler keeps its store here
    if store is None:
        return False
    try:
        store.check([_WORKER_STORE_KEY])  # one round trip; a closed connection fails at once
    except Exception:
        return True
    return False


def _rendezvous_error(exc: Exception, run: _Run) -> LaunchFailedError:
    """The error for a rendezvous that timed out, was closed by another node, or lost its store."""
    config, endpoint = run.config, run.endpoint
    if isinstance(exc, RendezvousTimeoutError):
        handler = run.handler
        seen = handler.max_participants_seen if isinstance(handler, FreshStoreHandler) else -1
        joined = max(seen, 1) if seen >= 0 else -1
        joined_text = f"{joined} of the {config.min_nodes}" if joined >= 0 else f"fewer than the {config.min_nodes}"
        missing = handler.watch.missing() if isinstance(handler, FreshStoreHandler) else None
        if missing is not None:
            # The group ran and lost a node: an infrastructure failure, retried (see PeerLostError).
            lost = f"node(s) {', '.join(missing)}" if missing else "a node"
            summary = (
                f"rendezvous {config.run_id!r} at {endpoint}: {lost} of the running group did not come back "
                f"(lost, or dead); the group did not re-form within join_timeout={run.join_timeout}s: {joined_text} "
                f"node(s) needed joined (min_nodes={config.min_nodes}, max_nodes={config.max_nodes})"
            )
            return PeerLostError(
                summary,
                run.failure_log.report(summary),
                joined=joined,
                needed=config.min_nodes,
                timeout_s=run.join_timeout,
                lost=missing,
            )
        summary = (
            f"rendezvous {config.run_id!r} at {endpoint} did not complete within "
            f"join_timeout={run.join_timeout}s: {joined_text} node(s) needed joined "
            f"(min_nodes={config.min_nodes}, max_nodes={config.max_nodes}). "
            "Start every node with the same endpoint and run id, or raise join_timeout."
        )
        return RendezvousIncompleteError(
            summary,
            run.failure_log.report(summary),
            joined=joined,
            needed=config.min_nodes,
            timeout_s=run.join_timeout,
        )
    if isinstance(exc, RendezvousClosedError):
        summary = f"rendezvous {config.run_id!r} at {endpoint} is closed: the job already ended on another node"
        if isinstance(exc, _ClosedWhileRunning):
            summary = f"rendezvous {config.run_id!r} at {endpoint}: {exc}; this node's workers were stopped"
        return ClosedByAnotherNodeError(summary, run.failure_log.report(summary))
    summary = f"lost the rendezvous store at {endpoint} (run id {config.run_id!r}): {exc}"
    return RendezvousStoreLostError(summary, run.failure_log.report(summary))


def _release(run: _Run) -> None:
    """Shut the rendezvous down (or abandon it after a signal or a lost store), then drop the stores.

    After an error, a node that closed the rendezvous first waits until the other nodes of its round
    have decided how they end (:meth:`_RoundWatch.leave`): its store must not vanish under them.

    An exception's traceback keeps run_agent's frame alive: the stores go now so their
    server threads and sockets go away with the launch, not with the exception.
    """
    handler, agent = run.handler, run.agent
    if isinstance(handler, FreshStoreHandler) and (not run.shutdown_rdzv or handler.watch.unreachable):
        handler.abandon()  # closing would write to the store; after a lost host, that write never returns
    elif handler is not None and run.shutdown_rdzv:
        with contextlib.suppress(Exception):
            handler.shutdown()
        if isinstance(handler, FreshStoreHandler) and run.error is not None:
            # The others notice the close within 1 s + monitor_interval and stop their workers within shutdown_timeout.
            shutdown_timeout = run.config.shutdown_timeout or DEFAULT_SHUTDOWN_TIMEOUT_S
            handler.watch.leave(1.0 + run.config.monitor_interval + shutdown_timeout)
    if isinstance(handler, FreshStoreHandler):
        handler.release()
    if agent is not None:
        agent.release()
    run.handler = run.agent = None


#: Where the launcher's own frames live: torch's ``@record`` wrapper and the worker bootstrap.
_INTERNAL_CODE = (
    os.path.dirname(torch.__file__) + os.sep,
    # the elastic_idl package (this file is in its _launch sub-package)
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep,
    os.path.dirname(runpy.__file__) + os.sep + "runpy.py",
)


def _with_traceback(summary: str, report: Any) -> str:
    """The summary plus the root cause's traceback, indented (what a user reads first).

    The traceback starts at the user's code: the frames of torch's ``@record`` wrapper and
    of the worker bootstrap above it are left out, unless the ``elastic_idl`` logger is at
    DEBUG (``-v``). The report keeps the whole traceback.
    """
    if not report.failures or not report.failures[0].traceback:
        return summary
    text = report.failures[0].traceback
    if not _log.isEnabledFor(logging.DEBUG):
        text = user_traceback(text, _INTERNAL_CODE)
    tb = "\n".join("    " + line for line in text.rstrip().splitlines())
    return f"{summary}\n  root cause traceback:\n{tb}"


def interrupted_error(sigval: signal.Signals, agent: _Agent | None, failure_log: FailureLog) -> LaunchInterruptedError:
    """The error for a launch stopped by a signal, after checking that no worker survived."""
    name = signal.Signals(sigval).name
    stopped = sorted(agent.current_pids.values()) if agent is not None else []
    survivors = [pid for pid in sorted(agent.all_pids) if _pid_running(pid)] if agent is not None else []
    for pid in survivors:  # the agent's shutdown already waited; make sure, then say so
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while survivors and time.monotonic() < deadline:
        survivors = [pid for pid in survivors if _pid_running(pid)]
        time.sleep(0.02)
    if stopped:
        what = f"stopped {len(stopped)} worker process(es) (pids {', '.join(map(str, stopped))})"
    else:
        what = "no worker was running yet"
    left = "no worker process is left running" if not survivors else f"could not stop pids {survivors}"
    summary = f"launch interrupted by {name}: {what}; {left}"
    # Not logged here: the caller reports the error (the CLI and the pod print it once).
    return LaunchInterruptedError(summary, failure_log.report(summary), signum=int(sigval), stopped_pids=stopped)
