"""Validation: every rule, with a stable id, checked all at once. Pure."""

from __future__ import annotations

import re
from typing import Any

from google.protobuf.duration_pb2 import Duration

from elastic_idl._errors import ValidationError, Violation, brief
from elastic_idl._task.enums import K8S_RESOURCE
from elastic_idl._task.messages import Resources
from elastic_idl._task.names import (
    DURATION_FIELDS,
    FAILURE_TIMEOUTS,
    KNOWN_BACKENDS,
    MAX_DURATION_S,
    MAX_FAILURE_TIMEOUT_S,
    MAX_MONITOR_INTERVAL_S,
    MAX_RDZV_NAME_LEN,
    NON_NEGATIVE_DURATIONS,
    RDZV_TYPED,
    SIGNAL_NAMES,
    STATIC,
    WHOLE_SECONDS,
    is_rdzv_id_text,
)
from elastic_idl._task.resources import quantity_problems
from elastic_idl._task.view import ElasticValues, Replica, TaskView, message_of, of, values_of
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.v1 import elastic_pb2

__all__ = ["RULES", "check", "validate", "violations"]

#: rule id -> what the rule requires. Docs and tests read this table.
RULES: dict[str, str] = {
    "elastic.min_replicas.min": "min_replicas >= 1",
    "elastic.min_le_max": "min_replicas <= max_replicas",
    "elastic.nproc.min": "nproc_per_node >= 1 unless nproc_policy is auto, cpu or gpu",
    "elastic.nproc.conflict": "nproc_per_node must be 0 when nproc_policy is set",
    "elastic.max_restarts.min": "max_restarts >= 0",
    "elastic.rdzv_backend.known": "rdzv_backend is one of '' (c10d), c10d, etcd, etcd-v2, static",
    "elastic.static.fixed_size": "the static backend requires min_replicas == max_replicas",
    "elastic.duration.positive": "every timeout and interval is > 0",
    "elastic.duration.non_negative": "cas_backoff_max_seconds is >= 0 (0 is torch's default: no delay)",
    "elastic.duration.valid": "a Duration has seconds and nanos of one sign, |nanos| < 1e9, |seconds| <= 315576000000",
    "elastic.duration.whole_seconds": "join/last_call/close/read_timeout, shutdown_timeout and nccl_heartbeat_timeout "
    "are whole seconds (torch reads them as integers)",
    "elastic.monitor_interval.max": f"monitor_interval <= {MAX_MONITOR_INTERVAL_S} s",
    "elastic.failure_timeout.max": f"collective_timeout and nccl_heartbeat_timeout are <= {MAX_FAILURE_TIMEOUT_S} s "
    "(24 h)",
    "enum.known": "an enum field holds a value the schema defines",
    "elastic.rdzv_options.key": "an rdzv option key is non-empty and has no ',' or '='",
    "elastic.rdzv_options.value": "an rdzv option value has no ','",
    "elastic.rdzv_options.unique": "rdzv option keys are unique",
    "elastic.rdzv_options.typed": "join/last_call/close/read timeouts and cas_backoff_max_seconds use their typed "
    "fields, not rdzv_options",
    "elastic.rdzv_id.format": f"rdzv_id is printable ASCII without spaces or ',', at most {MAX_RDZV_NAME_LEN} chars",
    "elastic.rdzv_host.format": f"rdzv_host has no whitespace, ',' or '/', at most {MAX_RDZV_NAME_LEN} chars",
    "elastic.rdzv_port.range": "rdzv_port is in 0..65535 (0 = runtime's choice)",
    "elastic.local_ranks_filter.range": "local_ranks_filter entries are >= 0, unique and < nproc_per_node",
    "elastic.signals.known": "signals_to_handle holds unique known signal names (SIGTERM, ...)",
    "task.not_empty": "the task sets at least one field: its binary form is not empty (an empty file, {} or null is no task)",
    "replicas.non_negative": "a replica count is >= 0",
    "replicas.workers_required": "without an elastic config, the worker count is not 0 (the job has at least 1 worker)",
    "replicas.image.format": "a replica image, when set, has no whitespace",
    "replicas.worker_matches_max": "with an elastic config, the worker count is 0 or max_replicas",
    "replicas.master_count": "the master replica spec is absent or has exactly 1 replica",
    "replicas.deprecated_conflict": "when `common` is set, the deprecated replica fields are unset or equal",
    "resources.entry": "a resource entry names a known resource and has a non-empty value",
    "resources.quantity": "a resource value is a Kubernetes quantity without spaces, >= 0, a whole number for GPU; "
    "a request is <= its limit, and equal to it for GPU (elastic_idl._task.resources has the grammar)",
    "run_policy.non_negative": "run policy seconds and backoff limit are >= 0",
    "launch.elastic_required": "a launch (run, torchrun, the pod) needs an elastic config; a limit of launching, not of validity",
    "env.rdzv_conf": "PET_RDZV_CONF is a comma-separated list of key=value",
}


def _v(field: str, rule: str, message: str) -> Violation:
    assert rule in RULES, rule  # internal consistency, not user input
    return Violation(field, rule, message)


#: enum type name -> the numbers it defines, built once (``EnumTypeWrapper.values()`` builds a list per call).
_ENUM_VALUES: dict[str, frozenset[int]] = {
    e.DESCRIPTOR.name: frozenset(e.values())
    for e in (
        elastic_pb2.NprocPolicy,
        elastic_pb2.StartMethod,
        elastic_pb2.StdStreams,
        elastic_pb2.NumaBinding,
        elastic_pb2.Toggle,
        common_pb2.RestartPolicy,
        common_pb2.CleanPodPolicy,
    )
}
_RESOURCE_NAMES = frozenset(Resources.ResourceName.values())
_K8S_TEXT = dict(K8S_RESOURCE.text)  # a dict reads faster than the table's read-only proxy


# The rules append to one list (no generator per rule: the rules run on every task of every path).
_NPROC_POLICIES = _ENUM_VALUES[elastic_pb2.NprocPolicy.DESCRIPTOR.name]
_START_METHODS = _ENUM_VALUES[elastic_pb2.StartMethod.DESCRIPTOR.name]
_STD_STREAMS = _ENUM_VALUES[elastic_pb2.StdStreams.DESCRIPTOR.name]
_NUMA_BINDINGS = _ENUM_VALUES[elastic_pb2.NumaBinding.DESCRIPTOR.name]
_TOGGLES = _ENUM_VALUES[elastic_pb2.Toggle.DESCRIPTOR.name]
_RESTART_POLICIES = _ENUM_VALUES[common_pb2.RestartPolicy.DESCRIPTOR.name]
_CLEAN_POD_POLICIES = _ENUM_VALUES[common_pb2.CleanPodPolicy.DESCRIPTOR.name]
_P = "elastic_config"
#: Where ElasticValues holds the Durations, and what it holds there when none is set.
_DURATION_SLICE = slice(
    ElasticValues._fields.index(DURATION_FIELDS[0]), ElasticValues._fields.index(DURATION_FIELDS[-1]) + 1
)
_NO_DURATIONS = (None,) * len(DURATION_FIELDS)
#: Duration field -> (its position in ElasticValues, its path, whether it must be whole seconds, whether 0 is a
#: value), in field order.
_DURATIONS = tuple(
    (ElasticValues._fields.index(name), f"{_P}.{name}", name in WHOLE_SECONDS, name in NON_NEGATIVE_DURATIONS)
    for name in DURATION_FIELDS
)
#: The bounded failure-detection timeouts as (position in ElasticValues, path), in field order.
_FAILURE_TIMEOUTS = tuple((ElasticValues._fields.index(name), f"{_P}.{name}") for name in FAILURE_TIMEOUTS)
_SPACE = re.compile(r"\s")
_BAD_HOST = re.compile(r"[\s,/]")
_SIGNALS = frozenset(SIGNAL_NAMES)
_TIMEOUT_KEYS = frozenset(RDZV_TYPED)
_RUN_POLICY_INTS = tuple(
    (name, f"run_policy.{name}") for name in ("ttl_seconds_after_finished", "active_deadline_seconds", "backoff_limit")
)


def _enum(out: list[Violation], field: str, value: int, enum: Any) -> None:
    """enum.known for a value already found outside the enum's set."""
    out.append(_v(field, "enum.known", f"{value} is not a value of {enum.DESCRIPTOR.name}"))


def _duration(out: list[Violation], field: str, d: Duration, whole: bool, zero: bool = False) -> bool:
    """The Duration rules of one field (``zero``: 0 is a value of it); whether ``d`` passed them."""
    seconds, nanos = d.seconds, d.nanos
    if (
        abs(nanos) >= 1_000_000_000
        or abs(seconds) > MAX_DURATION_S
        or (seconds > 0 and nanos < 0)
        or (seconds < 0 and nanos > 0)
    ):
        out.append(_v(field, "elastic.duration.valid", f"invalid Duration seconds={seconds} nanos={nanos}"))
    elif zero and (seconds < 0 or nanos < 0):
        out.append(_v(field, "elastic.duration.non_negative", f"must be >= 0, got {seconds + nanos / 1e9:g} s"))
    elif not zero and (seconds < 0 or (seconds == 0 and nanos <= 0)):
        out.append(_v(field, "elastic.duration.positive", f"must be > 0, got {seconds + nanos / 1e9:g} s"))
    elif nanos and whole:
        out.append(
            _v(
                field,
                "elastic.duration.whole_seconds",
                f"must be whole seconds (torch reads it as an integer), got {seconds + nanos / 1e9:g} s",
            )
        )
    else:
        return True
    return False


def _counts(out: list[Violation], e: ElasticValues) -> None:
    """Replica range, processes per node, restarts."""
    lo, hi = e.min_replicas, e.max_replicas
    if lo < 1:
        out.append(_v(f"{_P}.min_replicas", "elastic.min_replicas.min", f"must be >= 1, got {lo}"))
    if lo > hi:
        out.append(_v(f"{_P}.max_replicas", "elastic.min_le_max", f"max_replicas {hi} is below min_replicas {lo}"))
    policy, nproc = e.nproc_policy, e.nproc_per_node
    if policy not in _NPROC_POLICIES:
        _enum(out, f"{_P}.nproc_policy", policy, elastic_pb2.NprocPolicy)
    if policy:
        if nproc != 0:
            out.append(
                _v(
                    f"{_P}.nproc_per_node",
                    "elastic.nproc.conflict",
                    f"is {nproc} but nproc_policy is set; use one of the two",
                )
            )
    elif nproc < 1:
        out.append(
            _v(
                f"{_P}.nproc_per_node",
                "elastic.nproc.min",
                f"must be >= 1 (or set nproc_policy auto/cpu/gpu), got {nproc}",
            )
        )
    if e.max_restarts < 0:
        out.append(_v(f"{_P}.max_restarts", "elastic.max_restarts.min", f"must be >= 0, got {e.max_restarts}"))


def _backend(out: list[Violation], e: ElasticValues) -> None:
    backend = e.effective_backend()
    if backend not in KNOWN_BACKENDS:
        out.append(
            _v(
                f"{_P}.rdzv_backend",
                "elastic.rdzv_backend.known",
                f"{brief(e.rdzv_backend)} is not one of {', '.join(KNOWN_BACKENDS)}",
            )
        )
    elif backend == STATIC and e.min_replicas != e.max_replicas:
        out.append(
            _v(
                f"{_P}.rdzv_backend",
                "elastic.static.fixed_size",
                f"static needs min_replicas == max_replicas, got {e.min_replicas}:{e.max_replicas}",
            )
        )


def _durations(out: list[Violation], e: ElasticValues) -> None:
    row: Any = e  # indexed by position: the type checker sees the union of every field's type
    passed = set()
    for at, field, whole, zero in _DURATIONS:
        d = row[at]
        if d is not None and _duration(out, field, d, whole, zero):
            passed.add(at)
    for at, field in _FAILURE_TIMEOUTS:
        d = row[at]
        if at in passed and (d.seconds > MAX_FAILURE_TIMEOUT_S or (d.seconds == MAX_FAILURE_TIMEOUT_S and d.nanos)):
            out.append(_v(field, "elastic.failure_timeout.max", f"must be <= {MAX_FAILURE_TIMEOUT_S} s (24 h)"))
    mi = e.monitor_interval
    if (
        mi is not None
        and mi.seconds >= MAX_MONITOR_INTERVAL_S
        and (mi.seconds > MAX_MONITOR_INTERVAL_S or mi.nanos > 0)
    ):
        out.append(
            _v(f"{_P}.monitor_interval", "elastic.monitor_interval.max", f"must be <= {MAX_MONITOR_INTERVAL_S} s")
        )


def _process_enums(out: list[Violation], e: ElasticValues) -> None:
    if e.start_method not in _START_METHODS:
        _enum(out, f"{_P}.start_method", e.start_method, elastic_pb2.StartMethod)
    if e.redirects not in _STD_STREAMS:
        _enum(out, f"{_P}.redirects", e.redirects, elastic_pb2.StdStreams)
    if e.tee not in _STD_STREAMS:
        _enum(out, f"{_P}.tee", e.tee, elastic_pb2.StdStreams)
    if e.numa_binding not in _NUMA_BINDINGS:
        _enum(out, f"{_P}.numa_binding", e.numa_binding, elastic_pb2.NumaBinding)
    if e.nccl_async_error_handling not in _TOGGLES:
        _enum(out, f"{_P}.nccl_async_error_handling", e.nccl_async_error_handling, elastic_pb2.Toggle)
    if e.nccl_enable_monitoring not in _TOGGLES:
        _enum(out, f"{_P}.nccl_enable_monitoring", e.nccl_enable_monitoring, elastic_pb2.Toggle)


def _rdzv_options(out: list[Violation], e: ElasticValues) -> None:
    seen: set[str] = set()
    for i, (key, value) in enumerate(e.rdzv_options):
        f = f"{_P}.rdzv_options[{i}]"
        if not key or "," in key or "=" in key:
            out.append(_v(f"{f}.key", "elastic.rdzv_options.key", f"bad key {brief(key)}: non-empty, no ',' or '='"))
        elif key in _TIMEOUT_KEYS:
            out.append(
                _v(
                    f"{f}.key",
                    "elastic.rdzv_options.typed",
                    f"{brief(key)} has a typed field: set elastic_config.{key} instead",
                )
            )
        elif key in seen:
            out.append(_v(f"{f}.key", "elastic.rdzv_options.unique", f"duplicate key {brief(key)}"))
        seen.add(key)
        if "," in value:
            out.append(_v(f"{f}.value", "elastic.rdzv_options.value", f"value {brief(value)} contains ','"))


def _rendezvous_names(out: list[Violation], e: ElasticValues) -> None:
    rid = e.rdzv_id
    if rid and (len(rid) > MAX_RDZV_NAME_LEN or not is_rdzv_id_text(rid)):
        out.append(
            _v(
                f"{_P}.rdzv_id",
                "elastic.rdzv_id.format",
                f"bad rdzv_id {brief(rid)}: {RULES['elastic.rdzv_id.format']}",
            )
        )
    host = e.rdzv_host
    if host and (len(host) > MAX_RDZV_NAME_LEN or _BAD_HOST.search(host)):
        out.append(_v(f"{_P}.rdzv_host", "elastic.rdzv_host.format", f"bad rdzv_host {brief(host)}"))
    if not 0 <= e.rdzv_port <= 65535:
        out.append(_v(f"{_P}.rdzv_port", "elastic.rdzv_port.range", f"must be in 0..65535, got {e.rdzv_port}"))


def _ranks_and_signals(out: list[Violation], e: ElasticValues) -> None:
    ranks = e.local_ranks_filter
    if ranks:
        nproc = e.nproc_per_node
        bad = [r for r in ranks if r < 0 or (nproc > 0 and r >= nproc)]
        if bad or len(set(ranks)) != len(ranks):
            out.append(
                _v(
                    f"{_P}.local_ranks_filter",
                    "elastic.local_ranks_filter.range",
                    f"{brief(list(ranks))}: entries must be unique, >= 0 and < nproc_per_node",
                )
            )
    names = e.signals_to_handle
    if names:
        unknown = [n for n in names if n not in _SIGNALS]
        if unknown or len(set(names)) != len(names):
            out.append(
                _v(
                    f"{_P}.signals_to_handle",
                    "elastic.signals.known",
                    f"{brief(list(names))}: names must be unique signal names such as SIGTERM (unknown: {brief(unknown)})",
                )
            )


def _elastic(out: list[Violation], e: ElasticValues) -> None:
    """The elastic config's rules, in named steps (the order of the violations is stable).

    A step about fields a config rarely sets runs only when it sets one of them.
    """
    row: Any = e
    _counts(out, e)
    _backend(out, e)
    if row[_DURATION_SLICE] != _NO_DURATIONS:
        _durations(out, e)
    _process_enums(out, e)
    if e.rdzv_options:
        _rdzv_options(out, e)
    _rendezvous_names(out, e)
    if e.local_ranks_filter or e.signals_to_handle:
        _ranks_and_signals(out, e)


def _resources(out: list[Violation], path: str, res: Resources) -> None:
    pairs: dict[str, list[tuple[str, str]]] = {}
    text = _K8S_TEXT
    for kind in ("requests", "limits"):
        entries = [(e.name, e.value) for e in getattr(res, kind)]  # each entry read once
        for i, (name, value) in enumerate(entries):
            if name == 0 or name not in _RESOURCE_NAMES:
                out.append(_v(f"{path}.{kind}[{i}].name", "resources.entry", f"unknown resource name {name}"))
            if not value:
                out.append(_v(f"{path}.{kind}[{i}].value", "resources.entry", "empty quantity"))
        pairs[kind] = [(text.get(name, ""), value) for name, value in entries]
    # As the API server checks them once the backend has rendered the pod (GPU -> nvidia.com/gpu).
    for p in quantity_problems(pairs["requests"], pairs["limits"]):
        out.append(_v(f"{path}.{p.kind}[{p.entry}].value", "resources.quantity", p.message))


def _replica(out: list[Violation], r: Replica, t: TaskView, is_master: bool) -> None:
    n = r.replicas
    if n < 0:
        out.append(_v(r.replicas_path, "replicas.non_negative", f"must be >= 0, got {n}"))
    if not is_master and t.elastic is None and n == 0:
        # The backend refuses such a job (upstream: "number of workers must be greater than 0").
        out.append(
            _v(
                r.replicas_path,
                "replicas.workers_required",
                "a task without an elastic config runs as Master + Workers and needs at least 1 worker; "
                "set the worker replicas, or an elastic_config",
            )
        )
    if r.spec_path:
        if r.image and _SPACE.search(r.image):
            out.append(
                _v(f"{r.spec_path}.image", "replicas.image.format", f"{brief(r.image)} is not an image reference")
            )
        if r.restart_policy not in _RESTART_POLICIES:
            _enum(out, f"{r.spec_path}.restart_policy", r.restart_policy, common_pb2.RestartPolicy)
        if r.resources is not None:
            _resources(out, f"{r.spec_path}.resources", r.resources)
    if is_master:
        if n != 1:
            out.append(
                _v(r.replicas_path, "replicas.master_count", f"must be exactly 1 when the master is set, got {n}")
            )
    elif t.elastic is not None and n != 0 and n != t.elastic.max_replicas:
        out.append(
            _v(
                r.replicas_path,
                "replicas.worker_matches_max",
                f"{n} worker replicas but elastic_config.max_replicas is {t.elastic.max_replicas}",
            )
        )


def _deprecated_conflict(out: list[Violation], task: Any, r: Replica | None) -> None:
    """replicas.deprecated_conflict for a replica spec that sets `common` (the view read it from there)."""
    if r is None or r.spec_path == r.path:  # no spec, or no `common`: nothing to conflict with
        return
    path = r.path
    spec = getattr(task, path)
    c = spec.common
    for name in ("replicas", "image", "restart_policy"):
        old, new = getattr(spec, name), getattr(c, name)
        if old and old != new:
            out.append(
                _v(
                    f"{path}.{name}",
                    "replicas.deprecated_conflict",
                    f"deprecated {name}={brief(old)} differs from common.{name}={brief(new)}; common wins, so drop one",
                )
            )
    if spec.HasField("resources") and spec.resources != c.resources:
        out.append(
            _v(
                f"{path}.resources",
                "replicas.deprecated_conflict",
                "deprecated resources differ from common.resources; common wins, so drop one",
            )
        )


def _run_policy(out: list[Violation], rp: Any) -> None:
    if rp.clean_pod_policy not in _CLEAN_POD_POLICIES:
        _enum(out, "run_policy.clean_pod_policy", rp.clean_pod_policy, common_pb2.CleanPodPolicy)
    for name, field in _RUN_POLICY_INTS:
        value = getattr(rp, name)
        if value < 0:
            out.append(_v(field, "run_policy.non_negative", f"must be >= 0, got {value}"))


def check(t: TaskView) -> list[Violation]:
    """Run every rule on ``t``, in a stable order. Pure; `violations` runs it once per value."""
    pb: Any = message_of(t)
    out: list[Violation] = []
    if t.elastic is None and pb.ByteSize() == 0:  # a set elastic_config alone takes 2 bytes
        out.append(
            _v(
                "",
                "task.not_empty",
                "the task is empty (no field is set: an empty file, {} or null?); "
                "a task needs an elastic_config or worker replicas",
            )
        )
    values = values_of(t)
    if values is not None:
        _elastic(out, values)
    _replica(out, t.worker, t, is_master=False)
    if t.master is not None:
        _replica(out, t.master, t, is_master=True)
    if t.task_type_version == 1:
        _deprecated_conflict(out, pb, t.worker)
        _deprecated_conflict(out, pb, t.master)
        if t.run_policy is not None:
            _run_policy(out, t.run_policy)
    return out


def violations(task: Any, *, task_type_version: int = 1) -> list[Violation]:
    """Every rule ``task`` breaks, in a stable order; empty when it is valid.

    Accepts anything `elastic_idl.view` takes (a TaskView, a message of either shape and
    binding or of upstream flyteidl, serialized data or a custom dict of the shape
    ``task_type_version`` names), converted once. The rules run once per TaskView: a view
    checked before is answered from the value. Pure: no torch, no environment.
    """
    return list(of(task, task_type_version=task_type_version).rule_violations(check))


def validate(task: Any, *, task_type_version: int = 1) -> None:
    """Raise `ValidationError` listing every broken rule; return None when ``task`` is valid.

    ``task`` and ``task_type_version``: as for `violations` (rules run once per TaskView).
    """
    found = of(task, task_type_version=task_type_version).rule_violations(check)
    if found:
        raise ValidationError(list(found))
