"""Parity with flyteplugins-pytorch 2.12 (the Flyte 2 SDK's own pytorch plugin, test-only).

For a generated table of settings, flyteplugins-pytorch's ``Elastic`` and ``elastic_idl.flyte2.Elastic``
with the same arguments are each put in a ``flyte.TaskEnvironment`` and the ``@env.task`` is
serialized by Flyte 2 itself (``translate_task_to_wire``): the whole ``TaskSpec`` is equal once
our extension fields are removed (task type, version, custom, container, interface, metadata),
and the extension fields carry the values given (monitor interval, rendezvous timeouts, the NCCL
knobs). Then: the defaults are flyteplugins-pytorch's; the arguments each side refuses, and where
they differ (docs/quickstart/flyte2.md, "Moving from flyteplugins-pytorch"); registration with
``flyte.extend.TaskPluginRegistry``, for both config types.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import pathlib
import subprocess
import sys
import warnings
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings

import elastic_idl as ei
from strategies import flyte2_kwargs

pytest.importorskip("flyte")
pytest.importorskip("flyteplugins.pytorch")

# Flyte 2 and its plugin, imported once with their import-time warnings silenced (pydantic's
# class-based config in flyte.io, torch's); what the tests run is held to warnings-as-errors.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import flyte
    import flyte.io
    from flyte._internal.runtime.task_serde import translate_task_to_wire
    from flyte.extend import TaskPluginRegistry
    from flyte.models import SerializationContext
    from flyteplugins.pytorch import task as upstream

from elastic_idl.flyte2 import Elastic, ElasticFunctionTask, RunPolicy

#: Our extension fields (ElasticConfig numbers >= 100), by JSON name.
EXTENSIONS = {f.json_name for f in ei.ElasticConfig.DESCRIPTOR.fields if f.number >= 100}
SCTX = SerializationContext(version="v1", root_dir=pathlib.Path(__file__).resolve().parent)


def train(x: int) -> int:
    """The task function every case serializes (module level: Flyte 2's resolver names it)."""
    return x


def _serialize(config: Any) -> dict[str, Any]:
    env = flyte.TaskEnvironment(name="parity", plugin_config=config, image="ghcr.io/x/train:1")
    task = env.task(train)
    return MessageToDict(translate_task_to_wire(task, SCTX))


def _strip(spec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    elastic = out["taskTemplate"].get("custom", {}).get("elasticConfig")
    if elastic is not None:
        for key in EXTENSIONS & set(elastic):
            del elastic[key]
    return out


def _as_upstream(kwargs: dict[str, Any]) -> dict[str, Any]:
    kw = copy.deepcopy(kwargs)  # torch writes into rdzv_configs in a pod; never share one dict
    if isinstance(kw.get("run_policy"), dict):
        kw["run_policy"] = upstream.RunPolicy(**kw["run_policy"])
    return kw


def _as_ours(kwargs: dict[str, Any]) -> dict[str, Any]:
    kw = copy.deepcopy(kwargs)
    if isinstance(kw.get("run_policy"), dict):
        kw["run_policy"] = RunPolicy(**kw["run_policy"])
    return kw


# ------------------------------------------------------------------------------------------ the table
#: A product over what shapes the job (the nnodes forms, nproc, max_restarts) ...
_SHAPES = [
    {"nnodes": n, "nproc_per_node": p, **({} if r is None else {"max_restarts": r})}
    for n, p, r in itertools.product([1, "1", 2, "2", "1:4", "2:4"], [1, 4], [None, 0])
]
#: ... then every other setting on a two-node and on a ranged job.
_SETTINGS: list[dict[str, Any]] = [
    {"rdzv_backend": "etcd"},
    {"rdzv_backend": "etcd-v2"},
    {"run_policy": {}},
    {"run_policy": {"clean_pod_policy": "all", "ttl_seconds_after_finished": 600}},
    {"run_policy": {"clean_pod_policy": "Running", "active_deadline_seconds": 3600, "backoff_limit": 2}},
    {"run_policy": {"clean_pod_policy": "None", "backoff_limit": 0}},
    {"monitor_interval": 10},
    {"monitor_interval": 1, "max_restarts": 5},
    {"rdzv_configs": {}},
    {"rdzv_configs": {"join_timeout": 1800}},
    {"rdzv_configs": {"timeout": 1200}},
    {"rdzv_configs": {"timeout": 900, "join_timeout": 900, "read_timeout": 60}},
    {"rdzv_configs": {"join_timeout": 300, "last_call_timeout": 10, "close_timeout": 20}},
    {"nccl_heartbeat_timeout_sec": None},
    {"nccl_heartbeat_timeout_sec": 60, "nccl_collective_timeout_sec": 120},
    {"nccl_async_error_handling": True},
    {"nccl_enable_monitoring": False},
    {
        "nccl_heartbeat_timeout_sec": 30,
        "nccl_async_error_handling": True,
        "nccl_collective_timeout_sec": 45,
        "nccl_enable_monitoring": True,
    },
]
PARITY: list[dict[str, Any]] = _SHAPES + [
    {"nnodes": n, "nproc_per_node": 2, **s} for n, s in itertools.product([2, "1:3"], _SETTINGS)
]


def _case_id(kwargs: dict[str, Any]) -> str:
    return ",".join(f"{k}={v!r}" for k, v in kwargs.items()).replace(" ", "")


def _expected_extensions(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The extension fields our custom carries for these arguments (flyteplugins-pytorch's defaults beside)."""
    given = {f.name: f.default for f in dataclasses.fields(upstream.Elastic) if f.default is not dataclasses.MISSING}
    given["rdzv_configs"] = {"timeout": 900, "join_timeout": 900}
    given.update(kwargs)
    out: dict[str, Any] = {"monitorInterval": f"{given['monitor_interval']}s"}
    rdzv = dict(given["rdzv_configs"])
    if "timeout" in rdzv:  # c10d and etcd-v2 read only join_timeout; etcd reads timeout itself
        if given["rdzv_backend"] == "etcd":
            out["rdzvOptions"] = [{"key": "timeout", "value": str(rdzv.pop("timeout"))}]
        else:
            rdzv.setdefault("join_timeout", rdzv.pop("timeout"))
    for key, value in rdzv.items():
        out["".join([key.split("_")[0], *(w.title() for w in key.split("_")[1:])])] = f"{value}s"
    if given["nccl_heartbeat_timeout_sec"] is not None:
        out["ncclHeartbeatTimeout"] = f"{given['nccl_heartbeat_timeout_sec']}s"
    if given["nccl_collective_timeout_sec"] is not None:
        out["collectiveTimeout"] = f"{given['nccl_collective_timeout_sec']}s"
    if given["nccl_async_error_handling"]:
        out["ncclAsyncErrorHandling"] = "TOGGLE_ON"
    if given["nccl_enable_monitoring"]:
        out["ncclEnableMonitoring"] = "TOGGLE_ON"
    return out


def test_the_table_is_generated_and_large() -> None:
    assert len(PARITY) >= 20
    assert len({_case_id(k) for k in PARITY}) == len(PARITY)


@pytest.mark.parametrize("kwargs", PARITY, ids=_case_id)
def test_the_task_spec_equals_flyteplugins_pytorchs_and_carries_every_setting(kwargs: dict[str, Any]) -> None:
    theirs = _serialize(upstream.Elastic(**_as_upstream(kwargs)))
    ours = _serialize(Elastic(**_as_ours(kwargs)))
    assert _strip(ours) == _strip(theirs)
    template = ours["taskTemplate"]
    assert (template["type"], template["taskTypeVersion"]) == (theirs["taskTemplate"]["type"], 1)
    assert template["type"] == ("python-task" if kwargs["nnodes"] == 1 else "pytorch")
    elastic = template["custom"]["elasticConfig"]
    assert {k: v for k, v in elastic.items() if k in EXTENSIONS} == _expected_extensions(kwargs)
    # The custom as the backend receives it (a Struct: numbers as floats) decodes strictly and validates
    # (a python-task's too: Flyte 2 writes the custom of every task, flytekit none for a python-task).
    task = ei.from_custom(template["custom"], "pytorch", 1)
    ei.validate(task)


def test_the_custom_config_is_flyteplugins_pytorchs_dict_plus_extensions() -> None:
    """custom_config() itself (not only the wire form): equal dicts once the extensions are removed."""
    kwargs = {"nnodes": "2:4", "nproc_per_node": 4, "run_policy": {"clean_pod_policy": "all", "backoff_limit": 3}}
    envs = [
        flyte.TaskEnvironment(name=n, plugin_config=c)
        for n, c in (("a", upstream.Elastic(**_as_upstream(kwargs))), ("b", Elastic(**_as_ours(kwargs))))
    ]
    theirs, ours = (env.task(train).custom_config(SCTX) for env in envs)
    extensions = {k: ours["elasticConfig"].pop(k) for k in list(ours["elasticConfig"]) if k in EXTENSIONS}
    assert ours == theirs
    assert extensions == {
        "monitorInterval": "3s",
        "joinTimeout": "900s",
        "ncclHeartbeatTimeout": "300s",
        "ncclEnableMonitoring": "TOGGLE_ON",
    }


# ---------------------------------------------------------------------------------------- defaults


def _init_parameters(cls: type) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]


def test_the_arguments_and_defaults_are_flyteplugins_pytorchs() -> None:
    theirs = _init_parameters(upstream.Elastic)
    ours = _init_parameters(Elastic)[: len(theirs)]
    assert [(n, k) for n, k, _ in ours] == [(n, k) for n, k, _ in theirs]  # same names, order, positional
    ours_defaults = {f.name: f for f in dataclasses.fields(Elastic)}
    for field in dataclasses.fields(upstream.Elastic):
        mine = ours_defaults[field.name]
        if field.default_factory is not dataclasses.MISSING:
            assert mine.default_factory() == field.default_factory()  # type: ignore[misc]
        else:
            assert mine.default == field.default, field.name
    assert _init_parameters(RunPolicy) == _init_parameters(upstream.RunPolicy)
    # Positional, as flyteplugins-pytorch's dataclass takes them.
    assert Elastic(2, 4).config == Elastic(nnodes=2, nproc_per_node=4).config


def test_the_defaults_reach_the_launcher_as_flyteplugins_pytorch_applies_them() -> None:
    cfg = Elastic(nnodes=2, nproc_per_node=2).config
    assert (cfg.max_restarts, cfg.monitor_interval, cfg.rdzv_backend) == (3, 3, ei.DEFAULT_RDZV_BACKEND)
    assert cfg.rdzv_configs == {"join_timeout": 900}  # "timeout" read as c10d reads it
    assert (cfg.nccl_heartbeat_timeout, cfg.collective_timeout) == (300, None)
    # False leaves torch's default, as flyteplugins-pytorch sets nothing for it: unset, not "0".
    assert (cfg.nccl_async_error_handling, cfg.nccl_enable_monitoring) == (None, True)
    assert Elastic(nnodes=2, nproc_per_node=2, nccl_enable_monitoring=False).config.nccl_enable_monitoring is None


# ------------------------------------------------------------------------------ what each side refuses


def _upstream_refuses(kwargs: dict[str, Any]) -> bool:
    """Whether flyteplugins-pytorch refuses: at Elastic(...), at @env.task or when it serializes."""
    try:
        _serialize(upstream.Elastic(**kwargs))
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return True
    return False


def _ours_refuses(kwargs: dict[str, Any]) -> ei.ElasticIdlError | TypeError | None:
    try:
        Elastic(**kwargs)
    except (ei.ValidationError, TypeError) as err:
        return err
    return None


#: (id, arguments, the argument our error names): refused by both.
BOTH_REFUSE: list[tuple[str, dict[str, Any], str]] = [
    ("nnodes_not_a_number", {"nnodes": "x", "nproc_per_node": 1}, "nnodes"),
    ("nnodes_three_parts", {"nnodes": "1:2:3", "nproc_per_node": 1}, "nnodes"),
    ("nproc_missing", {"nnodes": 2}, "nproc_per_node"),
    ("misspelt_keyword", {"nnodes": 2, "nproc_per_nodes": 2}, "nproc_per_nodes"),
    (
        "unknown_clean_pod_policy",
        {"nnodes": 2, "nproc_per_node": 1, "run_policy": RunPolicy(clean_pod_policy="sometimes")},  # type: ignore[arg-type]
        "run_policy.clean_pod_policy",
    ),
]


@pytest.mark.parametrize(("kwargs", "argument"), [c[1:] for c in BOTH_REFUSE], ids=[c[0] for c in BOTH_REFUSE])
def test_what_flyteplugins_pytorch_refuses_we_refuse_naming_the_argument(kwargs: dict[str, Any], argument: str) -> None:
    theirs = dict(kwargs)
    if isinstance(theirs.get("run_policy"), RunPolicy):
        theirs["run_policy"] = upstream.RunPolicy(**dataclasses.asdict(theirs["run_policy"]))
    assert _upstream_refuses(theirs)
    err = _ours_refuses(kwargs)
    assert err is not None
    if isinstance(err, ei.ValidationError):
        assert argument in [v.field for v in err.violations]
    else:
        assert argument in str(err)
    if "nproc_per_nodes" in kwargs:
        assert isinstance(err, ei.UnknownArgumentError) and err.suggestion == "nproc_per_node"


#: (id, arguments, the argument our error names, its rule): flyteplugins-pytorch serializes them, we refuse.
ONLY_WE_REFUSE: list[tuple[str, dict[str, Any], str, str]] = [
    ("min_above_max", {"nnodes": "3:1"}, "nnodes", "elastic.min_le_max"),
    ("zero_nodes", {"nnodes": 0}, "nnodes", "elastic.min_replicas.min"),
    ("zero_min_nodes", {"nnodes": "0:2"}, "nnodes", "elastic.min_replicas.min"),
    ("zero_nproc", {"nproc_per_node": 0}, "nproc_per_node", "elastic.nproc.min"),
    ("negative_restarts", {"max_restarts": -1}, "max_restarts", "elastic.max_restarts.min"),
    ("zero_monitor_interval", {"monitor_interval": 0}, "monitor_interval", "elastic.duration.positive"),
    ("unknown_backend", {"rdzv_backend": "foo"}, "rdzv_backend", "elastic.rdzv_backend.known"),
    (
        "timeout_differs_from_join_timeout",
        {"rdzv_configs": {"timeout": 1200, "join_timeout": 900}},
        "rdzv_configs.timeout",
        "sdk.rdzv_timeout",
    ),
    (
        "zero_collective_timeout",
        {"nccl_collective_timeout_sec": 0},
        "nccl_collective_timeout_sec",
        "elastic.duration.positive",
    ),
    (
        "fractional_heartbeat",
        {"nccl_heartbeat_timeout_sec": 1.5},
        "nccl_heartbeat_timeout_sec",
        "elastic.duration.whole_seconds",
    ),
    (
        "negative_backoff_limit",
        {"run_policy": {"backoff_limit": -1}},
        "run_policy.backoff_limit",
        "run_policy.non_negative",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "argument", "rule"), [c[1:] for c in ONLY_WE_REFUSE], ids=[c[0] for c in ONLY_WE_REFUSE]
)
def test_what_flyteplugins_pytorch_serializes_and_we_refuse(kwargs: dict[str, Any], argument: str, rule: str) -> None:
    full = {"nnodes": 2, "nproc_per_node": 1, **kwargs}
    assert not _upstream_refuses(_as_upstream(full))
    err = _ours_refuses(_as_ours(full))
    assert isinstance(err, ei.ValidationError), err
    assert {v.field: v.rule for v in err.violations} == {argument: rule}


#: (id, arguments): we accept them, flyteplugins-pytorch refuses (TypeError or at serialization).
ONLY_WE_ACCEPT: list[tuple[str, dict[str, Any]]] = [
    ("nproc_auto", {"nnodes": 2, "nproc_per_node": "auto"}),
    ("nproc_gpu", {"nnodes": 2, "nproc_per_node": "gpu"}),
    ("run_policy_mapping", {"nnodes": 2, "nproc_per_node": 1, "run_policy": {"backoff_limit": 2}}),
    ("start_method", {"nnodes": 2, "nproc_per_node": 1, "start_method": "fork"}),
    ("replica_settings", {"nnodes": 2, "nproc_per_node": 1, "image": "ghcr.io/x/y:1", "requests": {"cpu": "2"}}),
    ("extension_fields", {"nnodes": 2, "nproc_per_node": 1, "rdzv_id": "r1", "role": "trainer", "tee": "all"}),
]


@pytest.mark.parametrize("kwargs", [c[1] for c in ONLY_WE_ACCEPT], ids=[c[0] for c in ONLY_WE_ACCEPT])
def test_what_we_accept_and_flyteplugins_pytorch_refuses(kwargs: dict[str, Any]) -> None:
    assert _upstream_refuses(kwargs)
    spec = _serialize(Elastic(**kwargs))
    ei.validate(ei.from_custom(spec["taskTemplate"]["custom"], "pytorch", 1))


def test_flyteplugins_pytorchs_run_policy_is_accepted_as_ours() -> None:
    given = {"clean_pod_policy": "Running", "backoff_limit": 4}
    theirs = Elastic(nnodes=2, nproc_per_node=1, run_policy=upstream.RunPolicy(**given))  # type: ignore[arg-type]
    assert theirs.config == Elastic(nnodes=2, nproc_per_node=1, run_policy=RunPolicy(**given)).config  # type: ignore[arg-type]
    assert theirs.config.run_policy == ei.RunPolicy(clean_pod_policy=ei.CleanPodPolicy.RUNNING, backoff_limit=4)


def test_the_config_is_frozen_where_flyteplugins_pytorchs_is_mutable() -> None:
    theirs, ours = upstream.Elastic(nnodes=2, nproc_per_node=1), Elastic(nnodes=2, nproc_per_node=1)
    theirs.max_restarts = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.max_restarts = 5  # type: ignore[misc]
    assert dataclasses.replace(ours, max_restarts=5).config.max_restarts == 5


# ------------------------------------------------------------------------------------- registration


def test_both_config_types_are_registered_and_build_our_task_class() -> None:
    assert TaskPluginRegistry.find(Elastic) is ElasticFunctionTask
    assert TaskPluginRegistry.find(ei.Elastic) is ElasticFunctionTask
    for config in (Elastic(nnodes="1:2", nproc_per_node=2), ei.Elastic(nnodes="1:2", nproc_per_node=2)):
        env = flyte.TaskEnvironment(name="reg", plugin_config=config)
        task = env.task(train)
        assert type(task) is ElasticFunctionTask
        assert (task.task_type, task.task_type_version) == ("pytorch", 1)


def test_elastic_idl_elastic_keeps_its_flytekit_defaults_and_its_python_task_rule() -> None:
    # elastic_idl.Elastic in a TaskEnvironment: flytekit's defaults (max_restarts 0, no monitor interval)
    # and its nnodes="1" -> python-task; the custom is written as for any other task.
    task = flyte.TaskEnvironment(name="fk", plugin_config=ei.Elastic(nnodes="1", nproc_per_node=2)).task(train)
    assert task.task_type == "python-task"
    custom = task.custom_config(SCTX)
    assert custom["elasticConfig"]["nprocPerNode"] == 2 and "maxRestarts" not in custom["elasticConfig"]
    assert "monitorInterval" not in custom["elasticConfig"]


def _fresh(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # the package alone: neither flyte nor torch
        ("import sys, elastic_idl.flyte2; print('flyte' in sys.modules, 'torch' in sys.modules)", "False False"),
        # the config: flyte imported to register it (Flyte 2 has no entry points), never torch
        (
            "import sys\nfrom elastic_idl.flyte2 import Elastic\nfrom flyte.extend import TaskPluginRegistry\n"
            "print(TaskPluginRegistry.find(Elastic).__name__, 'torch' in sys.modules)",
            "ElasticFunctionTask False",
        ),
        # flyte first, then elastic_idl.Elastic alone: registered as its module loads
        (
            "import flyte\nfrom flyte.extend import TaskPluginRegistry\nfrom elastic_idl import Elastic\n"
            "print(TaskPluginRegistry.find(Elastic).__name__)",
            "ElasticFunctionTask",
        ),
        # elastic_idl.Elastic first, flyte later: importing elastic_idl.flyte2 registers it
        (
            "from elastic_idl import Elastic\nimport flyte\nfrom flyte.extend import TaskPluginRegistry\n"
            "print(TaskPluginRegistry.find(Elastic))\nimport elastic_idl.flyte2\n"
            "print(TaskPluginRegistry.find(Elastic).__name__)",
            "None\nElasticFunctionTask",
        ),
    ],
    ids=["package_alone", "config_registers", "flyte_first", "flyte_later"],
)
def test_registration_happens_at_import_in_every_order(code: str, expected: str) -> None:
    assert _fresh(code) == expected


def test_a_plugin_registered_first_for_the_type_is_kept() -> None:
    code = (
        "from flyte.extend import TaskPluginRegistry, AsyncFunctionTaskTemplate\n"
        "import elastic_idl as ei\n"
        "TaskPluginRegistry.register(config_type=ei.Elastic, plugin=AsyncFunctionTaskTemplate)\n"
        "import elastic_idl.flyte2._config\n"
        "print(TaskPluginRegistry.find(ei.Elastic).__name__)"
    )
    assert _fresh(code) == "AsyncFunctionTaskTemplate"


def test_our_extras_reach_elastic_idl_elastic_and_none_keeps_its_defaults() -> None:
    cfg = Elastic(nnodes=2, nproc_per_node=1, rdzv_port="29500", role="trainer", tee="all", start_method="spawn")
    assert (cfg.config.rdzv_port, cfg.config.role, cfg.config.tee, cfg.config.start_method) == (
        29500,
        "trainer",
        3,
        "spawn",
    )
    defaults = ei.Elastic(nnodes=2, nproc_per_node=1)
    plain = Elastic(nnodes=2, nproc_per_node=1).config
    for name in (
        "rdzv_id",
        "rdzv_host",
        "rdzv_port",
        "role",
        "redirects",
        "tee",
        "local_ranks_filter",
        "signals_to_handle",
    ):
        assert getattr(plain, name) == getattr(defaults, name), name
    with pytest.raises(ei.ValidationError) as info:
        Elastic(nnodes=2, nproc_per_node=1, rdzv_port=70000)
    assert [v.field for v in info.value.violations] == ["rdzv_port"]


def test_the_config_and_the_task_pickle_and_a_task_override_rebuilds_our_task() -> None:
    import pickle

    import cloudpickle

    cfg = Elastic(nnodes="1:3", nproc_per_node=2, nccl_collective_timeout_sec=90)
    assert pickle.loads(pickle.dumps(cfg)) == cfg and hash(pickle.loads(pickle.dumps(cfg))) == hash(cfg)
    task = flyte.TaskEnvironment(name="pk", plugin_config=cfg).task(train)
    back = cloudpickle.loads(cloudpickle.dumps(task))  # Flyte 2's pkl code bundles pickle the task
    assert type(back) is ElasticFunctionTask and back.custom_config(SCTX) == task.custom_config(SCTX)
    other = task.override(plugin_config=Elastic(nnodes=3, nproc_per_node=1))
    assert type(other) is ElasticFunctionTask
    assert other.custom_config(SCTX)["elasticConfig"]["maxReplicas"] == 3


@settings(max_examples=150, derandomize=True, database=None)
@given(flyte2_kwargs())
def test_any_setting_both_accept_serializes_the_same_custom(kwargs: dict[str, Any]) -> None:
    """Beyond the table: Hypothesis draws flyteplugins-pytorch's arguments; custom_config() of both tasks
    is equal once the extension fields are removed, and so are task type and version."""
    theirs = flyte.TaskEnvironment(name="h", plugin_config=upstream.Elastic(**_as_upstream(kwargs))).task(train)
    ours = flyte.TaskEnvironment(name="h", plugin_config=Elastic(**_as_ours(kwargs))).task(train)
    assert (ours.task_type, ours.task_type_version) == (theirs.task_type, theirs.task_type_version)
    custom = ours.custom_config(SCTX)
    extensions = {k: custom["elasticConfig"].pop(k) for k in list(custom["elasticConfig"]) if k in EXTENSIONS}
    assert custom == theirs.custom_config(SCTX)
    assert extensions == _expected_extensions(kwargs)
