"""elastic-idl: the contract layer for elastic PyTorch training in Flyte.

The public API is the names in ``__all__``; every other module is private.
Generated messages live under ``elastic_idl.plugins`` / ``elastic_idl.core``
(protobuf ``_pb2``) and ``elastic_idl.betterproto`` (betterproto dataclasses).
Importing this package never imports torch.
"""

from __future__ import annotations

from elastic_idl._codec import (
    FORMATS,
    SkewError,
    SkewWarning,
    decode,
    detect_format,
    encode,
    extension_fields,
    from_custom,
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
from elastic_idl._messages import (
    ElasticConfig,
    FailureRecord,
    FailureReport,
    KubeflowTask,
    LegacyTask,
    Task,
    as_pb2,
)
from elastic_idl._spec import EnvDecision, LaunchSpec, to_launch_spec
from elastic_idl._validate import RULES, validate, violations
from elastic_idl._view import DEFAULT_RDZV_BACKEND, TaskView, view

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RDZV_BACKEND",
    "FORMATS",
    "RULES",
    "DecodeError",
    "ElasticConfig",
    "ElasticIdlError",
    "EnvDecision",
    "FailureRecord",
    "FailureReport",
    "KubeflowTask",
    "LaunchSpec",
    "LegacyTask",
    "RenderError",
    "SkewError",
    "SkewWarning",
    "Task",
    "TaskView",
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
    "to_custom",
    "to_launch_spec",
    "validate",
    "view",
    "violations",
]
