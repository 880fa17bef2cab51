"""What an SDK plugin's task does around a launch on this machine, for both SDK plugins.

The flytekit plugin (``elastic_idl.flytekit``) and the Flyte 2 plugin (``elastic_idl.flyte2``)
run a task the same way outside a PyTorchJob: the config as one node on loopback (a
multi-node task says so in one line rather than wait ``join_timeout`` for nodes that never
come), the task function and its inputs checked for cloudpickle when workers may start cold,
and the directory the function's module is imported from handed to cold workers. This module
holds those steps once; each plugin adds only its SDK's context around them. No SDK and no
torch is imported here (cloudpickle only when a check runs).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elastic_idl._sdk.elastic import Elastic

__all__ = ["culprit", "import_root", "one_node", "pickles", "unpicklable"]


def one_node(config: Elastic) -> tuple[Elastic, str]:
    """The config run as one node here, and the line that says so ("" when it already is one node)."""
    if config.to_task().elastic_config.max_replicas <= 1:
        return config, ""
    local = dataclasses.replace(config, nnodes="1:1")
    line = (
        f"elastic-idl: local run of a task with nnodes={config.nnodes!r} (no PET_* env of a PyTorchJob): "
        f"running 1 node with nproc_per_node={config.nproc_per_node!r} here"
    )
    return local, line


class _Sink:
    """A file that keeps nothing: what the pickle check writes to (no copy of the inputs in memory)."""

    def write(self, data: Any) -> int:
        return len(memoryview(data))


def pickles(obj: Any) -> Exception | None:
    """None when cloudpickle can send ``obj`` to a cold worker, else its error."""
    import cloudpickle

    try:
        cloudpickle.CloudPickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception as exc:
        return exc
    return None


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def culprit(fn: Any, kwargs: dict[str, Any]) -> str:
    """What of the function and its inputs cannot be pickled, in the user's words."""
    for name, value in kwargs.items():
        if pickles(value) is not None:
            return f"the input {name!r} (a {type(value).__name__})"
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        cells = zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False)
        for name, cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if pickles(value) is not None:
                return f"the variable {name!r} it closes over (a {type(value).__name__})"
        module_globals = getattr(fn, "__globals__", {})
        for name in sorted(_global_names(code)):
            if name in module_globals and pickles(module_globals[name]) is not None:
                return f"the global {name!r} it uses (a {type(module_globals[name]).__name__})"
    return "the task function"


def unpicklable(fn: Any, kwargs: dict[str, Any], name: str, where: str) -> TypeError | None:
    """None when a cold worker can receive ``fn`` and its inputs, else the TypeError to raise.

    Args:
        fn: The task function.
        kwargs: Its inputs by name.
        name: The task's name, for the message.
        where: The SDK's sentence saying when its workers start cold (so this task would fail there).
    """
    error = pickles((fn, kwargs))
    if error is None:
        return None
    exc = TypeError(
        f"task {name}: its workers cannot receive {culprit(fn, kwargs)}: cloudpickle fails with "
        f"{type(error).__name__}: {error}. {where} Create such an object inside the task function, or keep "
        "it in another module and use it as module.name (a module is sent by reference and imported again "
        "in each worker); or pass start_method='fork' in Elastic(...), which never pickles."
    )
    exc.__cause__ = error
    return exc


def import_root(fn: Any) -> str | None:
    """The directory ``fn``'s module is imported from (the ``sys.path`` entry it needs); None for
    ``__main__`` (sent by value) or a module without a file."""
    name = str(getattr(fn, "__module__", "") or "")
    module = sys.modules.get(name)
    file = str(getattr(module, "__file__", None) or "")
    if not name or name == "__main__" or not file:
        return None
    root = os.path.dirname(os.path.abspath(file))
    depth = name.count(".") + (1 if os.path.basename(file).startswith("__init__.") else 0)
    for _ in range(depth):
        root = os.path.dirname(root)
    return root
