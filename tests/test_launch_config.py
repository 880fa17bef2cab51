"""to_launch_config: task (+ the Kubeflow operator's pod env) -> torch's LaunchConfig, every field explicit.

No processes are started here.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from elastic_idl import to_launch_spec
from elastic_idl._errors import ValidationError
from elastic_idl._launch.launcher import to_launch_config
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from elastic_idl._task.names import DEFAULT_START_METHOD, is_loopback
from elastic_idl.plugins.v1 import elastic_pb2

with warnings.catch_warnings():  # torch 2.13 without numpy warns at import; _launch.agent filters it too
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig
    from torch.numa.binding import AffinityMode

    from elastic_idl._launch import agent

#: The env the Kubeflow training operator v1.9 injects into worker 1 of job "train" for
#: Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2) with an rdzv id and two rdzv options
#: (REFERENCE.md section 4: names and formats exactly as the operator writes them).
OPERATOR_ENV = {
    "PYTHONUNBUFFERED": "1",
    "PET_RDZV_ENDPOINT": "train-worker-0:23456",
    "PET_RDZV_BACKEND": "c10d",
    "PET_NNODES": "1:3",
    "PET_NPROC_PER_NODE": "4",
    "PET_MAX_RESTARTS": "2",
    "PET_RDZV_ID": "f3a9c0d2e1-n0-0",
    "PET_RDZV_CONF": "join_timeout=900,last_call_timeout=30",
}


def kubeflow_task(**elastic: Any) -> KubeflowTask:
    """flytekit 1.16's message for Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2)."""
    t = KubeflowTask()
    t.worker_replicas.replicas = 3
    e = t.elastic_config
    e.rdzv_backend, e.min_replicas, e.max_replicas, e.nproc_per_node, e.max_restarts = "c10d", 1, 3, 4, 2
    for key, value in elastic.items():
        setattr(e, key, value)
    return t


def every_field(lc: LaunchConfig) -> dict[str, Any]:
    out = {f.name: getattr(lc, f.name) for f in dataclasses.fields(lc)}
    logs = out.pop("logs_specs")
    assert isinstance(logs, DefaultLogsSpecs)
    out["logs_specs"] = (logs._redirects, logs._tee, logs._local_ranks_filter)
    return out


def test_the_operator_env_gives_exactly_this_launch_config() -> None:
    env = dict(OPERATOR_ENV)
    lc = to_launch_config(kubeflow_task(), env=env)
    assert every_field(lc) == {
        "min_nodes": 1,
        "max_nodes": 3,
        "nproc_per_node": 4,
        "logs_specs": (Std.NONE, Std.NONE, None),
        "run_id": "f3a9c0d2e1-n0-0",  # PET_RDZV_ID: every pod of the job agrees on it
        "role": "default",  # torchrun's, not LaunchConfig's "default_role"
        "rdzv_endpoint": "train-worker-0:23456",  # the operator's service address wins
        "rdzv_backend": "c10d",  # not LaunchConfig's "etcd"
        # Keys only in PET_RDZV_CONF are added (as strings, like --rdzv-conf);
        # "timeout" is what LaunchConfig.__post_init__ writes into its own copy.
        "rdzv_configs": {"join_timeout": "900", "last_call_timeout": "30", "timeout": 900},
        "rdzv_timeout": -1,
        "max_restarts": 2,  # not LaunchConfig's 3
        "monitor_interval": 0.1,  # not flytekit's 5 s
        "start_method": DEFAULT_START_METHOD,
        "log_line_prefix_template": None,
        "metrics_cfg": {},
        "local_addr": None,
        "event_log_handler": "null",
        "numa_options": None,
        "signals_to_handle": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        "duplicate_stdout_filters": None,
        "duplicate_stderr_filters": None,
        "virtual_local_rank": False,
        "shutdown_timeout": 30,
    }
    assert env == OPERATOR_ENV  # read, never written


def test_the_message_wins_over_the_env_for_what_to_run() -> None:
    # A pod env that disagrees with the message (say, a stale job): the contract wins.
    env = {**OPERATOR_ENV, "PET_NNODES": "2:2", "PET_NPROC_PER_NODE": "8", "PET_MAX_RESTARTS": "0"}
    lc = to_launch_config(kubeflow_task(), env=env)
    assert (lc.min_nodes, lc.max_nodes, lc.nproc_per_node, lc.max_restarts) == (1, 3, 4, 2)
    # ... and an explicit argument wins over the env for where to meet.
    lc = to_launch_config(kubeflow_task(), env=env, rdzv_endpoint="10.0.0.7:29400", run_id="mine")
    assert (lc.rdzv_endpoint, lc.run_id) == ("10.0.0.7:29400", "mine")


def test_typed_timeouts_beat_the_env_and_fractions_round_up_to_whole_seconds() -> None:
    task = kubeflow_task()
    task.elastic_config.join_timeout.CopyFrom(Duration(seconds=120, nanos=500_000_000))
    task.elastic_config.read_timeout.CopyFrom(Duration(seconds=0, nanos=250_000_000))
    lc = to_launch_config(task, env=OPERATOR_ENV)
    # torch int()s these: 120.5 would become 120 and 0.25 would become 0 (rejected).
    assert lc.rdzv_configs == {"join_timeout": 121, "read_timeout": 1, "last_call_timeout": "30", "timeout": 900}


def test_caller_owned_mappings_are_never_mutated() -> None:
    env = dict(OPERATOR_ENV)
    task = kubeflow_task()
    spec = to_launch_spec(task, env=env)
    before = dict(spec.rdzv_configs)
    first = agent.build_launch_config(spec)
    second = agent.build_launch_config(spec)
    assert "timeout" in first.rdzv_configs  # LaunchConfig wrote into its own dict ...
    assert dict(spec.rdzv_configs) == before  # ... not into the spec's
    assert isinstance(spec.rdzv_configs, MappingProxyType)
    assert first.rdzv_configs is not second.rdzv_configs
    first.rdzv_configs["join_timeout"] = 1
    assert second.rdzv_configs["join_timeout"] == "900"
    assert env == OPERATOR_ENV


def test_building_a_launch_config_creates_no_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # torch's DefaultLogsSpecs(log_dir=None) runs mkdtemp in its constructor: one stray
    # torchelastic_* dir per LaunchConfig. Ours makes it when a launch first needs it.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lc = to_launch_config(kubeflow_task(), env=OPERATOR_ENV)
    assert list(tmp_path.iterdir()) == []
    assert isinstance(lc.logs_specs, DefaultLogsSpecs)
    root = Path(lc.logs_specs.root_log_dir)  # first use
    assert root.parent == tmp_path and root.name.startswith("torchelastic_") and root.is_dir()


def test_outside_a_pod_the_launch_is_local_on_loopback() -> None:
    t = LegacyTask()
    t.elastic_config.min_replicas = t.elastic_config.max_replicas = 1
    t.elastic_config.nproc_per_node = 2
    lc = to_launch_config(t)
    assert (lc.rdzv_endpoint, lc.rdzv_backend, lc.run_id) == ("127.0.0.1:0", "c10d", "none")
    assert is_loopback(lc.rdzv_endpoint.rpartition(":")[0])


def test_the_extensions_reach_their_launch_config_fields() -> None:
    task = kubeflow_task(
        role="trainer",
        start_method=elastic_pb2.START_METHOD_SPAWN,
        redirects=elastic_pb2.STD_STREAMS_ERR,
        tee=elastic_pb2.STD_STREAMS_ALL,
        numa_binding=elastic_pb2.NUMA_BINDING_SOCKET,
        virtual_local_rank=True,
    )
    e = task.elastic_config
    e.monitor_interval.CopyFrom(Duration(nanos=250_000_000))
    e.shutdown_timeout.CopyFrom(Duration(seconds=4, nanos=1))
    e.local_ranks_filter.extend([0, 2])
    e.signals_to_handle.extend(["SIGTERM", "SIGUSR1"])
    lc = to_launch_config(task)
    assert (lc.role, lc.start_method, lc.monitor_interval, lc.shutdown_timeout) == ("trainer", "spawn", 0.25, 5)
    assert every_field(lc)["logs_specs"] == (Std.ERR, Std.ALL, {0, 2})
    assert lc.numa_options is not None and lc.numa_options.affinity_mode == AffinityMode.SOCKET
    assert (lc.virtual_local_rank, lc.signals_to_handle) == (True, "SIGTERM,SIGUSR1")
    assert to_launch_config(task, start_method="fork").start_method == "fork"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (elastic_pb2.NPROC_POLICY_CPU, len(os.sched_getaffinity(0))),
        (elastic_pb2.NPROC_POLICY_AUTO, len(os.sched_getaffinity(0))),  # no accelerator on this machine
    ],
)
def test_an_nproc_policy_is_resolved_on_this_node(policy: int, expected: int) -> None:
    import torch

    if torch.accelerator.is_available():
        pytest.skip("counts accelerators on a machine that has them")
    lc = to_launch_config(
        kubeflow_task(nproc_per_node=0, nproc_policy=policy), env={**OPERATOR_ENV, "PET_NPROC_PER_NODE": "auto"}
    )
    assert lc.nproc_per_node == expected


def test_the_gpu_policy_without_cuda_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="needs CUDA"):
        to_launch_config(kubeflow_task(nproc_per_node=0, nproc_policy=elastic_pb2.NPROC_POLICY_GPU))


def test_an_invalid_task_is_refused_with_every_violation() -> None:
    with pytest.raises(ValidationError) as info:
        to_launch_config(kubeflow_task(min_replicas=4, max_restarts=-1))
    assert {v.rule for v in info.value.violations} >= {"elastic.min_le_max", "elastic.max_restarts.min"}
