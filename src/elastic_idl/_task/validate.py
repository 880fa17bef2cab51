"""Validation: every rule, with a stable id, checked all at once. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf.duration_pb2 import Duration

from elastic_idl._errors import ValidationError, Violation, brief
from elastic_idl._task.enums import K8S_RESOURCE
from elastic_idl._task.messages import ElasticConfig, Resources
from elastic_idl._task.names import (
    DEFAULT_RDZV_BACKEND,
    DURATION_FIELDS,
    KNOWN_BACKENDS,
    MAX_DURATION_S,
    MAX_MONITOR_INTERVAL_S,
    MAX_RDZV_NAME_LEN,
    RDZV_TIMEOUTS,
    SIGNAL_NAMES,
    STATIC,
    WHOLE_SECONDS,
)
from elastic_idl._task.resources import quantity_problems
from elastic_idl._task.view import Replica, TaskView, message_of, of
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
    "elastic.duration.valid": "a Duration has seconds and nanos of one sign, |nanos| < 1e9, |seconds| <= 315576000000",
    "elastic.duration.whole_seconds": "join/last_call/close/read_timeout and shutdown_timeout are whole seconds "
    "(torch reads them as integers)",
    "elastic.monitor_interval.max": f"monitor_interval <= {MAX_MONITOR_INTERVAL_S} s",
    "enum.known": "an enum field holds a value the schema defines",
    "elastic.rdzv_options.key": "an rdzv option key is non-empty and has no ',' or '='",
    "elastic.rdzv_options.value": "an rdzv option value has no ','",
    "elastic.rdzv_options.unique": "rdzv option keys are unique",
    "elastic.rdzv_options.typed": "join/last_call/close/read timeouts use their typed fields, not rdzv_options",
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
        common_pb2.RestartPolicy,
        common_pb2.CleanPodPolicy,
    )
}
_RESOURCE_NAMES = frozenset(Resources.ResourceName.values())


def _enum(field: str, value: int, enum: Any) -> Iterator[Violation]:
    name = enum.DESCRIPTOR.name
    if value not in _ENUM_VALUES[name]:
        yield _v(field, "enum.known", f"{value} is not a value of {name}")


def _duration(field: str, msg: Any, d: Duration) -> Iterator[Violation]:
    name = field.rsplit(".", 1)[-1]
    if not msg.HasField(name):
        return
    if (
        abs(d.nanos) >= 1_000_000_000
        or abs(d.seconds) > MAX_DURATION_S
        or (d.seconds > 0 and d.nanos < 0)
        or (d.seconds < 0 and d.nanos > 0)
    ):
        yield _v(field, "elastic.duration.valid", f"invalid Duration seconds={d.seconds} nanos={d.nanos}")
        return
    if d.seconds < 0 or (d.seconds == 0 and d.nanos <= 0):
        yield _v(field, "elastic.duration.positive", f"must be > 0, got {d.seconds + d.nanos / 1e9:g} s")
    elif d.nanos and name in WHOLE_SECONDS:
        yield _v(
            field,
            "elastic.duration.whole_seconds",
            f"must be whole seconds (torch reads it as an integer), got {d.seconds + d.nanos / 1e9:g} s",
        )


def _elastic(e: ElasticConfig) -> Iterator[Violation]:
    p = "elastic_config"
    if e.min_replicas < 1:
        yield _v(f"{p}.min_replicas", "elastic.min_replicas.min", f"must be >= 1, got {e.min_replicas}")
    if e.min_replicas > e.max_replicas:
        yield _v(
            f"{p}.max_replicas",
            "elastic.min_le_max",
            f"max_replicas {e.max_replicas} is below min_replicas {e.min_replicas}",
        )
    yield from _enum(f"{p}.nproc_policy", e.nproc_policy, elastic_pb2.NprocPolicy)
    if e.nproc_policy:
        if e.nproc_per_node != 0:
            yield _v(
                f"{p}.nproc_per_node",
                "elastic.nproc.conflict",
                f"is {e.nproc_per_node} but nproc_policy is set; use one of the two",
            )
    elif e.nproc_per_node < 1:
        yield _v(
            f"{p}.nproc_per_node",
            "elastic.nproc.min",
            f"must be >= 1 (or set nproc_policy auto/cpu/gpu), got {e.nproc_per_node}",
        )
    if e.max_restarts < 0:
        yield _v(f"{p}.max_restarts", "elastic.max_restarts.min", f"must be >= 0, got {e.max_restarts}")
    backend = e.rdzv_backend or DEFAULT_RDZV_BACKEND
    if backend not in KNOWN_BACKENDS:
        yield _v(
            f"{p}.rdzv_backend",
            "elastic.rdzv_backend.known",
            f"{brief(e.rdzv_backend)} is not one of {', '.join(KNOWN_BACKENDS)}",
        )
    elif backend == STATIC and e.min_replicas != e.max_replicas:
        yield _v(
            f"{p}.rdzv_backend",
            "elastic.static.fixed_size",
            f"static needs min_replicas == max_replicas, got {e.min_replicas}:{e.max_replicas}",
        )
    for name in DURATION_FIELDS:
        yield from _duration(f"{p}.{name}", e, getattr(e, name))
    if (
        e.HasField("monitor_interval")
        and e.monitor_interval.seconds >= MAX_MONITOR_INTERVAL_S
        and (e.monitor_interval.seconds > MAX_MONITOR_INTERVAL_S or e.monitor_interval.nanos > 0)
    ):
        yield _v(f"{p}.monitor_interval", "elastic.monitor_interval.max", f"must be <= {MAX_MONITOR_INTERVAL_S} s")
    yield from _enum(f"{p}.start_method", e.start_method, elastic_pb2.StartMethod)
    yield from _enum(f"{p}.redirects", e.redirects, elastic_pb2.StdStreams)
    yield from _enum(f"{p}.tee", e.tee, elastic_pb2.StdStreams)
    yield from _enum(f"{p}.numa_binding", e.numa_binding, elastic_pb2.NumaBinding)
    seen: set[str] = set()
    for i, opt in enumerate(e.rdzv_options):
        f = f"{p}.rdzv_options[{i}]"
        if not opt.key or "," in opt.key or "=" in opt.key:
            yield _v(f"{f}.key", "elastic.rdzv_options.key", f"bad key {brief(opt.key)}: non-empty, no ',' or '='")
        elif opt.key in RDZV_TIMEOUTS:
            yield _v(
                f"{f}.key",
                "elastic.rdzv_options.typed",
                f"{brief(opt.key)} has a typed field: set elastic_config.{opt.key} instead",
            )
        elif opt.key in seen:
            yield _v(f"{f}.key", "elastic.rdzv_options.unique", f"duplicate key {brief(opt.key)}")
        seen.add(opt.key)
        if "," in opt.value:
            yield _v(f"{f}.value", "elastic.rdzv_options.value", f"value {brief(opt.value)} contains ','")
    rid = e.rdzv_id
    if rid and (len(rid) > MAX_RDZV_NAME_LEN or not all(33 <= ord(c) < 127 for c in rid) or "," in rid):
        yield _v(
            f"{p}.rdzv_id", "elastic.rdzv_id.format", f"bad rdzv_id {brief(rid)}: {RULES['elastic.rdzv_id.format']}"
        )
    host = e.rdzv_host
    if host and (len(host) > MAX_RDZV_NAME_LEN or any(c.isspace() or c in ",/" for c in host)):
        yield _v(f"{p}.rdzv_host", "elastic.rdzv_host.format", f"bad rdzv_host {brief(host)}")
    if not 0 <= e.rdzv_port <= 65535:
        yield _v(f"{p}.rdzv_port", "elastic.rdzv_port.range", f"must be in 0..65535, got {e.rdzv_port}")
    ranks = list(e.local_ranks_filter)
    bad = [r for r in ranks if r < 0 or (e.nproc_per_node > 0 and r >= e.nproc_per_node)]
    if bad or len(set(ranks)) != len(ranks):
        yield _v(
            f"{p}.local_ranks_filter",
            "elastic.local_ranks_filter.range",
            f"{brief(ranks)}: entries must be unique, >= 0 and < nproc_per_node",
        )
    names = list(e.signals_to_handle)
    unknown = [n for n in names if n not in SIGNAL_NAMES]
    if unknown or len(set(names)) != len(names):
        yield _v(
            f"{p}.signals_to_handle",
            "elastic.signals.known",
            f"{brief(names)}: names must be unique signal names such as SIGTERM (unknown: {brief(unknown)})",
        )


def _resources(path: str, res: Resources | None) -> Iterator[Violation]:
    if res is None:
        return
    for kind in ("requests", "limits"):
        for i, entry in enumerate(getattr(res, kind)):
            f = f"{path}.{kind}[{i}]"
            if entry.name == 0 or entry.name not in _RESOURCE_NAMES:
                yield _v(f"{f}.name", "resources.entry", f"unknown resource name {entry.name}")
            if not entry.value:
                yield _v(f"{f}.value", "resources.entry", "empty quantity")
    # As the API server checks them once the backend has rendered the pod (GPU -> nvidia.com/gpu).
    pairs = {k: [(K8S_RESOURCE.text.get(e.name, ""), e.value) for e in getattr(res, k)] for k in ("requests", "limits")}
    for p in quantity_problems(pairs["requests"], pairs["limits"]):
        yield _v(f"{path}.{p.kind}[{p.entry}].value", "resources.quantity", p.message)


def _replica(r: Replica, t: TaskView, is_master: bool) -> Iterator[Violation]:
    if r.replicas < 0:
        yield _v(r.replicas_path, "replicas.non_negative", f"must be >= 0, got {r.replicas}")
    if not is_master and t.elastic is None and r.replicas == 0:
        # The backend refuses such a job (upstream: "number of workers must be greater than 0").
        yield _v(
            r.replicas_path,
            "replicas.workers_required",
            "a task without an elastic config runs as Master + Workers and needs at least 1 worker; "
            "set the worker replicas, or an elastic_config",
        )
    if r.spec_path:
        if r.image and any(c.isspace() for c in r.image):
            yield _v(f"{r.spec_path}.image", "replicas.image.format", f"{brief(r.image)} is not an image reference")
        yield from _enum(f"{r.spec_path}.restart_policy", r.restart_policy, common_pb2.RestartPolicy)
        yield from _resources(f"{r.spec_path}.resources", r.resources)
    if is_master:
        if r.replicas != 1:
            yield _v(
                r.replicas_path, "replicas.master_count", f"must be exactly 1 when the master is set, got {r.replicas}"
            )
    elif t.elastic is not None and r.replicas not in (0, t.elastic.max_replicas):
        yield _v(
            r.replicas_path,
            "replicas.worker_matches_max",
            f"{r.replicas} worker replicas but elastic_config.max_replicas is {t.elastic.max_replicas}",
        )


def _deprecated_conflict(task: Any, path: str) -> Iterator[Violation]:
    spec = getattr(task, path)
    if not task.HasField(path) or not spec.HasField("common"):
        return
    c = spec.common
    for name in ("replicas", "image", "restart_policy"):
        old, new = getattr(spec, name), getattr(c, name)
        if old and old != new:
            yield _v(
                f"{path}.{name}",
                "replicas.deprecated_conflict",
                f"deprecated {name}={brief(old)} differs from common.{name}={brief(new)}; common wins, so drop one",
            )
    if spec.HasField("resources") and spec.resources != c.resources:
        yield _v(
            f"{path}.resources",
            "replicas.deprecated_conflict",
            "deprecated resources differ from common.resources; common wins, so drop one",
        )


def check(t: TaskView) -> list[Violation]:
    """Run every rule on ``t``, in a stable order. Pure; :func:`violations` runs it once per value."""
    pb: Any = message_of(t)
    out: list[Violation] = []
    if pb.ByteSize() == 0:
        out.append(
            _v(
                "",
                "task.not_empty",
                "the task is empty (no field is set: an empty file, {} or null?); "
                "a task needs an elastic_config or worker replicas",
            )
        )
    if t.elastic is not None:
        out.extend(_elastic(t.elastic))
    out.extend(_replica(t.worker, t, is_master=False))
    if t.master is not None:
        out.extend(_replica(t.master, t, is_master=True))
    if t.task_type_version == 1:
        for path in ("worker_replicas", "master_replicas"):
            out.extend(_deprecated_conflict(pb, path))
        rp = t.run_policy
        if rp is not None:
            out.extend(_enum("run_policy.clean_pod_policy", rp.clean_pod_policy, common_pb2.CleanPodPolicy))
            for name in ("ttl_seconds_after_finished", "active_deadline_seconds", "backoff_limit"):
                value = getattr(rp, name)
                if value < 0:
                    out.append(_v(f"run_policy.{name}", "run_policy.non_negative", f"must be >= 0, got {value}"))
    return out


def violations(task: Any, *, task_type_version: int = 1) -> list[Violation]:
    """Every rule ``task`` breaks, in a stable order; empty when it is valid.

    Accepts anything :func:`elastic_idl.view` takes (a TaskView, a message of either shape and
    binding or of upstream flyteidl, serialized data or a custom dict of the shape
    ``task_type_version`` names), converted once. The rules run once per TaskView: a view
    checked before is answered from the value. Pure: no torch, no environment.
    """
    return list(of(task, task_type_version=task_type_version).rule_violations(check))


def validate(task: Any, *, task_type_version: int = 1) -> None:
    """Raise :class:`ValidationError` listing every broken rule; return None when ``task`` is valid.

    ``task`` and ``task_type_version``: as for :func:`violations` (rules run once per TaskView).
    """
    found = violations(task, task_type_version=task_type_version)
    if found:
        raise ValidationError(found)
