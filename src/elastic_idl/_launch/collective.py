"""The task's collective_timeout, given to every process group a worker's code creates without a timeout.

torch takes the timeout of a group created without ``timeout=`` from one module-level function,
``torch.distributed.distributed_c10d._get_default_timeout`` (30 min for gloo, 10 min for NCCL), read
at call time by ``init_process_group``, ``new_group``, ``new_subgroups``, ``split_group`` and
``monitored_barrier``; a group created with its own ``timeout=`` never calls it and keeps its own.
So the worker replaces that one function rather than wrapping the public ones: a name bound before
the worker started (``from torch.distributed import init_process_group`` in a module the launcher
imported before it forked the worker) is covered too, and so is every group function, gloo and NCCL
alike. A torch without that function gets a warning, not a silent default.

Torch-free at import, like the worker bootstrap: the function is replaced when torch's module is
loaded already (a worker forked from the launcher or the fork server), else as it loads (an import
hook, so a worker that never imports torch does not pay for it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import math
import os
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

from elastic_idl._task.names import COLLECTIVE_TIMEOUT_ENV

__all__ = ["C10D_MODULE", "apply_collective_timeout"]

logger = logging.getLogger(__name__)

#: The torch module whose default-timeout function is replaced.
C10D_MODULE = "torch.distributed.distributed_c10d"
#: The function of `C10D_MODULE` every group creation without ``timeout=`` calls (torch 2.13).
_DEFAULT_TIMEOUT_FN = "_get_default_timeout"
#: Marks our replacement, holding its seconds.
_MARK = "_elastic_idl_collective_timeout_s"


def apply_collective_timeout(environ: Mapping[str, str] = os.environ) -> float | None:
    """Give every process group created without a timeout the seconds in `COLLECTIVE_TIMEOUT_ENV`.

    Returns the seconds applied (now or when torch's module loads), or None when the variable is
    unset or not a positive number (logged).
    """
    text = environ.get(COLLECTIVE_TIMEOUT_ENV, "")
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        logger.warning(
            "%s=%r is not a positive number of seconds: torch's default timeouts apply", COLLECTIVE_TIMEOUT_ENV, text
        )
        return None
    module = sys.modules.get(C10D_MODULE)
    if module is not None:
        _replace(module, seconds)
    else:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _OnLoad)]
        sys.meta_path.insert(0, _OnLoad(seconds))
    return seconds


def _replace(module: types.ModuleType, seconds: float) -> None:
    if not callable(getattr(module, _DEFAULT_TIMEOUT_FN, None)):
        logger.warning(
            "%s has no %s(): collective_timeout (%g s) is not applied; torch's default timeouts apply",
            C10D_MODULE,
            _DEFAULT_TIMEOUT_FN,
            seconds,
        )
        return
    from datetime import timedelta

    timeout = timedelta(seconds=seconds)

    def default_timeout(backend: Any) -> timedelta:
        return timeout

    setattr(default_timeout, _MARK, seconds)
    setattr(module, _DEFAULT_TIMEOUT_FN, default_timeout)


class _OnLoad(importlib.abc.MetaPathFinder):
    """Finds torch's module with the other finders, and replaces the function once it has run."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != C10D_MODULE:
            return None
        sys.meta_path.remove(self)  # once: the other finders find the real module
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, self.seconds)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, seconds: float) -> None:
        self.loader = loader
        self.seconds = seconds

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        _replace(module, self.seconds)
