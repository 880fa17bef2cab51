"""Running a Flyte 2 Elastic task: locally through elastic-idl's launcher; the pod path is not built.

Local mode (``flyte.with_runcontext(mode="local").run(task, ...)``, ``flyte run --local``, or
``flyte.run`` without a backend): the task's context says ``mode == "local"``. The config runs
as one node on loopback (`elastic_idl._sdk.local.one_node`, as the flytekit plugin does):
``nproc_per_node`` workers start through `elastic_idl.launch`, each calls the task function
with the task's inputs under the task's Flyte context (``flyte.ctx()`` works in a worker), and
rank 0's value is the task's output. flyteplugins-pytorch calls the function once instead.

Flyte 2's SDK runs threads of its own (its syncify loop, the local controller's runners), so
the launcher's warm fork server is never usable under it: workers start from a cold fork
server (the launcher says so in a warning), and the function, its inputs and the task context
travel by cloudpickle. A function or input that cannot is a ``TypeError`` before any worker
starts, naming it (`elastic_idl._sdk.local.unpicklable`); ``start_method="fork"`` never pickles.

Anywhere else (a pod: ``mode`` "remote", or "hybrid") this raises `elastic_idl.NotBuiltError`
(exported by ``elastic_idl.flyte2``): running in Flyte 2 pods is issue 32's item 3, and until it
is built a task must not run its function once where the config asks for a job.
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
from elastic_idl._sdk.local import import_root, one_node, pickles, unpicklable
from elastic_idl._task.names import DEFAULT_START_METHOD

__all__ = ["run_task"]

_log = logging.getLogger("elastic_idl")
#: Why a Flyte 2 task's workers start cold, for the pickle check's message.
_COLD_HERE = (
    "Under Flyte 2 the workers always start cold (its SDK runs threads, so the warm fork server is not "
    "used) and get the task function, what it uses and its inputs through cloudpickle."
)


class _Entry:
    """The task function bound to its inputs and Flyte task context, runnable in a worker.

    Pickled (a cold worker), it carries all three by cloudpickle (a function decorated with
    ``@env.task`` cannot be pickled by name: its module attribute is the task) and the
    directory its module is imported from.
    """

    def __init__(self, fn: Any, kwargs: dict[str, Any], tctx: Any, sys_path: tuple[str, ...]) -> None:
        self._fn, self._kwargs, self._tctx, self._sys_path = fn, kwargs, tctx, sys_path
        self.__name__ = self.__qualname__ = str(getattr(fn, "__qualname__", None) or "task")

    def __reduce__(self) -> tuple[Any, ...]:
        import cloudpickle

        payload = cloudpickle.dumps((self._fn, self._kwargs, self._tctx))
        return (_unpack, (payload, self._sys_path, self.__name__))

    def __call__(self) -> Any:
        from flyte._context import internal_ctx  # the context flyteplugins-pytorch's workers get too

        ctx = internal_ctx()
        with ctx.replace_task_context(self._tctx) if self._tctx is not None else contextlib.nullcontext():
            value = self._fn(**self._kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
        return value


async def _awaited(value: Any) -> Any:
    return await value


def _unpack(payload: bytes, sys_path: tuple[str, ...], name: str) -> _Entry:
    import cloudpickle

    for path in reversed(sys_path):
        if path not in sys.path:
            sys.path.insert(0, path)
    fn, kwargs, tctx = cloudpickle.loads(payload)
    entry = _Entry(fn, kwargs, tctx, sys_path)
    entry.__name__ = entry.__qualname__ = name
    return entry


def _task_context() -> Any:
    from flyte._context import internal_ctx

    return internal_ctx().data.task_context


def run_task(task: Any, config: ei.Elastic, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``execute`` of `elastic_idl.flyte2.ElasticFunctionTask` (see the module docs)."""
    tctx = _task_context()
    mode = getattr(tctx, "mode", None)
    if mode != "local":
        raise NotBuiltError(
            "the Flyte 2 pod path of elastic_idl.flyte2",
            f"task {task.name} runs in Flyte 2 mode {mode!r}; elastic-idl's Flyte 2 plugin launches workers in "
            "local mode only (flyte.with_runcontext(mode='local'), flyte run --local). Running in Flyte 2 pods "
            "(remote and hybrid modes) is issue 32's item 3; until it is built use flyteplugins.pytorch.Elastic "
            "for remote runs (docs/guide/flyte2.md, What is not built yet)",
        )
    fn = task.func
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    inputs = dict(bound.arguments)
    config, line = one_node(config)
    if line:
        _log.warning("%s", line)
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
            tctx = None
    root = import_root(fn)
    entry = _Entry(fn, inputs, tctx, (root,) if root else ())
    values = ei.launch(config.to_task(), entry, return_all=True)
    return values[0]
