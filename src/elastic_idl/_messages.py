"""The generated message classes the runtime works with, and the binding adapter.

The runtime thinks in one binding, the protobuf ``_pb2`` classes. A betterproto
message is accepted anywhere a task is, and crosses over through its wire bytes
(:func:`as_pb2`), so every rule and mapping is written once.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message

from elastic_idl._errors import DecodeError, UnsupportedVersionError
from elastic_idl.core.v1 import resources_pb2
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.kubeflow.v1 import pytorch_pb2 as kubeflow_pb2
from elastic_idl.plugins.v1 import elastic_pb2, failure_pb2
from elastic_idl.plugins.v1 import pytorch_pb2 as legacy_pb2

__all__ = [
    "TASK_CLASSES",
    "CommonReplicaSpec",
    "ElasticConfig",
    "FailureRecord",
    "FailureReport",
    "KubeflowTask",
    "LegacyTask",
    "ReplicaSpec",
    "Resources",
    "RunPolicy",
    "Task",
    "as_pb2",
    "task_class",
    "task_type_version_of",
]

ElasticConfig = elastic_pb2.ElasticConfig
RendezvousOption = elastic_pb2.RendezvousOption
LegacyTask = legacy_pb2.DistributedPyTorchTrainingTask
KubeflowTask = kubeflow_pb2.DistributedPyTorchTrainingTask
ReplicaSpec = kubeflow_pb2.DistributedPyTorchTrainingReplicaSpec
CommonReplicaSpec = common_pb2.CommonReplicaSpec
RunPolicy = common_pb2.RunPolicy
Resources = resources_pb2.Resources
FailureRecord = failure_pb2.FailureRecord
FailureReport = failure_pb2.FailureReport

Task = LegacyTask | KubeflowTask

#: task_type_version -> the message class of that task shape (what the backend dispatches on).
TASK_CLASSES: dict[int, type[LegacyTask] | type[KubeflowTask]] = {0: LegacyTask, 1: KubeflowTask}


def task_class(task_type_version: int) -> type[LegacyTask] | type[KubeflowTask]:
    """The task message class for a task_type_version, or UnsupportedVersionError."""
    if isinstance(task_type_version, bool) or task_type_version not in TASK_CLASSES:
        raise UnsupportedVersionError(task_type_version)
    return TASK_CLASSES[task_type_version]


def task_type_version_of(task: Task) -> int:
    """0 for the legacy shape, 1 for the kubeflow shape."""
    return 0 if isinstance(task, LegacyTask) else 1


_BY_FULL_NAME: dict[str, type[Message]] = {
    cls.DESCRIPTOR.full_name: cls
    for cls in (
        ElasticConfig,
        LegacyTask,
        KubeflowTask,
        ReplicaSpec,
        CommonReplicaSpec,
        RunPolicy,
        Resources,
        FailureRecord,
        FailureReport,
    )
}


def _betterproto_full_name(obj: Any) -> str | None:
    """ "elastic_idl.plugins.v1.ElasticConfig" for a betterproto message, else None."""
    try:
        import betterproto
    except ImportError:  # pragma: no cover - betterproto is a dependency
        return None
    if not isinstance(obj, betterproto.Message):
        return None
    module = type(obj).__module__
    prefix = "elastic_idl.betterproto."
    if not module.startswith(prefix):
        return None
    return f"elastic_idl.{module[len(prefix) :]}.{type(obj).__name__}"


def as_pb2(message: Any) -> Any:
    """Return ``message`` as a ``_pb2`` message of this package.

    A ``_pb2`` message is returned as is; a betterproto message of the
    ``elastic_idl.betterproto`` tree is converted through its wire bytes, which
    is lossless. Anything else raises :class:`TypeError`.
    """
    if isinstance(message, Message):
        return message
    full_name = _betterproto_full_name(message)
    if full_name is None or full_name not in _BY_FULL_NAME:
        raise TypeError(f"expected an elastic_idl task message (_pb2 or betterproto), got {type(message).__name__}")
    out = _BY_FULL_NAME[full_name]()
    try:
        out.ParseFromString(bytes(message))
    except _PbDecodeError as exc:  # pragma: no cover - betterproto wrote these bytes
        raise DecodeError("", f"betterproto message does not round-trip: {exc}", format="binary") from exc
    return out
