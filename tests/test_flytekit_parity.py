"""Parity with the real flytekit SDK (flytekitplugins-kfpytorch from PyPI, test-only).

Both directions, for a table of Elastic settings:
- SDK side: flytekit serializes a task with ``task_config=Elastic(...)``; our ``Elastic(...)``
  with the same arguments must emit the same task type, task_type_version and custom dict
  once our extension fields are removed.
- Runtime side: the LaunchConfig flytekit builds in the pod (captured from its own
  ``_execute``) against ours, built from flytekit's serialized custom and from ours. Every
  difference is one the parity table of docs/guide/sdk-config.md documents, and nothing else differs.
"""

from __future__ import annotations

import copy
import importlib
import warnings
from collections import OrderedDict
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

import elastic_idl as ei
from elastic_idl._sdk.elastic import Elastic
from elastic_idl._task.codec import from_custom
from elastic_idl._task.names import DEFAULT_START_METHOD

#: Our extension fields (ElasticConfig numbers >= 100), by JSON name.
EXTENSIONS = {f.json_name for f in ei.ElasticConfig.DESCRIPTOR.fields if f.number >= 100}
#: The pod env of a Kubeflow elastic job, as far as flytekit reads it.
POD_ENV = {"PET_RDZV_ENDPOINT": "job-worker-0:23456"}
#: The Flyte execution id flytekit uses as run id in a local execution ("local").
RUN_ID = "local"


@pytest.fixture(scope="module")
def fk() -> SimpleNamespace:
    """flytekit and its PyTorch plugin, imported once (about 2 s); torch's import warnings silenced."""
    pytest.importorskip("flytekitplugins.kfpytorch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("elastic_idl._launch.agent")
        kfp = importlib.import_module("flytekitplugins.kfpytorch")
        flytekit = importlib.import_module("flytekit")
        configuration = importlib.import_module("flytekit.configuration")
        translator = importlib.import_module("flytekit.tools.translator")
        launcher_api = importlib.import_module("torch.distributed.launcher.api")
    image = configuration.Image(name="default", fqn="ghcr.io/x/train", tag="1")
    return SimpleNamespace(
        kfp=kfp,
        task=flytekit.task,
        Resources=flytekit.Resources,
        settings=configuration.SerializationSettings(image_config=configuration.ImageConfig(default_image=image)),
        get_serializable=translator.get_serializable,
        launcher_api=launcher_api,
    )


def flytekit_kwargs(fk: SimpleNamespace, spec: dict[str, Any]) -> dict[str, Any]:
    """A case's settings as flytekit objects: run_policy as flytekit's RunPolicy (enum by member name).

    A deep copy every time: flytekit hands its ``rdzv_configs`` dict to torch's LaunchConfig,
    which writes ``"timeout"`` into it, so a shared dict would change under the next test.
    """
    kw = copy.deepcopy(spec)
    if "run_policy" in kw:
        rp = dict(kw["run_policy"])
        if "clean_pod_policy" in rp:
            rp["clean_pod_policy"] = fk.kfp.CleanPodPolicy[rp["clean_pod_policy"]]
        kw["run_policy"] = fk.kfp.RunPolicy(**rp)
    return kw


class Serialized(SimpleNamespace):
    custom: dict[str, Any] | None
    wire: dict[str, Any] | None  # the custom as the backend receives it (a protobuf Struct: numbers are floats)
    task_type: str
    task_type_version: int
    task: Any


def flytekit_serialize(fk: SimpleNamespace, config: Any, task_config_kind: str = "Elastic") -> Serialized:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        def train(x: int) -> int:
            return x

        task = fk.task(task_config=config)(train)
        template = fk.get_serializable(OrderedDict(), fk.settings, task).template
        struct = template.to_flyte_idl().custom
    return Serialized(
        custom=template.custom,
        wire=MessageToDict(struct) if template.custom is not None else None,
        task_type=template.type,
        task_type_version=template.task_type_version,
        task=task,
    )


def strip_extensions(custom: dict[str, Any] | None) -> dict[str, Any] | None:
    if custom is None:
        return None
    out = dict(custom)
    if "elasticConfig" in out:
        out["elasticConfig"] = {k: v for k, v in out["elasticConfig"].items() if k not in EXTENSIONS}
    return out


# (id, Elastic keyword arguments): flytekit and we emit the same template (extensions aside).
PARITY: list[tuple[str, dict[str, Any]]] = [
    ("defaults", {}),
    ("single_node_nproc", {"nproc_per_node": 4}),
    ("single_node_fork_restarts", {"start_method": "fork", "max_restarts": 3}),
    ("nnodes_2", {"nnodes": 2}),
    ("reference_example", {"nnodes": "1:3", "nproc_per_node": 4, "max_restarts": 2}),
    ("range_2_4", {"nnodes": "2:4"}),
    ("range_1_1", {"nnodes": "1:1"}),
    ("string_3", {"nnodes": "3"}),
    ("range_1_100", {"nnodes": "1:100"}),
    ("nproc_8", {"nnodes": 4, "nproc_per_node": 8}),
    ("max_restarts_5", {"nnodes": 2, "max_restarts": 5}),
    ("fork", {"nnodes": 2, "start_method": "fork"}),
    ("monitor_interval_10", {"nnodes": 2, "monitor_interval": 10}),
    ("join_timeout_1800", {"nnodes": 2, "rdzv_configs": {"join_timeout": 1800}}),
    ("timeout_only_1200", {"nnodes": 2, "rdzv_configs": {"timeout": 1200}}),
    ("rdzv_configs_empty", {"nnodes": 2, "rdzv_configs": {}}),
    (
        "flytekit_doc_read_timeout",
        {"nnodes": 2, "rdzv_configs": {"timeout": 900, "join_timeout": 900, "read_timeout": 900}},
    ),
    ("run_policy_empty", {"nnodes": 2, "run_policy": {}}),
    (
        "run_policy_full",
        {
            "nnodes": 2,
            "run_policy": {
                "clean_pod_policy": "ALL",
                "ttl_seconds_after_finished": 600,
                "active_deadline_seconds": 3600,
                "backoff_limit": 3,
            },
        },
    ),
    ("run_policy_none_zero", {"nnodes": 2, "run_policy": {"clean_pod_policy": "NONE", "backoff_limit": 0}}),
    ("no_shared_mem", {"nnodes": 2, "increase_shared_mem": False}),
    (
        "everything",
        {
            "nnodes": "2:8",
            "nproc_per_node": 2,
            "max_restarts": 3,
            "start_method": "fork",
            "monitor_interval": 1,
            "rdzv_configs": {"join_timeout": 300, "last_call_timeout": 10},
            "run_policy": {"clean_pod_policy": "RUNNING", "backoff_limit": 1},
        },
    ),
]
PARITY_IDS = [case_id for case_id, _ in PARITY]


def test_the_table_is_big_enough() -> None:
    assert len(PARITY) >= 15
    assert len(set(PARITY_IDS)) == len(PARITY_IDS)


@pytest.mark.parametrize("spec", [spec for _, spec in PARITY], ids=PARITY_IDS)
def test_sdk_emits_what_flytekit_emits(fk: SimpleNamespace, spec: dict[str, Any]) -> None:
    kw = flytekit_kwargs(fk, spec)  # flytekit's own RunPolicy object goes into both configs
    theirs = flytekit_serialize(fk, fk.kfp.Elastic(**kw))
    ours = Elastic(**kw).to_template()
    assert (ours.task_type, ours.task_type_version) == (theirs.task_type, theirs.task_type_version)
    assert strip_extensions(ours.custom) == theirs.custom
    if theirs.wire is not None:
        # What the backend receives (a Struct, floats) decodes to exactly our task, extensions aside.
        assert ours.custom is not None
        ours_upstream = ei.to_custom(from_custom(strip_extensions(ours.custom)), upstream=True)
        assert from_custom(theirs.wire) == from_custom(ours_upstream)


def test_flytekit_single_node_is_a_python_task_without_custom(fk: SimpleNamespace) -> None:
    theirs = flytekit_serialize(fk, fk.kfp.Elastic())
    assert (theirs.custom, theirs.task_type, theirs.task_type_version) == (None, "python-task", 1)


def test_deliberate_difference_nnodes_string_one(fk: SimpleNamespace) -> None:
    """flytekit: nnodes=1 is a python-task, nnodes="1" a one-worker PyTorchJob. Ours: both python-task; "1:1" is the job."""
    theirs_int = flytekit_serialize(fk, fk.kfp.Elastic(nnodes=1))
    theirs_str = flytekit_serialize(fk, fk.kfp.Elastic(nnodes="1"))
    assert theirs_int.task_type == "python-task"
    assert theirs_str.task_type == "pytorch"
    assert theirs_str.custom == {
        "workerReplicas": {"replicas": 1},
        "elasticConfig": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 1, "nprocPerNode": 1},
    }
    assert Elastic(nnodes=1).to_template() == Elastic(nnodes="1").to_template() == (None, "python-task", 1)
    job = Elastic(nnodes="1:1").to_template()
    assert job.task_type == "pytorch"
    assert strip_extensions(job.custom) == theirs_str.custom


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ({"nnodes": "3:1"}, "elastic.min_le_max"),
        ({"nnodes": "0:2"}, "elastic.min_replicas.min"),
        ({"nnodes": 2, "nproc_per_node": 0}, "elastic.nproc.min"),  # flytekit drops the key: 0 is proto3's default
        ({"nnodes": 2, "max_restarts": -1}, "elastic.max_restarts.min"),
        ({"nnodes": 2, "monitor_interval": 0}, "elastic.duration.positive"),
        ({"nnodes": 2, "start_method": "thread"}, "sdk.argument"),  # flytekit fails only in the pod
        ({"nnodes": 2, "rdzv_configs": {"timeout": 1200, "join_timeout": 900}}, "sdk.rdzv_timeout"),
    ],
    ids=["min_gt_max", "min_0", "nproc_0", "restarts_neg", "monitor_0", "start_method", "timeout_ignored"],
)
def test_flytekit_accepts_what_we_refuse(fk: SimpleNamespace, spec: dict[str, Any], rule: str) -> None:
    theirs = flytekit_serialize(fk, fk.kfp.Elastic(**spec))
    assert theirs.task_type == "pytorch"  # serialized without complaint
    with pytest.raises(ei.ValidationError) as info:
        Elastic(**spec)
    assert [v.rule for v in info.value.violations] == [rule]


def test_nproc_auto_only_we_can_say(fk: SimpleNamespace) -> None:
    with pytest.raises(TypeError):  # flytekit 1.16 removed "auto": the proto field is an int32 (flytekit#1736)
        flytekit_serialize(fk, fk.kfp.Elastic(nnodes=2, nproc_per_node="auto"))
    custom = Elastic(nnodes=2, nproc_per_node="auto").to_template().custom
    assert custom is not None
    assert custom["elasticConfig"]["nprocPolicy"] == "NPROC_POLICY_AUTO"
    assert "nprocPerNode" not in custom["elasticConfig"]


# ---------------------------------------------------------------- replica settings: flytekit's PyTorch Worker


@pytest.mark.parametrize(
    "worker",
    [
        {"image": "ghcr.io/x/train:2", "requests": {"cpu": 1, "mem": "1Gi"}},
        {"requests": {"cpu": "500m", "gpu": 1}, "limits": {"cpu": 2, "mem": "4Gi", "ephemeral_storage": "10Gi"}},
        {"image": "img", "limits": {"mem": "8Gi"}, "restart_policy": "FAILURE"},
        {"image": "img", "requests": {"cpu": 4}, "limits": {"cpu": 4}, "restart_policy": "ALWAYS"},
    ],
    ids=["image_requests", "requests_limits", "limits_restart", "all"],
)
def test_replica_settings_are_written_like_flytekits_worker(fk: SimpleNamespace, worker: dict[str, Any]) -> None:
    kw: dict[str, Any] = {"image": worker.get("image")}
    for kind in ("requests", "limits"):
        if kind in worker:
            kw[kind] = fk.Resources(**worker[kind])
    if "restart_policy" in worker:
        kw["restart_policy"] = fk.kfp.RestartPolicy[worker["restart_policy"]]
    theirs = flytekit_serialize(fk, fk.kfp.PyTorch(worker=fk.kfp.Worker(replicas=3, **kw)))
    ours = Elastic(nnodes="1:3", rdzv_configs={}, **kw).to_template().custom  # flytekit's own objects, as given
    assert ours is not None
    assert ours["workerReplicas"] == theirs.custom["workerReplicas"]  # type: ignore[index]


# ---------------------------------------------------------------- the runtime side: LaunchConfig in the pod


class _Captured(Exception):
    pass


LAUNCH_FIELDS = (
    "min_nodes",
    "max_nodes",
    "nproc_per_node",
    "run_id",
    "role",
    "rdzv_endpoint",
    "rdzv_backend",
    "rdzv_configs",
    "rdzv_timeout",
    "max_restarts",
    "monitor_interval",
    "start_method",
    "log_line_prefix_template",
    "metrics_cfg",
    "local_addr",
    "event_log_handler",
    "numa_options",
    "signals_to_handle",
    "duplicate_stdout_filters",
    "duplicate_stderr_filters",
    "virtual_local_rank",
    "shutdown_timeout",
)


def launch_fields(lc: Any) -> dict[str, Any]:
    out = {name: getattr(lc, name) for name in LAUNCH_FIELDS}
    logs = lc.logs_specs
    out["logs"] = (str(logs._redirects), str(logs._tee), logs._local_ranks_filter)
    return out


def flytekit_pod_config(fk: SimpleNamespace, task: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The LaunchConfig flytekit's PytorchElasticFunctionTask builds in the pod (elastic_launch stubbed)."""

    def stub(config: Any, entrypoint: Callable[..., Any]) -> Any:
        raise _Captured(config)

    monkeypatch.setattr(fk.launcher_api, "elastic_launch", stub)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(_Captured) as info:
            task._execute(x=1)
    return info.value.args[0]


def our_config(task: Any, env: dict[str, str]) -> Any:
    from elastic_idl._launch.launcher import to_launch_config

    return to_launch_config(task, env=env, run_id=RUN_ID)


def _flytekit_pod_rdzv(spec: dict[str, Any]) -> dict[str, Any]:
    configs = dict(spec.get("rdzv_configs", {"timeout": 900, "join_timeout": 900}))
    configs.setdefault("timeout", 900)  # LaunchConfig.__post_init__ adds it
    return configs


def expected_differences(spec: dict[str, Any], source: str, env: dict[str, str]) -> set[str]:
    """The parity table of docs/guide/sdk-config.md as code: which LaunchConfig fields differ from flytekit's pod, and why.

    source: "ours" (our wire form: the custom our Elastic emits, or its task for a python-task) or
    "flytekit" (flytekit's wire form fed to our runtime).
    """
    out = {"role"}  # flytekit leaves LaunchConfig's "default_role"; we set torchrun's "default"
    if "PET_RDZV_ENDPOINT" not in env:
        out.add("rdzv_endpoint")  # "localhost:0" vs "127.0.0.1:0": loopback only, no name lookup
    flytekit_method = spec.get("start_method", "spawn")
    if source == "flytekit":
        # Never on flytekit's wire: monitor_interval (flytekit 5 s or the user's), start_method, rdzv_configs.
        out.add("monitor_interval")
        if flytekit_method != DEFAULT_START_METHOD:
            out.add("start_method")
        if _flytekit_pod_rdzv(spec) != {"timeout": 900}:
            out.add("rdzv_configs")
    else:
        if spec.get("monitor_interval") is None:
            out.add("monitor_interval")  # unset: the launcher's 0.1 s, not flytekit's 5 s floor
        if spec.get("start_method") is None and DEFAULT_START_METHOD != flytekit_method:
            out.add("start_method")  # unset: the launcher's default (warm forkserver), not flytekit's spawn
        configs = spec.get("rdzv_configs", {})
        if "timeout" in configs and "join_timeout" not in configs and configs["timeout"] != 900:
            out.add("rdzv_configs")  # c10d ignores "timeout": we wait join_timeout = that long
    return out


@pytest.mark.parametrize("env", [{}, POD_ENV], ids=["no_env", "pod_env"])
@pytest.mark.parametrize("spec", [spec for _, spec in PARITY], ids=PARITY_IDS)
def test_launch_config_matches_flytekits_pod(
    fk: SimpleNamespace, spec: dict[str, Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # flytekit's _execute would set it in os.environ
    monkeypatch.delenv("PET_RDZV_ENDPOINT", raising=False)
    monkeypatch.delenv("PET_NNODES", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    kw = flytekit_kwargs(fk, spec)
    theirs = flytekit_serialize(fk, fk.kfp.Elastic(**kw))
    pod = launch_fields(flytekit_pod_config(fk, theirs.task, monkeypatch))

    cfg = Elastic(**flytekit_kwargs(fk, spec))  # a fresh copy: flytekit's pod wrote "timeout" into kw's dict
    custom, task_type, version = cfg.to_template()
    task = cfg.to_task() if custom is None else from_custom(custom, task_type=task_type, task_type_version=version)
    sources = {"ours": task}
    if theirs.wire is not None:
        sources["flytekit"] = from_custom(
            theirs.wire, task_type=theirs.task_type, task_type_version=theirs.task_type_version
        )
    for source, source_task in sources.items():
        got = launch_fields(our_config(source_task, env))
        differs = {name for name in pod if got[name] != pod[name]}
        assert differs == expected_differences(spec, source, env), (source, {n: (pod[n], got[n]) for n in differs})
        # The documented values, not just "something else".
        assert (pod["role"], got["role"]) == ("default_role", "default")
        if "rdzv_endpoint" in differs:
            assert (pod["rdzv_endpoint"], got["rdzv_endpoint"]) == ("localhost:0", "127.0.0.1:0")
        if "monitor_interval" in differs:
            assert (pod["monitor_interval"], got["monitor_interval"]) == (spec.get("monitor_interval", 5), 0.1)
        if "start_method" in differs:
            assert got["start_method"] == DEFAULT_START_METHOD


def test_a_timeout_alone_is_waited_for_not_ignored(fk: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """flytekit's {"timeout": 1200} under c10d: flytekit's pod waits torch's 600 s join_timeout; ours 1200 s."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    theirs = flytekit_serialize(fk, fk.kfp.Elastic(nnodes=2, rdzv_configs={"timeout": 1200}))
    pod = flytekit_pod_config(fk, theirs.task, monkeypatch)
    assert pod.rdzv_configs == {"timeout": 1200}  # no join_timeout: c10d waits its default 600 s
    ours = our_config(Elastic(nnodes=2, rdzv_configs={"timeout": 1200}).to_task(), {})
    assert ours.rdzv_configs == {"join_timeout": 1200, "timeout": 900}


def test_flytekits_pod_writes_into_its_config_ours_does_not(
    fk: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flytekit passes Elastic.rdzv_configs to LaunchConfig, which writes "timeout" into that very dict."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    theirs_cfg = fk.kfp.Elastic(nnodes=2, rdzv_configs={"join_timeout": 1800})
    flytekit_pod_config(fk, flytekit_serialize(fk, theirs_cfg).task, monkeypatch)
    assert theirs_cfg.rdzv_configs == {"join_timeout": 1800, "timeout": 900}
    ours = Elastic(nnodes=2, rdzv_configs={"join_timeout": 1800})
    assert our_config(ours.to_task(), {}).rdzv_configs == {"join_timeout": 1800, "timeout": 900}
    assert dict(ours.rdzv_configs) == {"join_timeout": 1800}
