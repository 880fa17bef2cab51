"""Elastic(...), the SDK config: arguments -> task, validation at construction, custom dict both ways."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import given
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl._sdk.arguments import RunPolicy
from elastic_idl._sdk.elastic import SDK_RULES, Elastic
from elastic_idl._task.codec import CustomTemplate, from_custom
from elastic_idl._task.enums import CleanPodPolicy, RestartPolicy
from elastic_idl._task.messages import KubeflowTask, LegacyTask, Resources
from elastic_idl._task.messages import RunPolicy as RunPolicyMessage
from elastic_idl._task.view import view
from strategies import arbitrary_tasks, elastic_kwargs, valid_tasks

#: REFERENCE §2: what flytekit 1.16 emits for Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2).
FLYTEKIT_EXAMPLE_CUSTOM = {
    "elasticConfig": {"maxReplicas": 3, "maxRestarts": 2, "minReplicas": 1, "nprocPerNode": 4, "rdzvBackend": "c10d"},
    "workerReplicas": {"replicas": 3},
}
FLYTEKIT_EXAMPLE_HEX = "0a020803220e0a04633130641001180320042802"


def rules_of(exc: ei.ValidationError) -> list[tuple[str, str]]:
    return [(v.field, v.rule) for v in exc.violations]


def kubeflow_task(**elastic: Any) -> KubeflowTask:
    """A kubeflow task as flytekit writes it (worker replicas = max), elastic fields set as given."""
    t = KubeflowTask()
    e = t.elastic_config
    e.rdzv_backend = "c10d"
    for key, value in elastic.items():
        if isinstance(value, Duration):
            getattr(e, key).CopyFrom(value)
        else:
            setattr(e, key, value)
    t.worker_replicas.replicas = e.max_replicas
    return t


# ---------------------------------------------------------------- defaults and the flytekit form


def test_defaults_are_flytekits_with_the_documented_exceptions() -> None:
    cfg = Elastic()
    assert (cfg.nnodes, cfg.nproc_per_node, cfg.max_restarts, cfg.run_policy) == (1, 1, 0, None)
    assert cfg.increase_shared_mem is True
    # Unset on the wire: the launcher's defaults (spawn, as flytekit; 0.1 s, not flytekit's 5 s).
    assert (cfg.start_method, cfg.monitor_interval) == (None, None)
    # flytekit's {"timeout": 900, "join_timeout": 900}: c10d reads only join_timeout.
    assert dict(cfg.rdzv_configs) == {"join_timeout": 900}
    assert cfg.to_template() == CustomTemplate(None, "python-task", 1)
    assert cfg.to_task() == kubeflow_task(
        min_replicas=1, max_replicas=1, nproc_per_node=1, join_timeout=Duration(seconds=900)
    )


def test_to_custom_is_the_deprecated_name_of_to_template() -> None:
    cfg = Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2, rdzv_configs={})
    with pytest.warns(
        DeprecationWarning, match=r"Elastic\.to_custom\(\) is deprecated .*Elastic\.to_template\(\)"
    ) as got:
        old = cfg.to_custom(upstream=True)
    assert got[0].filename == __file__  # the warning points at the caller
    assert old == cfg.to_template(upstream=True) == (FLYTEKIT_EXAMPLE_CUSTOM, "pytorch", 1)


def test_reference_example_is_byte_for_byte_flytekits() -> None:
    cfg = Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2, rdzv_configs={})
    custom, task_type, version = cfg.to_template()
    assert (custom, task_type, version) == (FLYTEKIT_EXAMPLE_CUSTOM, "pytorch", 1)
    assert cfg.to_template(upstream=True).custom == FLYTEKIT_EXAMPLE_CUSTOM
    assert cfg.to_task().SerializeToString(deterministic=True).hex() == FLYTEKIT_EXAMPLE_HEX


def test_default_rdzv_configs_ride_along_as_an_extension() -> None:
    cfg = Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2)
    custom = cfg.to_template().custom
    assert custom == {
        **FLYTEKIT_EXAMPLE_CUSTOM,
        "elasticConfig": {**FLYTEKIT_EXAMPLE_CUSTOM["elasticConfig"], "joinTimeout": "900s"},
    }
    with pytest.raises(ei.SkewError) as info:
        cfg.to_template(upstream=True)
    assert info.value.fields == ("elastic_config.join_timeout",)
    with pytest.warns(ei.SkewWarning, match="join_timeout"):
        assert cfg.to_template(upstream=True, allow_loss=True).custom == FLYTEKIT_EXAMPLE_CUSTOM


@pytest.mark.parametrize(
    ("nnodes", "task_type", "lo", "hi"),
    [
        (1, "python-task", 1, 1),
        ("1", "python-task", 1, 1),  # flytekit: a one-worker PyTorchJob (see docs/guide/sdk-config.md)
        ("1:1", "pytorch", 1, 1),
        (2, "pytorch", 2, 2),
        ("2", "pytorch", 2, 2),
        ("2:4", "pytorch", 2, 4),
        ("1:100", "pytorch", 1, 100),
    ],
    ids=repr,
)
def test_nnodes_forms(nnodes: int | str, task_type: str, lo: int, hi: int) -> None:
    cfg = Elastic(nnodes=nnodes, rdzv_configs={})
    assert cfg.task_type == task_type
    task = cfg.to_task()
    assert (task.elastic_config.min_replicas, task.elastic_config.max_replicas) == (lo, hi)
    assert task.worker_replicas.replicas == hi  # flytekit: max nodes, in the deprecated field
    custom, got_type, version = cfg.to_template()
    assert (got_type, version) == (task_type, 1)
    if task_type == "python-task":
        assert custom is None
    else:
        assert custom == ei.to_custom(task)


@pytest.mark.parametrize(
    ("nproc", "number", "policy"),
    [(4, 4, 0), ("4", 4, 0), ("auto", 0, 1), ("cpu", 0, 2), ("gpu", 0, 3)],
    ids=repr,
)
def test_nproc_per_node_forms(nproc: int | str, number: int, policy: int) -> None:
    e = Elastic(nnodes=2, nproc_per_node=nproc).to_task().elastic_config
    assert (e.nproc_per_node, e.nproc_policy) == (number, policy)


def test_every_extension_argument_lands_in_its_field() -> None:
    cfg = Elastic(
        nnodes="2:4",
        start_method="forkserver",
        monitor_interval=0.1,
        shutdown_timeout=3,
        rdzv_backend="etcd-v2",
        rdzv_id="job-1",
        rdzv_host="::1",
        rdzv_port=29400,
        role="trainer",
        redirects="all",
        tee=2,
        local_ranks_filter="0",
        numa_binding="core-complex",
        signals_to_handle="SIGTERM, SIGUSR1",
        virtual_local_rank=True,
        rdzv_configs={"last_call_timeout": 5, "read_timeout": "60", "is_host": False, "heartbeat_timeout": 10},
    )
    e = cfg.to_task().elastic_config
    assert e.start_method == 3
    assert (e.monitor_interval.seconds, e.monitor_interval.nanos) == (
        0,
        100_000_000,
    )  # exact, not 0.1000000000000000055
    assert (e.shutdown_timeout.seconds, e.shutdown_timeout.nanos) == (3, 0)
    assert (e.rdzv_backend, e.rdzv_id, e.rdzv_host, e.rdzv_port, e.role) == (
        "etcd-v2",
        "job-1",
        "::1",
        29400,
        "trainer",
    )
    assert (e.redirects, e.tee, list(e.local_ranks_filter), e.numa_binding) == (3, 2, [0], 4)
    assert list(e.signals_to_handle) == ["SIGTERM", "SIGUSR1"]
    assert e.virtual_local_rank is True
    assert (e.last_call_timeout.seconds, e.read_timeout.seconds) == (5, 60)
    assert [(o.key, o.value) for o in e.rdzv_options] == [("is_host", "0"), ("heartbeat_timeout", "10")]
    # The attributes hold what the message holds.
    assert cfg.signals_to_handle == ("SIGTERM", "SIGUSR1")
    assert cfg.local_ranks_filter == (0,)
    assert dict(cfg.rdzv_configs) == {
        "last_call_timeout": 5,
        "read_timeout": 60,
        "is_host": "0",
        "heartbeat_timeout": "10",
    }


# ---------------------------------------------------------------- rdzv_configs and flytekit's "timeout"


@pytest.mark.parametrize(
    ("backend", "configs", "join", "options"),
    [
        ("c10d", {"timeout": 900, "join_timeout": 900}, 900, []),  # flytekit's default: merged
        ("c10d", {"timeout": 1800}, 1800, []),  # flytekit waited 600 s here; we wait what was asked
        ("etcd-v2", {"timeout": 1800}, 1800, []),
        ("c10d", {"join_timeout": 60}, 60, []),
        ("c10d", {}, None, []),
        ("c10d", None, None, []),
        ("etcd", {"timeout": 1200}, None, [("timeout", "1200")]),  # etcd reads "timeout": passed through
        ("etcd", {"timeout": 1200, "join_timeout": 900}, 900, [("timeout", "1200")]),
        ("static", {"timeout": 30}, None, [("timeout", "30")]),
    ],
)
def test_flytekit_timeout_mapping(
    backend: str, configs: dict[str, Any] | None, join: int | None, options: list[tuple[str, str]]
) -> None:
    e = Elastic(nnodes=2, rdzv_backend=backend, rdzv_configs=configs).to_task().elastic_config
    assert (e.join_timeout.seconds if e.HasField("join_timeout") else None) == join
    assert [(o.key, o.value) for o in e.rdzv_options] == options


@pytest.mark.parametrize("backend", ["c10d", "etcd-v2"])
def test_timeout_that_would_be_ignored_is_an_error(backend: str) -> None:
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, rdzv_backend=backend, rdzv_configs={"timeout": 1200, "join_timeout": 900})
    assert rules_of(info.value) == [("rdzv_configs.timeout", "sdk.rdzv_timeout")]
    assert "ignores 'timeout'" in str(info.value)


def test_rdzv_configs_is_copied_and_read_only() -> None:
    given_configs = {"timeout": 900, "join_timeout": 900}
    cfg = Elastic(nnodes=2, rdzv_configs=given_configs)
    assert given_configs == {"timeout": 900, "join_timeout": 900}  # not mutated (torch's LaunchConfig does that)
    with pytest.raises(TypeError):
        cfg.rdzv_configs["join_timeout"] = 1  # type: ignore[index]


# ---------------------------------------------------------------- validation at construction


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nnodes": "x"}, "nnodes"),
        ({"nnodes": "1:2:3"}, "nnodes"),
        ({"nnodes": 1.5}, "nnodes"),
        ({"nnodes": True}, "nnodes"),
        ({"nnodes": 2**31}, "nnodes"),
        ({"nproc_per_node": "xpu"}, "nproc_per_node"),
        ({"nproc_per_node": 2.0}, "nproc_per_node"),
        ({"start_method": "thread"}, "start_method"),
        ({"start_method": ["spawn"]}, "start_method"),  # unhashable: a violation, not TypeError
        ({"numa_binding": {}}, "numa_binding"),
        ({"monitor_interval": "soon"}, "monitor_interval"),
        ({"monitor_interval": float("nan")}, "monitor_interval"),
        ({"monitor_interval": True}, "monitor_interval"),
        ({"max_restarts": "one"}, "max_restarts"),
        ({"rdzv_configs": [("join_timeout", 1)]}, "rdzv_configs"),
        ({"rdzv_configs": {1: 2}}, "rdzv_configs"),
        ({"rdzv_configs": {"k": [1]}}, "rdzv_configs.k"),
        ({"rdzv_configs": {"join_timeout": "ten"}}, "rdzv_configs.join_timeout"),
        ({"run_policy": "All"}, "run_policy"),
        ({"run_policy": {"backoff": 1}}, "run_policy"),
        ({"run_policy": {"clean_pod_policy": "sometimes"}}, "run_policy.clean_pod_policy"),
        ({"run_policy": {"backoff_limit": 1.5}}, "run_policy.backoff_limit"),
        ({"requests": {"tpu": 1}}, "requests"),
        ({"requests": {"cpu": (1, 2)}}, "requests.cpu"),
        ({"limits": {"mem": "1Gi", "memory": "2Gi"}}, "limits.memory"),
        ({"limits": "4 cpus"}, "limits"),
        ({"restart_policy": "sometimes"}, "restart_policy"),
        ({"image": 3}, "image"),
        ({"rdzv_backend": None}, "rdzv_backend"),
        ({"rdzv_port": "http"}, "rdzv_port"),
        ({"redirects": 7}, "redirects"),
        ({"tee": "both"}, "tee"),
        ({"local_ranks_filter": "0,x"}, "local_ranks_filter"),
        ({"numa_binding": "core"}, "numa_binding"),
        ({"signals_to_handle": 15}, "signals_to_handle"),
        ({"virtual_local_rank": "yes"}, "virtual_local_rank"),
        ({"increase_shared_mem": None}, "increase_shared_mem"),
    ],
)
def test_bad_argument_is_a_violation_naming_it(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ei.ValidationError) as info:
        Elastic(**kwargs)
    assert rules_of(info.value) == [(field, "sdk.argument")]
    assert isinstance(info.value, ValueError)


def test_every_bad_argument_is_reported_at_once() -> None:
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes="two", nproc_per_node="many", max_restarts=None, redirects=9)  # type: ignore[arg-type]
    assert [v.field for v in info.value.violations] == ["nnodes", "nproc_per_node", "max_restarts", "redirects"]


@pytest.mark.parametrize(
    ("kwargs", "task"),
    [
        ({"nnodes": "3:1"}, kubeflow_task(min_replicas=3, max_replicas=1, nproc_per_node=1)),
        ({"nnodes": 0}, kubeflow_task(min_replicas=0, max_replicas=0, nproc_per_node=1)),
        ({"nnodes": 2, "nproc_per_node": 0}, kubeflow_task(min_replicas=2, max_replicas=2)),
        (
            {"nnodes": 2, "max_restarts": -1},
            kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1, max_restarts=-1),
        ),
        (
            {"nnodes": 2, "rdzv_backend": "zookeeper"},
            kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1, rdzv_backend="zookeeper"),
        ),
        (
            {"nnodes": "1:2", "rdzv_backend": "static"},
            kubeflow_task(min_replicas=1, max_replicas=2, nproc_per_node=1, rdzv_backend="static"),
        ),
        (
            {"nnodes": 2, "monitor_interval": 0},
            kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1, monitor_interval=Duration()),
        ),
        (
            {"nnodes": 2, "monitor_interval": 7200},
            kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1, monitor_interval=Duration(seconds=7200)),
        ),
        (
            {"nnodes": 2, "rdzv_port": 70000, "rdzv_id": "a b"},
            kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1, rdzv_port=70000, rdzv_id="a b"),
        ),
    ],
)
def test_message_rules_are_validates_own(kwargs: dict[str, Any], task: KubeflowTask) -> None:
    expected = ei.violations(task)
    assert expected, "the case must break a rule"
    with pytest.raises(ei.ValidationError) as info:
        Elastic(rdzv_configs={}, **kwargs)
    got = info.value.violations
    # validate's rules and messages, each on the argument that set the field (the field in the message)
    assert [(v.rule, v.message) for v in got] == [(e.rule, f"{e.message} ({e.field})") for e in expected]
    assert {v.field for v in got} <= set(kwargs), got


def test_rdzv_option_rules_come_from_validate() -> None:
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, rdzv_configs={"a,b": 1, "k": "x,y", "": 1})
    assert rules_of(info.value) == [
        ("rdzv_configs['a,b']", "elastic.rdzv_options.key"),
        ("rdzv_configs.k", "elastic.rdzv_options.value"),
        ("rdzv_configs['']", "elastic.rdzv_options.key"),
    ]
    assert info.value.violations[0].message.endswith("(elastic_config.rdzv_options[0].key)")


def test_violations_name_the_argument_the_user_wrote() -> None:
    """Issue 18: Elastic(nnodes="2:1") named elastic_config.max_replicas, which the user never wrote."""
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes="2:1")
    (v,) = info.value.violations
    assert (v.field, v.rule) == ("nnodes", "elastic.min_le_max")
    assert str(v) == "nnodes: elastic.min_le_max: max_replicas 1 is below min_replicas 2 (elastic_config.max_replicas)"
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, requests={"gpu": "1.5"}, limits={"gpu": "1.5"}, run_policy={"backoff_limit": -1})
    assert {v.field.split(".")[0] for v in info.value.violations} <= {"requests", "limits", "run_policy"}, info.value
    # from_task keeps the task's paths: there the user gave a task
    with pytest.raises(ei.ValidationError, match=r"elastic_config\.max_replicas: elastic\.min_le_max"):
        Elastic.from_task(kubeflow_task(min_replicas=2, max_replicas=1, nproc_per_node=1))


@pytest.mark.parametrize(
    ("make", "typo", "suggestion"),
    [
        (lambda: Elastic(nproc_per_nodes=2), "nproc_per_nodes", "nproc_per_node"),  # type: ignore[call-arg]
        (lambda: Elastic(nnode=2), "nnode", "nnodes"),  # type: ignore[call-arg]
        (lambda: ei.RunPolicy(backoff_limt=2), "backoff_limt", "backoff_limit"),  # type: ignore[call-arg]
        (lambda: ei.JobOptions(name="j", image="i", entrypint=["t.py"]), "entrypint", "entrypoint"),  # type: ignore[call-arg]
    ],
    ids=["Elastic", "Elastic-nnodes", "RunPolicy", "JobOptions"],
)
def test_a_typo_in_an_argument_name_suggests_the_argument(make: Any, typo: str, suggestion: str) -> None:
    with pytest.raises(ei.UnknownArgumentError, match=f"did you mean '{suggestion}'") as info:
        make()
    assert isinstance(info.value, TypeError)  # as Python's own unknown-keyword error
    assert (info.value.argument, info.value.suggestion) == (typo, suggestion)
    with pytest.raises(ei.UnknownArgumentError, match=r"known: nnodes, nproc_per_node, "):
        Elastic(zzz=1)  # type: ignore[call-arg]
    with pytest.raises(ei.ValidationError, match="did you mean 'backoff_limit'"):
        Elastic(nnodes=2, run_policy={"backoff_limt": 2})


@given(arbitrary_tasks())
def test_from_task_raises_validates_violations(task: Any) -> None:
    found = ei.violations(task)
    if not found:
        return
    with pytest.raises(ei.ValidationError) as info:
        Elastic.from_task(task)
    assert list(info.value.violations) == found


def test_sdk_rule_ids_are_documented() -> None:
    assert set(SDK_RULES) == {"sdk.argument", "sdk.rdzv_timeout", "sdk.expressible"}
    assert not set(SDK_RULES) & set(ei.RULES)


# ---------------------------------------------------------------- replica settings and run policy


@dataclass
class FlytekitLikeResources:
    """Shaped like flytekit.Resources (the SDK config accepts it without importing flytekit)."""

    cpu: Any = None
    mem: Any = None
    gpu: Any = None
    ephemeral_storage: Any = None


def test_replica_settings_go_where_flytekit_writes_them() -> None:
    cfg = Elastic(
        nnodes="2:3",
        rdzv_configs={},
        image="ghcr.io/x/train:1",
        requests=FlytekitLikeResources(cpu=1, mem="1Gi", gpu=1, ephemeral_storage="10Gi"),
        limits={"memory": "2Gi", "cpu": "2", "storage": "1Ti"},
        restart_policy="OnFailure",
    )
    assert cfg.to_template().custom["workerReplicas"] == {  # type: ignore[index]
        "replicas": 3,
        "image": "ghcr.io/x/train:1",
        "resources": {
            "requests": [
                {"name": "CPU", "value": "1"},
                {"name": "MEMORY", "value": "1Gi"},
                {"name": "GPU", "value": "1"},
                {"name": "EPHEMERAL_STORAGE", "value": "10Gi"},
            ],
            "limits": [
                {"name": "MEMORY", "value": "2Gi"},
                {"name": "CPU", "value": "2"},
                {"name": "STORAGE", "value": "1Ti"},
            ],
        },
        "restartPolicy": "RESTART_POLICY_ON_FAILURE",
    }
    assert dict(cfg.requests) == {"cpu": "1", "mem": "1Gi", "gpu": "1", "ephemeral_storage": "10Gi"}
    assert cfg.restart_policy is RestartPolicy.FAILURE


@pytest.mark.parametrize("policy", ["Always", "always", RestartPolicy.ALWAYS, 2])
def test_restart_policy_spellings(policy: Any) -> None:
    assert Elastic(nnodes=2, restart_policy=policy).to_task().worker_replicas.restart_policy == 2


@dataclass
class FlytekitLikeRunPolicy:
    clean_pod_policy: Any = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None


class _FlytekitLikeEnum:
    name = "RUNNING"
    value = 1


@pytest.mark.parametrize(
    "policy",
    [
        RunPolicy(clean_pod_policy=CleanPodPolicy.RUNNING, ttl_seconds_after_finished=600, backoff_limit=3),
        {"clean_pod_policy": "Running", "ttl_seconds_after_finished": 600, "backoff_limit": 3},
        FlytekitLikeRunPolicy(clean_pod_policy=_FlytekitLikeEnum(), ttl_seconds_after_finished=600, backoff_limit=3),
        RunPolicyMessage(clean_pod_policy=1, ttl_seconds_after_finished=600, backoff_limit=3),
    ],
)
def test_run_policy_forms(policy: Any) -> None:
    cfg = Elastic(nnodes=2, rdzv_configs={}, run_policy=policy)
    assert cfg.run_policy == RunPolicy(
        clean_pod_policy=CleanPodPolicy.RUNNING, ttl_seconds_after_finished=600, backoff_limit=3
    )
    assert cfg.to_template().custom["runPolicy"] == {  # type: ignore[index]
        "cleanPodPolicy": "CLEANPOD_POLICY_RUNNING",
        "ttlSecondsAfterFinished": 600,
        "backoffLimit": 3,
    }


def test_empty_run_policy_is_written_like_flytekit() -> None:
    assert Elastic(nnodes=2, run_policy=RunPolicy()).to_template().custom["runPolicy"] == {}  # type: ignore[index]


# ---------------------------------------------------------------- from_custom and from_task


def test_from_custom_reads_flytekits_dict_and_ours() -> None:
    task = from_custom(FLYTEKIT_EXAMPLE_CUSTOM)
    assert task.SerializeToString(deterministic=True).hex() == FLYTEKIT_EXAMPLE_HEX
    cfg = Elastic(nnodes="1:3", nproc_per_node="auto", start_method="fork", run_policy={"backoff_limit": 2})
    custom, task_type, version = cfg.to_template()
    assert custom is not None
    assert from_custom(custom, task_type=task_type, task_type_version=version) == cfg.to_task()
    snake = {
        "elastic_config": {"min_replicas": 1, "max_replicas": 3, "nproc_per_node": 4.0},
        "worker_replicas": {"replicas": 3},
    }
    assert from_custom(snake).elastic_config.nproc_per_node == 4


def test_from_custom_legacy_shape() -> None:
    task = from_custom({"workers": 2, "elasticConfig": {"minReplicas": 2, "maxReplicas": 2}}, task_type_version=0)
    assert isinstance(task, LegacyTask)
    assert task.workers == 2


@pytest.mark.parametrize(
    ("custom", "task_type", "field"),
    [
        (None, "python-task", "task_type"),
        ({}, "python-task", "task_type"),
        ({"workerReplicas": {}}, "mpi", "task_type"),
        (None, "pytorch", ""),
        ({"elasticConfig": {"minReplica": 1}}, "pytorch", "elastic_config.minReplica"),
    ],
)
def test_from_custom_errors_name_the_field(custom: Any, task_type: str, field: str) -> None:
    with pytest.raises(ei.DecodeError) as info:
        from_custom(custom, task_type=task_type, strict=True)
    assert info.value.field == field


def test_from_custom_tolerates_an_unknown_key_and_names_it() -> None:
    """The backend's default (forward compatible): a key this version does not know is left out
    with a SkewWarning naming its path; strict=True (above) refuses it."""
    with pytest.warns(ei.SkewWarning, match=r"elastic_config\.minReplica\b") as caught:
        task = from_custom({"elasticConfig": {"minReplica": 1, "maxReplicas": 2}}, task_type="pytorch")
    assert [w.message.fields for w in caught if isinstance(w.message, ei.SkewWarning)] == [
        ("elastic_config.minReplica",)
    ]
    assert task.elastic_config.max_replicas == 2


def test_from_custom_unknown_version() -> None:
    with pytest.raises(ei.UnsupportedVersionError):
        from_custom({}, task_type_version=2)


@given(elastic_kwargs())
def test_elastic_task_elastic_round_trip(kwargs: dict[str, Any]) -> None:
    cfg = Elastic(**kwargs)
    task = cfg.to_task()
    back = Elastic.from_task(task)
    assert back.to_task() == task
    assert Elastic.from_task(back.to_task()) == back  # the normal form is a fixed point
    if cfg.task_type == "pytorch":
        assert back.to_template() == cfg.to_template()
        custom, task_type, version = cfg.to_template()
        assert from_custom(custom, task_type=task_type, task_type_version=version) == task


def _effective(task: Any) -> tuple[Any, ...]:
    """What a task means for the job: elastic config, worker count/settings, run policy."""
    t = view(task)
    assert t.elastic is not None
    e = type(t.elastic)()
    e.CopyFrom(t.elastic)
    e.rdzv_backend = e.rdzv_backend or "c10d"
    res = t.worker.resources
    resources = None
    if res is not None:
        resources = tuple(tuple((x.name, x.value) for x in getattr(res, k)) for k in ("requests", "limits"))
    rp = t.run_policy
    return (e, t.worker_count(), t.worker.image, resources, t.worker.restart_policy, rp)


@given(valid_tasks(elastic_expressible=True))
def test_from_task_keeps_what_the_task_means(task: Any) -> None:
    cfg = Elastic.from_task(task)
    again = cfg.to_task()
    assert _effective(again) == _effective(task)
    assert Elastic.from_task(again).to_task() == again


def test_from_task_picks_the_pytorchjob_form_of_nnodes() -> None:
    assert Elastic.from_task(kubeflow_task(min_replicas=1, max_replicas=1, nproc_per_node=1)).nnodes == "1:1"
    assert Elastic.from_task(kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1)).nnodes == 2
    assert Elastic.from_task(kubeflow_task(min_replicas=1, max_replicas=4, nproc_per_node=1)).nnodes == "1:4"


def test_from_task_refuses_what_elastic_cannot_say() -> None:
    non_elastic = KubeflowTask()
    non_elastic.worker_replicas.replicas = 2  # valid (an empty task is not: task.not_empty)
    with pytest.raises(ei.ValidationError) as info:
        Elastic.from_task(non_elastic)
    assert rules_of(info.value) == [("elastic_config", "sdk.expressible")]

    task = kubeflow_task(min_replicas=1, max_replicas=1, nproc_per_node=1)
    task.elastic_config.rdzv_options.add(key="timeout", value="5")  # a no-op under c10d
    with pytest.raises(ei.ValidationError) as info:
        Elastic.from_task(task)
    assert rules_of(info.value) == [("elastic_config.rdzv_options", "sdk.expressible")]
    task.elastic_config.rdzv_backend = "etcd"  # etcd reads it: fine
    assert dict(Elastic.from_task(task).rdzv_configs) == {"timeout": "5"}

    task = kubeflow_task(min_replicas=1, max_replicas=1, nproc_per_node=1)
    task.worker_replicas.resources.requests.add(name=Resources.CPU, value="1")
    task.worker_replicas.resources.requests.add(name=Resources.CPU, value="2")
    with pytest.raises(ei.ValidationError) as info:
        Elastic.from_task(task)
    assert rules_of(info.value) == [("worker_replicas.resources.requests", "sdk.expressible")]


def test_from_task_reads_common_and_the_legacy_shape() -> None:
    task = kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1)
    task.worker_replicas.ClearField("replicas")
    task.worker_replicas.common.image = "img"
    task.worker_replicas.common.restart_policy = 2
    cfg = Elastic.from_task(task)
    assert (cfg.image, cfg.restart_policy) == ("img", RestartPolicy.ALWAYS)
    legacy = LegacyTask(workers=0)
    legacy.elastic_config.CopyFrom(task.elastic_config)
    assert Elastic.from_task(legacy).to_task() == kubeflow_task(min_replicas=2, max_replicas=2, nproc_per_node=1)


# ---------------------------------------------------------------- the dataclass itself


def test_frozen_keyword_only_hashable_and_replace_revalidates() -> None:
    cfg = Elastic(nnodes=2, rdzv_configs={"join_timeout": 900})
    with pytest.raises(TypeError):
        Elastic(2)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.nnodes = 3  # type: ignore[misc]
    same = Elastic(nnodes=2, rdzv_configs={"timeout": 900, "join_timeout": 900})
    assert same == cfg
    assert hash(same) == hash(cfg)
    assert len({cfg, same, Elastic(nnodes=3)}) == 2
    assert dataclasses.replace(cfg, nnodes=4).to_task().elastic_config.max_replicas == 4
    with pytest.raises(ei.ValidationError):
        dataclasses.replace(cfg, nnodes="4:1")


def test_to_task_is_a_copy() -> None:
    cfg = Elastic(nnodes=2)
    cfg.to_task().elastic_config.max_replicas = 99
    assert cfg.to_task().elastic_config.max_replicas == 2


def test_no_torch_and_no_flytekit_import() -> None:
    code = (
        "import sys\n"
        "from elastic_idl._sdk.elastic import Elastic\n"
        "from elastic_idl._task.codec import from_custom\n"
        "c = Elastic(nnodes='1:4', nproc_per_node='auto', start_method='fork')\n"
        "from_custom(c.to_template().custom)\n"
        "Elastic.from_task(c.to_task())\n"
        # (the bare namespace package "flytekitplugins" is created at start-up by the plugin's -nspkg.pth)
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'flytekit') or m.startswith('flytekitplugins.')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@given(st.sampled_from([1, 2, "1:2"]), st.floats(min_value=1e-3, max_value=3600, allow_nan=False))
def test_monitor_interval_is_exact_to_the_nanosecond(nnodes: Any, seconds: float) -> None:
    d = Elastic(nnodes=nnodes, monitor_interval=seconds).to_task().elastic_config.monitor_interval
    assert abs(d.seconds + d.nanos / 1e9 - seconds) <= 5e-10 * max(1.0, seconds)


def test_readme_example() -> None:
    cfg = Elastic(
        nnodes="1:3", nproc_per_node=4, max_restarts=2, run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)
    )
    custom, task_type, version = cfg.to_template()
    assert (task_type, version) == ("pytorch", 1)
    task = from_custom(custom, task_type=task_type, task_type_version=version)
    assert task == cfg.to_task()
    assert cfg == Elastic.from_task(task)


def test_pickle_copy_and_asdict() -> None:
    """SDKs pickle task configs (and users asdict them): a config survives both, revalidated."""
    import copy
    import json
    import pickle

    cfg = Elastic(
        nnodes="1:3",
        requests={"cpu": 1},
        limits=FlytekitLikeResources(mem="1Gi"),
        run_policy={"clean_pod_policy": "All"},
        restart_policy="Always",
        signals_to_handle="SIGTERM",
    )
    for clone in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), copy.copy(cfg)):
        assert clone == cfg
        assert clone.to_task() == cfg.to_task()
    plain = dataclasses.asdict(cfg)
    assert plain["rdzv_configs"] == {"join_timeout": 900}
    assert plain["requests"] == {"cpu": "1"}
    assert json.dumps(plain["limits"]) == '{"mem": "1Gi"}'
    for mutate in (
        lambda d: d.update(x=1),
        lambda d: d.pop("cpu"),
        lambda d: d.clear(),
        lambda d: d.setdefault("x", 1),
    ):
        with pytest.raises(TypeError):
            mutate(cfg.requests)
    assert dict(cfg.requests) == {"cpu": "1"}


# ---------------------------------------------------------------- issue #9: public names, round trip


def test_sdk_companion_types_are_public() -> None:
    """The import line of docs/guide/sdk-config.md: every type an Elastic argument documents is a public name."""
    from elastic_idl import CleanPodPolicy as PublicClean
    from elastic_idl import RestartPolicy as PublicRestart
    from elastic_idl import RunPolicy as PublicRunPolicy

    assert (PublicClean, PublicRestart, PublicRunPolicy) == (CleanPodPolicy, RestartPolicy, RunPolicy)


@given(elastic_kwargs())
def test_a_config_is_the_config_its_task_gives_back(kwargs: dict[str, Any]) -> None:
    """docs/guide/sdk-config.md: ``cfg == Elastic.from_task(cfg.to_task())``, for every config but the documented two."""
    cfg = Elastic(**kwargs)
    if cfg.task_type == "python-task":  # nnodes=1: from_task says "1:1" (a task is a PyTorchJob)
        cfg = dataclasses.replace(cfg, nnodes="1:1")
    back = Elastic.from_task(cfg.to_task())
    assert back == cfg
    assert hash(back) == hash(cfg)
    assert back.to_task() == cfg.to_task()


@pytest.mark.parametrize(
    ("kwargs", "normal"),
    [
        ({"nnodes": "2"}, {"nnodes": 2}),
        ({"nnodes": "2:2"}, {"nnodes": 2}),
        ({"nnodes": "1"}, {"nnodes": 1}),
        ({"nnodes": "01:3"}, {"nnodes": "1:3"}),
        ({"nproc_per_node": "4"}, {"nproc_per_node": 4}),
        ({"max_restarts": "3"}, {"max_restarts": 3}),  # refused before, where nproc_per_node="4" was accepted
        ({"rdzv_port": "29400", "rdzv_host": "h"}, {"rdzv_port": 29400}),
        ({"monitor_interval": "5"}, {"monitor_interval": 5}),
        ({"monitor_interval": "0.1"}, {"monitor_interval": 0.1}),
        ({"shutdown_timeout": Decimal("2.00")}, {"shutdown_timeout": 2}),
        ({"redirects": "all", "tee": "2"}, {"redirects": 3, "tee": 2}),
        ({"local_ranks_filter": ["0", 1], "nproc_per_node": 2}, {"local_ranks_filter": (0, 1)}),
        ({"rdzv_backend": ""}, {"rdzv_backend": "c10d"}),
        ({"image": ""}, {"image": None}),
        ({"requests": {"cpu": 2}}, {"requests": {"cpu": "2"}, "limits": {}}),
        ({"limits": {}}, {"requests": {}, "limits": {}}),
        ({"restart_policy": "Never"}, {"restart_policy": None}),
        (
            {"run_policy": {"clean_pod_policy": "None", "backoff_limit": "0", "ttl_seconds_after_finished": "60"}},
            {"run_policy": RunPolicy(ttl_seconds_after_finished=60)},
        ),
    ],
)
def test_arguments_are_stored_in_their_normal_form(kwargs: dict[str, Any], normal: dict[str, Any]) -> None:
    cfg = Elastic(nnodes=kwargs.pop("nnodes", "1:2"), **kwargs)
    for name, value in normal.items():
        assert getattr(cfg, name) == value and isinstance(getattr(cfg, name), type(value)), name
    if cfg.task_type == "pytorch":  # nnodes=1 comes back as "1:1", the PyTorchJob form
        assert Elastic.from_task(cfg.to_task()) == cfg


def test_a_run_policy_object_is_checked_like_a_mapping() -> None:
    """RunPolicy(...) objects went unchecked into the message: a TypeError or AttributeError traceback."""
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, run_policy=RunPolicy(ttl_seconds_after_finished="soon", clean_pod_policy="All"))  # type: ignore[arg-type]
    assert rules_of(info.value) == [("run_policy.ttl_seconds_after_finished", "sdk.argument")]
    cfg = Elastic(nnodes=2, run_policy=RunPolicy(clean_pod_policy="All"))  # type: ignore[arg-type]
    assert cfg.run_policy == RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)


def test_the_failure_budget_arguments_are_typed_and_reach_the_task() -> None:
    from datetime import timedelta

    cfg = Elastic(
        nnodes="1:2",
        collective_timeout=timedelta(seconds=90, microseconds=500_000),
        nccl_heartbeat_timeout=300,
        nccl_async_error_handling=True,
        nccl_enable_monitoring=False,
    )
    e = cfg.to_task().elastic_config
    assert (e.collective_timeout.seconds, e.collective_timeout.nanos) == (90, 500_000_000)
    assert e.nccl_heartbeat_timeout.seconds == 300
    assert (e.nccl_async_error_handling, e.nccl_enable_monitoring) == (1, 2)  # TOGGLE_ON, TOGGLE_OFF
    assert (cfg.collective_timeout, cfg.nccl_heartbeat_timeout) == (90.5, 300)  # one normal form: seconds
    assert Elastic.from_task(cfg.to_task()) == cfg
    unset = Elastic(nnodes="1:2").to_task().elastic_config
    assert not unset.HasField("collective_timeout") and unset.nccl_enable_monitoring == 0
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, nccl_enable_monitoring=1)  # type: ignore[arg-type]
    assert [(v.field, v.rule) for v in info.value.violations] == [("nccl_enable_monitoring", "sdk.argument")]
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, collective_timeout=timedelta(days=2))
    assert [v.rule for v in info.value.violations] == ["elastic.failure_timeout.max"]


# ---------------------------------------------------------------- issue 33: the template and the CAS backoff


def test_the_log_line_prefix_template_and_the_cas_backoff_round_trip() -> None:
    from datetime import timedelta

    cfg = Elastic(nnodes="1:2", log_line_prefix_template="${hostname}:${rank}| ", cas_backoff_max_seconds=0.25)
    e = cfg.to_task().elastic_config
    assert e.log_line_prefix_template == "${hostname}:${rank}| "
    assert (e.cas_backoff_max_seconds.seconds, e.cas_backoff_max_seconds.nanos) == (0, 250_000_000)
    assert cfg.rdzv_configs == {"join_timeout": 900, "cas_backoff_max_seconds": 0.25}  # one field, shown in both
    assert Elastic.from_task(cfg.to_task()) == cfg
    custom = cfg.to_template().custom
    assert custom is not None
    assert custom["elasticConfig"]["logLinePrefixTemplate"] == "${hostname}:${rank}| "
    assert custom["elasticConfig"]["casBackoffMaxSeconds"] == "0.250s"
    # the same field through rdzv_configs, as torchrun's --rdzv-conf says it; a timedelta; an explicit 0
    by_key = Elastic(
        nnodes="1:2",
        rdzv_configs={"join_timeout": 900, "cas_backoff_max_seconds": "0.25"},
        log_line_prefix_template="${hostname}:${rank}| ",
    )
    assert by_key == cfg and by_key.cas_backoff_max_seconds == 0.25
    assert Elastic(nnodes=2, cas_backoff_max_seconds=timedelta(milliseconds=250)).cas_backoff_max_seconds == 0.25
    zero = Elastic(nnodes=2, cas_backoff_max_seconds=0)
    assert zero.to_task().elastic_config.HasField("cas_backoff_max_seconds") and zero.cas_backoff_max_seconds == 0
    # both given: equal is one value, different is refused naming the argument
    assert Elastic(
        nnodes=2, cas_backoff_max_seconds=1, rdzv_configs={"join_timeout": 900, "cas_backoff_max_seconds": "1.0"}
    ) == Elastic(nnodes=2, cas_backoff_max_seconds=1)
    with pytest.raises(ei.ValidationError) as err:
        Elastic(nnodes=2, cas_backoff_max_seconds=1, rdzv_configs={"cas_backoff_max_seconds": 2})
    assert [(v.field, v.rule) for v in err.value.violations] == [("cas_backoff_max_seconds", "sdk.argument")]


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"cas_backoff_max_seconds": -0.5}, "cas_backoff_max_seconds", "elastic.duration.non_negative"),
        ({"rdzv_configs": {"cas_backoff_max_seconds": -1}}, "cas_backoff_max_seconds", "elastic.duration.non_negative"),
        ({"cas_backoff_max_seconds": "soon"}, "cas_backoff_max_seconds", "sdk.argument"),
        ({"log_line_prefix_template": 3}, "log_line_prefix_template", "sdk.argument"),
    ],
)
def test_a_bad_template_or_cas_backoff_names_the_argument(kwargs: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(ei.ValidationError) as err:
        Elastic(nnodes=2, **kwargs)
    assert [(v.field, v.rule) for v in err.value.violations] == [(field, rule)]


def test_any_template_is_valid_as_torch_keeps_what_it_does_not_substitute() -> None:
    for template in ("${node}|", "${rank", "$", "$$", "100% ${rank}"):
        assert Elastic(nnodes=2, log_line_prefix_template=template).log_line_prefix_template == template
