"""Task (+ operator env) -> LaunchSpec: every field, and the documented precedence."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import elastic_idl as ei
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from elastic_idl._task.names import DEFAULT_MONITOR_INTERVAL_S, DEFAULT_START_METHOD

# What the Kubeflow training operator v1.9 injects into an elastic worker (REFERENCE §4).
OPERATOR_ENV = {
    "PYTHONUNBUFFERED": "1",
    "PET_RDZV_ENDPOINT": "train-worker-0:23456",
    "PET_RDZV_BACKEND": "c10d",
    "PET_NNODES": "1:3",
    "PET_NPROC_PER_NODE": "4",
    "PET_MAX_RESTARTS": "2",
    "PET_RDZV_ID": "f3a1b2c4",
    "PET_RDZV_CONF": "join_timeout=900,is_host=0",
}


def task() -> KubeflowTask:
    t = ei.from_custom(
        {
            "elasticConfig": {
                "maxReplicas": 3,
                "maxRestarts": 2,
                "minReplicas": 1,
                "nprocPerNode": 4,
                "rdzvBackend": "c10d",
            },
            "workerReplicas": {"replicas": 3},
        }
    )
    assert isinstance(t, KubeflowTask)
    t.elastic_config.join_timeout.seconds = 900
    return t


def test_local_defaults() -> None:
    spec = ei.to_launch_spec(task())
    assert spec.as_dict() == {
        "min_nodes": 1,
        "max_nodes": 3,
        "nproc_per_node": 4,
        "run_id": "none",
        "role": "default",
        "rdzv_endpoint": "127.0.0.1:0",
        "rdzv_backend": "c10d",
        "rdzv_configs": {"join_timeout": 900},
        "max_restarts": 2,
        "monitor_interval": DEFAULT_MONITOR_INTERVAL_S,
        "start_method": DEFAULT_START_METHOD,
        "redirects": "0",
        "tee": "0",
        "local_ranks_filter": [],
        "numa_binding": None,
        "signals_to_handle": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        "shutdown_timeout": None,
        "virtual_local_rank": False,
        "local_addr": None,
        "log_line_prefix_template": None,
        "collective_timeout": 600.0,
        "nccl_env": {},
    }
    assert spec.decisions == ()


def test_the_failure_budget_reaches_the_launch_spec_with_its_defaults_applied() -> None:
    t = task()
    e = t.elastic_config
    e.collective_timeout.FromSeconds(45)
    e.nccl_heartbeat_timeout.FromSeconds(120)
    e.nccl_enable_monitoring = 2  # TOGGLE_OFF
    spec = ei.to_launch_spec(t)
    assert spec.collective_timeout == 45.0
    assert dict(spec.nccl_env) == {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "120", "TORCH_NCCL_ENABLE_MONITORING": "0"}


def test_operator_env_consistent_with_message(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="elastic_idl"):
        spec = ei.to_launch_spec(task(), env=OPERATOR_ENV)
    assert spec.rdzv_endpoint == "train-worker-0:23456"
    assert spec.run_id == "f3a1b2c4"
    assert dict(spec.rdzv_configs) == {"join_timeout": 900, "is_host": "0"}
    assert (spec.min_nodes, spec.max_nodes, spec.nproc_per_node, spec.max_restarts) == (1, 3, 4, 2)
    settings = [d.setting for d in spec.decisions]
    assert settings == ["rdzv_endpoint", "run_id", "rdzv_configs.is_host"]
    assert all(d.winner == "env" for d in spec.decisions)
    assert len([r for r in caplog.records if "env wins" in r.getMessage()]) == 3


def test_message_wins_for_sizes_and_logs_the_ignored_env(caplog: pytest.LogCaptureFixture) -> None:
    env = dict(
        OPERATOR_ENV,
        PET_NNODES="2:5",
        PET_NPROC_PER_NODE="8",
        PET_MAX_RESTARTS="0",
        PET_RDZV_BACKEND="etcd",
        PET_RDZV_CONF="join_timeout=30",
    )
    with caplog.at_level(logging.INFO, logger="elastic_idl"):
        spec = ei.to_launch_spec(task(), env=env)
    assert (spec.min_nodes, spec.max_nodes, spec.nproc_per_node, spec.max_restarts) == (1, 3, 4, 2)
    assert spec.rdzv_backend == "c10d"
    assert spec.rdzv_configs["join_timeout"] == 900
    ignored = {d.setting: d for d in spec.decisions if d.winner == "message"}
    assert set(ignored) == {"rdzv_backend", "nnodes", "nproc_per_node", "max_restarts", "rdzv_configs.join_timeout"}
    assert ignored["nnodes"].env_value == "2:5" and ignored["nnodes"].message_value == "1:3"
    assert sum("message wins" in r.getMessage() for r in caplog.records) == 5


def test_explicit_arguments_beat_env_and_message() -> None:
    t = task()
    t.elastic_config.rdzv_host, t.elastic_config.rdzv_port, t.elastic_config.rdzv_id = "10.0.0.1", 29400, "msg-id"
    assert ei.to_launch_spec(t).rdzv_endpoint == "10.0.0.1:29400"
    assert ei.to_launch_spec(t).run_id == "msg-id"
    spec = ei.to_launch_spec(t, env=OPERATOR_ENV, run_id="exec-1", rdzv_endpoint="127.0.0.1:5555", start_method="fork")
    assert (spec.run_id, spec.rdzv_endpoint, spec.start_method) == ("exec-1", "127.0.0.1:5555", "fork")


def test_env_is_not_mutated_and_configs_are_read_only() -> None:
    env = dict(OPERATOR_ENV)
    spec = ei.to_launch_spec(task(), env=env)
    assert env == OPERATOR_ENV
    with pytest.raises(TypeError):
        spec.rdzv_configs["timeout"] = 1  # type: ignore[index]


def test_extension_fields_map() -> None:
    t = task()
    e = t.elastic_config
    e.nproc_per_node, e.nproc_policy = 0, 1
    e.start_method, e.role, e.redirects, e.tee = 3, "trainer", 3, 2
    e.monitor_interval.nanos = 250_000_000
    e.shutdown_timeout.seconds = 5
    e.numa_binding, e.virtual_local_rank = 4, True
    e.signals_to_handle.extend(["SIGTERM", "SIGUSR1"])
    e.rdzv_options.add(key="read_timeout_note", value="a=b")
    spec = ei.to_launch_spec(t)
    assert spec.nproc_per_node is None and spec.nproc_policy == "auto"
    assert spec.as_dict()["nproc_per_node"] == "auto"
    assert (spec.start_method, spec.role, spec.redirects, spec.tee) == ("forkserver", "trainer", "3", "2")
    assert spec.monitor_interval == 0.25
    assert spec.shutdown_timeout == 5
    assert (spec.numa_binding, spec.virtual_local_rank) == ("core-complex", True)
    assert spec.signals_to_handle == "SIGTERM,SIGUSR1"
    assert spec.rdzv_configs == {"join_timeout": 900, "read_timeout_note": "a=b"}


def test_invalid_task_or_env_is_rejected() -> None:
    bad = task()
    bad.elastic_config.min_replicas = 5
    with pytest.raises(ei.ValidationError) as info:
        ei.to_launch_spec(bad)
    assert [v.rule for v in info.value.violations] == ["elastic.min_le_max"]
    with pytest.raises(ei.ValidationError) as info:
        ei.to_launch_spec(LegacyTask(workers=2))
    assert [v.rule for v in info.value.violations] == ["launch.elastic_required"]
    with pytest.raises(ei.ValidationError) as info:
        ei.to_launch_spec(task(), env={"PET_RDZV_CONF": "novalue"})
    assert info.value.violations[0].field == "PET_RDZV_CONF"


def test_legacy_and_betterproto_give_the_same_spec() -> None:
    from elastic_idl.betterproto.plugins.kubeflow.v1 import DistributedPyTorchTrainingTask as Bp

    t = task()
    legacy = LegacyTask(workers=3)
    legacy.elastic_config.CopyFrom(t.elastic_config)
    bp = Bp().parse(t.SerializeToString())
    assert ei.to_launch_spec(legacy) == ei.to_launch_spec(t) == ei.to_launch_spec(bp)


# ---------------------------------------------------------------- issue #9: launch-time values


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"rdzv_endpoint": "host:99999"}, "rdzv_endpoint", "elastic.rdzv_port.range"),
        ({"rdzv_endpoint": "host:x"}, "rdzv_endpoint", "elastic.rdzv_port.range"),
        ({"rdzv_endpoint": ":29400"}, "rdzv_endpoint", "elastic.rdzv_host.format"),
        ({"rdzv_endpoint": "a b:1"}, "rdzv_endpoint", "elastic.rdzv_host.format"),
        ({"run_id": "a b"}, "run_id", "elastic.rdzv_id.format"),
        ({"run_id": ""}, "run_id", "elastic.rdzv_id.format"),
        ({"start_method": "thread"}, "start_method", "enum.known"),
        ({"env": {"PET_RDZV_ENDPOINT": "job-worker-0:70000"}}, "PET_RDZV_ENDPOINT", "elastic.rdzv_port.range"),
        ({"env": {"PET_RDZV_ID": "x,y"}}, "PET_RDZV_ID", "elastic.rdzv_id.format"),
    ],
)
def test_launch_time_values_obey_the_rules_of_their_fields(kwargs: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(ei.ValidationError) as info:
        ei.to_launch_spec(task(), **kwargs)
    assert [(v.field, v.rule) for v in info.value.violations] == [(field, rule)]


@pytest.mark.parametrize("endpoint", ["host:29400", "host", "[::1]:29400", "10.0.0.1:0", "job-worker-0:65535"])
def test_good_launch_time_endpoints_pass(endpoint: str) -> None:
    assert ei.to_launch_spec(task(), rdzv_endpoint=endpoint).rdzv_endpoint == endpoint
