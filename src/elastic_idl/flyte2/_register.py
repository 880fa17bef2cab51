"""Both config types in Flyte 2's task plugin table, through its public ``flyte.extend.TaskPluginRegistry``.

``TaskEnvironment(plugin_config=cfg)`` then ``@env.task`` builds the class
``TaskPluginRegistry.find(type(cfg))`` answers, and raises ``ValueError`` when there is none (no
silent fallback, unlike flytekit). The table is keyed by exact type and filled with
``TaskPluginRegistry.register(config_type=..., plugin=...)``; Flyte 2 has no entry-point group
for task plugins, so a plugin registers when its module is imported.

`register_all` maps the config types it is given (`elastic_idl.flyte2.Elastic`) and `elastic_idl.Elastic` (flytekit's defaults,
which a user may pass as well) to `elastic_idl.flyte2.ElasticFunctionTask`. It runs:

- when `elastic_idl.flyte2.Elastic` is loaded (``from elastic_idl.flyte2 import Elastic``), if
  ``flyte`` is installed: it imports ``flyte`` then;
- when `elastic_idl.Elastic` is loaded while ``flyte`` is imported already (the SDK module's last step).

A type the table holds for another plugin already (a user's own choice) is left as it is.
Never raises: it runs inside imports; a failure is logged once on the ``elastic_idl`` logger.
Nothing here imports flyte at module level.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading

__all__ = ["register_all"]

_log = logging.getLogger("elastic_idl")
_lock = threading.RLock()
_failures_logged: set[str] = set()


def _installed() -> bool:
    if "flyte" in sys.modules:
        return sys.modules["flyte"] is not None
    try:
        return importlib.util.find_spec("flyte") is not None
    except (ImportError, ValueError):
        return False


def register_all(*config_types: type) -> bool:
    """Register ``config_types`` and `elastic_idl.Elastic` with Flyte 2 when ``flyte`` is installed.

    Returns whether they are now in its table (for this plugin or one registered before).
    """
    if not _installed():
        return False
    try:
        from flyte.extend import TaskPluginRegistry

        import elastic_idl as ei
        from elastic_idl.flyte2._task import ElasticFunctionTask

        types = (*config_types, ei.Elastic)  # loading ei.Elastic may call this again (its module's last step)
        with _lock:
            for config_type in types:
                if TaskPluginRegistry.find(config_type) is None:
                    TaskPluginRegistry.register(config_type=config_type, plugin=ElasticFunctionTask)
        return True
    except Exception as exc:  # inside an import: say it once, never break it
        text = f"elastic-idl: the Flyte 2 plugin could not be registered: {type(exc).__name__}: {exc}"
        if text not in _failures_logged:
            _failures_logged.add(text)
            _log.warning("%s", text)
        return False
