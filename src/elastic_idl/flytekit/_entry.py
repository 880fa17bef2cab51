"""flytekit's entry point into elastic-idl (group ``flytekit.plugins``): the task plugin lookup.

flytekit imports every module of that group at the end of ``import flytekit``
(``load_implicit_plugins``), in every environment that holds both packages,
whatever extras were chosen. So this module:

- costs next to nothing: the standard library and flytekit modules that are
  already loaded; no torch, not even the runtime (importing ``Elastic`` alone
  costs about 30 ms);
- never raises: an error here would break ``import flytekit``;
- makes flytekit's plugin lookup answer :class:`~elastic_idl.flytekit.ElasticFunctionTask`
  for ``elastic_idl.Elastic`` and every subclass of it. ``@task`` asks
  ``TaskPlugins.find_pythontask_plugin(type(task_config))``, and flytekit's table
  is keyed by exact type: a subclass, or a config whose plugin was never
  registered, silently became a single-process ``python-task``. The lookup is
  wrapped once; every other config type gets flytekit's own answer;
- when the plugin cannot work here (flytekit outside the tested 1.16 line, a
  missing part of the ``flytekit`` extra, an import error), the lookup answers a
  class that raises ``ImportError`` with the reason when a task is defined, so a
  multi-process config never falls back to ``python-task``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys
from typing import Any

from elastic_idl.flytekit._support import SUPPORTED_FLYTEKIT

__all__ = ["SUPPORTED_FLYTEKIT", "install", "plugin_error"]

_log = logging.getLogger("elastic_idl")

#: Modules of the ``flytekit`` extra that the plugin needs besides flytekit itself.
_EXTRA_MODULES = ("kubernetes", "cloudpickle")
_INSTALL_HINT = "pip install 'elastic-idl[flytekit]'"
#: Marks our wrapper of the lookup, so that installing twice wraps once.
_MARK = "__elastic_idl__"

#: The resolved plugin class (ours, or one that refuses), once a task asked for it.
_plugin: type | None = None
_error: str | None = None


def _version_problem(version: str) -> str | None:
    parts = version.split(".")
    try:
        line = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        line = None
    if line != SUPPORTED_FLYTEKIT:
        want = ".".join(map(str, SUPPORTED_FLYTEKIT))
        return f"it supports flytekit {want}.x and this is flytekit {version} ({_INSTALL_HINT})"
    return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked with sys.modules[name] = None, a broken parent
        return False


def _problem() -> str | None:
    """Why the plugin cannot work in this environment, or None."""
    flytekit = sys.modules.get("flytekit")
    version = str(getattr(flytekit, "__version__", "")) if flytekit is not None else ""
    if not version:
        try:
            version = importlib.metadata.version("flytekit")
        except importlib.metadata.PackageNotFoundError:
            return f"flytekit is not installed ({_INSTALL_HINT})"
    found = _version_problem(version)
    if found:
        return found
    missing = [m for m in _EXTRA_MODULES if not _importable(m)]
    if missing:
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing ({_INSTALL_HINT})"
    return None


def _refusing(reason: str) -> type:
    """A task plugin class that raises ImportError(reason) when a task is defined with it."""
    from flytekit.core.python_function_task import PythonFunctionTask

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
    """Why ``@task(task_config=Elastic(...))`` cannot be used in this environment, or None when it can."""
    _resolve()
    return _error


def _is_elastic(config_type: Any) -> bool:
    """Whether ``config_type`` is elastic_idl's Elastic or a subclass, without importing it unless it may be."""
    for klass in getattr(config_type, "__mro__", ()):
        if klass.__name__ == "Elastic" and str(klass.__module__).startswith("elastic_idl."):
            from elastic_idl import Elastic

            return isinstance(config_type, type) and issubclass(config_type, Elastic)
    return False


def install() -> bool:
    """Wrap flytekit's task plugin lookup (once). Returns whether the lookup is ours now."""
    from flytekit.core.task import TaskPlugins

    current = TaskPlugins.__dict__.get("find_pythontask_plugin")
    if getattr(getattr(current, "__func__", None), _MARK, False):
        return True
    if not isinstance(current, classmethod):
        _log.warning("elastic-idl: flytekit's TaskPlugins.find_pythontask_plugin is not a classmethod; not wrapped")
        return False
    original = current.__func__

    def find_pythontask_plugin(cls: Any, plugin_config_type: type) -> Any:
        if _is_elastic(plugin_config_type):
            return _resolve()
        return original(cls, plugin_config_type)

    find_pythontask_plugin.__doc__ = original.__doc__
    setattr(find_pythontask_plugin, _MARK, True)
    TaskPlugins.find_pythontask_plugin = classmethod(find_pythontask_plugin)
    return True


def _install_quietly() -> None:
    try:
        install()
    except Exception as exc:  # never break `import flytekit`
        _log.warning("elastic-idl: the flytekit plugin could not be installed: %s: %s", type(exc).__name__, exc)


_install_quietly()
