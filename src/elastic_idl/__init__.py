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
    "FORMATS": "_task.codec",
    "decode": "_task.codec",
    "detect_format": "_task.codec",
    "encode": "_task.encoding",
    "extension_fields": "_task.encoding",
    "to_custom": "_task.encoding",
    # errors (all in one module)
    "DecodeError": "_errors",
    "ElasticIdlError": "_errors",
    "EncodeError": "_errors",
    "LaunchFailedError": "_errors",
    "LaunchInterruptedError": "_errors",
    "PeerLostError": "_errors",
    "RenderError": "_errors",
    "RendezvousClosedError": "_errors",
    "RendezvousIncompleteError": "_errors",
    "RendezvousStoreLostError": "_errors",
    "SkewError": "_errors",
    "SkewWarning": "_errors",
    "TargetLoss": "_errors",
    "TargetLossError": "_errors",
    "TorchrunError": "_errors",
    "UnknownArgumentError": "_errors",
    "UnsupportedFlagError": "_errors",
    "UnsupportedVersionError": "_errors",
    "ValidationError": "_errors",
    "Violation": "_errors",
    # messages
    "ElasticConfig": "_task.messages",
    "FailureRecord": "_task.messages",
    "FailureReport": "_task.messages",
    "KubeflowTask": "_task.messages",
    "LegacyTask": "_task.messages",
    "Task": "_task.messages",
    "as_pb2": "_task.messages",
    # validate, view
    "RULES": "_task.validate",
    "validate": "_task.validate",
    "violations": "_task.validate",
    "DEFAULT_RDZV_BACKEND": "_task.names",
    "TaskView": "_task.view",
    "view": "_task.view",
    # launch
    "EnvDecision": "_launch.spec",
    "LaunchSpec": "_launch.spec",
    "to_launch_spec": "_launch.spec",
    "to_launch_config": "_launch.launcher",
    "launch": "_launch.launcher",
    # pod entrypoint
    "pod_main": "pod",
    # backend side
    "JobOptions": "_backend.pytorchjob",
    "render_pytorchjob": "_backend.pytorchjob",
    "render_network_policy": "_backend.networkpolicy",
    "render_objects": "_backend.networkpolicy",
    "render_target": "_backend.targets",
    "pod_env": "_backend.operator",
    # SDK side
    "Elastic": "_sdk.elastic",
    "CleanPodPolicy": "_task.enums",
    "CustomTemplate": "_task.codec",
    "RestartPolicy": "_task.enums",
    "RunPolicy": "_sdk.arguments",
    "from_custom": "_task.codec",
    "from_torchrun": "_sdk.torchrun",
    "to_torchrun": "_sdk.torchrun",
    "TorchrunEntrypoint": "_sdk.torchrun",
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
    "JobOptions",
    "KubeflowTask",
    "LaunchFailedError",
    "LaunchInterruptedError",
    "LaunchSpec",
    "LegacyTask",
    "PeerLostError",
    "RenderError",
    "RendezvousClosedError",
    "RendezvousIncompleteError",
    "RendezvousStoreLostError",
    "RestartPolicy",
    "RunPolicy",
    "SkewError",
    "SkewWarning",
    "TargetLoss",
    "TargetLossError",
    "Task",
    "TaskView",
    "TorchrunEntrypoint",
    "TorchrunError",
    "UnknownArgumentError",
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
    "render_network_policy",
    "render_objects",
    "render_pytorchjob",
    "render_target",
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
    from elastic_idl._backend.networkpolicy import render_network_policy, render_objects
    from elastic_idl._backend.operator import pod_env
    from elastic_idl._backend.pytorchjob import JobOptions, render_pytorchjob
    from elastic_idl._backend.targets import render_target
    from elastic_idl._errors import (
        DecodeError,
        ElasticIdlError,
        EncodeError,
        LaunchFailedError,
        LaunchInterruptedError,
        PeerLostError,
        RenderError,
        RendezvousClosedError,
        RendezvousIncompleteError,
        RendezvousStoreLostError,
        SkewError,
        SkewWarning,
        TargetLoss,
        TargetLossError,
        TorchrunError,
        UnknownArgumentError,
        UnsupportedFlagError,
        UnsupportedVersionError,
        ValidationError,
        Violation,
    )
    from elastic_idl._launch.launcher import launch, to_launch_config
    from elastic_idl._launch.spec import EnvDecision, LaunchSpec, to_launch_spec
    from elastic_idl._sdk.arguments import RunPolicy
    from elastic_idl._sdk.elastic import Elastic
    from elastic_idl._sdk.torchrun import TorchrunEntrypoint, from_torchrun, to_torchrun
    from elastic_idl._task.codec import FORMATS, CustomTemplate, decode, detect_format, from_custom
    from elastic_idl._task.encoding import encode, extension_fields, to_custom
    from elastic_idl._task.enums import CleanPodPolicy, RestartPolicy
    from elastic_idl._task.messages import (
        ElasticConfig,
        FailureRecord,
        FailureReport,
        KubeflowTask,
        LegacyTask,
        Task,
        as_pb2,
    )
    from elastic_idl._task.names import DEFAULT_RDZV_BACKEND
    from elastic_idl._task.validate import RULES, validate, violations
    from elastic_idl._task.view import TaskView, view
    from elastic_idl.pod import pod_main
