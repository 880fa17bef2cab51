"""The generated message classes the runtime works with, and the binding adapter.

The runtime thinks in one binding, the protobuf ``_pb2`` classes. A betterproto
message, and the same message of upstream's ``flyteidl`` package, is accepted
anywhere a task is, and crosses over through its wire bytes (`as_pb2`),
so every rule and mapping is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor
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
    "UPSTREAM_MESSAGES",
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
    "as_task",
    "schema_messages",
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


def schema_messages() -> dict[str, Descriptor]:
    """Every message type of this schema that a task holds, of both shapes, by full name."""
    out: dict[str, Descriptor] = {}
    todo = [cls.DESCRIPTOR for cls in TASK_CLASSES.values()]
    while todo:
        desc = todo.pop()
        if desc.full_name not in out and desc.full_name.startswith(_OUR_PACKAGE):
            out[desc.full_name] = desc
            todo.extend(f.message_type for f in desc.fields if f.message_type is not None)
    return out


def task_class(task_type_version: int) -> type[LegacyTask] | type[KubeflowTask]:
    """The task message class for a task_type_version, or UnsupportedVersionError."""
    if isinstance(task_type_version, bool) or not isinstance(task_type_version, int):
        raise UnsupportedVersionError(task_type_version)
    if task_type_version not in TASK_CLASSES:
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


#: Upstream flyteidl message (full name) -> the message of this schema with the same wire form.
#: Upstream defines ElasticConfig twice (legacy and kubeflow packages); both map to ours.
UPSTREAM_MESSAGES: dict[str, type[Message]] = {
    "flyteidl.plugins.DistributedPyTorchTrainingTask": LegacyTask,
    "flyteidl.plugins.kubeflow.DistributedPyTorchTrainingTask": KubeflowTask,
    "flyteidl.plugins.ElasticConfig": ElasticConfig,
    "flyteidl.plugins.kubeflow.ElasticConfig": ElasticConfig,
    "flyteidl.plugins.kubeflow.DistributedPyTorchTrainingReplicaSpec": ReplicaSpec,
    "flyteidl.plugins.CommonReplicaSpec": CommonReplicaSpec,
    "flyteidl.plugins.kubeflow.RunPolicy": RunPolicy,
    "flyteidl.core.Resources": Resources,
}
_OUR_PACKAGE = "elastic_idl."


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


def _what_to_pass(message: Any) -> str:
    """The TypeError message for a value that is no message of this schema."""
    got = type(message).__name__
    if isinstance(message, Message):
        got = f"the message {message.DESCRIPTOR.full_name}"
    elif message is None:
        got = "None"
    hint = ""
    if isinstance(message, Mapping):
        hint = "; for a TaskTemplate.custom dict, call ei.from_custom(custom, task_type_version=...) first"
    elif isinstance(message, (bytes, bytearray, memoryview, str)):
        hint = "; for serialized data, call ei.decode(data, task_type_version=...) first"
    return (
        "expected a task message: DistributedPyTorchTrainingTask of elastic_idl or upstream flyteidl "
        f"(protobuf _pb2) or of elastic_idl.betterproto, got {got}{hint}"
    )


def as_pb2(message: Any) -> Any:
    """Return ``message`` as a ``_pb2`` message of this package.

    A ``_pb2`` message of this package is returned as is. A betterproto message
    of the ``elastic_idl.betterproto`` tree, or an upstream ``flyteidl`` message
    (`UPSTREAM_MESSAGES`), is converted through its wire bytes, which is
    lossless: the schemas are wire-identical.

    Raises:
        TypeError: ``message`` is none of these; the message says what to pass.
    """
    if isinstance(message, Message):
        full_name = message.DESCRIPTOR.full_name
        if full_name.startswith(_OUR_PACKAGE):
            return message
        cls = UPSTREAM_MESSAGES.get(full_name)
        if cls is None:
            raise TypeError(_what_to_pass(message))
        return _from_bytes(cls, message.SerializeToString(), "upstream")
    better_name = _betterproto_full_name(message)
    if better_name is None or better_name not in _BY_FULL_NAME:
        raise TypeError(_what_to_pass(message))
    return _from_bytes(_BY_FULL_NAME[better_name], bytes(message), "betterproto")


def _from_bytes(cls: type[Message], data: bytes, source: str) -> Message:
    out = cls()
    try:
        out.ParseFromString(data)
    except _PbDecodeError as exc:  # pragma: no cover - protobuf or betterproto wrote these bytes
        raise DecodeError("", f"{source} message does not round-trip: {exc}", format="binary") from None
    return out


def as_task(message: Any) -> Task:
    """`as_pb2` for a task: a DistributedPyTorchTrainingTask of either shape, else TypeError."""
    pb = as_pb2(message)
    if not isinstance(pb, (LegacyTask, KubeflowTask)):
        raise TypeError(_what_to_pass(pb))
    return pb
