"""render_pytorchjob and pod_env: every rendered field, upstream parity, typed errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import elastic_idl as ei
from elastic_idl._backend.operator import pod_env
from elastic_idl._backend.pytorchjob import (
    CONTAINER_NAME,
    DEFAULT_PORT,
    POD_ENTRYPOINT,
    PORT_NAME,
    JobOptions,
    render_pytorchjob,
)
from elastic_idl._errors import RenderError
from elastic_idl._sdk.elastic import Elastic
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from elastic_idl._task.names import TASK_ENV, TASK_TYPE_VERSION_ENV

# flytekit 1.16's custom for Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2) (REFERENCE §2).
FLYTEKIT_CUSTOM: dict[str, Any] = {
    "elasticConfig": {"maxReplicas": 3, "maxRestarts": 2, "minReplicas": 1, "nprocPerNode": 4, "rdzvBackend": "c10d"},
    "workerReplicas": {"replicas": 3},
}
OPTS: dict[str, Any] = {"name": "train", "image": "ghcr.io/acme/train:1", "entrypoint": ["train.py"]}


def kf(custom: dict[str, Any] | None = None) -> KubeflowTask:
    t = ei.from_custom(copy.deepcopy(custom or FLYTEKIT_CUSTOM), task_type_version=1)
    assert isinstance(t, KubeflowTask)
    return t


def render(task: Any, version: int = 1, **opts: Any) -> dict[str, Any]:
    return render_pytorchjob(task, JobOptions(**{**OPTS, **opts}), task_type_version=version)


def container(job: dict[str, Any], rtype: str = "Worker") -> dict[str, Any]:
    containers = job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == [CONTAINER_NAME]
    return dict(containers[0])


# --------------------------------------------------------------------------- elastic


def test_flytekit_default_renders_a_worker_only_job() -> None:
    job = render(kf())
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["kind"] == "PyTorchJob"
    assert job["metadata"] == {"name": "train", "namespace": "default"}
    spec = job["spec"]
    assert list(spec) == ["elasticPolicy", "nprocPerNode", "pytorchReplicaSpecs", "runPolicy"]
    assert spec["runPolicy"] == {}
    assert spec["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 2}
    assert spec["nprocPerNode"] == "4"
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"]
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3
    assert worker["restartPolicy"] == "ExitCode"  # the zero value, for an elastic Worker


def test_upstream_fields_carry_upstream_values_in_both_shapes() -> None:
    """What flyteplugins' ParseElasticConfig copies, except nProcPerNode, which moves to spec.nprocPerNode."""
    legacy = LegacyTask(workers=3)
    legacy.elastic_config.CopyFrom(kf().elastic_config)
    a, b = render(kf()), render(legacy, version=0)
    assert a["spec"] == b["spec"] | {"pytorchReplicaSpecs": a["spec"]["pytorchReplicaSpecs"]}
    for job in (a, b):
        policy = job["spec"]["elasticPolicy"]
        assert "nProcPerNode" not in policy
        assert "standalone" not in policy
        assert job["spec"]["nprocPerNode"] == "4"
    # Containers differ only by the task they carry.
    ca, cb = container(a), container(b)
    assert ca.pop("env") != cb.pop("env")
    assert ca == cb


def test_empty_backend_renders_as_c10d() -> None:
    custom = copy.deepcopy(FLYTEKIT_CUSTOM)
    del custom["elasticConfig"]["rdzvBackend"]
    assert render(kf(custom))["spec"]["elasticPolicy"]["rdzvBackend"] == "c10d"


def test_extension_fields_render_in_elastic_policy() -> None:
    t = kf()
    e = t.elastic_config
    e.rdzv_backend = "etcd-v2"
    e.rdzv_host = "etcd.infra.svc"
    e.rdzv_port = 2379
    e.rdzv_id = "exec-42"
    e.join_timeout.seconds = 900
    e.last_call_timeout.seconds = 2  # whole seconds (elastic.duration.whole_seconds)
    e.close_timeout.seconds = 30
    e.read_timeout.seconds = 60
    e.rdzv_options.add(key="is_host", value="0")
    e.rdzv_options.add(key="heartbeat_timeout", value="10")
    job = render(t)
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "rdzvBackend": "etcd-v2",
        "rdzvHost": "etcd.infra.svc",
        "rdzvPort": 2379,
        "rdzvId": "exec-42",
        "maxRestarts": 2,
        "rdzvConf": [
            {"key": "join_timeout", "value": "900"},
            {"key": "last_call_timeout", "value": "2"},
            {"key": "close_timeout", "value": "30"},
            {"key": "read_timeout", "value": "60"},
            {"key": "is_host", "value": "0"},
            {"key": "heartbeat_timeout", "value": "10"},
        ],
    }
    # The container exposes the rendezvous port under the operator's port name.
    assert container(job)["ports"] == [{"containerPort": 2379, "name": PORT_NAME}]


@pytest.mark.parametrize(("policy", "expected"), [(1, "auto"), (2, "cpu"), (3, "gpu")])
def test_nproc_policy_renders_as_string(policy: int, expected: str) -> None:
    t = kf()
    t.elastic_config.nproc_per_node = 0
    t.elastic_config.nproc_policy = policy  # type: ignore[assignment]
    job = render(t)
    assert job["spec"]["nprocPerNode"] == expected
    assert "nProcPerNode" not in job["spec"]["elasticPolicy"]


def test_worker_count_zero_means_max_replicas() -> None:
    custom = copy.deepcopy(FLYTEKIT_CUSTOM)
    del custom["workerReplicas"]
    assert render(kf(custom))["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    legacy = LegacyTask()
    legacy.elastic_config.CopyFrom(kf().elastic_config)
    assert render(legacy, version=0)["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


def test_elastic_task_drops_the_master_like_upstream() -> None:
    custom = copy.deepcopy(FLYTEKIT_CUSTOM)
    custom["masterReplicas"] = {"common": {"replicas": 1, "image": "other:1"}}
    job = render(kf(custom))
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]


# --------------------------------------------------------------------------- replica settings


@pytest.mark.parametrize(("value", "expected"), [(None, "ExitCode"), (0, "ExitCode"), (1, "OnFailure"), (2, "Always")])
def test_restart_policy(value: int | None, expected: str) -> None:
    t = kf()
    if value is not None:
        t.worker_replicas.common.replicas = 3
        t.worker_replicas.common.restart_policy = value  # type: ignore[assignment]
        t.worker_replicas.ClearField("replicas")
    assert render(t)["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == expected


def test_the_zero_restart_policy_of_a_non_elastic_job_stays_never_like_upstream() -> None:
    t = kf()
    t.ClearField("elastic_config")
    specs = render(t)["spec"]["pytorchReplicaSpecs"]
    assert [specs[r]["restartPolicy"] for r in ("Master", "Worker")] == ["Never", "Never"]


def test_common_wins_and_deprecated_fields_are_read_without_it() -> None:
    deprecated = kf()
    deprecated.worker_replicas.image = "old:1"
    deprecated.worker_replicas.restart_policy = 1  # type: ignore[assignment]
    deprecated.worker_replicas.resources.limits.add(name=1, value="2")
    job = render(deprecated)
    assert container(job)["image"] == "old:1"
    assert container(job)["resources"] == {"limits": {"cpu": "2"}}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"

    common = kf()
    common.worker_replicas.ClearField("replicas")
    common.worker_replicas.common.replicas = 3
    common.worker_replicas.common.image = "new:2"
    job = render(common)
    # `common` is set: its empty resources/restart policy win, not some deprecated default.
    assert container(job)["image"] == "new:2"
    assert "resources" not in container(job)
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"


def test_resources_map_every_resource_name() -> None:
    t = kf()
    res = t.worker_replicas.common.resources
    t.worker_replicas.common.replicas = 3
    t.worker_replicas.ClearField("replicas")
    for name, value in ((1, "500m"), (2, "1"), (3, "4Gi"), (4, "10Gi"), (5, "1Gi")):
        res.requests.add(name=name, value=value)  # type: ignore[arg-type]
    res.limits.add(name=2, value="1")
    res.limits.add(name=3, value="8Gi")
    # STORAGE is no container resource (the API server refuses it): dropped, and said so.
    with pytest.warns(ei.SkewWarning, match=r"worker_replicas\.common\.resources\.requests\[3\]: STORAGE"):
        job = render(t)
    assert container(job)["resources"] == {
        "requests": {
            "cpu": "500m",
            "ephemeral-storage": "1Gi",
            "memory": "4Gi",
            "nvidia.com/gpu": "1",
        },
        "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"},
    }


def test_task_resources_apply_unless_the_replica_sets_its_own() -> None:
    task_res = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": 3 * 1024**3}}
    job = render(kf(), resources=task_res)
    assert container(job)["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "3221225472"},
    }
    t = kf()
    t.worker_replicas.resources.limits.add(name=2, value="1")
    assert container(render(t, resources=task_res))["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_container_runs_the_pod_entrypoint_and_carries_the_task() -> None:
    t = kf()
    t.elastic_config.join_timeout.seconds = 60
    c = container(render(t, entrypoint=["train.py", "--epochs", "3"], env={"HF_HOME": "/cache"}))
    assert c["name"] == "pytorch"
    assert c["command"] == list(POD_ENTRYPOINT) == ["python", "-m", "elastic_idl.pod"]
    assert c["args"] == ["--", "train.py", "--epochs", "3"]
    assert (
        c["ports"]
        == [{"containerPort": DEFAULT_PORT, "name": PORT_NAME}]
        == [{"containerPort": 23456, "name": "pytorchjob-port"}]
    )
    env = {e["name"]: e["value"] for e in c["env"]}
    assert list(env) == [TASK_ENV, TASK_TYPE_VERSION_ENV, "HF_HOME"]
    assert env[TASK_TYPE_VERSION_ENV] == "1"
    assert ei.decode(env[TASK_ENV], task_type_version=1) == t


def test_legacy_task_is_carried_with_its_version() -> None:
    legacy = LegacyTask(workers=3)
    legacy.elastic_config.CopyFrom(kf().elastic_config)
    env = {e["name"]: e["value"] for e in container(render(legacy, version=0))["env"]}
    assert env[TASK_TYPE_VERSION_ENV] == "0"
    assert ei.decode(env[TASK_ENV], task_type_version=0) == legacy


def test_command_and_args_override() -> None:
    c = container(render(kf(), entrypoint=None, command=["bash", "-c"], args=["torchrun train.py"]))
    assert c["command"] == ["bash", "-c"]
    assert c["args"] == ["torchrun train.py"]
    c = container(render(kf(), entrypoint=None, command=["/bin/train"]))
    assert c["command"] == ["/bin/train"]
    assert "args" not in c
    c = container(render(kf(), entrypoint=None, args=["--module", "--", "pkg.train"]))
    assert c["command"] == list(POD_ENTRYPOINT)
    assert c["args"] == ["--module", "--", "pkg.train"]
    # pod_args are the pod entrypoint's own flags: before "--", never mixed into the entrypoint.
    c = container(render(kf(), pod_args=["--module", "--output", "/out/r.json"], entrypoint=["pkg.train", "--lr", "1"]))
    assert c["args"] == ["--module", "--output", "/out/r.json", "--", "pkg.train", "--lr", "1"]


def test_labels_and_annotations_on_job_and_pods() -> None:
    labels = {"team": "ml", "app.kubernetes.io/name": "train"}
    annotations = {"example.com/note": "free text, with spaces"}
    job = render(kf(), labels=labels, annotations=annotations)
    assert job["metadata"]["labels"] == labels
    assert job["metadata"]["annotations"] == annotations
    meta = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]
    assert meta == {"labels": labels, "annotations": annotations}
    # Sorted, so the object does not depend on the caller's dict order.
    assert list(job["metadata"]["labels"]) == sorted(labels)


# --------------------------------------------------------------------------- run policy


def test_run_policy_absent_or_zero_values_left_out() -> None:
    # Like upstream: an empty struct when the task has none (the operator defaults it).
    assert render(kf())["spec"]["runPolicy"] == {}
    assert render(LegacyTask(workers=2), version=0)["spec"]["runPolicy"] == {}
    t = kf()
    t.run_policy.SetInParent()
    assert render(t)["spec"]["runPolicy"] == {"cleanPodPolicy": "None"}


# The zero value (None) under a stated backoff_limit: Running (the Worker is OnFailure by its budget).
@pytest.mark.parametrize(("clean", "expected"), [(0, "Running"), (1, "Running"), (2, "All")])
def test_run_policy_every_field(clean: int, expected: str) -> None:
    t = kf()
    t.run_policy.clean_pod_policy = clean  # type: ignore[assignment]
    t.run_policy.ttl_seconds_after_finished = 3600
    t.run_policy.active_deadline_seconds = 7200
    t.run_policy.backoff_limit = 4
    assert render(t)["spec"]["runPolicy"] == {
        "cleanPodPolicy": expected,
        "ttlSecondsAfterFinished": 3600,
        "activeDeadlineSeconds": 7200,
        "backoffLimit": 4,
    }


def test_a_stated_backoff_limit_selects_on_failure_and_cleans_running_pods() -> None:
    # Issue 30 item 6: under ExitCode the operator counts no re-creation against backoffLimit.
    t = kf()
    assert render(t)["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    t.run_policy.backoff_limit = 2
    spec = render(t)["spec"]
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    # A failed job's pods would be restarted forever under cleanPodPolicy None: Running deletes them.
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2}
    t.run_policy.clean_pod_policy = 2  # type: ignore[assignment]  # the task's own wins
    assert render(t)["spec"]["runPolicy"]["cleanPodPolicy"] == "All"
    # Told to write Never for the zero value: Never stays, and so does the task's cleanPodPolicy.
    t.run_policy.clean_pod_policy = 0  # type: ignore[assignment]
    never = render(t, elastic_worker_restart_policy="Never")["spec"]
    assert never["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    assert never["runPolicy"]["cleanPodPolicy"] == "None"
    # The task's own OnFailure is the user's choice: its cleanPodPolicy is kept as given.
    t.worker_replicas.restart_policy = 1  # type: ignore[assignment]  # (the shape's deprecated field: no common)
    assert render(t)["spec"]["runPolicy"]["cleanPodPolicy"] == "None"


# --------------------------------------------------------------------------- non-elastic


def test_non_elastic_kubeflow_renders_master_and_workers() -> None:
    t = KubeflowTask()
    t.worker_replicas.common.replicas = 2
    t.worker_replicas.common.restart_policy = 1  # type: ignore[assignment]
    t.master_replicas.common.replicas = 1
    t.master_replicas.common.image = "master:1"
    job = render(t)
    spec = job["spec"]
    assert list(spec) == ["pytorchReplicaSpecs", "runPolicy"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Master", "Worker"]
    master, worker = spec["pytorchReplicaSpecs"]["Master"], spec["pytorchReplicaSpecs"]["Worker"]
    assert (master["replicas"], master["restartPolicy"]) == (1, "Never")
    assert (worker["replicas"], worker["restartPolicy"]) == (2, "OnFailure")
    assert container(job, "Master")["image"] == "master:1"
    assert container(job, "Worker")["image"] == OPTS["image"]


def test_non_elastic_without_master_spec_still_gets_one_master() -> None:
    t = KubeflowTask()
    t.worker_replicas.replicas = 3
    job = render(t)
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert container(job, "Master") == container(job, "Worker")


def test_non_elastic_legacy() -> None:
    job = render(LegacyTask(workers=2), version=0)
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 2}
    assert container(job, "Master") == container(job, "Worker")


@pytest.mark.parametrize(
    ("task", "version", "field"),
    [(LegacyTask(workers=0), 0, "workers"), (KubeflowTask(), 1, "worker_replicas.replicas")],
)
def test_non_elastic_needs_a_worker(task: Any, version: int, field: str) -> None:
    # A rule since issue #9 (validate rejects what render refuses): a ValidationError, not a RenderError.
    with pytest.raises(ei.ValidationError) as info:
        render(task, version=version)
    assert (field, "replicas.workers_required") in [(v.field, v.rule) for v in info.value.violations]


# --------------------------------------------------------------------------- inputs, purity, determinism


def test_custom_dict_and_betterproto_inputs_render_the_same() -> None:
    from elastic_idl.betterproto.plugins.kubeflow.v1 import DistributedPyTorchTrainingTask as Bp

    t = kf()
    bp = Bp().parse(t.SerializeToString())
    assert render(t) == render(FLYTEKIT_CUSTOM) == render(bp)


def test_render_is_pure_and_deterministic() -> None:
    t = kf()
    t.elastic_config.rdzv_options.add(key="b", value="2")
    t.elastic_config.rdzv_options.add(key="a", value="1")
    before = t.SerializeToString()
    labels = {"z": "1", "a": "2"}
    a = render(t, labels=labels, resources={"limits": {"memory": "1Gi", "cpu": "1"}})
    b = render(t, labels=dict(reversed(list(labels.items()))), resources={"limits": {"cpu": "1", "memory": "1Gi"}})
    assert t.SerializeToString() == before
    assert labels == {"z": "1", "a": "2"}
    assert json.dumps(a) == json.dumps(b)  # same keys in the same order, not only equal
    # rdzv options keep the message's order (torch reads them as given).
    assert [c["key"] for c in a["spec"]["elasticPolicy"]["rdzvConf"]] == ["b", "a"]
    # No shared sub-objects: editing one replica never changes another.
    t2 = KubeflowTask()
    t2.worker_replicas.replicas = 1
    job = render(t2, labels={"a": "b"})
    container(job, "Master")["env"].append({"name": "X", "value": "1"})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"].append({"name": "X"})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["labels"]["c"] = "d"
    assert len(container(job, "Worker")["env"]) == 2
    assert job["metadata"]["labels"] == {"a": "b"}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("version", [2, -1, 100, True, "1"])
def test_unknown_task_type_version(version: Any) -> None:
    with pytest.raises(ei.UnsupportedVersionError):
        render_pytorchjob(kf(), JobOptions(**OPTS), task_type_version=version)
    with pytest.raises(ei.UnsupportedVersionError):
        render_pytorchjob(FLYTEKIT_CUSTOM, JobOptions(**OPTS), task_type_version=version)


def test_a_message_carries_its_task_type_version() -> None:
    """Without task_type_version a message renders as its own shape; a custom dict needs the version."""
    legacy = LegacyTask(workers=2)
    job = render_pytorchjob(legacy, JobOptions(**OPTS))
    assert job == render(legacy, version=0)
    env = {e["name"]: e["value"] for e in container(job)["env"]}
    assert env[TASK_TYPE_VERSION_ENV] == "0"
    assert render_pytorchjob(kf(), JobOptions(**OPTS)) == render(kf(), version=1)
    with pytest.raises(RenderError) as info:
        render_pytorchjob(FLYTEKIT_CUSTOM, JobOptions(**OPTS))
    assert info.value.field == "task_type_version"
    with pytest.raises(RenderError) as info:
        render_pytorchjob(ei.ElasticConfig(), JobOptions(**OPTS))
    assert info.value.field == "task"


def test_job_options_is_a_frozen_keyword_only_record() -> None:
    options = JobOptions(**OPTS)
    assert options == JobOptions(name="train", image="ghcr.io/acme/train:1", entrypoint=["train.py"])
    assert options.namespace == "default"
    with pytest.raises(TypeError):
        JobOptions("train", "img:1")  # type: ignore[misc]
    with pytest.raises(AttributeError):
        options.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="bogus"):
        JobOptions(**OPTS, bogus=1)


def test_keyword_options_are_deprecated_and_render_the_same_job() -> None:
    with pytest.warns(DeprecationWarning, match="JobOptions") as caught:
        old = render_pytorchjob(kf(), task_type_version=1, **OPTS)
    assert caught[0].filename == __file__  # the warning points at the caller
    assert old == render(kf())
    with pytest.warns(DeprecationWarning, match="JobOptions"), pytest.raises(RenderError) as info:
        render_pytorchjob(kf(), task_type_version=1, **{**OPTS, "name": "Bad"})
    assert info.value.field == "name"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: render_pytorchjob(kf()), "needs options"),
        (lambda: render_pytorchjob(kf(), JobOptions(**OPTS), name="x"), "not also as name"),
        (lambda: render_pytorchjob(kf(), OPTS), "JobOptions\\(\\*\\*mapping\\)"),  # type: ignore[call-overload]
    ],
)
def test_options_given_wrong_are_a_type_error(call: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        call()


def test_render_converts_the_task_and_builds_the_custom_dict_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import betterproto

    from elastic_idl._backend import pytorchjob
    from elastic_idl._task.view import TaskView
    from elastic_idl.betterproto.plugins.kubeflow.v1 import DistributedPyTorchTrainingTask

    calls = {"views": 0, "betterproto": 0, "to_custom": 0}
    build, to_bytes, to_custom = TaskView.of_message.__func__, betterproto.Message.__bytes__, pytorchjob.to_custom

    def of_message(cls: type[TaskView], message: Any) -> TaskView:
        calls["views"] += 1
        return build(cls, message)

    def bp_bytes(self: betterproto.Message) -> bytes:
        calls["betterproto"] += isinstance(self, DistributedPyTorchTrainingTask)  # not its nested messages
        return to_bytes(self)

    def counted_to_custom(task: Any) -> Any:
        calls["to_custom"] += 1
        return to_custom(task)

    task = DistributedPyTorchTrainingTask().parse(ei.encode(kf(), "binary"))
    expected = render(kf())
    monkeypatch.setattr(TaskView, "of_message", classmethod(of_message))
    monkeypatch.setattr(betterproto.Message, "__bytes__", bp_bytes)
    monkeypatch.setattr(pytorchjob, "to_custom", counted_to_custom)
    assert render(task) == expected
    assert calls == {"views": 1, "betterproto": 1, "to_custom": 1}


def test_task_class_must_match_the_declared_version() -> None:
    legacy = LegacyTask(workers=3)
    legacy.elastic_config.CopyFrom(kf().elastic_config)
    with pytest.raises(RenderError, match="declared 1") as info:
        render(legacy, version=1)
    assert info.value.field == "task_type_version"
    with pytest.raises(RenderError, match="declared 0") as info:
        render(kf(), version=0)
    assert info.value.field == "task_type_version"
    with pytest.raises(RenderError) as info:
        render(ei.ElasticConfig(), version=1)
    assert info.value.field == "task_type_version"
    with pytest.raises(RenderError) as info:
        render(object(), version=1)
    assert info.value.field == "task"


@pytest.mark.parametrize(
    ("custom", "version", "field"),
    [
        ({"workers": 2}, 1, "workers"),  # a legacy custom declared as kubeflow
        ({"workerReplicas": {"replicas": 2}}, 0, "workerReplicas"),
        ({"elasticConfig": {"minReplicas": "two"}}, 1, "elastic_config.min_replicas"),
    ],
)
def test_custom_that_does_not_match_the_shape(custom: dict[str, Any], version: int, field: str) -> None:
    with pytest.raises(ei.DecodeError) as info:
        render(custom, version=version)
    assert info.value.field == field


def test_custom_with_an_enum_name_this_version_does_not_know_is_rendered_without_it() -> None:
    # A newer SDK's enum value: left out with a SkewWarning naming the field (forward compatible).
    custom = {**FLYTEKIT_CUSTOM, "workerReplicas": {"common": {"replicas": 3, "restartPolicy": "SOMETIMES"}}}
    with pytest.warns(ei.SkewWarning, match=r"^worker_replicas\.common\.restart_policy: "):
        job = render(custom)
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"


def test_invalid_task_lists_every_violation() -> None:
    t = kf()
    t.elastic_config.min_replicas = 5
    t.elastic_config.nproc_per_node = 0
    t.elastic_config.rdzv_backend = "zookeeper"
    with pytest.raises(ei.ValidationError) as info:
        render(t)
    assert {v.rule for v in info.value.violations} >= {
        "elastic.min_le_max",
        "elastic.nproc.min",
        "elastic.rdzv_backend.known",
    }


@pytest.mark.parametrize(
    "name",
    ["", "Train", "1train", "train_job", "train-", "-train", "train.job", "a" * 64, None, 7],
)
def test_job_name_must_be_a_dns1035_label(name: Any) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), name=name)
    assert info.value.field == "name"


def test_job_name_leaves_room_for_pod_names() -> None:
    t = kf()
    t.elastic_config.max_replicas = 12
    t.worker_replicas.replicas = 12
    ok = "a" * (63 - len("-worker-11"))
    assert render(t, name=ok)["metadata"]["name"] == ok
    with pytest.raises(RenderError, match="-worker-11") as info:
        render(t, name=ok + "b")
    assert info.value.field == "name"
    # 63 characters is fine for the job itself only if every pod name fits too.
    with pytest.raises(RenderError):
        render(kf(), name="a" * 63)


@pytest.mark.parametrize("image", ["", " ghcr.io/x:1", "ghcr.io/x:1 ", "ghcr io/x", None])
def test_image_is_required(image: Any) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), image=image)
    assert info.value.field == "image"


def test_replica_image_is_checked_and_named() -> None:
    t = kf()
    t.worker_replicas.common.replicas = 3
    t.worker_replicas.ClearField("replicas")
    t.worker_replicas.common.image = "bad image"
    with pytest.raises(ei.ValidationError) as info:  # rule replicas.image.format since issue #9
        render(t)
    assert [(v.field, v.rule) for v in info.value.violations] == [
        ("worker_replicas.common.image", "replicas.image.format")
    ]


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        ({"namespace": "Prod"}, "namespace"),
        ({"namespace": ""}, "namespace"),
        ({"entrypoint": None}, "entrypoint"),
        ({"entrypoint": []}, "entrypoint"),
        ({"entrypoint": ["a.py"], "args": ["x"]}, "entrypoint"),
        ({"entrypoint": "train.py"}, "entrypoint"),
        ({"pod_args": ["--module", "--"]}, "pod_args"),
        ({"entrypoint": None, "pod_args": ["--module"], "args": ["x"]}, "pod_args"),
        ({"command": ["python", 3]}, "command[1]"),
        ({"labels": {"bad key!": "x"}}, "labels.bad key!"),
        ({"labels": {"ok": "not a valid value!"}}, "labels.ok"),
        ({"labels": {"Example.com/x": "v"}}, "labels.Example.com/x"),
        ({"annotations": {"k": 1}}, "annotations.k"),
        ({"env": {"PET_NNODES": "9"}}, "env.PET_NNODES"),
        ({"env": {"ELASTIC_IDL_TASK": "{}"}}, "env.ELASTIC_IDL_TASK"),
        ({"env": {"1X": "v"}}, "env.1X"),
        ({"resources": {"requests": {"cpu": ""}}}, "resources.requests.cpu"),
        ({"resources": {"request": {"cpu": "1"}}}, "resources.request"),
        ({"resources": {"limits": ["cpu"]}}, "resources.limits"),
    ],
)
def test_bad_options_name_the_field(opts: dict[str, Any], field: str) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), **opts)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        ({"name": "job\ud800"}, "name"),
        ({"image": "example.com/train:\udcff"}, "image"),
        ({"namespace": "ns\ud800"}, "namespace"),
        ({"entrypoint": ["train.py", "--tag", "caf\udcff"]}, "entrypoint"),
        ({"pod_args": ["\udc80"]}, "pod_args"),
        ({"command": ["python", "\ud800"]}, "command"),
        ({"entrypoint": None, "args": ["\udfff"]}, "args"),
        ({"labels": {"app": "\ud800"}}, "labels"),
        ({"labels": {"app\ud800": "x"}}, "labels"),
        ({"annotations": {"note": "caf\udcff"}}, "annotations"),
        ({"annotations": {"example.com/\udcff": "x"}}, "annotations"),
        ({"env": {"NOTE": "caf\udcff"}}, "env"),
        ({"env": {"N\udcffTE": "x"}}, "env"),
        ({"resources": {"requests": {"cpu": "1\ud800"}}}, "resources"),
        ({"resources": {"requests": {"\ud800": "1"}}}, "resources"),
        ({"resources": {"limits\ud800": {"cpu": "1"}}}, "resources"),
        # Checked before any other option check, in the order of JobOptions' fields (as in Go).
        ({"name": "Bad_Name", "env": {"A": "\udcff"}}, "env"),
        ({"image": "\udcff", "env": {"A": "\udcff"}}, "image"),
    ],
)
def test_a_lone_surrogate_in_any_option_is_a_render_error_naming_it(opts: dict[str, Any], field: str) -> None:
    """A str that is no text (JSON's "\\ud800", an undecodable byte of an env var): refused, never written.

    Before, the image, list items and env or annotation values were written into the job (which then
    cannot be encoded: the conformance command crashed), and a bad key was echoed in the field.
    """
    with pytest.raises(RenderError) as info:
        render(kf(), **opts)
    assert info.value.field == field
    str(info.value).encode("utf-8")  # the error itself is text: the value is never echoed raw


def test_an_invalid_task_with_a_lone_surrogate_option_is_a_validation_error() -> None:
    t = kf()
    t.elastic_config.min_replicas = 0
    with pytest.raises(ei.ValidationError):
        render(t, image="\ud800")


# --------------------------------------------------------------------------- pod_env


def test_pod_env_elastic_flytekit_default() -> None:
    job = render(kf())
    expected = {
        "PYTHONUNBUFFERED": "1",
        "PET_RDZV_ENDPOINT": "train-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "2",
        "PET_NPROC_PER_NODE": "4",
    }
    for i in range(3):
        assert pod_env(job, "Worker", i) == expected
    assert "PET_STANDALONE" not in expected


def test_pod_env_elastic_with_extensions() -> None:
    t = kf()
    e = t.elastic_config
    e.rdzv_host, e.rdzv_port, e.rdzv_id = "store.svc", 29400, "exec-1"
    e.join_timeout.seconds = 900
    e.rdzv_options.add(key="is_host", value="0")
    e.nproc_per_node, e.nproc_policy = 0, 2  # type: ignore[assignment]
    assert pod_env(render(t), "Worker", 2) == {
        "PYTHONUNBUFFERED": "1",
        "PET_RDZV_ENDPOINT": "store.svc:29400",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "2",
        "PET_NPROC_PER_NODE": "cpu",
        "PET_RDZV_ID": "exec-1",
        "PET_RDZV_CONF": "join_timeout=900,is_host=0",
    }


def test_pod_env_non_elastic() -> None:
    t = KubeflowTask()
    t.worker_replicas.replicas = 2
    job = render(t)
    base = {
        "PYTHONUNBUFFERED": "1",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "MASTER_ADDR": "train-master-0",
        "PET_MASTER_ADDR": "train-master-0",
        "WORLD_SIZE": "3",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NNODES": "3",
    }
    assert pod_env(job, "Master", 0) == base | {"RANK": "0", "PET_NODE_RANK": "0"}
    assert pod_env(job, "Worker", 0) == base | {"RANK": "1", "PET_NODE_RANK": "1"}
    assert pod_env(job, "Worker", 1) == base | {"RANK": "2", "PET_NODE_RANK": "2"}
    # WORLD_SIZE counts processes when nprocPerNode is a number (the operator's rule).
    job["spec"]["nprocPerNode"] = "4"
    assert pod_env(job, "Worker", 1)["WORLD_SIZE"] == "12"


def test_pod_env_follows_operator_defaulting_for_foreign_jobs() -> None:
    job = render(kf())
    policy = job["spec"]["elasticPolicy"]
    del policy["minReplicas"], policy["maxReplicas"], policy["maxRestarts"], policy["rdzvBackend"]
    del job["spec"]["nprocPerNode"]
    policy["nProcPerNode"] = 2  # deprecated field: the operator copies it to spec.nprocPerNode
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = []
    env = pod_env(job, "Worker", 0)
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "PET_RDZV_ENDPOINT": "train-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "2",
    }
    policy["minReplicas"] = 2
    assert pod_env(job, "Worker", 0)["PET_NNODES"] == "2:2"
    del job["spec"]["elasticPolicy"]["nProcPerNode"]
    assert pod_env(job, "Worker", 0)["PET_NPROC_PER_NODE"] == "auto"


def test_pod_env_refuses_standalone() -> None:
    job = render(kf())
    job["spec"]["elasticPolicy"]["standalone"] = True
    with pytest.raises(RenderError) as info:
        pod_env(job, "Worker", 0)
    assert info.value.field == "spec.elasticPolicy.standalone"


@pytest.mark.parametrize(
    ("rtype", "index", "field"),
    [
        ("Master", 0, "replica_type"),
        ("worker", 0, "replica_type"),
        ("Launcher", 0, "replica_type"),
        ("Worker", 3, "index"),
        ("Worker", -1, "index"),
        ("Worker", True, "index"),
        ("Worker", "0", "index"),
    ],
)
def test_pod_env_bad_replica(rtype: str, index: Any, field: str) -> None:
    with pytest.raises(RenderError) as info:
        pod_env(render(kf()), rtype, index)
    assert info.value.field == field


def test_pod_env_agrees_with_the_message() -> None:
    """The operator's env, fed back into the launch spec, never contradicts the task it was rendered from."""
    t = kf()
    e = t.elastic_config
    e.rdzv_id = "exec-9"
    e.join_timeout.seconds = 30
    e.rdzv_options.add(key="is_host", value="0")
    for version, task in ((1, t), (0, LegacyTask(workers=3, elastic_config=e))):
        job = render(task, version=version)
        env = pod_env(job, "Worker", 1)
        spec = ei.to_launch_spec(task, env=env)
        # Only the endpoint comes from the env (the operator knows the Service); nothing else differs.
        assert [d.setting for d in spec.decisions] == ["rdzv_endpoint"]
        assert spec.rdzv_endpoint == "train-worker-0:23456"
        assert (spec.min_nodes, spec.max_nodes, spec.nproc_per_node, spec.max_restarts) == (1, 3, 4, 2)
        assert spec.run_id == "exec-9"
        assert dict(spec.rdzv_configs) == {"join_timeout": 30, "is_host": "0"}


# --------------------------------------------------------------------------- issue #9: quantities


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"requests": {"cpu": "-1"}}, "resources.requests.cpu"),
        ({"requests": {"cpu": -1}}, "resources.requests.cpu"),
        ({"requests": {"memory": "4Gi "}}, "resources.requests.memory"),
        ({"limits": {"nvidia.com/gpu": "1.5"}}, "resources.limits.nvidia.com/gpu"),
        ({"limits": {"example.com/fpga": "500m"}}, "resources.limits.example.com/fpga"),  # any extended resource
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "resources.requests.cpu"),
        ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "resources.requests.nvidia.com/gpu"),
        (
            {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi"}},
            "resources.requests.hugepages-2Mi",
        ),
        ({"requests": {"cpu ": "1"}}, "resources.requests.cpu "),  # a resource name is a qualified name
        ({"requests": {1: "1", "cpu": "1"}}, "resources.requests"),  # not a TypeError from sorted()
        ({1: {}, "requests": {}}, "resources"),
    ],
)
def test_resources_option_the_api_server_would_refuse_is_a_render_error(resources: Any, field: str) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), resources=resources)
    assert info.value.field == field


@pytest.mark.parametrize("option", ["labels", "annotations", "env"])
def test_a_key_that_is_not_a_string_is_a_render_error(option: str) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), **{option: {1: "a", "b": "c"}})
    assert info.value.field == option


def test_quantities_the_api_server_accepts_render_as_given() -> None:
    res = {
        "requests": {"cpu": ".5", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "500m", "nvidia.com/gpu": 1},
    }
    assert container(render(kf(), resources=res))["resources"] == {
        "requests": {"cpu": ".5", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "500m", "nvidia.com/gpu": "1"},
    }


@pytest.mark.parametrize(("number", "text"), [(0.5, "0.5"), (2, "2"), (1e-7, "1e-07")])
def test_a_number_quantity_is_written_as_the_sdk_writes_it(number: float, text: str) -> None:
    """Elastic(requests={"cpu": 0.5}) was accepted where render_pytorchjob(resources=...) refused 0.5."""
    assert container(render(kf(), resources={"requests": {"cpu": number}}))["resources"] == {"requests": {"cpu": text}}
    task = Elastic(nnodes=2, requests={"cpu": number}).to_task()
    assert container(render(task))["resources"] == {"requests": {"cpu": text}}


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -0.5])
def test_a_number_that_is_no_quantity_is_refused_alike(number: float) -> None:
    with pytest.raises(RenderError) as info:
        render(kf(), resources={"requests": {"cpu": number}})
    assert info.value.field == "resources.requests.cpu"
    with pytest.raises(ei.ValidationError) as v:
        Elastic(nnodes=2, requests={"cpu": number})
    assert [x.rule for x in v.value.violations] == ["resources.quantity"]


# --------------------------------------------------------------------------- the failure-detection budget


def _budget(**elastic: Any) -> KubeflowTask:
    custom = copy.deepcopy(FLYTEKIT_CUSTOM)
    custom["elasticConfig"].update(elastic)
    return kf(custom)


def test_the_nccl_knobs_are_exported_into_the_pod_container_and_only_when_set() -> None:
    task = _budget(ncclHeartbeatTimeout="300s", ncclAsyncErrorHandling="TOGGLE_ON", ncclEnableMonitoring="TOGGLE_OFF")
    job = render(task, env={"A": "b"})
    want = [
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "300"),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("TORCH_NCCL_ENABLE_MONITORING", "0"),
    ]
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]  # an elastic job's only replica type
    env = [(e["name"], e["value"]) for e in container(job)["env"]]
    assert [n for n, _ in env] == [TASK_ENV, TASK_TYPE_VERSION_ENV, *(n for n, _ in want), "A"]
    assert env[2:5] == want
    # Unset knobs export nothing (torch's defaults apply); collective_timeout travels in the task, not as env.
    plain = render(_budget(collectiveTimeout="90s", ncclEnableMonitoring="TOGGLE_ON"))
    names = [e["name"] for e in container(plain)["env"]]
    assert names == [TASK_ENV, TASK_TYPE_VERSION_ENV, "TORCH_NCCL_ENABLE_MONITORING"]
    assert [e["name"] for e in container(render(kf()))["env"]] == [TASK_ENV, TASK_TYPE_VERSION_ENV]


def test_env_may_not_give_an_nccl_variable_the_task_sets() -> None:
    task = _budget(ncclHeartbeatTimeout="300s")
    with pytest.raises(RenderError) as err:
        render(task, env={"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "60"})
    assert err.value.field == "env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"
    assert "elastic_config.nccl_heartbeat_timeout" in str(err.value)
    # A variable the task leaves unset is the user's to give.
    env = container(render(task, env={"TORCH_NCCL_ENABLE_MONITORING": "0"}))["env"]
    assert {"name": "TORCH_NCCL_ENABLE_MONITORING", "value": "0"} in env
