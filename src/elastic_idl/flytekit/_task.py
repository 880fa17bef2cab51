"""The flytekit task plugin for ``elastic_idl.Elastic``: what ``@task(task_config=Elastic(...))`` builds.

Serialization is exactly what the SDK config says (:meth:`elastic_idl.Elastic.to_custom`):
task type ``pytorch``, task_type_version 1 and our custom dict (flytekit's plus our
extension fields), or ``python-task`` with no custom for ``nnodes=1``; the container
is the one flytekit writes for any Python task, and with ``increase_shared_mem``
the pod template mounts a memory-backed ``/dev/shm`` (:mod:`._pod`). Execution goes
through elastic-idl's launcher (:mod:`._run`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from flytekit.core.python_function_task import PythonFunctionTask

import elastic_idl as ei
from elastic_idl.flytekit._pod import with_shared_memory

__all__ = ["ElasticFunctionTask"]


class ElasticFunctionTask(PythonFunctionTask):  # type: ignore[misc]
    """A Python function task run by elastic-idl's launcher on every node of a PyTorchJob.

    flytekit builds it for ``@task(task_config=Elastic(...))`` (and for any subclass
    of :class:`elastic_idl.Elastic`); there is no need to name it.

    Args:
        task_config: The SDK config; validated when it was built.
        task_function: The task's function; every worker calls it with the task's inputs.
        **kwargs: What ``@task`` passes on (resources, pod_template, shared_memory, ...).

    Raises:
        TypeError: ``task_config`` is not an ``elastic_idl.Elastic``.
        ImportError: ``increase_shared_mem`` needs the ``kubernetes`` package (``elastic-idl[flytekit]``).
    """

    def __init__(self, task_config: Any, task_function: Callable[..., Any], **kwargs: Any) -> None:
        if not isinstance(task_config, ei.Elastic):
            raise TypeError(f"task_config: expected elastic_idl.Elastic, got {type(task_config).__name__}")
        custom, task_type, version = task_config.to_custom()
        super().__init__(
            task_config=task_config,
            task_function=task_function,
            task_type=task_type,
            task_type_version=version,
            **kwargs,
        )
        self._elastic_custom: dict[str, Any] | None = custom
        if task_config.increase_shared_mem and not self.shared_memory:
            # flytekit's attribute (set by PythonAutoContainerTask); the user's object is copied, not changed.
            self.pod_template = with_shared_memory(self.pod_template)  # type: ignore[has-type]

    def get_custom(self, settings: Any) -> dict[str, Any] | None:
        """``TaskTemplate.custom``: the config's custom dict; None (flytekit's) for a ``python-task``."""
        if self._elastic_custom is None:
            return super().get_custom(settings)  # type: ignore[no-any-return]
        return copy.deepcopy(self._elastic_custom)

    def execute(self, **kwargs: Any) -> Any:
        """Run the function on every worker of this node; rank 0's value on the pod that holds it."""
        from elastic_idl.flytekit._run import run_task

        return run_task(self, kwargs)
