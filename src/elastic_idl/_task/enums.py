"""Enum numbers of the schema <-> the text each side writes for them, one table per enum.

torch's text (nproc policy, start method, NUMA binding, std streams), Kubernetes' text
(restart and clean-pod policies, resource names) and the SDK's (resource keys), and the
SDK's Python enums ``CleanPodPolicy`` and ``RestartPolicy``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from elastic_idl._task.messages import Resources
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.v1 import elastic_pb2

__all__ = [
    "CLEAN_POD_POLICY",
    "K8S_RESOURCE",
    "NPROC_POLICY",
    "NUMA_BINDING",
    "RESTART_POLICY",
    "SDK_RESOURCE",
    "START_METHOD",
    "STD_STREAMS",
    "CleanPodPolicy",
    "EnumText",
    "RestartPolicy",
]


class EnumText:
    """One enum's numbers and their text, both ways.

    Attributes:
        text: number -> text, in the table's order.
        number: text -> number; also every alias, right after the text of its number.
        names: The texts, in the table's order (no aliases).
    """

    __slots__ = ("names", "number", "text")

    def __init__(self, text: Mapping[int, str], aliases: Mapping[str, int] | None = None) -> None:
        aliases = aliases or {}
        number: dict[str, int] = {}
        for n, name in text.items():
            number[name] = n
            number.update((alias, m) for alias, m in aliases.items() if m == n)
        self.text: Mapping[int, str] = MappingProxyType(dict(text))
        self.number: Mapping[str, int] = MappingProxyType(number)
        self.names: tuple[str, ...] = tuple(text.values())


#: ElasticConfig.nproc_policy: torchrun's ``--nproc-per-node`` words (0, unset, is a number of processes).
NPROC_POLICY = EnumText(
    {elastic_pb2.NPROC_POLICY_AUTO: "auto", elastic_pb2.NPROC_POLICY_CPU: "cpu", elastic_pb2.NPROC_POLICY_GPU: "gpu"}
)
#: ElasticConfig.start_method: torch's start methods (0, unset, is the launcher's default).
START_METHOD = EnumText(
    {
        elastic_pb2.START_METHOD_SPAWN: "spawn",
        elastic_pb2.START_METHOD_FORK: "fork",
        elastic_pb2.START_METHOD_FORKSERVER: "forkserver",
    }
)
#: ElasticConfig.numa_binding: torch's ``--numa-binding`` words (0, unset, is no binding).
NUMA_BINDING = EnumText(
    {
        elastic_pb2.NUMA_BINDING_NODE: "node",
        elastic_pb2.NUMA_BINDING_SOCKET: "socket",
        elastic_pb2.NUMA_BINDING_EXCLUSIVE: "exclusive",
        elastic_pb2.NUMA_BINDING_CORE_COMPLEX: "core-complex",
    }
)
#: ElasticConfig.redirects / tee: torch's Std values "0".."3"; the SDK also reads none/out/err/all.
STD_STREAMS = EnumText({0: "0", 1: "1", 2: "2", 3: "3"}, aliases={"none": 0, "out": 1, "err": 2, "all": 3})
#: RestartPolicy -> a replica spec's ``restartPolicy`` (Kubernetes' words).
RESTART_POLICY = EnumText(
    {
        common_pb2.RESTART_POLICY_NEVER: "Never",
        common_pb2.RESTART_POLICY_ON_FAILURE: "OnFailure",
        common_pb2.RESTART_POLICY_ALWAYS: "Always",
    }
)
#: CleanPodPolicy -> ``runPolicy.cleanPodPolicy`` (the operator's words).
CLEAN_POD_POLICY = EnumText(
    {
        common_pb2.CLEANPOD_POLICY_NONE: "None",
        common_pb2.CLEANPOD_POLICY_RUNNING: "Running",
        common_pb2.CLEANPOD_POLICY_ALL: "All",
    }
)
#: flyteidl ResourceName -> Kubernetes resource name (what the PyTorchJob's container gets).
K8S_RESOURCE = EnumText(
    {
        Resources.CPU: "cpu",
        Resources.GPU: "nvidia.com/gpu",
        Resources.MEMORY: "memory",
        Resources.STORAGE: "storage",
        Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
    }
)
#: flyteidl ResourceName -> the SDK's resource key, in flytekit's order (cpu, mem, gpu,
#: ephemeral_storage), then storage; ``memory`` is read as ``mem``.
SDK_RESOURCE = EnumText(
    {
        Resources.CPU: "cpu",
        Resources.MEMORY: "mem",
        Resources.GPU: "gpu",
        Resources.EPHEMERAL_STORAGE: "ephemeral_storage",
        Resources.STORAGE: "storage",
    },
    aliases={"memory": Resources.MEMORY},
)


class CleanPodPolicy(enum.Enum):
    """Which pods are deleted when the job finishes. Member names and values match flytekit's."""

    NONE = 0
    RUNNING = 1
    ALL = 2


class RestartPolicy(enum.Enum):
    """What Kubernetes does when a worker container exits. Names and values match flytekit's."""

    NEVER = 0
    FAILURE = 1
    ALWAYS = 2
