"""The flytekit task plugin for ``elastic_idl.Elastic``: what ``@task(task_config=Elastic(...))`` builds.

Serialization is exactly what the SDK config says (`elastic_idl.Elastic.to_custom`):
task type ``pytorch``, task_type_version 1 and our custom dict (flytekit's plus our
extension fields), or ``python-task`` with no custom for ``nnodes=1``; the container
is the one flytekit writes for any Python task, and with ``increase_shared_mem``
the pod template mounts a memory-backed ``/dev/shm`` (`._pod`). Execution goes
through elastic-idl's launcher (`._run`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from flytekit.core.python_function_task import PythonFunctionTask
from flytekit.extend import TaskPlugins

import elastic_idl as ei
from elastic_idl.flytekit._pod import with_shared_memory

__all__ = ["ElasticFunctionTask"]


class ElasticFunctionTask(PythonFunctionTask):  # type: ignore[misc]
    """A Python function task run by elastic-idl's launcher on every node of a PyTorchJob.

    flytekit builds it for ``@task(task_config=Elastic(...))``; there is no need to name it,
    but to register a subclass of `elastic_idl.Elastic` with flytekit's plugin table.

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
        custom, task_type, version = task_config.to_template()
        # Before super().__init__, which sets pod_template (the property below).
        self._shm_wanted = bool(task_config.increase_shared_mem)
        self._user_pod_template: Any = None
        self._shm_pod_template: Any = None
        super().__init__(
            task_config=task_config,
            task_function=task_function,
            task_type=task_type,
            task_type_version=version,
            **kwargs,
        )
        self._elastic_custom: dict[str, Any] | None = custom

    @property
    def pod_template(self) -> Any:
        """The pod template flytekit serializes: the user's, with a memory-backed ``/dev/shm`` for ``increase_shared_mem``.

        Built from a copy on first read (the user's ``PodTemplate`` is never changed), so
        that ``kubernetes`` is imported only when a task is serialized, not by a local run.
        flytekit's own ``@task(shared_memory=...)`` replaces it.
        """
        if not self._shm_wanted or getattr(self, "shared_memory", None):
            return self._user_pod_template
        if self._shm_pod_template is None:
            self._shm_pod_template = with_shared_memory(self._user_pod_template)
        return self._shm_pod_template

    @pod_template.setter
    def pod_template(self, value: Any) -> None:
        self._user_pod_template = value
        self._shm_pod_template = None

    def get_custom(self, settings: Any) -> dict[str, Any] | None:
        """``TaskTemplate.custom``: the config's custom dict; None (flytekit's) for a ``python-task``."""
        if self._elastic_custom is None:
            return super().get_custom(settings)  # type: ignore[no-any-return]
        return copy.deepcopy(self._elastic_custom)

    def execute(self, **kwargs: Any) -> Any:
        """Run the function on every worker of this node; rank 0's value on the pod that holds it."""
        from elastic_idl.flytekit._run import run_task

        return run_task(self, kwargs)


# Importing the plugin registers its config type, as flytekit's plugins do (elastic_idl.flytekit._register).
# A plugin registered for it first stays: the one that refuses tasks where the plugin cannot work.
with contextlib.suppress(TypeError):
    TaskPlugins.register_pythontask_plugin(ei.Elastic, ElasticFunctionTask)
