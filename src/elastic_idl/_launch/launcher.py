"""The local elastic launcher: ``launch(task, entrypoint, *args)`` and ``to_launch_config``.

Data flow: task (+ pod env) -> `to_launch_spec` (pure) ->
torch ``LaunchConfig`` (`elastic_idl._launch.agent`) -> an elastic agent for this
node, with workers started the fast and safe way, restarts that work, and one
typed error with every failure when the job fails.

Importing this module does not import torch; calling either function does.

Start methods (``ElasticConfig.start_method``, default ``forkserver``):

- ``forkserver``: workers are forked from a *warm fork server*, a copy of the
  launcher made once torch is imported and before any thread exists
  (`elastic_idl._launch.forkserver`). Workers start with torch loaded, the
  entrypoint is not pickled (closures work), and nothing unsafe is inherited.
  If the launcher already runs threads or initialised CUDA, a regular fork
  server is started instead, with torch preloaded (slower, still safe), and
  the reason is logged.
- ``spawn``: a fresh interpreter per worker (torch's default; every worker
  imports torch again).
- ``fork``: a plain fork of the agent (which runs threads by then). Refused when
  CUDA is initialised. Workers get default signal handlers back, so a restart
  does not wait torch's 30 s for workers that inherited the agent's handler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, overload

from elastic_idl._errors import (
    HostNotFoundError,
    LaunchFailedError,
    LaunchInterruptedError,
    RendezvousIncompleteError,
    ValidationError,
)
from elastic_idl._launch.failures import (
    FailureLog,
    check_writable,
    save_report,
)
from elastic_idl._launch.forkserver import Zygote, cpython_forkserver, fork_hazard, thread_count
from elastic_idl._launch.spec import LaunchSpec, override_violations, split_endpoint, to_launch_spec
from elastic_idl._launch.worker import (
    KIND_CALLABLE,
    KIND_MODULE,
    KIND_SCRIPT,
    WorkerMain,
    cwd_first_on_path,
    note_launcher_threads,
    stash,
    unstash,
)
from elastic_idl._task.names import (
    COLLECTIVE_TIMEOUT_ENV,
    DEFAULT_JOIN_TIMEOUT_S,
    DEFAULT_RUN_ID,
    ENV,
    JOIN_TIMEOUT,
    LOOPBACK_HOST,
    is_loopback,
)
from elastic_idl._task.view import seconds_number

if TYPE_CHECKING:
    from torch.distributed.launcher.api import LaunchConfig

__all__ = [
    "LaunchFailedError",
    "LaunchInterruptedError",
    "RendezvousIncompleteError",
    "launch",
    "to_launch_config",
]

_log = logging.getLogger("elastic_idl")

#: Modules a regular (cold) fork server imports once, so its workers start warm.
_COLD_FORKSERVER_PRELOAD = ["__main__", "torch", "torch.distributed", "elastic_idl._launch.worker"]


def to_launch_config(
    task: Any,
    *,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
) -> LaunchConfig:
    """torch's ``LaunchConfig`` for a task, every field set explicitly.

    Builds the torch-free `LaunchSpec` first (see
    `to_launch_spec` for the message/env precedence), then the
    real config; an ``nproc_per_node`` policy (auto/cpu/gpu) is resolved on this
    machine. The returned config owns its ``rdzv_configs`` dict: torch writes
    ``rdzv_configs["timeout"]`` into it, never into anything the caller holds.

    Args:
        task: The task message (either shape, either binding).
        env: The pod env (``PET_*``); None outside a pod. Never modified.
        run_id: Explicit run id (beats ``PET_RDZV_ID`` and the message).
        rdzv_endpoint: Explicit "host:port" (beats ``PET_RDZV_ENDPOINT`` and the message).
        start_method: Explicit start method (beats the message).

    Raises:
        ValidationError: The task breaks a rule or has no elastic config.
        ValueError: The nproc policy cannot be resolved here ("gpu" without CUDA).
    """
    spec = to_launch_spec(task, env=env, run_id=run_id, rdzv_endpoint=rdzv_endpoint, start_method=start_method)
    from elastic_idl._launch import agent

    return agent.build_launch_config(spec)


def worker_main_of(entrypoint: Any, args: tuple[Any, ...], module: bool) -> WorkerMain:
    """What the workers run, checked before anything starts."""
    if callable(entrypoint) and not isinstance(entrypoint, str):
        if module:
            raise TypeError("module=True needs a module name, not a callable")
        return WorkerMain(KIND_CALLABLE, entrypoint, tuple(args))
    if isinstance(entrypoint, os.PathLike):
        entrypoint = os.fspath(entrypoint)
    if not isinstance(entrypoint, str) or not entrypoint:
        raise TypeError(f"entrypoint must be a callable, a script path or a module name, got {entrypoint!r}")
    if entrypoint == "-m" and not module:
        if not args:
            raise TypeError('entrypoint "-m" needs the module name as the next argument')
        entrypoint, args, module = str(args[0]), tuple(args[1:]), True
    if module:
        _find_module(entrypoint)
        return WorkerMain(KIND_MODULE, entrypoint, tuple(str(a) for a in args))
    path = Path(entrypoint)
    if not path.is_file():
        raise FileNotFoundError(2, "no such script to launch", entrypoint)
    return WorkerMain(KIND_SCRIPT, str(path.resolve()), tuple(str(a) for a in args))


def _find_module(name: str) -> None:
    """Check that ``python -m name`` would find the module: the working directory first, then sys.path.

    ``python -m`` puts the working directory first on ``sys.path``; a launcher started
    as a console script (``elastic-idl``) or from a script elsewhere has the script's
    directory there instead. The workers run the module the same way
    (`elastic_idl._launch.worker`). Finding ``pkg.mod`` imports ``pkg``, as
    ``python -m`` does.

    Raises:
        ModuleNotFoundError: No such module.
        ImportError: Importing its package failed (the package's own error is in the message).
    """
    import importlib.util

    with cwd_first_on_path() as cwd:
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        except Exception as exc:  # the package's __init__ raised: say so, in one line
            raise ImportError(
                f"cannot import the package of module {name!r}: {type(exc).__name__}: {exc}", name=name
            ) from None
    if found is None:
        raise ModuleNotFoundError(
            f"no module named {name!r} to launch (looked in {cwd} first, as python -m does, then sys.path)",
            name=name,
        )


#: Seconds between two lookups while a pod waits for the rendezvous host to resolve.
_RESOLVE_RETRY_S = 1.0


def _resolve(host: str) -> str:
    """Why ``host`` does not resolve (the resolver's words), or an empty string when it does."""
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    return ""


def _wait_for_host(spec: LaunchSpec, host: str, log: FailureLog) -> None:
    """In a pod: wait, within join_timeout, for the rendezvous host to resolve.

    The operator's ``<job>-worker-0`` service name may not resolve yet while pods start.
    Waits in 1 s slices so that a signal is handled at once.
    """
    join_timeout = float(spec.rdzv_configs.get(JOIN_TIMEOUT, DEFAULT_JOIN_TIMEOUT_S))
    deadline = time.monotonic() + join_timeout
    reason = _resolve(host)
    if not reason:
        return
    _log.info("elastic-idl: waiting up to %ss for %s to resolve (%s)", seconds_number(join_timeout), host, reason)
    while reason:
        if time.monotonic() >= deadline:
            summary = (
                f"rendezvous {spec.run_id!r} at {spec.rdzv_endpoint}: the host {host!r} did not resolve within "
                f"join_timeout={seconds_number(join_timeout)}s ({reason})"
            )
            raise RendezvousIncompleteError(
                summary, log.report(summary), joined=0, needed=spec.min_nodes, timeout_s=join_timeout
            )
        time.sleep(min(_RESOLVE_RETRY_S, max(0.0, deadline - time.monotonic())))
        reason = _resolve(host)


def _overrides(spec: LaunchSpec, *, node_rank: int | None, local_addr: str | None) -> LaunchSpec:
    """Apply the per-node launch settings: node rank (static backend) and local address."""
    found = override_violations(local_addr=local_addr)
    if found:
        raise ValidationError(found)
    if local_addr is not None:
        spec = dataclasses.replace(spec, local_addr=local_addr)
    if node_rank is not None and (isinstance(node_rank, bool) or not isinstance(node_rank, int)):
        raise TypeError(f"node_rank must be an int, got {node_rank!r}")
    if spec.rdzv_backend == "static":
        rank = node_rank if node_rank is not None else int(spec.rdzv_configs.get("rank", 0))
        if not 0 <= rank < spec.max_nodes:
            raise ValueError(
                f"node_rank: {rank} is not in 0..{spec.max_nodes - 1} (the static job has {spec.max_nodes} nodes)"
            )
        spec = dataclasses.replace(spec, rdzv_configs=MappingProxyType({**spec.rdzv_configs, "rank": rank}))
    elif node_rank:
        raise ValueError(
            f"node_rank: only the static rendezvous backend takes a node rank; the {spec.rdzv_backend} "
            "rendezvous assigns node ranks itself (drop it)"
        )
    return spec


def _loopback_interface() -> str | None:
    with contextlib.suppress(OSError):
        for _, name in socket.if_nameindex():
            if name in ("lo", "lo0"):
                return name
    return None


@contextlib.contextmanager
def _scoped_environ(updates: Mapping[str, str]) -> Iterator[None]:
    """Set env variables for the duration of the launch (workers inherit them), then restore."""
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def _cold_forkserver() -> Iterator[None]:
    """CPython's own fork server with torch preloaded; stopped afterwards if this launch started it."""
    server = cpython_forkserver()
    started_here = server._forkserver_pid is None
    saved_preload = list(server._preload_modules)
    if started_here:
        server.set_forkserver_preload(list(_COLD_FORKSERVER_PRELOAD))
        _start_immune_to_group_signals(server)
    try:
        yield
    finally:
        server.set_forkserver_preload(saved_preload)
        if started_here and server._forkserver_pid is not None:
            with contextlib.suppress(Exception):
                server._stop()


def _start_immune_to_group_signals(server: Any) -> None:
    """Start CPython's fork server ignoring SIGTERM and SIGHUP (it already ignores SIGINT).

    It runs in the launcher's process group, and its workers die with it (parent-death
    signal): a ``kill -TERM -<pgid>`` would end them while they handle the agent's own
    signal. An ignored disposition survives the server's exec; its workers reset theirs
    (`WorkerMain`). It still exits when the launcher does.
    """
    if threading.current_thread() is not threading.main_thread():
        server.ensure_running()
        return
    names = (signal.SIGTERM, signal.SIGHUP)
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in names}
    try:
        server.ensure_running()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _check_picklable(main: WorkerMain, method: str, why: str) -> None:
    try:
        pickle.dumps(main)
    except Exception as exc:
        raise TypeError(
            f"the entrypoint {main.__name__} cannot be sent to {method} workers ({exc}); {why}. "
            "Define it at module level, or pass start_method='fork'."
        ) from exc


@overload
def launch(
    task: Any,
    entrypoint: Callable[..., Any] | str | os.PathLike[str],
    *args: Any,
    return_all: Literal[False] = False,
    module: bool = False,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    node_rank: int | None = None,
    local_addr: str | None = None,
) -> Any: ...


@overload
def launch(
    task: Any,
    entrypoint: Callable[..., Any] | str | os.PathLike[str],
    *args: Any,
    return_all: Literal[True],
    module: bool = False,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    node_rank: int | None = None,
    local_addr: str | None = None,
) -> dict[int, Any]: ...


@overload
def launch(
    task: Any,
    entrypoint: Callable[..., Any] | str | os.PathLike[str],
    *args: Any,
    return_all: bool,
    module: bool = False,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    node_rank: int | None = None,
    local_addr: str | None = None,
) -> Any: ...


def launch(
    task: Any,
    entrypoint: Callable[..., Any] | str | os.PathLike[str],
    *args: Any,
    return_all: bool = False,
    module: bool = False,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    node_rank: int | None = None,
    local_addr: str | None = None,
) -> Any:
    """Run a task's elastic job on this node and wait for it.

    One node by default: c10d rendezvous on 127.0.0.1 with a free port, the
    stores listening on loopback only; workers use CPU/gloo unless the user code
    picks GPUs (``nproc_policy`` auto/gpu counts them). Start several launchers
    with the same ``rdzv_endpoint`` and ``run_id`` to form a multi-node job.

    Args:
        task: The task message (either shape, either binding), with an elastic config.
        entrypoint: What every worker runs: a function (called with ``args``), a
            script path (run as ``__main__`` with ``args`` as its argv), or a module
            name with ``module=True`` (or ``"-m", "pkg.mod", ...``), like torchrun.
        *args: Arguments for the entrypoint. ``${local_rank}`` in a string is
            replaced by the worker's local rank, as torchrun does.
        return_all: Return every local worker's value by global rank instead of rank 0's.
        module: ``entrypoint`` names a module to run like ``python -m``.
        env: The pod env (``PET_*`` variables); see `to_launch_spec`.
        run_id: Rendezvous id shared by all nodes (default: message, env, else "none";
            a one-node launch on a free port gets a random id).
        rdzv_endpoint: "host:port" of the rendezvous (default: 127.0.0.1 and a free port).
        start_method: "forkserver" (default), "spawn" or "fork"; see the module docs.
        failure_path: When the job fails, also write the FailureReport here as JSON.
            Checked for writing before anything starts; should the write fail at
            the end anyway, a warning is logged and the launch's own error is raised.
        log_dir: Keep torch's per-attempt logs and error files here (default: a
            temporary directory, removed afterwards). Created if missing.
        node_rank: This node's rank for the ``static`` backend (torchrun's
            ``--node-rank``; default 0). Other backends assign node ranks themselves:
            a non-zero value is an error there.
        local_addr: This node's address as the other nodes should see it (torchrun's
            ``--local-addr``; default: the loopback address for a loopback endpoint,
            else torch's choice).

    A rendezvous host that does not resolve fails at once (``HostNotFoundError``, a
    ValueError), unless ``env`` is a pod env (holds ``PET_RDZV_ENDPOINT``): there the
    operator's ``<job>-worker-0`` may not resolve yet, so the launch waits for it
    within ``join_timeout`` (then raises ``RendezvousIncompleteError``).

    Returns:
        Rank 0's return value (None for scripts and modules, and on a node that
        does not hold rank 0), or with ``return_all`` a dict of this node's
        workers' values by global rank.

    Raises:
        ValidationError: The task breaks a rule, or a launch-time value breaks its field's rule;
            `TorchVersionError` (a ValidationError, rule ``launch.torch_version``) when the task
            sets a field the installed torch cannot apply (``${hostname}`` in
            log_line_prefix_template before torch 2.14, cas_backoff_max_seconds > 0 before 2.15).
        TypeError, FileNotFoundError, ImportError: The entrypoint is unusable
            (ModuleNotFoundError, an ImportError, for a module that does not exist).
        OSError: ``failure_path`` or ``log_dir`` cannot be written.
        ValueError: The rendezvous host of a local launch does not resolve, or
            ``node_rank`` does not fit the backend.
        LaunchFailedError: The job failed for good; ``.report`` / ``.failures`` hold
            every failed rank of every attempt, root cause first.
        RendezvousIncompleteError: Too few nodes joined within ``join_timeout``.
        LaunchInterruptedError: SIGTERM/SIGINT (or another handled signal) reached the
            launcher; every worker was stopped before this was raised.
    """
    values = launch_values(
        task,
        entrypoint,
        *args,
        module=module,
        env=env,
        run_id=run_id,
        rdzv_endpoint=rdzv_endpoint,
        start_method=start_method,
        failure_path=failure_path,
        log_dir=log_dir,
        node_rank=node_rank,
        local_addr=local_addr,
    )
    return values if return_all else values.get(0)


def launch_values(
    task: Any,
    entrypoint: Callable[..., Any] | str | os.PathLike[str],
    *args: Any,
    module: bool = False,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    node_rank: int | None = None,
    local_addr: str | None = None,
    fresh_store: bool = True,
) -> dict[int, Any]:
    """`launch`, returning this node's workers' values by global rank (internal: pod, CLI, bench).

    ``fresh_store=False`` keeps torch's shared rendezvous store across rounds instead of
    `FreshStoreHandler` (only bench/stress_restart.py's
    "stock" arm uses it, to measure torch's behaviour with everything else equal).
    """
    spec = to_launch_spec(task, env=env, run_id=run_id, rdzv_endpoint=rdzv_endpoint, start_method=start_method)
    spec = _overrides(spec, node_rank=node_rank, local_addr=local_addr)
    main = worker_main_of(entrypoint, args, module)
    return run_spec(
        spec,
        main,
        in_pod=bool(env and env.get(ENV.RDZV_ENDPOINT)),
        failure_path=failure_path,
        log_dir=log_dir,
        fresh_store=fresh_store,
    )


def run_spec(
    spec: LaunchSpec,
    main: WorkerMain,
    *,
    in_pod: bool = False,
    failure_path: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    fresh_store: bool = True,
) -> dict[int, Any]:
    """Run a resolved spec's agent on this node; this node's workers' values by global rank.

    ``in_pod``: the operator's ``<job>-worker-0`` may not resolve yet, so wait for it
    (within join_timeout) instead of failing at once. See `launch` for the errors.
    """
    _check_paths(failure_path, log_dir)
    host = split_endpoint(spec.rdzv_endpoint)[0]
    if not in_pod:
        reason = _resolve(host)
        if reason:
            raise HostNotFoundError(host, spec.rdzv_endpoint, reason)
    from elastic_idl._launch import agent  # imports torch: from here on the launch has started

    agent.check_installed_torch(spec)  # a field this torch cannot apply: refused before anything starts
    loopback = is_loopback(host)
    spec = _standalone_run_id(spec)
    nproc = agent.resolve_nproc(spec)
    log = FailureLog(run_id=spec.run_id, role=spec.role, enrich_signal=agent.signal_failure_enricher())
    note_launcher_threads(os.environ.get("OMP_NUM_THREADS"))  # before the launch env changes it
    try:
        with contextlib.ExitStack() as stack:
            root = (
                str(log_dir)
                if log_dir is not None
                else stack.enter_context(tempfile.TemporaryDirectory(prefix="elastic-idl-"))
            )
            stack.enter_context(_scoped_environ(_launch_env(spec, nproc, loopback, fresh_store)))
            stack.enter_context(agent.scoped_signal_handlers(spec.signals_to_handle))
            if in_pod:
                _wait_for_host(spec, host, log)
            worker_main, method = _prepare_start(spec.start_method, main, stack)
            config = agent.build_launch_config(
                spec,
                nproc_per_node=nproc,
                start_method=method,
                log_dir=root,
                local_addr=_local_addr(host) if loopback and not spec.local_addr else spec.local_addr,
            )
            return agent.run_agent(
                config,
                worker_main,
                failure_log=log,
                loopback=loopback,
                fresh_store=fresh_store,
                on_endpoint=lambda ep: _log.info("elastic-idl: rendezvous %s at %s", spec.run_id, ep),
                stuck_after_s=spec.collective_timeout,
            )
    except agent.SignalException as exc:  # a signal before or after the agent ran: nothing to stop
        error = agent.interrupted_error(exc.sigval, None, log)
        save_report(error.report, failure_path)
        raise error from None
    except LaunchFailedError as exc:
        save_report(exc.report, failure_path)
        raise


def _check_paths(failure_path: str | os.PathLike[str] | None, log_dir: str | os.PathLike[str] | None) -> None:
    """Fail before anything starts when the failure report or the log directory cannot be written."""
    if failure_path is not None:
        check_writable(failure_path, "failure report")
    if log_dir is not None:
        check_writable(Path(log_dir) / ".elastic-idl", "log directory")


def _standalone_run_id(spec: LaunchSpec) -> LaunchSpec:
    """A private store on a fresh port gets a random run id, like torchrun --standalone."""
    if spec.run_id == DEFAULT_RUN_ID and spec.rdzv_endpoint.endswith(":0") and spec.max_nodes == 1:
        return dataclasses.replace(spec, run_id=uuid.uuid4().hex)
    return spec


def _launch_env(spec: LaunchSpec, nproc: int, loopback: bool, fresh_store: bool) -> dict[str, str]:
    """The env variables set for the launch (the workers inherit them)."""
    from elastic_idl._launch import agent

    updates: dict[str, str] = {"TORCHELASTIC_SIGNALS_TO_HANDLE": spec.signals_to_handle}
    # The failure-detection budget: the worker bootstrap reads the first; torch reads TORCH_NCCL_*.
    updates[COLLECTIVE_TIMEOUT_ENV] = repr(spec.collective_timeout)
    updates.update(spec.nccl_env)
    if fresh_store:
        updates[agent.DISABLE_SHARED_STORE_ENV] = "1"
    if "OMP_NUM_THREADS" not in os.environ and nproc > 1:
        updates["OMP_NUM_THREADS"] = "1"  # torchrun's default: no oversubscription
    if loopback and "GLOO_SOCKET_IFNAME" not in os.environ:
        lo = _loopback_interface()
        if lo:
            updates["GLOO_SOCKET_IFNAME"] = lo  # every node is on this machine: keep gloo on loopback
    return updates


def _local_addr(host: str) -> str:
    """The address a loopback launch advertises for this node (and binds its stores to)."""
    return LOOPBACK_HOST if host in ("localhost", "") else host


def _prepare_start(method: str, main: WorkerMain, stack: contextlib.ExitStack) -> tuple[WorkerMain, str]:
    """Pick how workers start; returns the entrypoint torch gets and torch's start method."""
    if method == "forkserver":
        hazard = fork_hazard()
        if hazard is None:
            worker_main = main
            if main.kind == KIND_CALLABLE:
                key = uuid.uuid4().hex
                stash(key, main.target, main.args)
                stack.callback(unstash, key)
                worker_main = WorkerMain(KIND_CALLABLE, None, stash_key=key, name=main.__name__)
            zygote = Zygote()
            zygote.start()
            stack.callback(zygote.stop)
            stack.enter_context(zygote.installed())
            return worker_main, "forkserver"
        _log.warning("elastic-idl: workers start from a cold fork server (slower): %s", hazard)
        _check_picklable(main, "forkserver", hazard)
        stack.enter_context(_cold_forkserver())
        return main, "forkserver"
    if method == "fork":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            raise RuntimeError(
                "start_method='fork' is unsafe here: CUDA is initialised in the launcher process and a "
                "forked worker cannot use it. Use 'forkserver' (the default) or 'spawn'."
            )
        n = thread_count()
        if n > 1:
            _log.warning("elastic-idl: start_method='fork' from a launcher with %d threads", n)
        return main, "fork"
    if method == "spawn":
        _check_picklable(main, "spawn", "spawned workers receive it by pickle")
        return main.spawned(), "spawn"
    raise ValueError(f"unknown start method {method!r}: use forkserver, spawn or fork")
