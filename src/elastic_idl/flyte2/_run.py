"""Running a Flyte 2 Elastic task through elastic-idl's launcher: locally, and in the pods of a PyTorchJob.

Where it runs is read once (`elastic_idl.pod.pod_env_here`; the plugin reads no env itself):

- in a pod of a PyTorchJob (the operator's ``PET_RDZV_ENDPOINT`` / ``PET_NNODES`` are set; Flyte
  2's runtime, ``a0 ...``, runs the task with ``mode`` "remote"): the operator's env is merged
  with the task by the launch spec's precedence rules, as in a flytekit pod; the rendezvous id
  is ``PET_RDZV_ID`` > the task's ``rdzv_id`` > the Flyte 2 action's run name (what every pod of
  the job shares, flyteplugins-pytorch's run id); ``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE`` replaces
  the endpoint. Each worker calls ``flyte.init`` with the action's org, project, domain and the
  run's base directory, as flyteplugins-pytorch's workers do, then the function under the task's
  context;
- in local mode (``flyte.with_runcontext(mode="local").run(task, ...)``, ``flyte run --local``,
  or ``flyte.run`` without a backend), and in a Flyte 2 pod that is no PyTorchJob's (the
  ``python-task`` of ``nnodes=1``): one node here (`elastic_idl._sdk.local.one_node`, as the
  flytekit plugin does), a multi-node task saying so in one line;
- in hybrid mode outside a pod: `elastic_idl.NotBuiltError` (exported by ``elastic_idl.flyte2``):
  not built, since it cannot be tested without a Flyte 2 backend.

Outcome, as Flyte 2's runtime takes it from ``execute`` (it writes ``outputs.pb`` for a value
returned, ``error.pb`` for an exception, under the action's output prefix, which every pod of
the job shares):

- the pod holding global rank 0 returns rank 0's value;
- a pod without rank 0 writes nothing: it waits (at most `elastic_idl._sdk.in_pod.OUTCOME_WAIT_S`)
  until rank 0's outcome is under the output prefix, then ends with ``SystemExit(0)``, which
  Flyte 2's runtime does not catch. Flyte 2 has no ``IgnoreOutputs``: returning would make its
  runtime write this pod's value (or fail to convert None) over rank 0's outputs;
- a failure for good is the launcher's `elastic_idl.LaunchFailedError`, which Flyte 2's runtime
  writes as a user error with the same message: the ``FailureReport``'s root cause (rank,
  attempt, exit code, the exception and its traceback), as in local mode. Flyte 2 has one
  ``error.pb`` per action, not one per pod: a pod that fails for good after another pod's error
  document is written leaves that one (the earlier failure) and ends with nothing written;
- a rendezvous closed by another node (that node failed for good, or finished): nothing written,
  after waiting for that node's outcome as above;
- the rendezvous store lost, or a node of the running group lost with too few left:
  ``SystemExit(200)``, nothing written (the operator's ``ExitCode`` policy recreates the pod);
- SIGTERM or another handled signal: the launcher stops every worker, then the pod ends as
  that signal would (``SystemExit(128 + N)``), nothing written.

Flyte 2's SDK runs threads of its own (its syncify loop, the local controller's runners), so
the launcher's warm fork server is never usable under it: workers start from a cold fork
server (the launcher says so in a warning), and the function, its inputs and the task context
travel by cloudpickle. A function or input that cannot is a ``TypeError`` before any worker
starts, naming it (`elastic_idl._sdk.local.unpicklable`); ``start_method="fork"`` never pickles.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
from typing import Any

import elastic_idl as ei
from elastic_idl._errors import NotBuiltError
from elastic_idl._sdk import in_pod
from elastic_idl._sdk.local import import_root, one_node, pickles, unpicklable
from elastic_idl._task.names import DEFAULT_START_METHOD
from elastic_idl.pod import PodEnv, pod_env_here

__all__ = ["run_task"]

_log = logging.getLogger("elastic_idl")
#: Why a Flyte 2 task's workers start cold, for the pickle check's message.
_COLD_HERE = (
    "Under Flyte 2 the workers always start cold (its SDK runs threads, so the warm fork server is not "
    "used) and get the task function, what it uses and its inputs through cloudpickle."
)
#: The file Flyte 2's runtime writes a task's error to, under the action's output prefix.
ERROR_FILE = "error.pb"


class _Entry:
    """The task function bound to its inputs and Flyte task context, runnable in a worker.

    Pickled (a cold worker), it carries all three by cloudpickle (a function decorated with
    ``@env.task`` cannot be pickled by name: its module attribute is the task) and the
    directory its module is imported from. ``init``: the ``flyte.init`` arguments a worker in a
    pod calls it with first (None: no ``flyte.init``, as in local mode).
    """

    def __init__(
        self,
        fn: Any,
        kwargs: dict[str, Any],
        tctx: Any,
        sys_path: tuple[str, ...],
        init: dict[str, Any] | None = None,
    ) -> None:
        self._fn, self._kwargs, self._tctx, self._sys_path, self._init = fn, kwargs, tctx, sys_path, init
        self.__name__ = self.__qualname__ = str(getattr(fn, "__qualname__", None) or "task")

    def __reduce__(self) -> tuple[Any, ...]:
        import cloudpickle

        payload = cloudpickle.dumps((self._fn, self._kwargs, self._tctx))
        return (_unpack, (payload, self._sys_path, self.__name__, self._init))

    def __call__(self) -> Any:
        import flyte
        from flyte._context import internal_ctx  # the context flyteplugins-pytorch's workers get too

        if self._init is not None:
            flyte.init(**self._init)
        ctx = internal_ctx()
        with ctx.replace_task_context(self._tctx) if self._tctx is not None else contextlib.nullcontext():
            value = self._fn(**self._kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
        return value


async def _awaited(value: Any) -> Any:
    return await value


def _unpack(payload: bytes, sys_path: tuple[str, ...], name: str, init: dict[str, Any] | None = None) -> _Entry:
    import cloudpickle

    for path in reversed(sys_path):
        if path not in sys.path:
            sys.path.insert(0, path)
    fn, kwargs, tctx = cloudpickle.loads(payload)
    entry = _Entry(fn, kwargs, tctx, sys_path, init)
    entry.__name__ = entry.__qualname__ = name
    return entry


def task_context() -> Any:
    """The Flyte 2 task context the task runs under (None outside one)."""
    from flyte._context import internal_ctx

    return internal_ctx().data.task_context


def _filesystem(path: str) -> Any:
    import flyte.storage

    return flyte.storage.get_underlying_filesystem(path=path)


def _quietly(end: BaseException) -> BaseException:
    """``end`` (a ``SystemExit`` or ``KeyboardInterrupt`` that ends the pod, said in a log line already),
    kept out of the event loop's "Task exception was never retrieved" report and its traceback.

    Flyte 2's runtime runs the task in an asyncio task, which keeps a ``BaseException`` that passes
    through it and reports it when it is collected; the loop's exception handler is where that goes.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return end
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("exception") is end:
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return end


def _ends_writing_nothing(tctx: Any, why: str) -> BaseException:
    """This pod's end when another pod decides the outcome: after that outcome is written, exit 0."""
    _log.warning("elastic-idl: %s; this pod writes nothing", why)
    prefix = str(getattr(tctx, "output_path", "") or "")
    try:
        fs = _filesystem(prefix) if prefix else None
    except Exception as exc:  # no store to look at: end without waiting, still writing nothing
        _log.warning(
            "elastic-idl: cannot look under %s (%s: %s); ending without waiting", prefix, type(exc).__name__, exc
        )
        fs = None
    if fs is not None:
        in_pod.await_outcome(fs, prefix)
    return _quietly(SystemExit(0))


def _error_written(tctx: Any) -> bool:
    """Whether another pod of the job wrote the action's error document already."""
    prefix = str(getattr(tctx, "output_path", "") or "").rstrip("/")
    if not prefix:
        return False
    path = f"{prefix}/{ERROR_FILE}"
    try:
        fs = _filesystem(prefix)
        fs.invalidate_cache(prefix)
        return bool(fs.exists(path))
    except Exception as exc:  # cannot tell: this pod's own error is written, never hidden
        _log.warning("elastic-idl: cannot tell whether %s exists (%s: %s)", path, type(exc).__name__, exc)
        return False


def _launch_in_pod(task: Any, config: ei.Elastic, entry: _Entry, tctx: Any, pod: PodEnv) -> Any:
    """The launch in a pod of the job, and this pod's outcome (see the module docs)."""
    run_id = in_pod.run_id(config, pod, getattr(tctx.action, "run_name", None))
    try:
        values = ei.launch(
            config.to_task(), entry, return_all=True, env=pod.env, run_id=run_id, rdzv_endpoint=pod.rdzv_endpoint
        )
    except ei.LaunchInterruptedError as err:
        raise _quietly(in_pod.interrupted(err)) from None
    except (ei.RendezvousStoreLostError, ei.PeerLostError) as err:
        raise _quietly(in_pod.store_lost(err)) from None
    except ei.RendezvousClosedError as err:
        raise _ends_writing_nothing(tctx, str(err).splitlines()[0]) from None
    except ei.LaunchFailedError as err:
        if _error_written(tctx):
            first = str(err).splitlines()[0]
            _log.warning(
                "elastic-idl: task %s: %s; another pod's error is written already (the earlier failure): "
                "this pod writes nothing",
                task.name,
                first,
            )
            raise _quietly(SystemExit(0)) from None
        raise
    if 0 not in values:
        raise _ends_writing_nothing(tctx, f"this pod ran global ranks {sorted(values)}, not 0") from None
    return values[0]


def run_task(task: Any, config: ei.Elastic, tctx: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``execute`` of `elastic_idl.flyte2.ElasticFunctionTask` under the task context ``tctx`` (see the module docs)."""
    mode = getattr(tctx, "mode", None)
    pod = pod_env_here()
    if not pod.in_pytorchjob and mode not in ("local", "remote"):
        raise NotBuiltError(
            f"elastic_idl.flyte2 in Flyte 2 mode {mode!r}",
            f"task {task.name} runs in Flyte 2 mode {mode!r} outside a pod of a PyTorchJob; elastic-idl's Flyte 2 "
            "plugin runs a task in local mode and in the pods of its job (remote mode), and hybrid mode is not "
            "tested without a Flyte 2 backend (docs/guide/flyte2.md, What is not built yet)",
        )
    fn = task.func
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    inputs = dict(bound.arguments)
    if not pod.in_pytorchjob:
        config, line = one_node(config)
        if line:
            _log.warning("%s", line)
    tctx_sent = tctx
    if (config.start_method or DEFAULT_START_METHOD) != "fork":
        error = unpicklable(fn, inputs, task.name, _COLD_HERE)
        if error is not None:
            raise error
        problem = pickles(tctx)
        if problem is not None:  # the function still runs, without the context
            _log.warning(
                "elastic-idl: task %s: its Flyte context cannot be sent to the workers (%s: %s); "
                "flyte.ctx() is None in them",
                task.name,
                type(problem).__name__,
                problem,
            )
            tctx_sent = None
    root = import_root(fn)
    sys_path = (root,) if root else ()
    if not pod.in_pytorchjob:
        values = ei.launch(config.to_task(), _Entry(fn, inputs, tctx_sent, sys_path), return_all=True)
        return values[0]
    action = tctx.action
    init = {"org": action.org, "project": action.project, "domain": action.domain, "root_dir": tctx.run_base_dir}
    return _launch_in_pod(task, config, _Entry(fn, inputs, tctx_sent, sys_path, init), tctx, pod)
