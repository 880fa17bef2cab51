"""The arguments Elastic(...) and a torchrun command line share, parsed once, and the task they make.

Each parser reads a value as torchrun (or flytekit) does and reports a bad one to a
`Problems`, naming the argument, so every bad argument is reported at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from google.protobuf.duration_pb2 import Duration

from elastic_idl._errors import Violation, reject_unknown_keywords
from elastic_idl._task.enums import NPROC_POLICY, SDK_RESOURCE, CleanPodPolicy
from elastic_idl._task.messages import ElasticConfig, KubeflowTask
from elastic_idl._task.names import INT32, MAX_DURATION_S, RDZV_TYPED

__all__ = [
    "Problems",
    "RunPolicy",
    "duration_of",
    "duration_text",
    "int32",
    "is_int",
    "parse_nnodes",
    "parse_nproc",
    "seconds_value",
    "split_rdzv",
    "task_of",
]


@dataclass(frozen=True, kw_only=True)
class RunPolicy:
    """Job-level policy of the PyTorchJob, like flytekit's ``RunPolicy`` (``spec.runPolicy``).

    Attributes:
        clean_pod_policy: Which pods are deleted when the job finishes; None leaves it to the operator.
        ttl_seconds_after_finished: Seconds before a finished job is deleted; None: never.
        active_deadline_seconds: Seconds the job may run; None: no limit.
        backoff_limit: Retries before the job is marked failed; None: the operator's default.
    """

    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None


reject_unknown_keywords(RunPolicy)


class Problems:
    """Collects argument violations, so one ValidationError names every bad argument."""

    def __init__(self) -> None:
        self.found: list[Violation] = []

    def add(self, argument: str, message: str, rule: str = "sdk.argument") -> None:
        v = Violation(argument, rule, message)
        if v not in self.found:  # "nnodes" 2**31 is out of range twice (min and max): say it once
            self.found.append(v)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int32(value: object, argument: str, problems: Problems) -> int:
    """An int32 argument: an int, or its text as ``int()`` reads it (torchrun's reading), like ``nnodes="2"``."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            pass
    if not is_int(value):
        problems.add(argument, f"expected an integer, got {type(value).__name__} {value!r}")
        return 0
    assert isinstance(value, int)
    if not INT32[0] <= value <= INT32[1]:
        problems.add(argument, f"{value} does not fit the message (int32)")
        return 0
    return value


def duration_of(value: object, argument: str, problems: Problems) -> Duration | None:
    """A number of seconds (int, float, Decimal or numeric str) or a timedelta as an exact Duration, or a problem."""
    if isinstance(value, timedelta):
        # Exact: a timedelta is whole days, seconds and microseconds.
        value = Decimal(value.days * 86400 + value.seconds) + Decimal(value.microseconds) / 1_000_000
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        problems.add(argument, f"expected a number of seconds, got {type(value).__name__} {value!r}")
        return None
    try:
        # str() of a float is its shortest repr, so 0.1 becomes exactly 0.1 s, not 0.1000000000000000055 s.
        number = Decimal(value if isinstance(value, (Decimal, int)) else str(value).strip())
    except InvalidOperation:
        problems.add(argument, f"expected a number of seconds, got {value!r}")
        return None
    if not number.is_finite() or abs(number) > MAX_DURATION_S:
        problems.add(argument, f"{value!r} is not a finite number of seconds within ±{MAX_DURATION_S}")
        return None
    nanos_total = int((number * 1_000_000_000).to_integral_value())
    seconds, nanos = divmod(abs(nanos_total), 1_000_000_000)
    sign = -1 if nanos_total < 0 else 1
    return Duration(seconds=sign * seconds, nanos=sign * nanos)


def seconds_value(d: Duration) -> int | float | Decimal:
    """A Duration as the number of seconds ``duration_of`` reads back to it: an int when whole, else a
    float when one is exact enough, else a Decimal (nanoseconds a float cannot hold)."""
    if d.nanos == 0:
        return int(d.seconds)
    exact = Decimal(duration_text(d))
    as_float = float(exact)
    return as_float if duration_of(as_float, "", Problems()) == d else exact


def duration_text(d: Duration) -> str:
    """A Duration as an exact decimal number of seconds: "0.1", "900", "1.000000001"."""
    total = Decimal(d.seconds) + Decimal(d.nanos) / Decimal(1_000_000_000)
    text = format(total, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_nnodes(value: object, argument: str = "nnodes") -> tuple[int, int, bool]:
    """``N`` or ``"MIN:MAX"`` -> (min, max, given as one number), like torch's parse_min_max_nnodes.

    Raises:
        ValueError: Not an int, nor a string of one or two integers separated by ":".
    """
    if is_int(value):
        assert isinstance(value, int)
        return value, value, True
    if not isinstance(value, str):
        raise ValueError(f'{argument}: expected N or "MIN:MAX", got {type(value).__name__} {value!r}')
    parts = value.split(":")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f'{argument}: {value!r} is not N or "MIN:MAX" (integers)') from None
    if len(numbers) == 1:
        return numbers[0], numbers[0], True
    if len(numbers) == 2:
        return numbers[0], numbers[1], False
    raise ValueError(f'{argument}: {value!r} is not N or "MIN:MAX"')


def parse_nproc(value: object, argument: str = "nproc_per_node") -> tuple[int, int]:
    """An int, a decimal string, or "auto" / "cpu" / "gpu" -> (nproc_per_node, NprocPolicy number).

    Raises:
        ValueError: Anything else (torch's "xpu" and custom device names included: the schema has no policy for them).
    """
    if is_int(value):
        assert isinstance(value, int)
        return value, 0
    if isinstance(value, str):
        if value in NPROC_POLICY.number:
            return 0, NPROC_POLICY.number[value]
        try:
            return int(value), 0
        except ValueError:
            pass
    raise ValueError(
        f"{argument}: expected an integer or one of {', '.join(NPROC_POLICY.names)}, got {type(value).__name__} {value!r}"
    )


def split_rdzv(
    items: Iterable[tuple[str, Any]],
    config: ElasticConfig,
    argument: str,
    problems: Problems,
) -> None:
    """Put rendezvous settings on ``config``: typed ones (timeouts, cas_backoff_max_seconds) as Durations, every
    other key as an option."""
    for key, value in items:
        if key in RDZV_TYPED:
            d = duration_of(value, f"{argument}.{key}", problems)
            if d is not None:
                getattr(config, key).CopyFrom(d)
            continue
        if isinstance(value, bool):
            text = "1" if value else "0"  # torch's get_as_bool reads "1"/"0"
        elif isinstance(value, (str, int, float, Decimal)):
            text = str(value)
        else:
            problems.add(f"{argument}.{key}", f"expected a string or a number, got {type(value).__name__} {value!r}")
            continue
        config.rdzv_options.add(key=key, value=text)


def task_of(config: ElasticConfig, replica: Mapping[str, Any] | None, run_policy: RunPolicy | None) -> KubeflowTask:
    """The kubeflow task flytekit emits for an elastic config (plus replica settings and run policy).

    Worker replicas = max nodes, in the deprecated ``replicas`` field, as flytekit 1.16 writes
    it. Replica settings go in the deprecated fields too, as flytekit's ``PyTorch`` task
    writes them: every backend version reads those (new ones when ``common`` is unset).
    """
    task = KubeflowTask()
    task.elastic_config.CopyFrom(config)
    worker = task.worker_replicas
    worker.replicas = config.max_replicas
    if replica:
        if replica.get("image"):
            worker.image = replica["image"]
        for kind in ("requests", "limits"):
            for key, quantity in (replica.get(kind) or {}).items():
                getattr(worker.resources, kind).add(name=SDK_RESOURCE.number[key], value=quantity)
        if replica.get("requests") is not None or replica.get("limits") is not None:
            worker.resources.SetInParent()
        if replica.get("restart_policy") is not None:
            worker.restart_policy = cast(Any, replica["restart_policy"].value)
    if run_policy is not None:
        rp = task.run_policy
        rp.SetInParent()
        if run_policy.clean_pod_policy is not None:
            rp.clean_pod_policy = cast(Any, run_policy.clean_pod_policy.value)
        rp.ttl_seconds_after_finished = run_policy.ttl_seconds_after_finished or 0
        rp.active_deadline_seconds = run_policy.active_deadline_seconds or 0
        rp.backoff_limit = run_policy.backoff_limit or 0
    return task
