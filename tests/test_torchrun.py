"""torchrun command lines <-> tasks: every flag, the PET_ env fallbacks, refusals, and round trips.

Three kinds of evidence: unit cases per flag and per refusal; property tests for the two
round trips (task -> argv -> task, argv -> task -> argv); and torch itself: our parser
against torch 2.13's own ``torchrun`` parser on raw command lines, and our task against the
LaunchConfig torchrun would build.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from typing import Any
from unittest import mock

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import assume, given, settings

import elastic_idl as ei
from elastic_idl._sdk.torchrun import (
    FLAGS,
    TorchrunEntrypoint,
    TorchrunError,
    UnsupportedFlagError,
    _parser,
    _resolve,
    from_torchrun,
    to_torchrun,
)
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from strategies import raw_torchrun_command_lines, torchrun_command_lines, torchrun_entrypoints, torchrun_tasks


def parse(*argv: str, env: dict[str, str] | None = None) -> ei.ElasticConfig:
    task, _ = from_torchrun([*argv, "train.py"], env)
    assert isinstance(task, KubeflowTask)
    assert task.worker_replicas.replicas == task.elastic_config.max_replicas
    return task.elastic_config


def expected_task(**elastic: Any) -> KubeflowTask:
    t = KubeflowTask()
    e = t.elastic_config
    e.rdzv_backend, e.min_replicas, e.max_replicas, e.nproc_per_node = "c10d", 1, 1, 1
    for key, value in elastic.items():
        if isinstance(value, Duration):
            getattr(e, key).CopyFrom(value)
        elif isinstance(value, list):
            getattr(e, key).extend(value)
        else:
            setattr(e, key, value)
    t.worker_replicas.replicas = e.max_replicas
    return t


# ---------------------------------------------------------------- the plain command line


def test_plain_torchrun_is_a_local_c10d_rendezvous() -> None:
    """torchrun's default static backend with one node and no --master-port is its standalone mode."""
    task, entry = from_torchrun(["--nproc-per-node=2", "train.py", "--lr", "0.1"])
    assert task == expected_task(nproc_per_node=2)
    assert entry == TorchrunEntrypoint("train.py", ("--lr", "0.1"))
    assert to_torchrun(task, entry) == [
        "--nnodes=1",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        "--max-restarts=0",
        "train.py",
        "--lr",
        "0.1",
    ]


def test_flags_after_the_script_belong_to_the_script() -> None:
    task, entry = from_torchrun(["train.py", "--nnodes=4", "-m", "--standalone"])
    assert task.elastic_config.max_replicas == 1
    assert entry.args == ("--nnodes=4", "-m", "--standalone")


# (dash spelling, underscore spelling or None, value, expected ElasticConfig fields)
COVERED: list[tuple[str, str | None, str | None, dict[str, Any]]] = [
    ("--nnodes", None, "2:4", {"min_replicas": 2, "max_replicas": 4}),
    ("--nproc-per-node", "--nproc_per_node", "8", {"nproc_per_node": 8}),
    ("--nproc-per-node", "--nproc_per_node", "gpu", {"nproc_per_node": 0, "nproc_policy": 3}),
    ("--rdzv-backend", "--rdzv_backend", "etcd-v2", {"rdzv_backend": "etcd-v2"}),
    ("--rdzv-endpoint", "--rdzv_endpoint", "h:1", {"rdzv_host": "h", "rdzv_port": 1}),
    ("--rdzv-id", "--rdzv_id", "job-7", {"rdzv_id": "job-7"}),
    ("--rdzv-conf", "--rdzv_conf", "join_timeout=600,is_host=1", {"join_timeout": Duration(seconds=600)}),
    ("--standalone", None, None, {}),
    ("--max-restarts", "--max_restarts", "3", {"max_restarts": 3}),
    ("--monitor-interval", "--monitor_interval", "2.5", {"monitor_interval": Duration(seconds=2, nanos=500_000_000)}),
    ("--start-method", "--start_method", "fork", {"start_method": 2}),
    ("--role", None, "trainer", {"role": "trainer"}),
    ("--redirects", None, "3", {"redirects": 3}),
    ("-r", None, "2", {"redirects": 2}),
    ("--tee", None, "1", {"tee": 1}),
    ("-t", None, "3", {"tee": 3}),
    ("--local-ranks-filter", "--local_ranks_filter", "0,0", {"local_ranks_filter": [0]}),  # torch: a set
    ("--numa-binding", "--numa_binding", "core-complex", {"numa_binding": 4}),
    ("--signals-to-handle", "--signals_to_handle", "SIGTERM,SIGUSR1", {"signals_to_handle": ["SIGTERM", "SIGUSR1"]}),
    ("--shutdown-timeout", "--shutdown_timeout", "45", {"shutdown_timeout": Duration(seconds=45)}),
    ("--virtual-local-rank", "--virtual_local_rank", None, {"virtual_local_rank": True}),
]


@pytest.mark.parametrize(("dash", "underscore", "value", "fields"), COVERED, ids=[f"{c[0]}={c[2]}" for c in COVERED])
def test_every_covered_flag_in_every_spelling(
    dash: str, underscore: str | None, value: str | None, fields: dict[str, Any]
) -> None:
    nnodes = [] if dash == "--nnodes" else ["--nnodes=1"]
    backend = [] if dash in ("--rdzv-backend", "--standalone") else ["--rdzv-backend=c10d"]
    expected = expected_task(**fields).elastic_config
    if dash == "--rdzv-backend":
        expected.rdzv_backend = value or ""
    if dash == "--rdzv-conf":
        expected.rdzv_options.add(key="is_host", value="1")
    if dash == "--nproc-per-node" and value == "gpu":
        expected.nproc_per_node = 0
    for spelling in filter(None, (dash, underscore)):
        forms = [[spelling]] if value is None else [[spelling, value]]
        if value is not None:
            forms.append([f"{spelling}{value}"] if not spelling.startswith("--") else [f"{spelling}={value}"])
        for form in forms:
            assert parse(*nnodes, *backend, *form) == expected, form


def test_every_torchrun_flag_is_classified() -> None:
    covered = {c[0] for c in COVERED} | {c[1] for c in COVERED if c[1]}
    for f in FLAGS:
        assert f.status in ("covered", "entrypoint", "launch", "refused"), f
        if f.status == "covered" and f.dest not in ("master_addr", "master_port"):
            assert set(f.options) & covered, f"{f.options} has no unit case"


# ---------------------------------------------------------------- entrypoint flags


@pytest.mark.parametrize(
    ("argv", "entry"),
    [
        (["-m", "pkg.train", "x"], TorchrunEntrypoint("pkg.train", ("x",), module=True)),
        (["--module", "pkg.train"], TorchrunEntrypoint("pkg.train", module=True)),
        (["--no-python", "./run.sh"], TorchrunEntrypoint("./run.sh", no_python=True)),
        (["--no_python", "--run_path", "/abs/t.py"], TorchrunEntrypoint("/abs/t.py", no_python=True, run_path=True)),
        (
            ["--run-path", "/abs/t.py", "--", "y"],
            TorchrunEntrypoint("/abs/t.py", ("y",), run_path=True),
        ),  # as torchrun: "--" eaten
        (["--", "train.py", "a"], TorchrunEntrypoint("train.py", ("a",))),
    ],
)
def test_entrypoint_flags(argv: list[str], entry: TorchrunEntrypoint) -> None:
    task, got = from_torchrun(argv)
    assert got == entry
    assert from_torchrun(to_torchrun(task, got)) == (task, got)


def test_module_and_no_python_conflict() -> None:
    with pytest.raises(TorchrunError) as info:
        from_torchrun(["-m", "--no-python", "x"])
    assert info.value.flag == "--module"


# ---------------------------------------------------------------- PET_ env fallbacks


def test_env_fills_what_the_command_line_leaves_out() -> None:
    env = {
        "PET_NNODES": "2:3",
        "PET_NPROC_PER_NODE": "auto",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "job-worker-0:23456",
        "PET_RDZV_ID": "exec-1",
        "PET_RDZV_CONF": "join_timeout=900",
        "PET_MAX_RESTARTS": "2",
        "PET_MONITOR_INTERVAL": "1",
        "PET_START_METHOD": "spawn",
        "PET_ROLE": "trainer",
        "PET_REDIRECTS": "3",
        "PET_TEE": "1",
        "PET_LOCAL_RANKS_FILTER": "0",
        "PET_SIGNALS_TO_HANDLE": "SIGTERM",
        "PET_SHUTDOWN_TIMEOUT": "10",
        "PET_VIRTUAL_LOCAL_RANK": "1",
        "PET_MODULE": "1",
    }
    task, entry = from_torchrun(["pkg.train"], env)
    e = task.elastic_config
    assert (e.min_replicas, e.max_replicas, e.nproc_policy, e.rdzv_backend) == (2, 3, 1, "c10d")
    assert (e.rdzv_host, e.rdzv_port, e.rdzv_id, e.join_timeout.seconds) == ("job-worker-0", 23456, "exec-1", 900)
    assert (e.max_restarts, e.monitor_interval.seconds, e.start_method, e.role) == (2, 1, 1, "trainer")
    assert (e.redirects, e.tee, list(e.local_ranks_filter), list(e.signals_to_handle)) == (3, 1, [0], ["SIGTERM"])
    assert (e.shutdown_timeout.seconds, e.virtual_local_rank) == (10, True)
    assert entry.module is True


def test_the_command_line_wins_over_env() -> None:
    env = {"PET_NNODES": "4", "PET_MAX_RESTARTS": "not-a-number", "PET_RDZV_BACKEND": "etcd"}
    e = parse("--nnodes=2", "--max-restarts=1", "--rdzv-backend=c10d", env=env)
    assert (e.min_replicas, e.max_replicas, e.max_restarts, e.rdzv_backend) == (2, 2, 1, "c10d")


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), ("2", True)])
def test_boolean_env_is_an_integer(value: str, expected: bool) -> None:
    assert parse("--rdzv-backend=c10d", env={"PET_VIRTUAL_LOCAL_RANK": value}).virtual_local_rank is expected
    # The flag on the command line sets it whatever the env says.
    assert parse("--rdzv-backend=c10d", "--virtual-local-rank", env={"PET_VIRTUAL_LOCAL_RANK": "0"}).virtual_local_rank


@pytest.mark.parametrize("value", ["", "true", "yes"])
def test_a_bad_boolean_env_fails_like_torchrun_does(value: str) -> None:
    # torchrun crashes at start-up on these, even when the flag is on the command line (REFERENCE §4: PET_STANDALONE="").
    with pytest.raises(TorchrunError) as info:
        from_torchrun(["--standalone", "train.py"], {"PET_STANDALONE": value})
    assert info.value.flag == "--standalone"
    assert "PET_STANDALONE" in str(info.value)


def test_a_bad_env_value_names_the_variable() -> None:
    with pytest.raises(TorchrunError) as info:
        from_torchrun(["train.py"], {"PET_MAX_RESTARTS": "many"})
    assert info.value.flag == "--max-restarts"
    assert "PET_MAX_RESTARTS='many'" in str(info.value)


def test_flags_without_env_fallback_ignore_it_like_torchrun() -> None:
    # --numa-binding and --logs-specs are plain argparse options in torchrun: no PET_ variable.
    e = parse(env={"PET_NUMA_BINDING": "node", "PET_LOGS_SPECS": "custom"})
    assert e.numa_binding == 0


def test_env_none_means_no_env() -> None:
    assert from_torchrun(["train.py"], None) == from_torchrun(["train.py"], {})


# ---------------------------------------------------------------- rendezvous resolution (torchrun's run())


def test_standalone() -> None:
    assert parse("--standalone", "--nnodes=1") == expected_task().elastic_config
    assert parse("--standalone", "--rdzv-backend=c10d") == expected_task().elastic_config
    # torchrun ignores the operator's rendezvous env with --standalone, and so do we.
    env = {"PET_RDZV_ENDPOINT": "job-worker-0:23456", "PET_RDZV_ID": "x", "PET_RDZV_BACKEND": "etcd"}
    assert parse("--standalone", env=env) == expected_task().elastic_config


@pytest.mark.parametrize(
    "flag", ["--rdzv-endpoint=h:1", "--rdzv-id=x", "--rdzv-backend=etcd", "--master-addr=10.0.0.1"]
)
def test_standalone_refuses_what_torchrun_would_ignore(flag: str) -> None:
    with pytest.raises(UnsupportedFlagError) as info:
        parse("--standalone", flag)
    assert info.value.flag == flag.split("=")[0]
    assert "--standalone" in str(info.value)


@pytest.mark.parametrize(
    ("argv", "backend", "host", "port"),
    [
        (["--nnodes=2"], "static", "127.0.0.1", 29500),
        (["--nnodes=2", "--master-addr=10.0.0.1", "--master-port=1234"], "static", "10.0.0.1", 1234),
        (["--master-port=1234"], "static", "127.0.0.1", 1234),  # one node, but a port: torchrun stays static
        (["--rdzv-backend=static", "--rdzv-endpoint=h:7"], "static", "h", 7),
        (["--rdzv-backend=c10d", "--rdzv-endpoint=h"], "c10d", "h", 29400),
        (["--rdzv-backend=etcd", "--rdzv-endpoint=h"], "etcd", "h", 2379),
        (["--rdzv-backend=etcd-v2", "--rdzv-endpoint=h"], "etcd-v2", "h", 2379),
        (["--rdzv-backend=c10d", "--rdzv-endpoint=[::1]:29400"], "c10d", "::1", 29400),
        (["--rdzv-backend=c10d", "--rdzv-endpoint= h:0 "], "c10d", "h", 0),
        (["--rdzv-backend=c10d"], "c10d", "", 0),
    ],
)
def test_endpoint_resolution(argv: list[str], backend: str, host: str, port: int) -> None:
    e = parse(*argv)
    assert (e.rdzv_backend, e.rdzv_host, e.rdzv_port) == (backend, host, port)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--rdzv-backend=static", "--rdzv-endpoint=h"], "--rdzv-endpoint"),  # static has no default port
        (["--rdzv-backend=c10d", "--rdzv-endpoint=:5"], "--rdzv-endpoint"),
        (["--rdzv-backend=c10d", "--rdzv-endpoint=h:99999"], "--rdzv-endpoint"),
        (["--rdzv-backend=c10d", "--rdzv-endpoint=a b:1"], "--rdzv-endpoint"),
    ],
)
def test_bad_endpoints(argv: list[str], flag: str) -> None:
    with pytest.raises(TorchrunError) as info:
        parse(*argv)
    assert info.value.flag == flag


@pytest.mark.parametrize(
    "argv",
    [
        ["--rdzv-backend=c10d", "--master-addr=10.0.0.1"],
        ["--rdzv-backend=c10d", "--master-port=29500"],
        ["--rdzv-backend=static", "--rdzv-endpoint=h:1", "--master-port=2"],
    ],
)
def test_master_address_where_torchrun_ignores_it(argv: list[str]) -> None:
    with pytest.raises(UnsupportedFlagError) as info:
        parse(*argv)
    assert info.value.flag in ("--master-addr", "--master-port")
    assert "torchrun ignores it" in str(info.value)


def test_explicit_defaults_of_refused_flags_are_accepted() -> None:
    """A common single-node line: --node-rank 0 and the default master address say nothing a task cannot."""
    e = parse(
        "--nnodes=1", "--node_rank=0", "--master_addr=127.0.0.1", "--event-log-handler=null", "--rdzv-backend=c10d"
    )
    assert e == expected_task().elastic_config


# ---------------------------------------------------------------- --rdzv-conf


def test_rdzv_conf_typed_and_free_form() -> None:
    e = parse(
        "--rdzv-backend=c10d",
        "--rdzv-conf= join_timeout = 900 ,last_call_timeout=5,close_timeout=7,read_timeout=60,timeout=10,a=b=c,a=2",
    )
    assert [d.seconds for d in (e.join_timeout, e.last_call_timeout, e.close_timeout, e.read_timeout)] == [
        900,
        5,
        7,
        60,
    ]
    # "timeout" is kept as torchrun passes it (c10d ignores it); the last "a" wins, as in torch.
    assert [(o.key, o.value) for o in e.rdzv_options] == [("timeout", "10"), ("a", "2")]


@pytest.mark.parametrize(
    "conf", ["k=", "k", "=v", "a=1,,b=2", "join_timeout=1.5", "join_timeout=10s", "read_timeout=x"]
)
def test_rdzv_conf_errors(conf: str) -> None:
    with pytest.raises(TorchrunError) as info:
        parse("--rdzv-backend=c10d", f"--rdzv-conf={conf}")
    assert info.value.flag == "--rdzv-conf"


def test_rdzv_conf_rank_under_static_is_refused() -> None:
    with pytest.raises(UnsupportedFlagError) as info:
        parse("--rdzv-backend=static", "--rdzv-endpoint=h:1", "--rdzv-conf=rank=1")
    assert info.value.flag == "--rdzv-conf"


# ---------------------------------------------------------------- refused flags


REFUSED: list[tuple[list[str], dict[str, str], str]] = [
    (["--log-dir=/tmp/x"], {}, "--log-dir"),
    (["--log_dir", "/tmp/x"], {}, "--log-dir"),
    ([], {"PET_LOG_DIR": "/tmp/x"}, "--log-dir"),
    (["--logs-specs=custom"], {}, "--logs-specs"),
    (["--logs_specs", "custom"], {}, "--logs-specs"),
    (["--event-log-handler=console"], {}, "--event-log-handler"),
    ([], {"PET_EVENT_LOG_HANDLER": "console"}, "--event-log-handler"),
    (["--duplicate-stdout-filters=a,b"], {}, "--duplicate-stdout-filters"),
    (["--duplicate_stderr_filters", ""], {}, "--duplicate-stderr-filters"),
    (["--node-rank=1"], {}, "--node-rank"),
    ([], {"PET_NODE_RANK": "2"}, "--node-rank"),  # under static: see test_node_rank_* at the end
    (["--local-addr=10.0.0.2"], {}, "--local-addr"),
    (["--local_addr", "10.0.0.2"], {}, "--local-addr"),
    (["--nproc-per-node=xpu"], {}, "--nproc-per-node"),
    ([], {"PET_NPROC_PER_NODE": "privateuseone"}, "--nproc-per-node"),
    (["-r", "0:1,1:2"], {}, "--redirects"),
    (["--tee=0:3"], {}, "--tee"),
]


@pytest.mark.parametrize(("argv", "env", "flag"), REFUSED, ids=[f"{c[2]}:{c[0] or c[1]}" for c in REFUSED])
def test_refused_flags_name_the_flag(argv: list[str], env: dict[str, str], flag: str) -> None:
    # An ambient PET_NODE_RANK only matters to the static backend (c10d ignores it, as torchrun does).
    backend = "--rdzv-backend=static" if "PET_NODE_RANK" in env else "--rdzv-backend=c10d"
    with pytest.raises(UnsupportedFlagError) as info:
        from_torchrun([backend, "--nnodes=3", "--rdzv-endpoint=h:1", *argv, "train.py"], env)
    assert info.value.flag == flag
    assert str(info.value).startswith(f"{flag}: ")
    for var in env:
        assert var in str(info.value)


def test_every_refused_flag_has_a_case() -> None:
    refused = {f.options[0] if f.options[0].startswith("--") else f.options[1] for f in FLAGS if f.status == "refused"}
    assert refused <= {flag for _, _, flag in REFUSED}


# ---------------------------------------------------------------- command lines torchrun itself rejects


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--nnodes", "x", "t.py"], "--nnodes"),
        (["--nnodes", "1:2:3", "t.py"], "--nnodes"),
        (["--nnodes"], "--nnodes"),
        (["--max-restarts=x", "t.py"], "--max-restarts"),
        (["--monitor-interval=soon", "t.py"], "--monitor-interval"),
        (["--monitor-interval=nan", "t.py"], "--monitor-interval"),
        (["--start-method=thread", "t.py"], "--start-method"),
        (["--numa-binding=core", "t.py"], "--numa-binding"),
        (["--nproc", "2", "t.py"], "--nproc"),  # ambiguous between the two spellings, as in torchrun
        (["--bogus", "t.py"], "--bogus"),
        (["-r", "7", "t.py"], "--redirects"),
        (["--local-ranks-filter=0,x", "t.py"], "--local-ranks-filter"),
        (["--signals-to-handle=SIGTERM,", "t.py"], "--signals-to-handle"),
        (["--nnodes=2"], "training_script"),
        ([], "training_script"),
        (["-h"], "--help"),
        (["--nnodes=2", "--help", "t.py"], "--help"),
    ],
)
def test_errors_name_the_flag(argv: list[str], flag: str) -> None:
    with pytest.raises(TorchrunError) as info:
        from_torchrun(argv)
    assert info.value.flag == flag
    assert isinstance(info.value, ValueError)


def test_env_start_method_is_checked_too() -> None:
    with pytest.raises(TorchrunError) as info:
        from_torchrun(["t.py"], {"PET_START_METHOD": "thread"})
    assert info.value.flag == "--start-method"
    assert "PET_START_METHOD" in str(info.value)


@pytest.mark.parametrize(
    ("argv", "rule", "flag"),
    [
        (["--nnodes=3:1", "--rdzv-backend=c10d"], "elastic.min_le_max", "--nnodes=3:1"),
        (["--nproc-per-node=0"], "elastic.nproc.min", "--nproc-per-node=0"),
        (["--nproc_per_node", "0"], "elastic.nproc.min", "--nproc_per_node=0"),  # the spelling as written
        (["--max-restarts=-1"], "elastic.max_restarts.min", "--max-restarts=-1"),
        (["--monitor-interval=0"], "elastic.duration.positive", "--monitor-interval=0"),
        (["--rdzv-backend=zk", "--rdzv-endpoint=h:1"], "elastic.rdzv_backend.known", "--rdzv-backend=zk"),
        (
            ["--nnodes=1:2", "--rdzv-backend=static", "--rdzv-endpoint=h:1"],
            "elastic.static.fixed_size",
            "--rdzv-backend=static",
        ),
        (["--nnodes=1:2"], "elastic.static.fixed_size", "--rdzv-backend (default static)"),
        (["--signals-to-handle=SIGNOPE"], "elastic.signals.known", "--signals-to-handle=SIGNOPE"),
        (
            ["--nproc-per-node=2", "--local-ranks-filter=5"],
            "elastic.local_ranks_filter.range",
            "--local-ranks-filter=5",
        ),
        (["--shutdown-timeout=0"], "elastic.duration.positive", "--shutdown-timeout=0"),
        (["--rdzv-conf=join_timeout=0"], "elastic.duration.positive", "--rdzv-conf=join_timeout=0"),
        (
            ["--nnodes=2", "--rdzv-backend=c10d", "--rdzv-id=a b", "--rdzv-endpoint=h:1"],
            "elastic.rdzv_id.format",
            "--rdzv-id='a b'",
        ),
    ],
)
def test_rule_breaking_lines_name_the_flag_the_user_wrote(argv: list[str], rule: str, flag: str) -> None:
    """Issue 29 item 7: the violations are the task's (a ValidationError, rule ids kept), the message names the flag."""
    with pytest.raises(ei.ValidationError) as info:
        from_torchrun([*argv, "t.py"])
    assert [v.rule for v in info.value.violations] == [rule]
    assert info.value.violations[0].field.startswith("elastic_config.")
    assert getattr(info.value, "flags", None) == (flag,)
    assert f"  {flag}: {rule}: " in str(info.value)


def test_rule_breaking_env_values_name_the_variable() -> None:
    with pytest.raises(ei.ValidationError) as info:
        from_torchrun(["t.py"], {"PET_NNODES": "3:1", "PET_RDZV_BACKEND": "c10d", "PET_MAX_RESTARTS": "-2"})
    assert getattr(info.value, "flags", None) == (
        "PET_NNODES='3:1' (--nnodes)",
        "PET_MAX_RESTARTS='-2' (--max-restarts)",
    )
    # the command line wins over the env, and is what is named
    with pytest.raises(ei.ValidationError) as info:
        from_torchrun(["--max-restarts", "-3", "t.py"], {"PET_MAX_RESTARTS": "1"})
    assert getattr(info.value, "flags", None) == ("--max-restarts=-3",)


@pytest.mark.parametrize(
    ("env", "flag", "needle"),
    [
        (
            {"PET_MAX_RESTARTS": "99999999999"},
            "--max-restarts",
            "PET_MAX_RESTARTS='99999999999': 99999999999 does not fit",
        ),
        ({"PET_RDZV_CONF": "join_timeout=x"}, "--rdzv-conf", "PET_RDZV_CONF='join_timeout=x': join_timeout='x' is not"),
        ({"PET_RDZV_CONF": "x"}, "--rdzv-conf", "PET_RDZV_CONF='x': "),
        ({"PET_MONITOR_INTERVAL": "inf"}, "--monitor-interval", "PET_MONITOR_INTERVAL='inf': 'inf' is not a finite"),
        ({"PET_NNODES": "a:b"}, "--nnodes", "PET_NNODES='a:b': 'a:b' is not N"),
        (
            {"PET_NNODES": "2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "h:99999"},
            "--rdzv-endpoint",
            "PET_RDZV_ENDPOINT='h:99999': the port",
        ),
        ({"PET_LOCAL_RANKS_FILTER": "a"}, "--local-ranks-filter", "PET_LOCAL_RANKS_FILTER='a': 'a' is not"),
        ({"PET_SIGNALS_TO_HANDLE": "SIGTERM,"}, "--signals-to-handle", "PET_SIGNALS_TO_HANDLE='SIGTERM,': "),
    ],
)
def test_errors_from_env_values_name_the_variable(env: dict[str, str], flag: str, needle: str) -> None:
    """Issue 29 item 7's sibling: a bad PET_* value torchrun takes as the flag's default names the variable."""
    with pytest.raises(TorchrunError) as info:
        from_torchrun(["t.py"], env)
    assert info.value.flag == flag
    assert needle in str(info.value)
    assert str(info.value).count(flag) == 1  # said once


# ---------------------------------------------------------------- to_torchrun


def test_to_torchrun_renders_every_setting() -> None:
    task = expected_task(
        min_replicas=2,
        max_replicas=4,
        nproc_policy=2,
        nproc_per_node=0,
        rdzv_host="::1",
        rdzv_port=29400,
        rdzv_id="job-1",
        join_timeout=Duration(seconds=900),
        read_timeout=Duration(seconds=60),
        max_restarts=3,
        monitor_interval=Duration(nanos=100_000_000),
        start_method=3,
        role="trainer",
        redirects=3,
        tee=1,
        local_ranks_filter=[0, 1],
        numa_binding=1,
        signals_to_handle=["SIGTERM", "SIGUSR1"],
        shutdown_timeout=Duration(seconds=45),
        virtual_local_rank=True,
    )
    task.elastic_config.rdzv_options.add(key="is_host", value="1")
    entry = TorchrunEntrypoint("pkg.train", ("--lr", "1"), module=True)
    argv = to_torchrun(task, entry)
    assert argv == [
        "--nnodes=2:4",
        "--nproc-per-node=cpu",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=[::1]:29400",
        "--rdzv-id=job-1",
        "--rdzv-conf=join_timeout=900,read_timeout=60,is_host=1",
        "--max-restarts=3",
        "--monitor-interval=0.1",
        "--start-method=forkserver",
        "--role=trainer",
        "--module",  # every flag in FLAGS order, torchrun's own
        "--redirects=3",
        "--tee=1",
        "--local-ranks-filter=0,1",
        "--numa-binding=node",
        "--signals-to-handle=SIGTERM,SIGUSR1",
        "--shutdown-timeout=45",
        "--virtual-local-rank",
        "pkg.train",
        "--lr",
        "1",
    ]
    assert from_torchrun(argv) == (task, entry)


def test_to_torchrun_accepts_the_legacy_shape_and_a_script_path() -> None:
    legacy = LegacyTask(workers=2)
    legacy.elastic_config.CopyFrom(expected_task(min_replicas=2, max_replicas=2).elastic_config)
    argv = to_torchrun(legacy, "train.py", ["--lr", "1"])
    assert argv[-3:] == ["train.py", "--lr", "1"]
    task, _ = from_torchrun(argv)
    assert task.elastic_config == legacy.elastic_config


def test_to_torchrun_empty_backend_is_c10d() -> None:
    task = expected_task(rdzv_backend="")
    assert "--rdzv-backend=c10d" in to_torchrun(task, "t.py")


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"rdzv_backend": "static"}, "--rdzv-endpoint"),
        ({"rdzv_port": 29400}, "--rdzv-endpoint"),
        ({"rdzv_host": "a@b", "rdzv_port": 1}, "--rdzv-endpoint"),
    ],
)
def test_to_torchrun_refuses_what_no_command_line_can_say(fields: dict[str, Any], flag: str) -> None:
    task = expected_task(**fields)
    assert ei.violations(task) == []
    with pytest.raises(TorchrunError) as info:
        to_torchrun(task, "t.py")
    assert info.value.flag == flag


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"collective_timeout": 5}, "collective_timeout"),
        ({"nccl_heartbeat_timeout": 300}, "nccl_heartbeat_timeout"),
        ({"nccl_async_error_handling": False}, "nccl_async_error_handling"),
        ({"nccl_enable_monitoring": True}, "nccl_enable_monitoring"),
    ],
)
def test_to_torchrun_refuses_the_failure_budget_no_flag_says(fields: dict[str, Any], field: str) -> None:
    task = ei.Elastic(nnodes="1:2", **fields).to_task()
    with pytest.raises(TorchrunError) as info:
        to_torchrun(task, "t.py")
    assert info.value.flag == field
    assert "no flag" in str(info.value)


@pytest.mark.parametrize("name", ["join_timeout", "shutdown_timeout"])
def test_to_torchrun_refuses_a_fractional_timeout_as_invalid(name: str) -> None:
    task = expected_task(**{name: Duration(seconds=1, nanos=500_000_000)})
    with pytest.raises(ei.ValidationError, match=r"elastic\.duration\.whole_seconds"):
        to_torchrun(task, "t.py")


@pytest.mark.parametrize(("key", "value"), [(" k", "v"), ("k", ""), ("k", " v")])
def test_to_torchrun_refuses_options_torch_would_read_differently(key: str, value: str) -> None:
    task = expected_task()
    task.elastic_config.rdzv_options.add(key=key, value=value)
    with pytest.raises(TorchrunError) as info:
        to_torchrun(task, "t.py")
    assert info.value.flag == "--rdzv-conf"


def test_to_torchrun_refuses_invalid_tasks_and_bad_entrypoints() -> None:
    non_elastic = KubeflowTask()
    non_elastic.worker_replicas.replicas = 2  # valid; an empty task also breaks task.not_empty
    with pytest.raises(ei.ValidationError) as info:
        to_torchrun(non_elastic, "t.py")
    assert [v.rule for v in info.value.violations] == ["launch.elastic_required"]
    with pytest.raises(ei.ValidationError):
        to_torchrun(expected_task(min_replicas=3), "t.py")
    with pytest.raises(TorchrunError) as err:
        to_torchrun(expected_task(), "-x.py")
    assert err.value.flag == "training_script"
    with pytest.raises(TypeError):
        to_torchrun(expected_task(), TorchrunEntrypoint("t.py"), ["a"])


def test_a_leading_double_dash_script_argument_survives() -> None:
    """argparse drops one "--" right after the script, so to_torchrun doubles it."""
    entry = TorchrunEntrypoint("t.py", ("--", "x"))
    argv = to_torchrun(expected_task(), entry)
    assert argv[-4:] == ["t.py", "--", "--", "x"]
    assert from_torchrun(argv)[1] == entry


# ---------------------------------------------------------------- round trips (property tests)


def _normalised(task: KubeflowTask) -> KubeflowTask:
    out = KubeflowTask()
    out.CopyFrom(task)
    out.elastic_config.rdzv_backend = out.elastic_config.rdzv_backend or "c10d"
    return out


@given(torchrun_tasks(), torchrun_entrypoints())
def test_task_to_argv_to_task_is_lossless(task: KubeflowTask, entry: TorchrunEntrypoint) -> None:
    argv = to_torchrun(task, entry)
    assert from_torchrun(argv) == (_normalised(task), entry)


@given(torchrun_command_lines())
def test_argv_to_task_to_argv(case: tuple[list[str], dict[str, str], KubeflowTask, TorchrunEntrypoint]) -> None:
    argv, env, task, entry = case
    got_task, got_entry = from_torchrun(argv, env)
    assert (got_task, got_entry) == (_normalised(task), entry)
    canonical = to_torchrun(got_task, got_entry)
    assert from_torchrun(canonical) == (got_task, got_entry)  # no env needed: every setting is on the line
    assert to_torchrun(*from_torchrun(canonical)) == canonical  # the canonical form is a fixed point


# ---------------------------------------------------------------- against torch's own torchrun


def _torch_run_module() -> Any:
    import elastic_idl._launch.agent  # noqa: F401  (silences torch's import-time NumPy warning first)

    return pytest.importorskip("torch.distributed.run")


def _torch_parse(run: Any, argv: list[str], env: dict[str, str]) -> Any:
    """torch's torchrun parser under exactly ``env`` (its `env` actions read os.environ when built)."""
    with mock.patch.dict(os.environ, env, clear=True), contextlib.redirect_stderr(io.StringIO()):
        try:
            return run.get_args_parser().parse_args(argv)
        except (SystemExit, ValueError):
            return None


def _our_parse(argv: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    from elastic_idl._launch.agent import installed_torchrun_surface

    surface = installed_torchrun_surface()  # the installed torch's flags, as the drop-in reads them
    try:
        ns = _parser(surface).parse_args(argv)
        resolved = _resolve(ns, env, surface)
    except TorchrunError:
        return None
    out = {dest: v.value for dest, v in resolved.items()}
    out["training_script"], out["training_script_args"] = ns.training_script, ns.training_script_args
    return out


@settings(max_examples=300)
@given(raw_torchrun_command_lines())
def test_parser_agrees_with_torchs_parser(case: tuple[list[str], dict[str, str]]) -> None:
    """Same success or failure, same value for every flag, on raw (often invalid) command lines and env."""
    run = _torch_run_module()
    argv, env = case
    theirs = _torch_parse(run, argv, env)
    ours = _our_parse(argv, env)
    assert (theirs is None) == (ours is None), (argv, env, theirs, ours)
    if theirs is None or ours is None:
        return
    for dest, value in ours.items():
        if not hasattr(theirs, dest):  # a flag of another torch's torchrun: never given here
            continue
        expected = getattr(theirs, dest)
        if dest == "monitor_interval":
            value = float(value)  # kept as text by us, for an exact Duration
        assert value == expected, (dest, argv, env)


def _torchrun_launch_config(run: Any, argv: list[str], env: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    """The LaunchConfig torchrun 2.13 would build (run()'s rendezvous resolution + config_from_args), no launch."""
    logs: dict[str, Any] = {}

    class Logs:
        def __init__(self, **kwargs: Any) -> None:
            logs.update(kwargs)

    with (
        mock.patch.dict(os.environ, env, clear=True),
        mock.patch.object(run, "_get_logs_specs_class", return_value=Logs),
    ):
        args = run.get_args_parser().parse_args(argv)
        if args.standalone:
            args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", "random"
        elif args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None:
            if run.parse_min_max_nnodes(args.nnodes)[1] == 1:
                args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", "random"
        if args.master_port is None:
            args.master_port = 29500
        config, _, _ = run.config_from_args(args)
    return config, logs


@settings(max_examples=60)
@given(torchrun_command_lines())
def test_task_means_what_torchrun_would_run(
    case: tuple[list[str], dict[str, str], KubeflowTask, TorchrunEntrypoint],
) -> None:
    """Our task's LaunchSpec against torchrun's LaunchConfig for the same command line and env."""
    run = _torch_run_module()
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    from elastic_idl._launch.agent import resolve_nproc
    from elastic_idl._task.names import DEFAULT_SHUTDOWN_TIMEOUT_S

    argv, env, _, _ = case
    assume(not any("\0" in v for v in env.values()))  # no process env can hold it (os.environ refuses it)
    task, _ = from_torchrun(argv, env)
    e = task.elastic_config
    spec = ei.to_launch_spec(task)
    try:
        theirs, logs = _torchrun_launch_config(run, argv, env)
    except ValueError:
        assert spec.nproc_policy == "gpu"  # torchrun: "Cuda is not available"
        return
    assert (spec.min_nodes, spec.max_nodes, spec.rdzv_backend) == (
        theirs.min_nodes,
        theirs.max_nodes,
        theirs.rdzv_backend,
    )
    assert resolve_nproc(spec) == theirs.nproc_per_node
    assert (spec.max_restarts, spec.role, spec.virtual_local_rank) == (
        theirs.max_restarts,
        theirs.role,
        theirs.virtual_local_rank,
    )
    assert math.isclose(spec.monitor_interval, theirs.monitor_interval, rel_tol=1e-12)
    if e.start_method:  # unset: each launcher's own default (torchrun: spawn)
        assert spec.start_method == theirs.start_method
    assert (spec.shutdown_timeout or DEFAULT_SHUTDOWN_TIMEOUT_S) == theirs.shutdown_timeout  # unset: torch's 30 s
    assert [s.strip() for s in spec.signals_to_handle.split(",")] == [
        s.strip() for s in theirs.signals_to_handle.split(",")
    ]
    assert (spec.redirects, spec.tee) == (str(logs["redirects"].value), str(logs["tee"].value))
    assert set(spec.local_ranks_filter) == (logs["local_ranks_filter"] or set())
    assert spec.numa_binding == (theirs.numa_options.affinity_mode.value if theirs.numa_options else None)
    if e.rdzv_host:  # empty: the runtime's choice (ours 127.0.0.1 and a free port; torchrun localhost:0 or :29400)
        default_port = {"c10d": 29400, "static": -1}.get(spec.rdzv_backend, 2379)
        assert parse_rendezvous_endpoint(spec.rdzv_endpoint, default_port) == parse_rendezvous_endpoint(
            theirs.rdzv_endpoint, default_port
        )
    if e.rdzv_id:
        assert spec.run_id == theirs.run_id
    configs = {k: v for k, v in theirs.rdzv_configs.items() if not (k == "rank" and spec.rdzv_backend == "static")}
    if "timeout" not in spec.rdzv_configs:
        configs.pop("timeout")  # LaunchConfig's own default, added after parsing
    # cas_backoff_max_seconds is a number in the spec (the typed field) and text in torchrun's: torch reads float()
    cas = "cas_backoff_max_seconds"
    if cas in configs:
        assert math.isclose(float(spec.rdzv_configs[cas]), float(configs.pop(cas)), rel_tol=1e-12)
    assert {k: str(v) for k, v in spec.rdzv_configs.items() if k != cas} == {k: str(v) for k, v in configs.items()}


def test_the_docs_flag_table_is_the_flag_table(repo_root: Any) -> None:
    """Every torchrun flag is in the table of docs/reference/torchrun.md, with the status FLAGS gives it."""
    section = (repo_root / "docs" / "reference" / "torchrun.md").read_text()
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in ("covered", "entrypoint", "launch", "refused", "error"):
            for flag in cells[0].replace("`", "").split(","):
                rows[flag.strip()] = cells[1]
    for f in FLAGS:
        for option in f.options:
            if option.startswith("--") and "_" in option:
                continue  # the underscore spelling of a dashed flag
            assert rows.get(option) == f.status, option
    assert rows.get("--help") == "error"


# ---------------------------------------------------------------- issue #9


def test_a_command_line_as_one_string_is_a_type_error_that_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"pass argv=\['--nproc_per_node=2', 'x.py'\]"):
        from_torchrun("--nproc_per_node=2 x.py")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="strings only"):
        from_torchrun(["--nnodes", 2, "x.py"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="env must be a mapping"):
        from_torchrun(["x.py"], ["PET_NNODES=2"])  # type: ignore[arg-type]
    task, _ = from_torchrun(["x.py"])
    with pytest.raises(TypeError, match="list of arguments"):
        to_torchrun(task, "x.py", "--lr 1")  # type: ignore[arg-type]


def test_what_torchruns_parser_rejects_is_a_usage_error() -> None:
    from elastic_idl._errors import TorchrunUsageError

    for argv, env in (([], {}), (["--bogus", "t.py"], {}), (["-h"], {}), (["t.py"], {"PET_MAX_RESTARTS": "x"})):
        with pytest.raises(TorchrunUsageError):
            from_torchrun(argv, env)
    for argv in (["--nnodes=3:1", "t.py"], ["--logs-specs=x", "t.py"], ["--module", "--no-python", "t"]):
        with pytest.raises((TorchrunError, ei.ValidationError)) as info:
            from_torchrun(argv)
        assert not isinstance(info.value, TorchrunUsageError)


def test_per_node_settings_are_launch_time_settings_of_the_drop_in() -> None:
    from elastic_idl._sdk.torchrun import NodeSettings, parse_torchrun

    static = ["--nnodes=2", "--master-addr=10.0.0.1", "--master-port=29500"]
    task, _, node = parse_torchrun([*static, "--node-rank=1", "--local-addr=10.0.0.2", "--log-dir=/l", "t.py"])
    assert node == NodeSettings(node_rank=1, local_addr="10.0.0.2", log_dir="/l")
    assert (task.elastic_config.rdzv_backend, task.elastic_config.rdzv_host) == ("static", "10.0.0.1")
    assert parse_torchrun([*static, "t.py"], {"PET_NODE_RANK": "1", "PET_LOG_DIR": "/e"})[2] == NodeSettings(
        node_rank=1, log_dir="/e"
    )
    assert parse_torchrun(["t.py"])[2] == NodeSettings()
    # from_torchrun cannot put them in a task: refused, saying where they go instead
    with pytest.raises(UnsupportedFlagError, match=r"--node-rank: 1: a launch-time setting .*elastic-idl torchrun"):
        from_torchrun([*static, "--node-rank=1", "t.py"])
    with pytest.raises(TorchrunError, match=r"--node-rank: 2 is not in 0\.\.1"):
        parse_torchrun([*static, "--node-rank=2", "t.py"])


def test_node_rank_where_the_rendezvous_assigns_it() -> None:
    from elastic_idl._sdk.torchrun import NodeSettings, parse_torchrun

    # An ambient PET_NODE_RANK (a non-elastic pod sets one) with torchrun's default one-node line:
    # ignored, as torchrun ignores it; the message no longer contradicts itself.
    task, _, node = parse_torchrun(["t.py"], {"PET_NODE_RANK": "1"})
    assert node == NodeSettings() and task.elastic_config.rdzv_backend == "c10d"
    assert from_torchrun(["t.py"], {"PET_NODE_RANK": "1"})[0] == task
    # On the command line, with c10d: refused (torchrun would ignore it), saying why.
    with pytest.raises(UnsupportedFlagError, match="only the static backend uses a node rank") as info:
        from_torchrun(["--rdzv-backend=c10d", "--rdzv-endpoint=h:1", "--nnodes=1:2", "--node-rank=1", "t.py"])
    assert "PET_NODE_RANK" not in str(info.value)


def test_per_rank_redirect_maps_say_what_to_use_instead() -> None:
    with pytest.raises(UnsupportedFlagError, match=r"give one value .*--local-ranks-filter"):
        from_torchrun(["-r", "0:1,1:2", "t.py"])


def test_the_help_lists_every_flag_by_status() -> None:
    from elastic_idl._sdk.torchrun import torchrun_help

    text = torchrun_help()
    for f in FLAGS:
        dashed = next(o for o in f.options if o.startswith("--"))
        assert dashed in text, dashed
    sections = text.split("\n\n")
    launch = next(sec for sec in sections if sec.startswith("Launch-time"))
    assert all(flag in launch for flag in ("--node-rank", "--local-addr", "--log-dir"))
