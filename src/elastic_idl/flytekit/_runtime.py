"""The private pieces of elastic-idl's runtime that the flytekit plugin uses, in one place.

Everything else the plugin takes from the public API (``elastic_idl.__all__``).
When the runtime's private modules move, only this file changes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping

from elastic_idl._launch.forkserver import thread_count
from elastic_idl._task.enums import K8S_RESOURCE
from elastic_idl._task.messages import Resources as ResourceName
from elastic_idl._task.names import DEFAULT_START_METHOD, ENV
from elastic_idl.pod import FLYTE_EXECUTION_ID_ENV, RDZV_ENDPOINT_OVERRIDE_ENV

__all__ = [
    "DEFAULT_START_METHOD",
    "ENV",
    "FLYTE_EXECUTION_ID_ENV",
    "RDZV_ENDPOINT_OVERRIDE_ENV",
    "RESOURCE_NAMES",
    "ResourceName",
    "in_pytorchjob",
    "quiet_cold_start_warning",
    "thread_count",
]

#: flyteidl ResourceName -> Kubernetes resource name.
RESOURCE_NAMES = K8S_RESOURCE.text

#: What the launcher logs (WARNING, logger "elastic_idl") when it cannot fork its warm
#: server (elastic_idl._launch.launcher's _prepare_start). The plugin decides that case itself and
#: says so once, so the launcher's line is dropped while the plugin launches.
_COLD_START_PREFIX = "elastic-idl: workers start from a cold fork server"


def in_pytorchjob(environ: Mapping[str, str]) -> bool:
    """Whether the training operator's env is there: this process is a pod of an elastic PyTorchJob."""
    return ENV.RDZV_ENDPOINT in environ or ENV.NNODES in environ


class _DropColdStart(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_COLD_START_PREFIX)


@contextlib.contextmanager
def quiet_cold_start_warning() -> Iterator[None]:
    """Drop the launcher's cold-fork-server warning while the plugin launches."""
    logger = logging.getLogger("elastic_idl")
    flt = _DropColdStart()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)
