"""elastic-idl: the contract layer for elastic PyTorch training in Flyte.

The public API is the names in ``__all__``; every other module is private.
Generated messages live under ``elastic_idl.plugins`` / ``elastic_idl.core``
(protobuf ``_pb2``) and ``elastic_idl.betterproto`` (betterproto dataclasses).

Names are loaded on first use (PEP 562), so importing a message module such as
``elastic_idl.plugins.kubeflow.v1.pytorch_pb2`` does not load the runtime, and
nothing here imports torch until a launch needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> private module that defines it
_EXPORTS: dict[str, str] = {
    # formats
    "FORMATS": "_codec",
    "EncodeError": "_codec",
    "SkewError": "_codec",
    "SkewWarning": "_codec",
    "decode": "_codec",
    "detect_format": "_codec",
    "encode": "_codec",
    "extension_fields": "_codec",
    "to_custom": "_codec",
    # errors
    "DecodeError": "_errors",
    "ElasticIdlError": "_errors",
    "RenderError": "_errors",
    "UnsupportedVersionError": "_errors",
    "ValidationError": "_errors",
    "Violation": "_errors",
    # messages
    "ElasticConfig": "_messages",
    "FailureRecord": "_messages",
    "FailureReport": "_messages",
    "KubeflowTask": "_messages",
    "LegacyTask": "_messages",
    "Task": "_messages",
    "as_pb2": "_messages",
    # validate, view
    "RULES": "_validate",
    "validate": "_validate",
    "violations": "_validate",
    "DEFAULT_RDZV_BACKEND": "_view",
    "TaskView": "_view",
    "view": "_view",
    # launch
    "EnvDecision": "_spec",
    "LaunchSpec": "_spec",
    "to_launch_spec": "_spec",
    "to_launch_config": "_launcher",
    "launch": "_launcher",
    # pod entrypoint
    "pod_main": "pod",
    "LaunchFailedError": "_launcher",
    "LaunchInterruptedError": "_launcher",
    "RendezvousIncompleteError": "_launcher",
    # backend side
    "render_pytorchjob": "_kubeflow",
    "pod_env": "_kubeflow",
    # SDK side
    "Elastic": "_sdk",
    "CleanPodPolicy": "_sdk",
    "CustomTemplate": "_sdk",
    "RestartPolicy": "_sdk",
    "RunPolicy": "_sdk",
    "from_custom": "_sdk",
    "from_torchrun": "_torchrun",
    "to_torchrun": "_torchrun",
    "TorchrunEntrypoint": "_torchrun",
    "TorchrunError": "_torchrun",
    "UnsupportedFlagError": "_torchrun",
}

__all__ = [
    "DEFAULT_RDZV_BACKEND",
    "FORMATS",
    "RULES",
    "CleanPodPolicy",
    "CustomTemplate",
    "DecodeError",
    "Elastic",
    "ElasticConfig",
    "ElasticIdlError",
    "EncodeError",
    "EnvDecision",
    "FailureRecord",
    "FailureReport",
    "KubeflowTask",
    "LaunchFailedError",
    "LaunchInterruptedError",
    "LaunchSpec",
    "LegacyTask",
    "RenderError",
    "RendezvousIncompleteError",
    "RestartPolicy",
    "RunPolicy",
    "SkewError",
    "SkewWarning",
    "Task",
    "TaskView",
    "TorchrunEntrypoint",
    "TorchrunError",
    "UnsupportedFlagError",
    "UnsupportedVersionError",
    "ValidationError",
    "Violation",
    "__version__",
    "as_pb2",
    "decode",
    "detect_format",
    "encode",
    "extension_fields",
    "from_custom",
    "from_torchrun",
    "launch",
    "pod_env",
    "pod_main",
    "render_pytorchjob",
    "to_custom",
    "to_launch_config",
    "to_launch_spec",
    "to_torchrun",
    "validate",
    "view",
    "violations",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elastic_idl' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"elastic_idl.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from elastic_idl._codec import (
        FORMATS,
        EncodeError,
        SkewError,
        SkewWarning,
        decode,
        detect_format,
        encode,
        extension_fields,
        to_custom,
    )
    from elastic_idl._errors import (
        DecodeError,
        ElasticIdlError,
        RenderError,
        UnsupportedVersionError,
        ValidationError,
        Violation,
    )
    from elastic_idl._kubeflow import pod_env, render_pytorchjob
    from elastic_idl._launcher import (
        LaunchFailedError,
        LaunchInterruptedError,
        RendezvousIncompleteError,
        launch,
        to_launch_config,
    )
    from elastic_idl._messages import (
        ElasticConfig,
        FailureRecord,
        FailureReport,
        KubeflowTask,
        LegacyTask,
        Task,
        as_pb2,
    )
    from elastic_idl._sdk import CleanPodPolicy, CustomTemplate, Elastic, RestartPolicy, RunPolicy, from_custom
    from elastic_idl._spec import EnvDecision, LaunchSpec, to_launch_spec
    from elastic_idl._torchrun import (
        TorchrunEntrypoint,
        TorchrunError,
        UnsupportedFlagError,
        from_torchrun,
        to_torchrun,
    )
    from elastic_idl._validate import RULES, validate, violations
    from elastic_idl._view import DEFAULT_RDZV_BACKEND, TaskView, view
    from elastic_idl.pod import pod_main
