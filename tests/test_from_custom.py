"""One from_custom: a custom dict with its task type and version, positional or keyword, or a CustomTemplate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import elastic_idl as ei
from elastic_idl._task import codec

SRC = Path(__file__).resolve().parent.parent / "src" / "elastic_idl"


def test_there_is_one_from_custom() -> None:
    assert ei.from_custom is codec.from_custom
    assert ei.CustomTemplate is codec.CustomTemplate
    defined = [
        f"{p.relative_to(SRC)}:{n.lineno}"
        for p in sorted(SRC.rglob("*.py"))
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in ("from_custom", "CustomTemplate")
    ]
    assert len(defined) == 2, defined
    assert all(d.startswith("_task/codec.py:") for d in defined), defined


def test_a_template_is_read_whole_or_spread() -> None:
    cfg = ei.Elastic(nnodes="1:3", nproc_per_node=4)
    template = cfg.to_template()
    task = cfg.to_task()
    assert ei.from_custom(template) == task
    assert ei.from_custom(*template) == task
    assert ei.from_custom(custom=template) == task
    assert ei.from_custom(template.custom, "pytorch", 1) == task
    assert ei.from_custom(template.custom, task_type="pytorch", task_type_version=1) == task
    assert ei.from_custom(template.custom) == task  # pytorch, version 1 by default


def test_a_single_node_template_says_what_to_do_instead() -> None:
    template = ei.Elastic(nnodes=1).to_template()
    for call in (lambda: ei.from_custom(template), lambda: ei.from_custom(*template)):
        with pytest.raises(ei.DecodeError, match="python-task") as info:
            call()
        assert info.value.field == "task_type"


def test_a_template_with_its_type_given_again_is_a_type_error() -> None:
    template = ei.Elastic(nnodes=2).to_template()
    with pytest.raises(TypeError, match="give it alone"):
        ei.from_custom(template, task_type_version=1)
    with pytest.raises(TypeError, match="give it alone"):
        ei.from_custom(template, "pytorch")


@pytest.mark.parametrize(
    ("args", "error", "field"),
    [
        (({"workers": 2}, "pytorch", 0), None, None),
        (({"workers": 2}, "tensorflow", 0), ei.DecodeError, "task_type"),
        ((None, "pytorch", 1), ei.DecodeError, ""),
        (({}, "pytorch", 2), ei.UnsupportedVersionError, None),
    ],
)
def test_positional_arguments(args: tuple[object, ...], error: type[Exception] | None, field: str | None) -> None:
    if error is None:
        assert isinstance(ei.from_custom(*args), ei.LegacyTask)  # type: ignore[arg-type]
        return
    with pytest.raises(error) as info:
        ei.from_custom(*args)  # type: ignore[arg-type]
    if field is not None:
        assert isinstance(info.value, ei.DecodeError)
        assert info.value.field == field
