"""The SDK config: ``Elastic(...)``, a drop-in for flytekit's ``Elastic``, and custom dict <-> task.

``Elastic`` is validated when it is written: it builds the task message and runs the
same rules as `validate`, so an invalid config never reaches a
cluster. It emits exactly what flytekit 1.16 emits (``to_template``), plus our
extension fields, which put on the wire the settings flytekit keeps only in the
Python object (start method, monitor interval, rendezvous timeouts). Pure: no
torch, no flytekit, no environment. When flytekit is imported already (never by this
module), ``Elastic`` is registered with its task plugin table as this module's last step;
imported later, flytekit's entry point does it (``elastic_idl.flytekit._register``).
"""

from __future__ import annotations

import enum
import functools
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any, NoReturn, cast

from elastic_idl._errors import ValidationError, Violation, deprecated, did_you_mean, reject_unknown_keywords
from elastic_idl._sdk.arguments import (
    Problems,
    RunPolicy,
    duration_of,
    int32,
    is_int,
    parse_nnodes,
    parse_nproc,
    seconds_value,
    split_rdzv,
    task_of,
)
from elastic_idl._task import encoding
from elastic_idl._task.codec import CustomTemplate
from elastic_idl._task.enums import (
    NPROC_POLICY,
    NUMA_BINDING,
    SDK_RESOURCE,
    START_METHOD,
    STD_STREAMS,
    CleanPodPolicy,
    EnumText,
    RestartPolicy,
)
from elastic_idl._task.messages import ElasticConfig, KubeflowTask
from elastic_idl._task.messages import RunPolicy as RunPolicyMessage
from elastic_idl._task.names import (
    CAS_BACKOFF_MAX,
    DEFAULT_RDZV_BACKEND,
    DYNAMIC_BACKENDS,
    FAILURE_TIMEOUTS,
    JOIN_TIMEOUT,
    LOG_LINE_PREFIX_TEMPLATE,
    RDZV_TIMEOUTS,
    STANDALONE_TASK_TYPE,
    TASK_TYPE,
    TASK_TYPE_VERSION,
)
from elastic_idl._task.validate import violations
from elastic_idl._task.view import Replica, TaskView, elastic_values, rdzv_configs, values_of, view
from elastic_idl.plugins.v1 import elastic_pb2

__all__ = [
    "FLYTEKIT_RDZV_CONFIGS",
    "SDK_RULES",
    "Elastic",
]

#: flytekit's default ``rdzv_configs`` (15 minutes, for pods that start at different times).
FLYTEKIT_RDZV_CONFIGS: Mapping[str, int] = MappingProxyType({"timeout": 900, JOIN_TIMEOUT: 900})

#: rule id -> what it requires, for the errors only ``Elastic(...)`` and ``Elastic.from_task`` raise.
#: Every other violation they report is one of `elastic_idl.RULES`, exactly as ``validate`` reports it.
SDK_RULES: dict[str, str] = {
    "sdk.argument": "an Elastic(...) argument has the type and syntax its docstring gives",
    "sdk.rdzv_timeout": (
        "rdzv_configs 'timeout' equals 'join_timeout' when both are given for a backend that "
        "reads only join_timeout (c10d, etcd-v2)"
    ),
    "sdk.expressible": "Elastic.from_task: the task holds nothing Elastic cannot say (an elastic config, "
    "one quantity per resource, no rdzv option 'timeout' under c10d/etcd-v2)",
}


class FrozenDict(dict[str, Any]):
    """A read-only dict: what ``Elastic`` holds for ``rdzv_configs``, ``requests`` and ``limits``.

    A real dict (``json.dumps``, ``dataclasses.asdict`` and pickle work), but every
    mutating method raises TypeError, so a config can never drift from its message.
    """

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Elastic settings are read-only: build a new Elastic (dataclasses.replace)")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


def _enum_member(
    value: object, enum_cls: type[enum.Enum], argument: str, aliases: Mapping[str, str], problems: Problems
) -> Any:
    """Our enum member for ``value``: a member, flytekit's same-named member, a name (any case) or its number."""
    if value is None:
        return None
    if isinstance(value, enum_cls):
        return value
    name = getattr(value, "name", None)  # flytekit's enums (same member names)
    if isinstance(name, str) and name in enum_cls.__members__:
        return enum_cls[name]
    if isinstance(value, str):
        key = aliases.get(value.lower().replace("-", "_"), value.upper())
        if key in enum_cls.__members__:
            return enum_cls[key]
    if is_int(value):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    problems.add(argument, f"expected one of {', '.join(enum_cls.__members__)}, got {value!r}")
    return None


def _run_policy(value: object, problems: Problems) -> RunPolicy | None:
    """The run policy in its one normal form: what the message can tell apart (0 and NONE read as None)."""
    if value is None:
        return None
    if isinstance(value, RunPolicyMessage):
        return RunPolicy(
            clean_pod_policy=CleanPodPolicy(value.clean_pod_policy) if value.clean_pod_policy else None,
            ttl_seconds_after_finished=value.ttl_seconds_after_finished or None,
            active_deadline_seconds=value.active_deadline_seconds or None,
            backoff_limit=value.backoff_limit or None,
        )
    names = ("clean_pod_policy", "ttl_seconds_after_finished", "active_deadline_seconds", "backoff_limit")
    get: Callable[[str], Any]
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(names))
        if unknown:
            hint = did_you_mean(str(unknown[0]), names) if len(unknown) == 1 else ""
            problems.add("run_policy", f"unknown keys {unknown}; known: {', '.join(names)}{hint}")
            return None
        get = value.get
    elif all(hasattr(value, n) for n in names):  # ours, flytekit's, or any object shaped like it
        get = functools.partial(getattr, value)
    else:
        problems.add("run_policy", f"expected a RunPolicy or a mapping of {', '.join(names)}, got {value!r}")
        return None
    clean = _enum_member(get("clean_pod_policy"), CleanPodPolicy, "run_policy.clean_pod_policy", {}, problems)
    numbers: dict[str, int | None] = {}
    for n in names[1:]:
        v = get(n)
        numbers[n] = None if v is None else int32(v, f"run_policy.{n}", problems) or None  # 0 is unset on the wire
    return RunPolicy(clean_pod_policy=clean if clean is not CleanPodPolicy.NONE else None, **numbers)


def _resources(value: object, argument: str, problems: Problems) -> Mapping[str, str] | None:
    """Requests or limits as {"cpu": "2", "mem": "4Gi", ...} in canonical key names."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif all(hasattr(value, n) for n in ("cpu", "mem", "gpu")):  # flytekit's Resources
        pairs = [(n, getattr(value, n, None)) for n in ("cpu", "mem", "gpu", "ephemeral_storage")]
        pairs = [(k, v) for k, v in pairs if v is not None]
    else:
        problems.add(argument, f"expected a mapping such as {{'cpu': '2', 'mem': '4Gi'}}, got {value!r}")
        return None
    out: dict[str, str] = {}
    for key, quantity in pairs:
        if not isinstance(key, str) or key not in SDK_RESOURCE.number:
            problems.add(argument, f"unknown resource {key!r}; known: {', '.join(SDK_RESOURCE.number)}")
            continue
        canonical = SDK_RESOURCE.text[SDK_RESOURCE.number[key]]
        if isinstance(quantity, bool) or not isinstance(quantity, (str, int, float)):
            problems.add(
                f"{argument}.{key}",
                f"expected one quantity (str or number), got {quantity!r}; requests and limits are separate arguments",
            )
            continue
        if canonical in out:
            problems.add(f"{argument}.{key}", f"resource {canonical!r} is given twice")
            continue
        out[canonical] = str(quantity)  # flytekit writes str(value) too
    return FrozenDict(out)


def _strings(value: object, argument: str, problems: Problems) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(s.strip() for s in value.split(",")) if value else ()
    if isinstance(value, Iterable) and all(isinstance(s, str) for s in value):
        return tuple(value)
    problems.add(argument, f"expected a list of strings or a comma-separated string, got {value!r}")
    return ()


def _ints(value: object, argument: str, problems: Problems) -> tuple[int, ...]:
    """int32s from a list (ints or their text) or a comma-separated string."""
    items: list[Any] | None = None
    if isinstance(value, str):
        items = value.split(",") if value else []
    elif isinstance(value, Iterable) and not isinstance(value, Mapping):
        items = list(value)
    if items is None or not all(is_int(i) or isinstance(i, str) for i in items):
        problems.add(argument, f"expected a list of integers or a comma-separated string, got {value!r}")
        return ()
    return tuple(int32(i, argument, problems) for i in items)


def _enum_number(table: EnumText, value: object, argument: str, problems: Problems) -> int:
    """The enum number of ``value``, one of the table's texts; else a problem naming the argument (and 0)."""
    if isinstance(value, str) and value in table.number:
        return table.number[value]
    problems.add(argument, f"expected one of {', '.join(table.names)}, got {value!r}")
    return 0


def _str(value: object, argument: str, problems: Problems) -> str:
    if isinstance(value, str):
        return value
    problems.add(argument, f"expected a string, got {type(value).__name__} {value!r}")
    return ""


class _ElasticBuilder:
    """Reads the arguments of one ``Elastic(...)`` into an ElasticConfig, step by step.

    Each step checks its arguments (a bad one is added to ``problems``, so every bad argument
    is reported at once), writes the config, and stores the argument back on the (frozen)
    Elastic in its one normal form.
    """

    def __init__(self, cfg: Elastic) -> None:
        self.cfg = cfg
        self.problems = Problems()
        self.config = ElasticConfig()

    def put(self, name: str, value: Any) -> None:
        object.__setattr__(self.cfg, name, value)  # frozen: normalise the inputs once, here

    def nodes(self) -> bool:
        """min/max replicas from ``nnodes``; whether the config is a single-node python-task."""
        config, problems = self.config, self.problems
        try:
            lo, hi, single = parse_nnodes(self.cfg.nnodes)
        except ValueError as exc:
            problems.add("nnodes", str(exc).split(": ", 1)[1])
            return False
        config.min_replicas = int32(lo, "nnodes", problems)
        config.max_replicas = int32(hi, "nnodes", problems)
        # "2" and "2:2" are the job 2 is; "1:1" stays apart from 1 (a PyTorchJob, not a python-task).
        self.put("nnodes", lo if single or (lo == hi and lo != 1) else f"{lo}:{hi}")
        return single and lo == 1

    def nproc(self) -> None:
        try:
            nproc, policy = parse_nproc(self.cfg.nproc_per_node)
        except ValueError as exc:
            self.problems.add("nproc_per_node", str(exc).split(": ", 1)[1])
            return
        self.config.nproc_per_node = int32(nproc, "nproc_per_node", self.problems)
        self.config.nproc_policy = cast(Any, policy)
        self.put("nproc_per_node", NPROC_POLICY.text.get(policy) or nproc)

    def launch_settings(self) -> str:
        """Restarts, backend, start method, monitor interval and shutdown timeout; the backend."""
        cfg, config, problems = self.cfg, self.config, self.problems
        config.max_restarts = int32(cfg.max_restarts, "max_restarts", problems)
        self.put("max_restarts", config.max_restarts)
        # "" means c10d everywhere; flytekit writes "c10d", so the message does too.
        backend = _str(cfg.rdzv_backend, "rdzv_backend", problems) or DEFAULT_RDZV_BACKEND
        config.rdzv_backend = backend
        self.put("rdzv_backend", backend)
        if cfg.start_method is not None:
            config.start_method = cast(Any, _enum_number(START_METHOD, cfg.start_method, "start_method", problems))
        self.durations(("monitor_interval", "shutdown_timeout"))
        return backend

    def durations(self, names: tuple[str, ...]) -> None:
        """Each named config value that is set, as a Duration field of the message of that name."""
        cfg, config, problems = self.cfg, self.config, self.problems
        for name in names:
            value = getattr(cfg, name)
            if value is not None:
                d = duration_of(value, name, problems)
                if d is not None:
                    getattr(config, name).CopyFrom(d)
                    self.put(name, seconds_value(d))

    def rendezvous(self, backend: str) -> None:
        """rdzv_configs (typed timeouts and options), rdzv id, host, port, and the role."""
        cfg, config, problems = self.cfg, self.config, self.problems
        items = self._cas_backoff(cfg._rdzv_items(backend, problems))
        split_rdzv(items, config, "rdzv_configs", problems)
        # What the message holds, as numbers (typed ones) and text (options): what from_task gives back.
        self.put("rdzv_configs", FrozenDict(rdzv_configs(elastic_values(config))))
        has_cas = config.HasField(CAS_BACKOFF_MAX)
        self.put(CAS_BACKOFF_MAX, seconds_value(config.cas_backoff_max_seconds) if has_cas else None)
        config.rdzv_id = _str(cfg.rdzv_id, "rdzv_id", problems)
        config.rdzv_host = _str(cfg.rdzv_host, "rdzv_host", problems)
        config.rdzv_port = int32(cfg.rdzv_port, "rdzv_port", problems)
        self.put("rdzv_port", config.rdzv_port)
        config.role = _str(cfg.role, "role", problems)

    def _cas_backoff(self, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """The rdzv_configs items with the ``cas_backoff_max_seconds`` argument among them: the argument and the
        rdzv_configs key of that name are one field; given both, they must be equal."""
        value = self.cfg.cas_backoff_max_seconds
        if value is None:
            return items
        given = [v for k, v in items if k == CAS_BACKOFF_MAX]
        a = duration_of(value, CAS_BACKOFF_MAX, self.problems)
        if not given:
            return [*items, (CAS_BACKOFF_MAX, seconds_value(a))] if a is not None else items
        b = duration_of(given[-1], f"rdzv_configs.{CAS_BACKOFF_MAX}", self.problems)
        if a is not None and b is not None and a != b:
            self.problems.add(
                CAS_BACKOFF_MAX,
                f"{value!r} differs from rdzv_configs[{CAS_BACKOFF_MAX!r}] ({given[-1]!r}): they are one field, "
                "give it once (or the same value twice)",
            )
        return items

    def log_line_prefix(self) -> None:
        """The log-line prefix template: any text (torch keeps what it does not substitute)."""
        template = _str(self.cfg.log_line_prefix_template, LOG_LINE_PREFIX_TEMPLATE, self.problems)
        self.config.log_line_prefix_template = template

    def streams(self) -> None:
        """redirects, tee, local ranks filter, NUMA binding, signals, and the two switches."""
        cfg, config, problems = self.cfg, self.config, self.problems
        for name in ("redirects", "tee"):
            value = getattr(cfg, name)
            key = str(value).lower() if is_int(value) or isinstance(value, str) else None
            if key is not None and key in STD_STREAMS.number:
                setattr(config, name, STD_STREAMS.number[key])
                self.put(name, STD_STREAMS.number[key])
            else:
                problems.add(name, f"expected 0-3 or one of none, out, err, all; got {value!r}")
        ranks = _ints(cfg.local_ranks_filter, "local_ranks_filter", problems)
        self.put("local_ranks_filter", ranks)
        config.local_ranks_filter.extend(ranks)
        if cfg.numa_binding is not None:
            config.numa_binding = cast(Any, _enum_number(NUMA_BINDING, cfg.numa_binding, "numa_binding", problems))
        signals = _strings(cfg.signals_to_handle, "signals_to_handle", problems)
        self.put("signals_to_handle", signals)
        config.signals_to_handle.extend(signals)
        for name in ("virtual_local_rank", "increase_shared_mem"):
            flag: object = getattr(cfg, name)
            if not isinstance(flag, bool):
                problems.add(name, f"expected True or False, got {flag!r}")
        config.virtual_local_rank = bool(cfg.virtual_local_rank)

    def failure_budget(self) -> None:
        """collective_timeout, the NCCL heartbeat timeout (Durations) and the two NCCL switches (Toggles)."""
        cfg, config, problems = self.cfg, self.config, self.problems
        self.durations(FAILURE_TIMEOUTS)
        for name in _NCCL_SWITCHES:
            flag: object = getattr(cfg, name)
            if flag is None:
                continue
            if not isinstance(flag, bool):
                problems.add(name, f"expected True, False or None, got {flag!r}")
                continue
            setattr(config, name, _TOGGLE_ON if flag else _TOGGLE_OFF)

    def run_policy(self) -> RunPolicy | None:
        run_policy = _run_policy(self.cfg.run_policy, self.problems)
        self.put("run_policy", run_policy)
        return run_policy

    def replica_settings(self) -> dict[str, Any]:
        """image, requests, limits and restart policy of the Worker replicas."""
        cfg, problems = self.cfg, self.problems
        replica: dict[str, Any] = {}
        if cfg.image is not None:
            replica["image"] = _str(cfg.image, "image", problems)
        self.put("image", replica.get("image") or None)  # "" is the task's image, like None
        for kind in ("requests", "limits"):
            replica[kind] = _resources(getattr(cfg, kind), kind, problems)
        if replica["requests"] is not None or replica["limits"] is not None:
            # One resources message holds both lists: with either given, the other is empty, not absent.
            for kind in ("requests", "limits"):
                replica[kind] = replica[kind] if replica[kind] is not None else FrozenDict()
        for kind in ("requests", "limits"):
            self.put(kind, replica[kind])
        policy = _enum_member(
            cfg.restart_policy,
            RestartPolicy,
            "restart_policy",
            {"on_failure": "FAILURE", "onfailure": "FAILURE"},
            problems,
        )
        replica["restart_policy"] = policy if policy is not RestartPolicy.NEVER else None  # NEVER is the unset 0
        self.put("restart_policy", replica["restart_policy"])
        return replica


@dataclass(frozen=True, kw_only=True)
class Elastic:
    """Elastic PyTorch training config: flytekit's ``Elastic``, validated, with nothing left off the wire.

    Drop it in where ``flytekitplugins.kfpytorch.Elastic`` stands (keyword arguments). It is
    validated at construction with the same rules and errors as `elastic_idl.validate`
    (a `ValidationError` listing every violation); an argument of the wrong
    type or syntax is a violation whose field is the argument name (rule ``sdk.argument``).
    Building one never imports torch or flytekit.

    Arguments are stored in one normal form (a number given as text is stored as the number;
    values the message cannot tell apart, such as ``rdzv_backend=""`` and ``"c10d"``, as one
    value), so ``cfg == Elastic.from_task(cfg.to_task())`` unless ``nnodes`` is the single
    number 1 or ``increase_shared_mem`` is False.

    flytekit's settings (same names, same defaults unless said otherwise):

    Attributes:
        nnodes: Number of nodes: an int, or ``"MIN:MAX"`` for an elastic range (also ``"N"``).
            ``1`` and ``"1"`` give a single-node ``python-task`` (one plain pod, no Kubeflow
            operator); ``"1:1"`` gives a one-worker PyTorchJob. (flytekit turns ``"1"`` into a
            PyTorchJob: docs/guide/sdk-config.md explains the choice.)
        nproc_per_node: Worker processes per node: an int (or its decimal string), or ``"auto"``,
            ``"cpu"``, ``"gpu"`` (resolved on the node; flytekit cannot express these).
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"``. None (default) leaves it unset
            on the wire: the launcher's default (elastic-idl's launcher: a warm ``forkserver``).
            flytekit's default is ``"spawn"``; pass it to keep it.
        monitor_interval: Seconds between worker health checks (> 0, <= 3600). None (default):
            the launcher's 0.1 s. flytekit's default 5 puts a 5 s floor under every run; pass
            ``monitor_interval=5`` to keep it.
        max_restarts: Worker-group restarts per node before the job fails (>= 0). Default 0.
        rdzv_configs: Rendezvous settings, flytekit's dict. ``join_timeout``,
            ``last_call_timeout``, ``close_timeout``, ``read_timeout`` (seconds) and
            ``cas_backoff_max_seconds`` (see below) go to typed fields; other keys are passed
            through as text. ``timeout`` is torch's legacy overall timeout: with ``c10d``/``etcd-v2`` (which ignore it and wait ``join_timeout``) it
            becomes ``join_timeout`` when that is absent, is merged when equal, and is an error
            (``sdk.rdzv_timeout``) when different; with ``etcd``/``static`` (which read it) it is
            passed through. Default: flytekit's ``{"timeout": 900, "join_timeout": 900}``, so
            ``join_timeout=900 s`` is on the wire.
        run_policy: A `RunPolicy`, flytekit's ``RunPolicy``, or a mapping of its fields.
        increase_shared_mem: flytekit's deprecated pod-template switch. Kept for drop-in use; it
            is not part of the task (the SDK plugin applies it to the pod template).

    Replica settings of the Worker pods (flytekit's ``Elastic`` has none; its ``PyTorch``
    task's ``Worker`` has these, and they are written the same way):

    Attributes:
        image: Container image; None: the task's image.
        requests: Resource requests: flytekit's ``Resources`` or ``{"cpu": "2", "mem": "4Gi",
            "gpu": 1, "ephemeral_storage": ..., "storage": ...}`` (``memory`` also accepted).
            Each value is a Kubernetes quantity the API server accepts (rule ``resources.quantity``).
        limits: Resource limits, same forms.
        restart_policy: ``RestartPolicy`` (ours or flytekit's), or "Never"/"OnFailure"/"Always".

    elastic-idl extensions (each maps to the ElasticConfig field of the same name):

    Attributes:
        rdzv_backend: "c10d" (default, what flytekit hard-codes), "etcd", "etcd-v2" or "static".
        rdzv_id: Rendezvous id; "" lets the runtime choose (the Flyte execution id in a pod).
        rdzv_host: Rendezvous host; "" lets the runtime choose.
        rdzv_port: Rendezvous port 0..65535; 0 lets the runtime choose.
        role: Worker group role; "" means "default".
        redirects: Worker streams redirected to log files: 0-3 or "none", "out", "err", "all".
        tee: Worker streams copied to the console as well, same values.
        local_ranks_filter: Local ranks whose output is shown (ints, or "0,1"); empty: all.
        numa_binding: None, "node", "socket", "exclusive" or "core-complex".
        signals_to_handle: Signal names to forward to workers (list, or "SIGTERM,SIGUSR1"); empty: torch's list.
        shutdown_timeout: Seconds to wait for workers to stop before killing them; None: torch's 30 s.
        virtual_local_rank: Give every worker LOCAL_RANK=0 and its own device.
        collective_timeout: The timeout of every process group a worker creates without one of its
            own (gloo and NCCL), in seconds or a timedelta, > 0 and <= 24 h; None: 10 minutes.
        nccl_heartbeat_timeout: Seconds (whole) or a timedelta before NCCL's monitoring thread aborts
            a process whose watchdog is stuck, <= 24 h; None: torch's own (480 s in torch 2.13).
            Exported as ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``.
        nccl_async_error_handling: True/False exports ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` 1/0;
            None leaves torch's default.
        nccl_enable_monitoring: True/False exports ``TORCH_NCCL_ENABLE_MONITORING`` 1/0; None
            leaves torch's default.
        log_line_prefix_template: The prefix of each console line of a tee'd worker stream, a
            ``string.Template`` with torch's macros ``${role_name}``, ``${rank}``, ``${local_rank}``
            and (torch 2.14 on) ``${hostname}``; other text is kept as written. "" (default): torch's
            ``[${role_name}${local_rank}]:``. The launcher refuses ``${hostname}`` on torch 2.13.
        cas_backoff_max_seconds: The upper bound of the random delay after a failed write of the
            rendezvous state (torch 2.15's rendezvous option), seconds (fractions allowed) or a
            timedelta, >= 0; None: unset (no delay). The rdzv_configs key of the same name is the
            same field (give either, or both equal). The launcher refuses a value above 0 on torch
            before 2.15, which ignores it.

    Example:
        ```python
        cfg = Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2)
        custom, task_type, version = cfg.to_template()  # flytekit's dict (+ joinTimeout), "pytorch", 1
        task = cfg.to_task()
        ```
    """

    nnodes: int | str = 1
    nproc_per_node: int | str = 1
    start_method: str | None = None
    monitor_interval: float | Decimal | str | None = None
    max_restarts: int | str = 0
    rdzv_configs: Mapping[str, Any] | None = field(default_factory=lambda: dict(FLYTEKIT_RDZV_CONFIGS))
    run_policy: Any = None
    increase_shared_mem: bool = True
    image: str | None = None
    requests: Any = None
    limits: Any = None
    restart_policy: Any = None
    rdzv_backend: str = DEFAULT_RDZV_BACKEND
    rdzv_id: str = ""
    rdzv_host: str = ""
    rdzv_port: int | str = 0
    role: str = ""
    redirects: int | str = 0
    tee: int | str = 0
    local_ranks_filter: Sequence[int] | str = ()
    numa_binding: str | None = None
    signals_to_handle: Sequence[str] | str = ()
    shutdown_timeout: float | Decimal | str | None = None
    virtual_local_rank: bool = False
    collective_timeout: float | Decimal | str | timedelta | None = None
    nccl_heartbeat_timeout: float | Decimal | str | timedelta | None = None
    nccl_async_error_handling: bool | None = None
    nccl_enable_monitoring: bool | None = None
    log_line_prefix_template: str = ""
    cas_backoff_max_seconds: float | Decimal | str | timedelta | None = None
    _task: KubeflowTask = field(init=False, repr=False, compare=False)
    _standalone: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Every argument is stored in one normal form (numbers as numbers, values the message
        # cannot tell apart as one value), so a config equals Elastic.from_task(config.to_task()).
        b = _ElasticBuilder(self)
        standalone = b.nodes()
        b.nproc()
        backend = b.launch_settings()
        b.rendezvous(backend)
        b.streams()
        b.log_line_prefix()
        b.failure_budget()
        run_policy = b.run_policy()
        replica = b.replica_settings()
        if b.problems.found:
            raise ValidationError(b.problems.found)
        task = task_of(b.config, replica, run_policy)
        found = violations(task)
        if found:
            raise ValidationError(_as_arguments(found, task))
        b.put("_task", task)
        b.put("_standalone", standalone)

    def _rdzv_items(self, backend: str, problems: Problems) -> list[tuple[str, Any]]:
        """rdzv_configs as (key, value) pairs, with flytekit's ``timeout`` mapped for the backend."""
        raw: object = self.rdzv_configs
        if raw is None:
            return []
        if not isinstance(raw, Mapping):
            problems.add("rdzv_configs", f"expected a mapping of rendezvous settings, got {raw!r}")
            return []
        items: list[tuple[str, Any]] = []
        for key, value in raw.items():
            if not isinstance(key, str):
                problems.add("rdzv_configs", f"keys must be strings, got {key!r}")
                continue
            items.append((key, value))
        configs = dict(items)
        if "timeout" not in configs or backend not in DYNAMIC_BACKENDS:
            return items
        # c10d and etcd-v2 ignore "timeout": map it to the timeout they do read.
        timeout = configs["timeout"]
        if JOIN_TIMEOUT not in configs:
            return [(JOIN_TIMEOUT, timeout) if k == "timeout" else (k, v) for k, v in items]
        t = duration_of(timeout, "rdzv_configs.timeout", problems)
        j = duration_of(configs[JOIN_TIMEOUT], f"rdzv_configs.{JOIN_TIMEOUT}", problems)
        if t is not None and j is not None and t != j:
            problems.add(
                "rdzv_configs.timeout",
                f"the {backend} backend ignores 'timeout' ({timeout!r}) and waits join_timeout "
                f"({configs[JOIN_TIMEOUT]!r}); drop 'timeout' or make the two equal",
                rule="sdk.rdzv_timeout",
            )
        return [(k, v) for k, v in items if k != "timeout"]

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt (and so revalidated) from its arguments: pickle, copy and deepcopy all work.
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return (_rebuild, (kwargs,))

    def __hash__(self) -> int:
        return hash((self.task_type, self._task.SerializeToString(deterministic=True)))

    @property
    def task_type(self) -> str:
        """``"python-task"`` when ``nnodes`` is the single number 1, else ``"pytorch"``."""
        return STANDALONE_TASK_TYPE if self._standalone else TASK_TYPE

    def to_task(self) -> KubeflowTask:
        """The kubeflow-shape task message (task_type_version 1); a fresh copy each call.

        A single-node config gives the task too (min = max = 1), for a local launch.
        """
        out = KubeflowTask()
        out.CopyFrom(self._task)
        return out

    def to_template(self, *, upstream: bool = False, allow_loss: bool = False) -> CustomTemplate:
        """What flytekit puts in the ``TaskTemplate``: custom dict, task type, task_type_version.

        ``nnodes`` 1 gives ``(None, "python-task", 1)`` exactly as flytekit does; otherwise
        ``(custom, "pytorch", 1)`` where custom is flytekit's dict plus our extension fields.
        ``from_custom(*cfg.to_template())`` gives the task back.

        Args:
            upstream: Emit only what upstream flyteidl knows (see `elastic_idl.to_custom`).
                The default ``rdzv_configs`` puts ``joinTimeout`` on the wire, so with defaults
                this raises `SkewError` unless ``allow_loss`` is set.
            allow_loss: With ``upstream``, drop set extension fields with a ``SkewWarning``.
        """
        if self._standalone:
            return CustomTemplate(None, STANDALONE_TASK_TYPE, TASK_TYPE_VERSION)
        custom = encoding.to_custom(self._task, upstream=upstream, allow_loss=allow_loss)
        return CustomTemplate(custom, TASK_TYPE, TASK_TYPE_VERSION)

    def to_custom(self, *, upstream: bool = False, allow_loss: bool = False) -> CustomTemplate:
        """Deprecated (removed in 0.3): `to_template`, which this returns.

        Renamed because `elastic_idl.to_custom` returns the custom dict alone.
        """
        deprecated("Elastic.to_custom()", "Elastic.to_template()")
        return self.to_template(upstream=upstream, allow_loss=allow_loss)

    @classmethod
    def from_task(cls, task: Any) -> Elastic:
        """The config that gives ``task`` back, from a valid elastic task (either shape or binding).

        ``Elastic.from_task(t).to_task()`` describes the same job as ``t``; it is ``t`` itself
        for a task ``to_task`` made. Normalised on the way: the worker count becomes
        max_replicas (0 means that), replica settings move to the deprecated fields flytekit
        writes (``common`` is read first, as the backend does), and a Master spec, which the
        backend deletes for an elastic job, is left out. A one-node range gives
        ``nnodes="1:1"``: a task message always describes a PyTorchJob.

        Raises:
            ValidationError: The task breaks a rule, or holds something Elastic cannot say
                (rule ``sdk.expressible``).
        """
        task = view(task)  # converted once; the rules run once on the value
        found = violations(task)
        if found:
            raise ValidationError(found)
        t = view(task)
        _expressible(t)
        return cls(**_arguments_of(t))


#: Task field (under elastic_config, or a whole path) -> the Elastic(...) argument that sets it, where the
#: two names differ; an elastic_config field of the same name as an argument maps to it.
_ARGUMENT_OF_FIELD = {
    "min_replicas": "nnodes",
    "max_replicas": "nnodes",
    "nproc_policy": "nproc_per_node",
    **{name: f"rdzv_configs.{name}" for name in RDZV_TIMEOUTS},
    "worker_replicas.replicas": "nnodes",
    "worker_replicas.image": "image",
    "worker_replicas.restart_policy": "restart_policy",
}
_INDEXED = re.compile(r"^(?P<name>\w+)\[(?P<i>\d+)\]")


def _argument_of(path: str, task: KubeflowTask) -> str | None:
    """The Elastic(...) argument that wrote the task field ``path``, or None when none did."""
    if path in _ARGUMENT_OF_FIELD:
        return _ARGUMENT_OF_FIELD[path]
    if path.startswith(("run_policy.", "worker_replicas.resources.")):
        head = path.removeprefix("worker_replicas.resources.")
        return head.split("[", 1)[0]  # run_policy.backoff_limit, requests, limits
    first = path.removeprefix("elastic_config.").partition(".")[0]
    if path == first or not path.startswith("elastic_config."):
        return None
    m = _INDEXED.match(first)
    if m and m["name"] == "rdzv_options":
        key = task.elastic_config.rdzv_options[int(m["i"])].key
        return f"rdzv_configs.{key}" if key.isidentifier() else f"rdzv_configs[{key!r}]"
    name = m["name"] if m else first
    if name in _ARGUMENT_OF_FIELD:
        return _ARGUMENT_OF_FIELD[name]
    return name if name in _ELASTIC_ARGUMENTS else None


def _as_arguments(found: Sequence[Violation], task: KubeflowTask) -> list[Violation]:
    """The task's violations as the arguments the user wrote: ``nnodes="2:1"`` breaks
    elastic.min_le_max on elastic_config.max_replicas, reported on ``nnodes`` (the task field stays
    in the message)."""
    out = []
    for v in found:
        argument = _argument_of(v.field, task)
        out.append(v if argument in (None, v.field) else Violation(argument, v.rule, f"{v.message} ({v.field})"))
    return out


def _expressible(t: TaskView) -> None:
    """Refuse a task that holds something Elastic cannot say (rule ``sdk.expressible``)."""

    def refuse(field: str, message: str) -> NoReturn:
        raise ValidationError([Violation(field, "sdk.expressible", message)])

    e = t.elastic
    if e is None:
        refuse("elastic_config", "Elastic needs an elastic config")
    backend = e.rdzv_backend or DEFAULT_RDZV_BACKEND
    if backend in DYNAMIC_BACKENDS and any(o.key == "timeout" for o in e.rdzv_options):
        refuse(
            "elastic_config.rdzv_options",
            f"rdzv option 'timeout' has no effect with {backend} (it waits join_timeout), and Elastic "
            "maps rdzv_configs['timeout'] to join_timeout; remove the option or set join_timeout",
        )
    w = t.worker
    for kind in ("requests", "limits"):
        names = [SDK_RESOURCE.text[x.name] for x in _resource_entries(w, kind)]
        if len(set(names)) != len(names):
            refuse(f"{w.spec_path}.resources.{kind}", f"a resource is named twice: {names}")


def _resource_entries(w: Replica, kind: str) -> Sequence[Any]:
    """The worker's requests or limits entries (empty when it has no resources)."""
    return getattr(w.resources, kind) if w.resources is not None else ()


def _arguments_of(t: TaskView) -> dict[str, Any]:
    """The Elastic(...) arguments of an expressible task."""
    e, w, rp = values_of(t), t.worker, t.run_policy
    assert e is not None  # _expressible checked
    lo, hi = e.min_replicas, e.max_replicas
    kwargs: dict[str, Any] = {}
    if w.resources is not None:
        for kind in ("requests", "limits"):
            kwargs[kind] = {SDK_RESOURCE.text[x.name]: x.value for x in _resource_entries(w, kind)}
    return dict(
        nnodes=hi if lo == hi and hi != 1 else f"{lo}:{hi}",
        nproc_per_node=NPROC_POLICY.text.get(e.nproc_policy) or e.nproc_per_node,
        start_method=START_METHOD.text.get(e.start_method),
        monitor_interval=None if e.monitor_interval is None else seconds_value(e.monitor_interval),
        max_restarts=e.max_restarts,
        rdzv_configs=rdzv_configs(e),
        run_policy=_run_policy(rp, Problems()) if rp is not None else None,
        image=w.image or None,
        restart_policy=RestartPolicy(w.restart_policy) if w.restart_policy else None,
        rdzv_backend=e.rdzv_backend or DEFAULT_RDZV_BACKEND,
        rdzv_id=e.rdzv_id,
        rdzv_host=e.rdzv_host,
        rdzv_port=e.rdzv_port,
        role=e.role,
        redirects=e.redirects,
        tee=e.tee,
        local_ranks_filter=e.local_ranks_filter,
        numa_binding=NUMA_BINDING.text.get(e.numa_binding),
        signals_to_handle=e.signals_to_handle,
        shutdown_timeout=None if e.shutdown_timeout is None else seconds_value(e.shutdown_timeout),
        virtual_local_rank=e.virtual_local_rank,
        collective_timeout=None if e.collective_timeout is None else seconds_value(e.collective_timeout),
        nccl_heartbeat_timeout=None if e.nccl_heartbeat_timeout is None else seconds_value(e.nccl_heartbeat_timeout),
        nccl_async_error_handling=_TOGGLE_FLAG[e.nccl_async_error_handling],
        nccl_enable_monitoring=_TOGGLE_FLAG[e.nccl_enable_monitoring],
        log_line_prefix_template=e.log_line_prefix_template,
        cas_backoff_max_seconds=None if e.cas_backoff_max_seconds is None else seconds_value(e.cas_backoff_max_seconds),
        **kwargs,
    )


#: The NCCL switches of the failure-detection budget (Toggle fields; True/False/None in Elastic).
_NCCL_SWITCHES = ("nccl_async_error_handling", "nccl_enable_monitoring")
_TOGGLE_ON, _TOGGLE_OFF = elastic_pb2.TOGGLE_ON, elastic_pb2.TOGGLE_OFF
#: Toggle number -> the Elastic argument (validation ran before: only the schema's values reach it).
_TOGGLE_FLAG: dict[int, bool | None] = {elastic_pb2.TOGGLE_UNSPECIFIED: None, _TOGGLE_ON: True, _TOGGLE_OFF: False}


def _rebuild(kwargs: dict[str, Any]) -> Elastic:
    return Elastic(**kwargs)


#: The argument names of Elastic(...), the names a task field maps back to.
_ELASTIC_ARGUMENTS = tuple(f.name for f in fields(Elastic) if f.init)
reject_unknown_keywords(Elastic)

# flytekit's task plugin table (elastic_idl.flytekit._register): a plugin registers its config type
# when it loads; with flytekit imported later, flytekit's entry point into elastic-idl does it.
if sys.modules.get("flytekit") is not None:
    from elastic_idl.flytekit._register import register

    register(Elastic)

# Flyte 2's task plugin table (elastic_idl.flyte2._register): with flyte imported already, Elastic is
# registered there too (Flyte 2 has no entry points; loading elastic_idl.flyte2.Elastic does it otherwise).
if sys.modules.get("flyte") is not None:
    from elastic_idl.flyte2._register import register_all

    register_all()
