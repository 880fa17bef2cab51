"""Enum numbers of the schema <-> the text each side writes for them, one table per enum.

torch's text (nproc policy, start method, NUMA binding, std streams), Kubernetes' text
(restart and clean-pod policies, resource names) and the SDK's (resource keys), and the
SDK's Python enums ``CleanPodPolicy`` and ``RestartPolicy``. And the short names a task
file may use for an enum value (``spawn`` for ``START_METHOD_SPAWN``): :data:`ENUM_SHORT_NAMES`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from google.protobuf.descriptor import EnumDescriptor

from elastic_idl._errors import close_match
from elastic_idl._task.messages import Resources, schema_messages
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.v1 import elastic_pb2

__all__ = [
    "CLEAN_POD_POLICY",
    "ENUM_SHORT_NAMES",
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
    "enum_suggestion",
    "enum_value_name",
    "spelling_key",
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


# --------------------------------------------------------------------------- short names in task files


def spelling_key(text: str) -> str | None:
    """How a task file's spelling of an enum value is compared: upper case, without ``_`` and ``-``, so
    that ``on-failure``, ``OnFailure`` and ``ON_FAILURE`` are one; None for text that is not ASCII (no
    case rule of one language then differs from the other's)."""
    if not text.isascii():
        return None
    return text.upper().replace("_", "").replace("-", "")


def _short_names(enum_type: EnumDescriptor) -> dict[str, str]:
    """Each value's name -> its short name: without the words all the names share, in lower case."""
    words = [v.name.split("_") for v in enum_type.values]
    shared = 0  # whole words (CLEANPOD_POLICY_), each name keeping at least one of its own
    while all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    return {v.name: "_".join(w[shared:]).lower() for v, w in zip(enum_type.values, words, strict=True)}


def _schema_enums() -> dict[str, EnumDescriptor]:
    out: dict[str, EnumDescriptor] = {}
    for desc in schema_messages().values():
        for f in desc.fields:
            if f.enum_type is not None:
                out[f.enum_type.full_name] = f.enum_type
    return dict(sorted(out.items()))


#: Every enum of the schema (full name) -> {a value's name -> its short name}: ``START_METHOD_SPAWN`` ->
#: ``spawn``, ``RESTART_POLICY_ON_FAILURE`` -> ``on_failure``. A task file (YAML, JSON, the custom dict) may
#: write a value by its name or by its short name in any case, ``-`` or ``_`` between words or neither
#: (:func:`spelling_key`: ``on-failure``, ``OnFailure``), as ``Elastic()`` and torchrun take them; what
#: is written back is always the name. Textproto, protobuf's own format, takes the names only. The Go
#: backend reads this table (``tables_gen.go``).
ENUM_SHORT_NAMES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {name: MappingProxyType(_short_names(e)) for name, e in _schema_enums().items()}
)


def _by_spelling(short_names: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, short in short_names.items():
        key = spelling_key(short)
        if not key or key in out:  # pragma: no cover - a schema change that makes short names ambiguous
            raise AssertionError(f"the short name {short!r} of {name} is empty or ambiguous")
        out[key] = name
    return out


#: enum full name -> {spelling_key of a short name -> the value's name}: how a short name is looked up.
_BY_SPELLING = {enum_name: _by_spelling(table) for enum_name, table in ENUM_SHORT_NAMES.items()}


def enum_value_name(enum_type: EnumDescriptor, text: str) -> str | None:
    """The name of the value of ``enum_type`` that ``text`` writes (its name, or its short name), or None."""
    if text in enum_type.values_by_name:
        return text
    key = spelling_key(text)
    return _BY_SPELLING.get(enum_type.full_name, {}).get(key) if key else None


def enum_suggestion(enum_type: EnumDescriptor, text: str) -> str | None:
    """The value's name ``text`` looks like a typo of (of its short name, or of its name), or None."""
    key = spelling_key(text)
    by_spelling = _BY_SPELLING.get(enum_type.full_name, {})
    match = close_match(key, by_spelling) if key else None
    return by_spelling[match] if match is not None else close_match(text, enum_type.values_by_name)
