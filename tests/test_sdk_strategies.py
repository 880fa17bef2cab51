"""The shared strategies (tests/strategies.py) keep the promises their docstrings make."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl._errors import TorchrunError
from elastic_idl._sdk.elastic import Elastic
from elastic_idl._sdk.torchrun import from_torchrun, to_torchrun
from elastic_idl._task.messages import KubeflowTask, LegacyTask
from strategies import (
    arbitrary_tasks,
    elastic_configs,
    elastic_kwargs,
    raw_torchrun_command_lines,
    torchrun_tasks,
    valid_tasks,
)


@given(st.data())
@pytest.mark.parametrize(("shape", "cls"), [(0, LegacyTask), (1, KubeflowTask)])
def test_valid_tasks_are_valid_and_of_the_shape_asked(shape: int, cls: type, data: st.DataObject) -> None:
    task = data.draw(valid_tasks(shape, elastic=False))
    assert isinstance(task, cls)
    assert ei.violations(task) == []


@given(valid_tasks(upstream_only=True))
def test_upstream_only_tasks_have_no_extensions(task: Any) -> None:
    assert ei.extension_fields(task) == []
    ei.to_custom(task, upstream=True)  # no SkewError


@given(elastic_configs())
def test_elastic_configs_are_valid(config: ei.ElasticConfig) -> None:
    task = KubeflowTask()
    task.elastic_config.CopyFrom(config)
    assert ei.violations(task) == []


@given(valid_tasks(elastic_expressible=True))
def test_expressible_tasks_give_an_elastic(task: Any) -> None:
    Elastic.from_task(task)


@given(elastic_kwargs())
def test_elastic_kwargs_are_accepted(kwargs: dict[str, Any]) -> None:
    Elastic(**kwargs)


@given(torchrun_tasks())
def test_torchrun_tasks_render(task: KubeflowTask) -> None:
    assert ei.violations(task) == []
    to_torchrun(task, "train.py")


#: find() without shrinking: the question is only whether the strategy reaches the case.
REACH = settings(phases=[Phase.generate], database=None, max_examples=500)


def test_arbitrary_tasks_reach_both_sides_of_every_shape() -> None:
    for shape in (0, 1):
        find(arbitrary_tasks(shape), lambda t: not ei.violations(t), settings=REACH)
        find(arbitrary_tasks(shape), lambda t: len(ei.violations(t)) >= 2, settings=REACH)
    find(arbitrary_tasks(), lambda t: isinstance(t, KubeflowTask) and t.HasField("master_replicas"), settings=REACH)


def _outcome(case: tuple[list[str], dict[str, str]]) -> str:
    try:
        from_torchrun(*case)
    except TorchrunError as exc:
        return type(exc).__name__
    except ei.ValidationError:
        return "ValidationError"
    return "ok"


def test_raw_command_lines_reach_every_outcome() -> None:
    for outcome in ("ok", "TorchrunError", "UnsupportedFlagError", "ValidationError"):
        find(raw_torchrun_command_lines(), lambda case, outcome=outcome: _outcome(case) == outcome, settings=REACH)
