"""The private pieces of elastic-idl's runtime that the flytekit plugin uses, in one place.

Everything else the plugin takes from the public API (``elastic_idl.__all__``).
When the runtime's private modules move, only this file changes.
"""

from __future__ import annotations

from elastic_idl._launch.worker import Sent
from elastic_idl._task.enums import K8S_RESOURCE
from elastic_idl._task.messages import Resources as ResourceName
from elastic_idl._task.names import DEFAULT_START_METHOD
from elastic_idl.pod import RDZV_ENDPOINT_OVERRIDE_ENV

__all__ = [
    "DEFAULT_START_METHOD",
    "RDZV_ENDPOINT_OVERRIDE_ENV",
    "RESOURCE_NAMES",
    "ResourceName",
    "Sent",
]

#: flyteidl ResourceName -> Kubernetes resource name.
RESOURCE_NAMES = K8S_RESOURCE.text
