"""Decode once: a public call converts its input at most once, builds the view at most once, and a
value that was validated is not validated again (counted by wrapping the one builder and the rule runner)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import betterproto
import pytest

import elastic_idl as ei
from elastic_idl._task.view import TaskView
from elastic_idl.betterproto.plugins.kubeflow.v1 import DistributedPyTorchTrainingTask

CUSTOM = {
    "elasticConfig": {"minReplicas": 1, "maxReplicas": 2, "nprocPerNode": 2, "rdzvHost": "h", "rdzvPort": 29400},
    "workerReplicas": {"replicas": 2},
}
OPTIONS = ei.JobOptions(name="job", image="example.com/train:1", entrypoint=("train.py",))
CALLS: dict[str, tuple[Callable[[Any], Any], int]] = {  # call, views/rule runs it may add for a value of its own
    "validate": (ei.validate, 0),
    "violations": (ei.violations, 0),
    "to_launch_spec": (lambda t: ei.to_launch_spec(t, env={"PET_RDZV_ENDPOINT": "job-worker-0:23456"}), 0),
    "to_launch_config": (ei.to_launch_config, 0),
    "render_pytorchjob": (lambda t: ei.render_pytorchjob(t, OPTIONS, task_type_version=1), 0),
    "to_custom": (ei.to_custom, 0),
    "encode": (lambda t: ei.encode(t, "json"), 0),
    "encode_binary": (lambda t: ei.encode(t, "binary"), 0),
    "extension_fields": (ei.extension_fields, 0),
    "to_torchrun": (lambda t: ei.to_torchrun(t, "train.py"), 0),
    "Elastic.from_task": (ei.Elastic.from_task, 1),  # the config builds and checks its own task
}


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    n = {"views": 0, "betterproto": 0, "rules": 0}
    build, to_bytes = TaskView.of_message.__func__, betterproto.Message.__bytes__  # type: ignore[attr-defined]
    cached = TaskView.rule_violations

    def of_message(cls: type[TaskView], message: Any) -> TaskView:
        n["views"] += 1
        return build(cls, message)  # type: ignore[no-any-return]

    def bp_bytes(self: betterproto.Message) -> bytes:
        n["betterproto"] += isinstance(self, DistributedPyTorchTrainingTask)  # the task, not its parts
        return to_bytes(self)

    def rule_violations(self: TaskView, check: Callable[[TaskView], Any]) -> Any:
        # Every caller's rule run goes through here, whichever name it imported the rules by.
        def counted(t: TaskView) -> Any:
            n["rules"] += 1
            return check(t)

        return cached(self, counted)

    monkeypatch.setattr(TaskView, "of_message", classmethod(of_message))
    monkeypatch.setattr(betterproto.Message, "__bytes__", bp_bytes)
    monkeypatch.setattr(TaskView, "rule_violations", rule_violations)
    return n


def _task(binding: str) -> Any:
    message = ei.from_custom(CUSTOM)
    if binding == "pb2":
        return message
    return DistributedPyTorchTrainingTask().parse(message.SerializeToString())


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("binding", ["pb2", "betterproto"])
def test_a_public_call_converts_its_input_once(call: str, binding: str, counts: dict[str, int]) -> None:
    task = _task(binding)
    counts.update(views=0, betterproto=0, rules=0)
    fn, own = CALLS[call]
    fn(task)
    assert counts["betterproto"] <= 1
    assert counts["views"] <= 1 + own
    assert counts["rules"] <= 1 + own


@pytest.mark.parametrize("call", CALLS)
def test_a_viewed_value_is_never_converted_or_validated_again(call: str, counts: dict[str, int]) -> None:
    wire = ei.encode(_task("pb2"), "binary")
    counts.update(views=0, betterproto=0, rules=0)
    t = ei.view(wire)
    ei.validate(t)
    assert counts == {"views": 1, "betterproto": 0, "rules": 1}
    fn, own = CALLS[call]
    fn(t)
    fn(t)
    assert counts == {"views": 1 + 2 * own, "betterproto": 0, "rules": 1 + 2 * own}


def test_validate_then_to_launch_spec_on_a_view_runs_the_rules_once(counts: dict[str, int]) -> None:
    t = ei.view(_task("pb2"))
    ei.validate(t)
    ei.to_launch_spec(t)
    assert counts == {"views": 1, "betterproto": 0, "rules": 1}


def test_a_custom_dict_is_decoded_once_by_the_renderer(counts: dict[str, int]) -> None:
    ei.render_pytorchjob(CUSTOM, OPTIONS, task_type_version=1)
    assert counts == {"views": 1, "betterproto": 0, "rules": 1}


def test_the_pod_entrypoint_views_its_task_once(
    counts: dict[str, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pod_main: the env's task is decoded once; the run id and the launch read that one view."""
    from elastic_idl import pod
    from elastic_idl._launch import launcher

    launched: list[Any] = []

    def launch_values(task: Any, *args: Any, **kwargs: Any) -> dict[int, Any]:
        launched.append(task)
        return {0: None}

    monkeypatch.setattr(launcher, "launch_values", launch_values)
    environ = {"ELASTIC_IDL_TASK": json.dumps(CUSTOM), "ELASTIC_IDL_TASK_TYPE_VERSION": "1"}
    argv = ["--output", str(tmp_path / "out.json"), "--failure-path", str(tmp_path / "error.json"), "--", "train.py"]
    assert pod.pod_main(argv, environ=environ) == 0
    assert counts == {"views": 1, "betterproto": 0, "rules": 1}
    assert len(launched) == 1 and isinstance(launched[0], TaskView)


def test_a_view_is_immutable_and_keeps_its_own_copy() -> None:
    message = _task("pb2")
    t = ei.view(message)
    assert ei.view(t) is t
    message.elastic_config.max_replicas = 7  # the caller changes its message: the view does not follow
    assert t.elastic is not None and t.elastic.max_replicas == 2
    assert ei.violations(t) == []
    with pytest.raises(AttributeError, match="immutable"):
        t.elastic = None  # type: ignore[misc]
    copy = t.to_message()
    copy.elastic_config.max_replicas = 9
    assert t.to_message() == ei.from_custom(CUSTOM) != copy
    assert t == ei.view(ei.encode(t, "binary")) and t != ei.view(copy)


def test_the_view_of_bytes_and_of_a_dict_decode_strictly_with_the_version() -> None:
    legacy = ei.LegacyTask(workers=2)
    legacy.elastic_config.min_replicas = legacy.elastic_config.max_replicas = 2
    legacy.elastic_config.nproc_per_node = 1
    t = ei.view(legacy.SerializeToString(), task_type_version=0)
    assert t.task_type_version == 0 and t.worker.replicas == 2
    assert ei.view({"workers": 2}, task_type_version=0).worker.replicas == 2
    with pytest.raises(ei.DecodeError):
        ei.view({"workers": 2})  # read as the kubeflow shape (the default), which has no such field
