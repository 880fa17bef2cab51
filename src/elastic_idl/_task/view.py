"""The task as one normalised, immutable value: `TaskView`, and its one way in, `of`.

``of`` converts whatever it is given exactly once (a message of either binding or of upstream
flyteidl, serialized bytes/str in any format, a custom dict) into a TaskView that owns a private
copy of the task message. Every reader (validate, to_launch_spec, render_pytorchjob, to_custom,
encode) takes a TaskView as is, so a value converted once is never converted again, and its rule
check runs once (cached on the value: sound because the value cannot change).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

from google.protobuf.duration_pb2 import Duration

from elastic_idl._errors import Violation
from elastic_idl._task.codec import Format, decode, is_repeated
from elastic_idl._task.messages import (
    ElasticConfig,
    KubeflowTask,
    LegacyTask,
    Resources,
    RunPolicy,
    Task,
    as_task,
)
from elastic_idl._task.names import (
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_MONITOR_INTERVAL_S,
    DEFAULT_NCCL_HEARTBEAT_TIMEOUT_S,
    DEFAULT_RDZV_BACKEND,
    DURATION_FIELDS,
    NCCL_ENV_FIELDS,
    RDZV_TYPED,
    TOGGLE_ENV_VALUES,
)

__all__ = [
    "ElasticValues",
    "Replica",
    "TaskView",
    "duration_seconds",
    "elastic_values",
    "message_of",
    "of",
    "rdzv_configs",
    "seconds_number",
    "values_of",
    "view",
]


class Replica(NamedTuple):
    """The effective settings of one replica type, after upstream's `common` rule.

    Attributes:
        path: Field path of the replica spec in the task ("worker_replicas", "workers").
        spec_path: Field path the settings were read from ("worker_replicas.common"
            when `common` is set, else "worker_replicas"; "" for the legacy shape).
        replicas_path: Field path the replica count was read from.
        replicas: Replica count as written (0 may mean "take max_replicas").
        image: Container image; "" means the task's image.
        resources: Container resources, or None.
        restart_policy: RestartPolicy enum number (0 = Never).
        present: Whether the spec was set at all in the message.
    """

    path: str
    spec_path: str
    replicas_path: str
    replicas: int
    image: str
    resources: Resources | None
    restart_policy: int
    present: bool


class ElasticValues(NamedTuple):
    """Every field of an ElasticConfig as a plain Python value, read from the message once.

    Numbers, enums (as numbers) and text as in the message (unset: the proto default), each
    Duration as its message (None when unset), repeated fields as tuples (``rdzv_options`` as
    (key, value) pairs). The rules, the launch spec and the renderer read these instead of the
    message, so a task's fields are read once however many readers look.
    """

    # Singular scalars and enums.
    rdzv_backend: str
    min_replicas: int
    max_replicas: int
    nproc_per_node: int
    max_restarts: int
    nproc_policy: int
    start_method: int
    rdzv_id: str
    rdzv_host: str
    rdzv_port: int
    role: str
    redirects: int
    tee: int
    numa_binding: int
    virtual_local_rank: bool
    nccl_async_error_handling: int
    nccl_enable_monitoring: int
    log_line_prefix_template: str
    # The Durations, in DURATION_FIELDS order.
    monitor_interval: Duration | None
    join_timeout: Duration | None
    last_call_timeout: Duration | None
    close_timeout: Duration | None
    read_timeout: Duration | None
    shutdown_timeout: Duration | None
    collective_timeout: Duration | None
    nccl_heartbeat_timeout: Duration | None
    cas_backoff_max_seconds: Duration | None
    # The repeated fields.
    rdzv_options: tuple[tuple[str, str], ...]
    local_ranks_filter: tuple[int, ...]
    signals_to_handle: tuple[str, ...]

    def effective_backend(self) -> str:
        """The rendezvous backend, with "" read as `DEFAULT_RDZV_BACKEND`."""
        return self.rdzv_backend or DEFAULT_RDZV_BACKEND

    def monitor_interval_s(self) -> float:
        """The agent's monitor interval in seconds, with unset read as `DEFAULT_MONITOR_INTERVAL_S`."""
        d = self.monitor_interval
        return DEFAULT_MONITOR_INTERVAL_S if d is None else duration_seconds(d)

    def collective_timeout_s(self) -> float:
        """The process-group timeout in seconds, with unset read as `DEFAULT_COLLECTIVE_TIMEOUT_S`."""
        d = self.collective_timeout
        return float(DEFAULT_COLLECTIVE_TIMEOUT_S) if d is None else duration_seconds(d)

    def nccl_heartbeat_timeout_s(self) -> int:
        """NCCL's heartbeat timeout in seconds, with unset read as torch's `DEFAULT_NCCL_HEARTBEAT_TIMEOUT_S`."""
        d = self.nccl_heartbeat_timeout
        return DEFAULT_NCCL_HEARTBEAT_TIMEOUT_S if d is None else int(d.seconds)

    def nccl_env(self) -> dict[str, str]:
        """The NCCL env vars the config sets (`NCCL_ENV_FIELDS` order); an unset field exports nothing."""
        out: dict[str, str] = {}
        for field, env in NCCL_ENV_FIELDS:
            value = getattr(self, field)
            if isinstance(value, Duration):
                out[env] = str(int(value.seconds))
            elif value in TOGGLE_ENV_VALUES:
                out[env] = TOGGLE_ENV_VALUES[value]
        return out


_FIELDS = ElasticValues._fields
_DURATIONS_AT = _FIELDS.index(DURATION_FIELDS[0])
_OPTIONS_AT, _RANKS_AT, _SIGNALS_AT = (_FIELDS.index(f.name) for f in ElasticConfig.DESCRIPTOR.fields if is_repeated(f))
#: field descriptor -> its position in ElasticValues (ListFields gives the descriptors).
_POSITION = {f: _FIELDS.index(f.name) for f in ElasticConfig.DESCRIPTOR.fields}
#: What ElasticValues holds for each field the message leaves unset: the proto default, None for a Duration, ().
_UNSET = [
    () if is_repeated(f) else None if f.message_type is not None else f.default_value
    for f in sorted(ElasticConfig.DESCRIPTOR.fields, key=lambda f: _POSITION[f])
]


def _assert_layout() -> None:
    """ElasticValues holds every field of ElasticConfig once; the Durations in DURATION_FIELDS order, then the repeated."""
    assert sorted(_FIELDS) == sorted(f.name for f in ElasticConfig.DESCRIPTOR.fields), "a field is missing"
    assert _FIELDS[_DURATIONS_AT : _DURATIONS_AT + len(DURATION_FIELDS)] == DURATION_FIELDS
    assert (_OPTIONS_AT, _RANKS_AT, _SIGNALS_AT) == (len(_FIELDS) - 3, len(_FIELDS) - 2, len(_FIELDS) - 1)


_assert_layout()


def elastic_values(e: ElasticConfig) -> ElasticValues:
    """The fields of ``e`` as `ElasticValues`: the fields it sets (one ListFields), the defaults for the rest."""
    row: list[Any] = _UNSET.copy()
    position = _POSITION
    for f, value in e.ListFields():
        row[position[f]] = value
    options, ranks, signals = row[_OPTIONS_AT], row[_RANKS_AT], row[_SIGNALS_AT]
    if options:
        row[_OPTIONS_AT] = tuple([(o.key, o.value) for o in options])
    if ranks:
        row[_RANKS_AT] = tuple(ranks)
    if signals:
        row[_SIGNALS_AT] = tuple(signals)
    return _new_tuple(ElasticValues, row)


class TaskView:
    """A task of either shape as one immutable value: elastic config, replicas and run policy.

    Build it with `elastic_idl.view` (``of``). It owns a private copy of the task message,
    so changing the message it was made from does not change it; the sub-messages it exposes
    (``elastic``, ``run_policy``, ``Replica.resources``) are read-only by contract. Two views are
    equal when their task messages are. `to_message` gives a mutable copy of the message.

    Attributes:
        task_type_version: 0 (legacy) or 1 (kubeflow).
        elastic: The elastic config, or None for a non-elastic task.
        worker: Effective Worker replica settings.
        master: Effective Master replica settings (kubeflow shape only), or None.
        run_policy: The run policy (kubeflow shape only), or None.
    """

    __slots__ = ("_message", "_values", "_violations", "elastic", "master", "run_policy", "task_type_version", "worker")

    _message: Task
    _values: ElasticValues | None
    _violations: tuple[Violation, ...] | None
    task_type_version: int
    elastic: ElasticConfig | None
    worker: Replica
    master: Replica | None
    run_policy: RunPolicy | None

    def __init__(self, message: Task) -> None:
        """Use `elastic_idl.view`; this takes ownership of ``message`` (a ``_pb2`` task nobody else holds)."""
        _set_message(self, message)
        _set_violations(self, None)
        _set_values(self, None)
        has: Any = message.HasField
        _set_elastic(self, message.elastic_config if has("elastic_config") else None)
        if type(message) is not KubeflowTask and isinstance(message, LegacyTask):  # `is` first: cheap
            _set_version(self, 0)
            _set_worker(self, Replica("workers", "", "workers", message.workers, "", None, 0, True))
            _set_master(self, None)
            _set_run_policy(self, None)
            return
        _set_version(self, 1)
        _set_worker(self, _replica(message.worker_replicas, _WORKER_PATHS, has("worker_replicas")))
        _set_master(self, _replica(message.master_replicas, _MASTER_PATHS, True) if has("master_replicas") else None)
        _set_run_policy(self, message.run_policy if has("run_policy") else None)

    @classmethod
    def of_message(cls, message: Task) -> TaskView:
        """The one builder: a view owning ``message`` (a ``_pb2`` task that nobody else holds)."""
        return cls(message)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TaskView is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TaskView is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskView):
            return NotImplemented
        return bool(self._message == other._message)

    __hash__ = None  # type: ignore[assignment]  # equal by a mutable-typed message: not hashable

    def __repr__(self) -> str:
        return (
            f"TaskView(task_type_version={self.task_type_version}, elastic={_short(self.elastic)}, "
            f"worker={self.worker!r}, master={self.master!r}, run_policy={_short(self.run_policy)})"
        )

    def __copy__(self) -> TaskView:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> TaskView:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_wire, (self._message.SerializeToString(deterministic=True), self.task_type_version))

    def to_message(self) -> Task:
        """A new, mutable copy of the task message (``_pb2``)."""
        return _copy(self._message)

    def effective_backend(self) -> str:
        """The rendezvous backend, with "" read as `DEFAULT_RDZV_BACKEND`."""
        values = values_of(self)
        return DEFAULT_RDZV_BACKEND if values is None else values.effective_backend()

    def worker_count(self) -> int:
        """Worker pods: max_replicas for an elastic task, else the replica count."""
        if self.elastic is not None:
            return int(self.elastic.max_replicas)
        return self.worker.replicas

    def rule_violations(self, check: Callable[[TaskView], list[Violation]]) -> tuple[Violation, ...]:
        """``check(self)``, run once per value and kept (the value never changes); for the validate module."""
        found = self._violations
        if found is None:
            found = tuple(check(self))
            _set_violations(self, found)
        return found


# The slots' own setters: how TaskView fills itself despite its __setattr__ (cheaper than object.__setattr__).
(
    _set_message,
    _set_violations,
    _set_values,
    _set_elastic,
    _set_version,
    _set_worker,
    _set_master,
    _set_run_policy,
) = (
    getattr(TaskView, name).__set__
    for name in ("_message", "_violations", "_values", "elastic", "task_type_version", "worker", "master", "run_policy")
)


def _short(m: Any) -> str:
    return "None" if m is None else "{" + " ".join(str(m).split()) + "}"


def _from_wire(raw: bytes, task_type_version: int) -> TaskView:
    return of(raw, task_type_version=task_type_version)


def message_of(t: TaskView) -> Task:
    """The view's own task message, for the library's readers: read it, never change it."""
    return t._message


def values_of(t: TaskView) -> ElasticValues | None:
    """The view's elastic config as `ElasticValues` (None without one), read once per value and kept."""
    found = t._values
    if found is None and t.elastic is not None:
        found = elastic_values(t.elastic)
        _set_values(t, found)
    return found


def _copy(message: Task) -> Task:
    out: Any = type(message)()
    out.CopyFrom(message)
    return cast(Task, out)


def _paths(path: str) -> tuple[str, str, str, str]:
    """(path, path.common, path.common.replicas, path.replicas) of a replica spec, built once."""
    return path, f"{path}.common", f"{path}.common.replicas", f"{path}.replicas"


_WORKER_PATHS = _paths("worker_replicas")
_MASTER_PATHS = _paths("master_replicas")


def _replica(spec: Any, paths: tuple[str, str, str, str], present: bool) -> Replica:
    # Upstream's backend rule: `common` wins when it is set, else the deprecated fields.
    path, common_path, common_replicas_path, replicas_path = paths
    # tuple.__new__ with the fields in Replica's order: the NamedTuple's own __new__ is a Python call.
    if spec.HasField("common"):
        c = spec.common
        fields = (
            path,
            common_path,
            common_replicas_path,
            c.replicas,
            c.image,
            c.resources if c.HasField("resources") else None,
            c.restart_policy,
            present,
        )
    else:
        fields = (
            path,
            path,
            replicas_path,
            spec.replicas,
            spec.image,
            spec.resources if spec.HasField("resources") else None,
            spec.restart_policy,
            present,
        )
    return _new_tuple(Replica, fields)


_new_tuple = tuple.__new__
_OWN_TASKS = (LegacyTask, KubeflowTask)


def of(task: Any, *, task_type_version: int = 1, format: Format | None = None) -> TaskView:
    """The task as a `TaskView`, converted exactly once: the way into every reader.

    Args:
        task: A TaskView (returned as is); a task message of either shape, as ``_pb2`` or
            betterproto of this package or upstream flyteidl's ``_pb2`` (copied or converted
            through its wire bytes, once); or a serialized task (``bytes``/``str`` in any
            format) or ``TaskTemplate.custom`` dict, decoded strictly by `decode`.
        task_type_version: The shape of a serialized task or custom dict: 0 legacy, 1 (default)
            kubeflow. Ignored for a message or a view, which carry their shape.
        format: The format of serialized data, one of `FORMATS`; None
            (default) detects it, as `decode` does.

    Raises:
        DecodeError: Serialized data or a custom dict that is not a task of that shape.
        UnsupportedVersionError: task_type_version is not 0 or 1.
        TypeError: ``task`` is none of these; the message says what to pass.
    """
    if isinstance(task, TaskView):
        return task
    if isinstance(task, (bytes, bytearray, memoryview, str)):  # first: cheaper than the message check
        return TaskView.of_message(decode(task, format=format, task_type_version=task_type_version))
    if isinstance(task, _OWN_TASKS):
        return TaskView.of_message(_copy(task))  # the caller keeps its message; the view owns a copy
    if isinstance(task, Mapping):
        return TaskView.of_message(decode(task, task_type_version=task_type_version))
    return TaskView.of_message(as_task(task))  # another binding: a new message, through its bytes


#: The public name (``elastic_idl.view``).
view = of


def duration_seconds(d: Any) -> float:
    """A Duration as a float number of seconds."""
    return float(d.seconds) + float(d.nanos) / 1e9


def seconds_number(x: float) -> int | float:
    """A number of seconds as an int when it is whole (``900``, not ``900.0``), else as is."""
    return int(x) if float(x).is_integer() else x


#: The typed rendezvous options as (name, position in ElasticValues), in RDZV_TYPED order.
_TIMEOUT_AT = tuple((name, _FIELDS.index(name)) for name in RDZV_TYPED)


def rdzv_configs(v: ElasticValues) -> dict[str, Any]:
    """The rendezvous options a config states: typed ones (seconds: an int when whole, else a float), then the
    extras in order."""
    out: dict[str, Any] = {}
    row: Any = v  # indexed by position: the type checker sees the union of every field's type
    for name, at in _TIMEOUT_AT:
        d = row[at]
        if d is not None:
            out[name] = d.seconds if not d.nanos else seconds_number(duration_seconds(d))
    if v.rdzv_options:
        out.update(v.rdzv_options)
    return out
