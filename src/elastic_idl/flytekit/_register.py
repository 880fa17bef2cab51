"""``Elastic`` in flytekit's task plugin table, through flytekit's public API only.

``@task(task_config=cfg)`` builds the class ``TaskPlugins.find_pythontask_plugin(type(cfg))``
answers. That table is keyed by exact type and filled with the public
``flytekit.extend.TaskPlugins.register_pythontask_plugin(config_type, plugin_class)`` (the
same pair again is a no-op; another plugin for a type raises ``TypeError``); a type it does
not hold gives a single-process ``python-task``, silently.

A flytekit plugin registers its config type when it is imported, and flytekit imports the
plugins of its ``flytekit.plugins`` entry-point group at the end of ``import flytekit``
(``flytekit.load_implicit_plugins``, flytekit 1.16: ``importlib.metadata.entry_points``, then
``load()`` of each, with no guard: an error there breaks ``import flytekit``). Our config type
lives in the SDK (``elastic_idl._sdk.elastic``), which imports no flytekit, so `register`
runs at whichever of the two imports comes second:

- ``import flytekit`` after ``elastic_idl.Elastic`` is loaded: our entry point
  (`._entry`) registers it;
- ``elastic_idl.Elastic`` loaded after ``import flytekit``: the SDK module registers it as its
  last step (the way kfpytorch's module registers its ``Elastic``);
- importing the plugin class (``from elastic_idl.flytekit import ElasticFunctionTask``) registers
  it too: the way in where flytekit does not see the entry point (a source tree on
  ``PYTHONPATH`` without dist-info).

Building a config registers nothing. A subclass of ``Elastic`` is a type of its own to flytekit's
table: register it as any plugin's config, with
``TaskPlugins.register_pythontask_plugin(MyElastic, ElasticFunctionTask)``.

The plugin class is resolved on the first registration: ``ElasticFunctionTask``, or where it
cannot work (``kubernetes`` or ``cloudpickle`` missing, an import error) a class that raises
``ImportError`` with the reason when a task is defined, so that a multi-process config never
becomes a ``python-task``. A flytekit outside the tested lines (``TESTED_FLYTEKIT_LINES``) is
no such reason: the plugin is registered and one warning per process says so (logger
``elastic_idl``; not repeated by the workers a task launches).

Nothing here imports flytekit: `register` runs only once it is imported
(`plugin_error` excepted, which imports it to answer).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
from typing import Any

from elastic_idl.flytekit._support import (
    TESTED_FLYTEKIT_LINES,
    WARM_START_FLYTEKIT_LINES,
    flytekit_line,
    flytekit_version,
    lines_text,
)

__all__ = ["plugin_error", "register"]

_log = logging.getLogger("elastic_idl")

#: Modules of the ``flytekit`` extra that the plugin needs besides flytekit itself.
_EXTRA_MODULES = ("kubernetes", "cloudpickle")
#: elastic-idl is not on PyPI: the extra comes with the wheel built from the checkout.
_INSTALL_HINT = "install the elastic-idl wheel with its flytekit extra (docs/guide/flytekit.md, Install)"
_lock = threading.RLock()
#: The resolved plugin class (ours, or one that refuses) and why it refuses.
_plugin: type | None = None
_error: str | None = None
#: Whether the flytekit line was looked at (once per process) and the failures already logged.
_line_checked = False
_failures_logged: set[str] = set()


def _importable(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package
        return False


def _problem() -> str | None:
    """Why the plugin cannot work in this environment, or None."""
    if not _importable("flytekit"):
        return f"flytekit is not installed ({_INSTALL_HINT})"
    missing = [m for m in _EXTRA_MODULES if not _importable(m)]
    if missing:
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing ({_INSTALL_HINT})"
    return None


def _refusing(reason: str) -> type:
    """A task plugin class that raises ImportError(reason) when a task is defined with it."""
    from flytekit import PythonFunctionTask

    message = f"elastic-idl's flytekit plugin cannot be used: {reason}"

    class ElasticPluginUnavailable(PythonFunctionTask):  # type: ignore[misc]
        """Stands in for ElasticFunctionTask where it cannot load: refuses every task."""

        def __init__(self, task_config: Any, task_function: Any, **kwargs: Any) -> None:
            name = getattr(task_function, "__qualname__", repr(task_function))
            raise ImportError(f"@task {name} with {type(task_config).__name__}(...): {message}")

    return ElasticPluginUnavailable


def _resolve() -> type:
    """The plugin class, imported on first use; a refusing class when it cannot work here."""
    global _plugin, _error
    with _lock:
        if _plugin is None:
            try:
                _error = _problem()
                if _error is None:
                    from elastic_idl.flytekit._task import ElasticFunctionTask

                    _plugin = ElasticFunctionTask
            except Exception as exc:  # whatever breaks, the task must refuse, never fall back
                _error = f"importing it failed: {type(exc).__name__}: {exc}"
            if _plugin is None:
                assert _error is not None
                _plugin = _refusing(_error)
        return _plugin


def plugin_error() -> str | None:
    """Why ``@task(task_config=Elastic(...))`` cannot be used in this environment, or None when it can.

    An untested flytekit line is not such a reason (one warning per process says so); this
    imports flytekit when it is installed.
    """
    _resolve()
    return _error


def _is_multiprocessing_child() -> bool:
    """Whether this is a multiprocessing child, also while it imports the parent's main module.

    (``parent_process()`` is set only after that import; the process name before it.)
    """
    mp = sys.modules.get("multiprocessing")
    return mp is not None and (mp.parent_process() is not None or mp.current_process().name != "MainProcess")


def _check_line() -> None:
    """Log once per process when flytekit is not a tested line (a warning, never a refusal).

    Not in a multiprocessing child: the plugin's workers import the task's module again, and
    the process that launched them has said it already (a fork inherits the flag anyway).
    """
    global _line_checked
    if _line_checked:
        return
    _line_checked = True
    if _is_multiprocessing_child():
        return
    version = flytekit_version()
    line = flytekit_line(version)
    if line in TESTED_FLYTEKIT_LINES:
        return
    cold = "" if line in WARM_START_FLYTEKIT_LINES else "; its workers start cold (no warm start, about 2 s more a run)"
    _log.warning(
        "elastic-idl: flytekit %s is not a release line elastic-idl's flytekit plugin is tested on (%s); "
        "@task(task_config=Elastic(...)) uses the plugin anyway%s. The tested versions: %s",
        version or "(unknown version)",
        lines_text(TESTED_FLYTEKIT_LINES),
        cold,
        _INSTALL_HINT,
    )


def _log_failure(what: str, exc: BaseException) -> None:
    text = f"elastic-idl: {what}: {type(exc).__name__}: {exc}"
    if text not in _failures_logged:  # once per distinct failure, not once per config built
        _failures_logged.add(text)
        _log.warning("%s", text)


def register(config_type: type) -> bool:
    """Map ``config_type`` to the plugin in flytekit's table; flytekit must be imported.

    A type the table already holds for another plugin is left as it is (flytekit refuses to
    replace it). Returns whether flytekit's lookup now answers a plugin other than its default;
    a failure (flytekit's API not what it documents) is logged once. Never raises: it runs
    inside ``import flytekit`` and at the end of our SDK's import.
    """
    try:
        from flytekit import PythonFunctionTask
        from flytekit.extend import TaskPlugins

        with _lock:
            plugin = _resolve()
            try:
                TaskPlugins.register_pythontask_plugin(config_type, plugin)
            except TypeError:
                pass  # flytekit refuses a second plugin for a type: the one registered first stays
            found = TaskPlugins.find_pythontask_plugin(config_type)
            if found is PythonFunctionTask:
                raise LookupError("flytekit's table still answers PythonFunctionTask for it")
            if found is plugin:
                _check_line()
            return True
    except Exception as exc:
        _log_failure(f"{config_type.__qualname__} could not be registered with flytekit", exc)
        return False
