"""validate / violations: every rule has an invalid case, and valid tasks pass."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

import elastic_idl as ei
from elastic_idl._errors import MAX_ERROR_CHARS
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from elastic_idl._task.validate import RULES


def kubeflow(**elastic: Any) -> KubeflowTask:
    t = KubeflowTask()
    e = t.elastic_config
    e.rdzv_backend = "c10d"
    e.min_replicas, e.max_replicas, e.nproc_per_node = 1, 2, 2
    for key, value in elastic.items():
        if isinstance(value, Duration):
            getattr(e, key).CopyFrom(value)
        else:
            setattr(e, key, value)
    t.worker_replicas.replicas = e.max_replicas
    return t


def legacy(workers: int = 2, **elastic: Any) -> LegacyTask:
    t = LegacyTask(workers=workers)
    t.elastic_config.CopyFrom(kubeflow(**elastic).elastic_config)
    return t


def d(seconds: int, nanos: int = 0) -> Duration:
    return Duration(seconds=seconds, nanos=nanos)


def _with(fn: Callable[[KubeflowTask], None], base: KubeflowTask | None = None) -> KubeflowTask:
    t = base if base is not None else kubeflow()
    fn(t)
    return t


def _opt(*pairs: tuple[str, str]) -> KubeflowTask:
    t = kubeflow()
    for k, v in pairs:
        t.elastic_config.rdzv_options.add(key=k, value=v)
    return t


# (case id, task, rule id, field path)
INVALID: list[tuple[str, Any, str, str]] = [
    ("min0", kubeflow(min_replicas=0), "elastic.min_replicas.min", "elastic_config.min_replicas"),
    ("min_gt_max", kubeflow(min_replicas=3, max_replicas=2), "elastic.min_le_max", "elastic_config.max_replicas"),
    ("nproc0", kubeflow(nproc_per_node=0), "elastic.nproc.min", "elastic_config.nproc_per_node"),
    ("nproc_neg", kubeflow(nproc_per_node=-1), "elastic.nproc.min", "elastic_config.nproc_per_node"),
    ("nproc_conflict", kubeflow(nproc_policy=1), "elastic.nproc.conflict", "elastic_config.nproc_per_node"),
    ("restarts_neg", kubeflow(max_restarts=-1), "elastic.max_restarts.min", "elastic_config.max_restarts"),
    ("backend", kubeflow(rdzv_backend="zookeeper"), "elastic.rdzv_backend.known", "elastic_config.rdzv_backend"),
    (
        "static",
        kubeflow(rdzv_backend="static", max_replicas=3),
        "elastic.static.fixed_size",
        "elastic_config.rdzv_backend",
    ),
    ("join0", kubeflow(join_timeout=d(0)), "elastic.duration.positive", "elastic_config.join_timeout"),
    (
        "join_fraction",
        kubeflow(join_timeout=d(1, 500_000_000)),
        "elastic.duration.whole_seconds",
        "elastic_config.join_timeout",
    ),
    ("read_neg", kubeflow(read_timeout=d(-5)), "elastic.duration.positive", "elastic_config.read_timeout"),
    ("last_call0", kubeflow(last_call_timeout=d(0)), "elastic.duration.positive", "elastic_config.last_call_timeout"),
    ("close0", kubeflow(close_timeout=d(0)), "elastic.duration.positive", "elastic_config.close_timeout"),
    ("shutdown0", kubeflow(shutdown_timeout=d(0)), "elastic.duration.positive", "elastic_config.shutdown_timeout"),
    ("monitor0", kubeflow(monitor_interval=d(0)), "elastic.duration.positive", "elastic_config.monitor_interval"),
    ("duration_mixed", kubeflow(join_timeout=d(5, -1)), "elastic.duration.valid", "elastic_config.join_timeout"),
    ("duration_huge", kubeflow(close_timeout=d(10**12)), "elastic.duration.valid", "elastic_config.close_timeout"),
    (
        "monitor_big",
        kubeflow(monitor_interval=d(3601)),
        "elastic.monitor_interval.max",
        "elastic_config.monitor_interval",
    ),
    ("start_method", kubeflow(start_method=99), "enum.known", "elastic_config.start_method"),
    (
        "collective_big",
        kubeflow(collective_timeout=d(86400, 1000)),
        "elastic.failure_timeout.max",
        "elastic_config.collective_timeout",
    ),
    (
        "heartbeat_big",
        kubeflow(nccl_heartbeat_timeout=d(86401)),
        "elastic.failure_timeout.max",
        "elastic_config.nccl_heartbeat_timeout",
    ),
    (
        "collective0",
        kubeflow(collective_timeout=d(0)),
        "elastic.duration.positive",
        "elastic_config.collective_timeout",
    ),
    (
        "heartbeat_neg",
        kubeflow(nccl_heartbeat_timeout=d(-1)),
        "elastic.duration.positive",
        "elastic_config.nccl_heartbeat_timeout",
    ),
    (
        "cas_backoff_neg",
        kubeflow(cas_backoff_max_seconds=d(-1)),
        "elastic.duration.non_negative",
        "elastic_config.cas_backoff_max_seconds",
    ),
    (
        "cas_backoff_neg_nanos",
        kubeflow(cas_backoff_max_seconds=d(0, -1)),
        "elastic.duration.non_negative",
        "elastic_config.cas_backoff_max_seconds",
    ),
    (
        "cas_backoff_mixed_signs",
        kubeflow(cas_backoff_max_seconds=d(1, -1)),
        "elastic.duration.valid",
        "elastic_config.cas_backoff_max_seconds",
    ),
    (
        "opt_cas_backoff",
        _opt(("cas_backoff_max_seconds", "2")),
        "elastic.rdzv_options.typed",
        "elastic_config.rdzv_options[0].key",
    ),
    ("async_errors", kubeflow(nccl_async_error_handling=3), "enum.known", "elastic_config.nccl_async_error_handling"),
    ("monitoring", kubeflow(nccl_enable_monitoring=-1), "enum.known", "elastic_config.nccl_enable_monitoring"),
    ("nproc_policy", kubeflow(nproc_per_node=0, nproc_policy=7), "enum.known", "elastic_config.nproc_policy"),
    ("opt_key_empty", _opt(("", "1")), "elastic.rdzv_options.key", "elastic_config.rdzv_options[0].key"),
    ("opt_key_eq", _opt(("a=b", "1")), "elastic.rdzv_options.key", "elastic_config.rdzv_options[0].key"),
    ("opt_value_comma", _opt(("is_host", "1,2")), "elastic.rdzv_options.value", "elastic_config.rdzv_options[0].value"),
    ("opt_dup", _opt(("k", "1"), ("k", "2")), "elastic.rdzv_options.unique", "elastic_config.rdzv_options[1].key"),
    ("opt_typed", _opt(("join_timeout", "5")), "elastic.rdzv_options.typed", "elastic_config.rdzv_options[0].key"),
    ("rdzv_id", kubeflow(rdzv_id="has space"), "elastic.rdzv_id.format", "elastic_config.rdzv_id"),
    ("rdzv_host", kubeflow(rdzv_host="a b"), "elastic.rdzv_host.format", "elastic_config.rdzv_host"),
    ("rdzv_port", kubeflow(rdzv_port=70000), "elastic.rdzv_port.range", "elastic_config.rdzv_port"),
    (
        "ranks",
        _with(lambda t: t.elastic_config.local_ranks_filter.extend([0, 2])),
        "elastic.local_ranks_filter.range",
        "elastic_config.local_ranks_filter",
    ),
    (
        "signals",
        _with(lambda t: t.elastic_config.signals_to_handle.append("SIGNOPE")),
        "elastic.signals.known",
        "elastic_config.signals_to_handle",
    ),
    ("workers_neg", legacy(workers=-1), "replicas.non_negative", "workers"),
    ("workers_mismatch", legacy(workers=5), "replicas.worker_matches_max", "workers"),
    (
        "kf_workers_mismatch",
        _with(lambda t: setattr(t.worker_replicas, "replicas", 7)),
        "replicas.worker_matches_max",
        "worker_replicas.replicas",
    ),
    (
        "common_mismatch",
        _with(lambda t: setattr(t.worker_replicas.common, "replicas", 3)),
        "replicas.worker_matches_max",
        "worker_replicas.common.replicas",
    ),
    (
        "master2",
        _with(lambda t: setattr(t.master_replicas.common, "replicas", 2)),
        "replicas.master_count",
        "master_replicas.common.replicas",
    ),
    (
        "deprecated_conflict",
        _with(
            lambda t: (
                setattr(t.worker_replicas.common, "replicas", 2),
                setattr(t.worker_replicas, "image", "a"),
                setattr(t.worker_replicas.common, "image", "b"),
            )
        ),
        "replicas.deprecated_conflict",
        "worker_replicas.image",
    ),
    (
        "restart_policy",
        _with(lambda t: setattr(t.worker_replicas.common, "restart_policy", 9)),
        "enum.known",
        "worker_replicas.common.restart_policy",
    ),
    (
        "resource_unknown",
        _with(lambda t: t.worker_replicas.common.resources.limits.add(name=0, value="1")),
        "resources.entry",
        "worker_replicas.common.resources.limits[0].name",
    ),
    (
        "resource_empty",
        _with(lambda t: t.worker_replicas.resources.requests.add(name=1, value="")),
        "resources.entry",
        "worker_replicas.resources.requests[0].value",
    ),
    (
        "resource_quantity",
        _with(lambda t: t.worker_replicas.resources.limits.add(name=2, value="1.5")),
        "resources.quantity",
        "worker_replicas.resources.limits[0].value",
    ),
    (
        "clean_pod",
        _with(lambda t: setattr(t.run_policy, "clean_pod_policy", 5)),
        "enum.known",
        "run_policy.clean_pod_policy",
    ),
    (
        "run_policy_neg",
        _with(lambda t: setattr(t.run_policy, "backoff_limit", -1)),
        "run_policy.non_negative",
        "run_policy.backoff_limit",
    ),
    ("tee", kubeflow(tee=8), "enum.known", "elastic_config.tee"),
    # What the renderer refuses is invalid: an empty task, no workers, an image with whitespace.
    ("empty_kubeflow", KubeflowTask(), "task.not_empty", ""),
    ("empty_legacy", LegacyTask(), "task.not_empty", ""),
    (
        "no_workers_master_only",
        _with(lambda t: t.master_replicas.SetInParent(), KubeflowTask()),
        "replicas.workers_required",
        "worker_replicas.replicas",
    ),
    ("no_workers_legacy", LegacyTask(workers=0), "replicas.workers_required", "workers"),
    (
        "no_workers_common",
        _with(lambda t: setattr(t.worker_replicas.common, "image", "train:1"), KubeflowTask()),
        "replicas.workers_required",
        "worker_replicas.common.replicas",
    ),
    (
        "image_space",
        _with(lambda t: setattr(t.worker_replicas, "image", "train: 1")),
        "replicas.image.format",
        "worker_replicas.image",
    ),
    (
        "image_newline_master",
        _with(lambda t: setattr(t.master_replicas.common, "image", "train:1\n")),
        "replicas.image.format",
        "master_replicas.common.image",
    ),
]

# Rules that no task can break on its own: they are about the launch context.
CONTEXT_RULES = {"launch.elastic_required", "env.rdzv_conf"}


@pytest.mark.parametrize(("task", "rule", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_case_is_rejected_with_its_rule(task: Any, rule: str, field: str) -> None:
    found = ei.violations(task)
    assert (field, rule) in [(v.field, v.rule) for v in found], found
    with pytest.raises(ei.ValidationError) as info:
        ei.validate(task)
    assert info.value.violations == tuple(found)
    assert isinstance(info.value, ValueError)


def test_every_rule_has_an_invalid_case() -> None:
    covered = {c[2] for c in INVALID} | CONTEXT_RULES
    assert covered == set(RULES)


VALID: list[tuple[str, Any]] = [
    ("minimal", kubeflow()),
    ("empty_backend_is_c10d", kubeflow(rdzv_backend="")),
    ("etcd", kubeflow(rdzv_backend="etcd-v2")),
    ("static_fixed", kubeflow(rdzv_backend="static", min_replicas=2, max_replicas=2)),
    ("policy_auto", kubeflow(nproc_per_node=0, nproc_policy=1)),
    (
        "all_timeouts",
        kubeflow(
            join_timeout=d(900),
            last_call_timeout=d(1),
            close_timeout=d(30),
            read_timeout=d(60),
            monitor_interval=d(3600),
            shutdown_timeout=d(5),
        ),
    ),
    ("options", _opt(("is_host", "1"), ("heartbeat_timeout", "a=b"), ("timeout", "900"))),
    ("int32_max", kubeflow(max_replicas=2**31 - 1, nproc_per_node=2**31 - 1, max_restarts=2**31 - 1)),
    ("unicode_role", kubeflow(role="trainer-é", rdzv_id="run-1", rdzv_host="::1", rdzv_port=65535)),
    ("legacy_zero_workers", legacy(workers=0)),
    ("legacy_no_elastic", LegacyTask(workers=3)),
    ("kubeflow_no_elastic", _with(lambda t: setattr(t.worker_replicas, "replicas", 2), KubeflowTask())),
    ("image", _with(lambda t: setattr(t.worker_replicas, "image", "ghcr.io/acme/train@sha256:0a1b"))),
    ("master_one", _with(lambda t: setattr(t.master_replicas, "replicas", 1))),
    (
        "common_wins",
        _with(lambda t: (setattr(t.worker_replicas, "replicas", 0), setattr(t.worker_replicas.common, "replicas", 2))),
    ),
    ("signals", _with(lambda t: t.elastic_config.signals_to_handle.extend(["SIGTERM", "SIGUSR1"]))),
    ("ranks", _with(lambda t: t.elastic_config.local_ranks_filter.extend([0, 1]))),
    # torch 2.15 reads a float >= 0: a fraction and 0 (no delay, its default) are values.
    ("cas_backoff_fraction", kubeflow(cas_backoff_max_seconds=d(0, 250_000_000))),
    ("cas_backoff_zero", kubeflow(cas_backoff_max_seconds=d(0))),
    ("cas_backoff_large", kubeflow(cas_backoff_max_seconds=d(86400 * 365))),
    # torch substitutes its macros with string.Template's safe_substitute: anything else stays as written.
    ("template_macros", kubeflow(log_line_prefix_template="${hostname}:${rank}|${local_rank}|$role_name ")),
    ("template_unknown_macro", kubeflow(log_line_prefix_template="${node}|")),
    ("template_unterminated", kubeflow(log_line_prefix_template="${rank|$")),
    ("template_unicode", kubeflow(log_line_prefix_template="rang ${rank} → ")),
]


@pytest.mark.parametrize("task", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_case_passes(task: Any) -> None:
    assert ei.violations(task) == []
    ei.validate(task)


def test_all_violations_reported_at_once() -> None:
    t = kubeflow(min_replicas=0, nproc_per_node=0, max_restarts=-1, rdzv_backend="x")
    rules = [v.rule for v in ei.violations(t)]
    assert rules == [
        "elastic.min_replicas.min",
        "elastic.nproc.min",
        "elastic.max_restarts.min",
        "elastic.rdzv_backend.known",
    ]
    text = str(ei.ValidationError(ei.violations(t)))
    assert text.startswith("4 violations:") and "elastic_config.min_replicas: elastic.min_replicas.min:" in text


# betterproto maps google.protobuf.Duration to datetime.timedelta: it loses the
# presence of an explicitly set zero duration ("0 s" comes back as "unset") and
# normalises a mixed-sign Duration into a valid one. Both change the bytes.
BETTERPROTO_REWRITES_DURATION = {
    "join0",
    "last_call0",
    "close0",
    "shutdown0",
    "monitor0",
    "duration_mixed",
    "collective0",
    "cas_backoff_neg_nanos",  # -1 ns: a timedelta holds microseconds, so it comes back as an explicit 0, dropped
    "cas_backoff_mixed_signs",
}


def test_betterproto_task_gives_the_same_violations() -> None:
    from elastic_idl.betterproto.plugins.kubeflow.v1 import DistributedPyTorchTrainingTask as BpTask
    from elastic_idl.betterproto.plugins.v1 import DistributedPyTorchTrainingTask as BpLegacy

    for name, task, rule, field in INVALID:
        cls = BpLegacy if isinstance(task, LegacyTask) else BpTask
        bp = cls().parse(task.SerializeToString())
        if name in BETTERPROTO_REWRITES_DURATION:
            assert bytes(bp) != task.SerializeToString()
            assert (field, rule) not in [(v.field, v.rule) for v in ei.violations(bp)]
        else:
            assert ei.violations(bp) == ei.violations(task), name


def test_validate_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PET_NNODES", "9:1")
    monkeypatch.setenv("PET_NPROC_PER_NODE", "0")
    assert ei.violations(kubeflow()) == []


def test_validate_does_not_import_torch() -> None:
    import subprocess

    code = "import sys, elastic_idl as ei; from elastic_idl._task.messages import KubeflowTask; ei.violations(KubeflowTask()); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- issue #9: Kubernetes quantities


def _resources_task(requests: list[tuple[int, str]], limits: list[tuple[int, str]]) -> Any:
    def fill(t: Any) -> None:
        for name, value in requests:
            t.worker_replicas.resources.requests.add(name=name, value=value)
        for name, value in limits:
            t.worker_replicas.resources.limits.add(name=name, value=value)

    return _with(fill)


CPU, GPU, MEMORY = 1, 2, 3


@pytest.mark.parametrize(
    ("requests", "limits", "fields"),
    [
        ([(GPU, "x")], [], ["requests[0]"]),  # not a quantity
        ([(CPU, "-1")], [], ["requests[0]"]),  # negative
        ([(MEMORY, "4Gi ")], [], ["requests[0]"]),  # surrounding whitespace
        ([(MEMORY, " 4Gi")], [], ["requests[0]"]),
        ([], [(GPU, "1.5")], ["limits[0]"]),  # a GPU is whole
        ([(CPU, "2")], [(CPU, "1")], ["requests[0]"]),  # request above its limit
        ([(GPU, "1")], [(GPU, "2")], ["requests[0]"]),  # GPU request and limit differ
        ([(CPU, "1"), (CPU, "3")], [(CPU, "2")], ["requests[1]"]),  # the last value of a name counts
        ([(CPU, "1K"), (MEMORY, "1e1.5")], [(CPU, "-0.1n")], ["requests[0]", "requests[1]", "limits[0]"]),
    ],
)
def test_quantities_the_api_server_refuses_are_violations(
    requests: list[tuple[int, str]], limits: list[tuple[int, str]], fields: list[str]
) -> None:
    found = ei.violations(_resources_task(requests, limits))
    assert [(v.field, v.rule) for v in found] == [
        (f"worker_replicas.resources.{f}.value", "resources.quantity") for f in fields
    ]


@pytest.mark.parametrize(
    ("requests", "limits"),
    [
        ([(CPU, "500m"), (MEMORY, "1Gi"), (GPU, "1")], [(CPU, "1"), (MEMORY, "1024Mi"), (GPU, "1000m")]),
        ([(CPU, ".5"), (MEMORY, "+1.")], [(CPU, "5e-1"), (MEMORY, "1E3")]),
        ([(GPU, "2")], []),  # a GPU request alone is not refused here (see _resources.py)
        ([(CPU, "0")], [(CPU, "0")]),
        ([(MEMORY, "1e2147483647")], []),  # int32 exponent
    ],
)
def test_quantities_the_api_server_accepts_are_valid(
    requests: list[tuple[int, str]], limits: list[tuple[int, str]]
) -> None:
    assert ei.violations(_resources_task(requests, limits)) == []


def test_the_empty_task_and_no_workers_are_what_render_refuses() -> None:
    """validate rejects every task whose content the renderer refuses (issue #9)."""
    master_only = _with(lambda t: t.master_replicas.SetInParent(), KubeflowTask())
    for task, version in ((KubeflowTask(), 1), (LegacyTask(), 0), (LegacyTask(workers=0), 0), (master_only, 1)):
        assert ei.violations(task), task
        with pytest.raises(ei.ValidationError) as info:
            ei.render_pytorchjob(
                task, ei.JobOptions(name="j", image="i", entrypoint=["t.py"]), task_type_version=version
            )
        assert info.value.violations == tuple(ei.violations(task))
    empty = ei.violations(KubeflowTask())
    assert [(v.field, v.rule) for v in empty] == [
        ("", "task.not_empty"),
        ("worker_replicas.replicas", "replicas.workers_required"),
    ]
    assert str(empty[0]).startswith("task.not_empty: the task is empty")
    # A negative count is replicas.non_negative only; workers_required is about 0.
    assert [v.rule for v in ei.violations(LegacyTask(workers=-1))] == ["replicas.non_negative"]


def test_violation_messages_are_bounded() -> None:
    t = kubeflow(rdzv_id="x" * 100_000, rdzv_host="h " * 50_000)
    t.elastic_config.local_ranks_filter.extend(range(-1, 100_000))
    t.elastic_config.rdzv_options.add(key="k,\n" * 10_000, value="v")
    found = ei.violations(t)
    assert {v.rule for v in found} >= {"elastic.rdzv_id.format", "elastic.rdzv_host.format", "elastic.rdzv_options.key"}
    for v in found:
        assert len(v.message) <= MAX_ERROR_CHARS and "\n" not in str(v), v.rule


def test_validation_error_lists_a_bounded_number_of_violations() -> None:
    t = kubeflow()
    for _ in range(500):
        t.elastic_config.rdzv_options.add(key="", value="v")
    err = ei.ValidationError(ei.violations(t))
    assert len(err.violations) == 500
    lines = str(err).splitlines()
    assert lines[0] == "500 violations:" and lines[-1] == "  ... and 480 more violations"
    assert len(lines) == 1 + 20 + 1


def test_upstream_flyteidl_messages_are_validated_by_their_bytes() -> None:
    from flyteidl.plugins import pytorch_pb2 as up_legacy
    from flyteidl.plugins.kubeflow import pytorch_pb2 as up_kubeflow

    up = up_kubeflow.DistributedPyTorchTrainingTask()
    up.worker_replicas.replicas = 3
    up.elastic_config.min_replicas, up.elastic_config.max_replicas = 3, 2
    ours = ei.decode(up.SerializeToString(), format="binary")
    assert ei.violations(up) == ei.violations(ours) and ei.violations(up)
    assert ei.violations(up_legacy.DistributedPyTorchTrainingTask(workers=2)) == []


@pytest.mark.parametrize(
    "name",
    [
        "join_timeout",
        "last_call_timeout",
        "close_timeout",
        "read_timeout",
        "shutdown_timeout",
        "nccl_heartbeat_timeout",
    ],
)
def test_a_fractional_timeout_breaks_only_the_whole_seconds_rule(name: str) -> None:
    found = ei.violations(kubeflow(**{name: d(0, 500_000_000)}))
    assert [(v.field, v.rule) for v in found] == [(f"elastic_config.{name}", "elastic.duration.whole_seconds")]
    assert ei.violations(kubeflow(**{name: d(2)})) == []
    # An invalid or non-positive duration gets only that rule, not this one as well.
    assert [v.rule for v in ei.violations(kubeflow(**{name: d(-1, -500_000_000)}))] == ["elastic.duration.positive"]


def test_the_failure_timeouts_are_bounded_at_24_hours_and_the_collective_timeout_may_be_fractional() -> None:
    assert ei.violations(kubeflow(collective_timeout=d(86400), nccl_heartbeat_timeout=d(86400))) == []
    assert ei.violations(kubeflow(collective_timeout=d(2, 500_000_000))) == []
    found = ei.violations(kubeflow(collective_timeout=d(86401), nccl_heartbeat_timeout=d(90000)))
    assert [(v.field, v.rule) for v in found] == [
        ("elastic_config.collective_timeout", "elastic.failure_timeout.max"),
        ("elastic_config.nccl_heartbeat_timeout", "elastic.failure_timeout.max"),
    ]
    # A fractional heartbeat over the bound breaks only the whole-seconds rule (one rule per field).
    found = ei.violations(kubeflow(nccl_heartbeat_timeout=d(90000, 1)))
    assert [v.rule for v in found] == ["elastic.duration.whole_seconds"]


def test_the_monitor_interval_may_be_fractional() -> None:
    assert ei.violations(kubeflow(monitor_interval=d(0, 1))) == []
