"""The Flyte 2 task plugin: what ``@env.task`` builds in a ``TaskEnvironment(plugin_config=Elastic(...))``.

Serialization is what the config says: task type ``pytorch`` version 1, or ``python-task``
where flyteplugins-pytorch writes it (``nnodes`` the int 1), and ``custom_config()`` the custom
of `elastic_idl.to_custom`: flyteplugins-pytorch's ``DistributedPyTorchTrainingTask`` dict plus
every extension field the config sets (monitor interval, rendezvous timeouts and options, the
NCCL knobs), so that a backend sees what the pods will do. Execution: a local run launches the
workers through elastic-idl's launcher (`elastic_idl.flyte2._run`), and so does a run in the
pods of the task's PyTorchJob, where the pod holding rank 0 writes the outputs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from flyte.extend import AsyncFunctionTaskTemplate
from flyte.models import SerializationContext

import elastic_idl as ei
from elastic_idl._task.names import TASK_TYPE, TASK_TYPE_VERSION
from elastic_idl.flyte2._run import run_task, task_context

__all__ = ["ElasticFunctionTask", "elastic_of"]


def elastic_of(plugin_config: object) -> ei.Elastic:
    """The `elastic_idl.Elastic` behind a plugin config: itself, or an ``elastic_idl.flyte2.Elastic``'s ``config``.

    Raises:
        TypeError: ``plugin_config`` is neither.
    """
    if isinstance(plugin_config, ei.Elastic):
        return plugin_config
    inner = getattr(plugin_config, "config", None)
    if isinstance(inner, ei.Elastic):
        return inner
    raise TypeError(
        f"plugin_config: expected elastic_idl.flyte2.Elastic or elastic_idl.Elastic, got {type(plugin_config).__name__}"
    )


@dataclass(kw_only=True)
class ElasticFunctionTask(AsyncFunctionTaskTemplate[..., Any, Any]):
    """A Python function task run by elastic-idl's launcher on every worker of an elastic job.

    Flyte 2 builds it for ``@env.task`` in a ``TaskEnvironment(plugin_config=cfg)`` when ``cfg`` is
    an `elastic_idl.flyte2.Elastic` or an `elastic_idl.Elastic`; there is no need to name it.

    Attributes:
        plugin_config: The config; validated when it was built.
    """

    task_type: str = TASK_TYPE  # the config's, set in __post_init__
    task_type_version: int = TASK_TYPE_VERSION
    plugin_config: Any
    debuggable: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[no-untyped-call]
        config = elastic_of(self.plugin_config)
        template = config.to_template()
        self.task_type = template.task_type
        self.task_type_version = template.task_type_version
        self._elastic = config

    def custom_config(self, sctx: SerializationContext) -> dict[str, Any]:
        """``TaskTemplate.custom``: the config's custom dict (also for a ``python-task``, as flyteplugins-pytorch)."""
        return ei.to_custom(self._elastic.to_task())

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function on every worker of this node; rank 0's value is the task's output.

        Around the launch, ``pre`` and ``post`` as Flyte 2's own function tasks call them: what
        ``pre`` returns is the task context's ``data`` the workers see.
        """
        from flyte._context import internal_ctx

        ctx = internal_ctx()
        tctx = task_context()
        if tctx is not None:
            tctx = tctx.replace(data=await self.pre(*args, **kwargs))
        with ctx.replace_task_context(tctx) if tctx is not None else contextlib.nullcontext():
            value = run_task(self, self._elastic, tctx, args, kwargs)
            await self.post(value)
        return value
