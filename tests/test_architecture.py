"""The layout's invariants, checked on the source (AST, nothing imported): one home per fact,
no private name of another module, no import cycle, every error type in _errors."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "elastic_idl"
MODULES = {
    ".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): ast.parse(p.read_text())
    for p in sorted(SRC.rglob("*.py"))
}


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, kinds)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }


def _written(value: object) -> list[str]:
    return [
        f"{name}:{node.lineno}"
        for name, tree in MODULES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and type(node.value) is type(value)
        and node.value == value
        and id(node) not in _docstrings(tree)
    ]


@pytest.mark.parametrize(
    "fact",
    [
        "join_timeout",
        "last_call_timeout",
        "close_timeout",
        "read_timeout",
        "c10d",
        "127.0.0.1",
        "SIGTERM",
        29400,
        23456,
        315_576_000_000,
    ],
)
def test_a_fact_is_written_once(fact: object) -> None:
    assert len(_written(fact)) == 1, _written(fact)


def test_the_int32_limit_is_written_once() -> None:
    found = [
        f"{name}:{n.lineno}"
        for name, tree in MODULES.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Pow)
        and isinstance(n.left, ast.Constant)
        and isinstance(n.right, ast.Constant)
        and (n.left.value, n.right.value) == (2, 31)
    ]
    assert len(found) == 1, found


def _imports(tree: ast.Module) -> Iterator[tuple[int, str, str | None, str | None]]:
    """(line, module, name or None, as-name) of every runtime import, function-level ones included."""
    skip = {
        id(n)
        for i in ast.walk(tree)
        if isinstance(i, ast.If) and getattr(i.test, "id", "") == "TYPE_CHECKING"
        for c in i.body
        for n in ast.walk(c)
    }
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name, None, a.asname) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "absolute imports only"
            yield from ((node.lineno, node.module or "", a.name, a.asname) for a in node.names)


def test_no_module_imports_a_private_name_of_another_module() -> None:
    bad = []
    for module, tree in MODULES.items():
        aliases: dict[str, str] = {}  # local name -> our module it is bound to
        for line, target, name, asname in _imports(tree):
            full = target if name is None else f"{target}.{name}"
            if not target.startswith("elastic_idl"):
                continue
            if full in MODULES:
                local = asname or name
                if local:
                    aliases[local] = full  # importing a (private) module is fine
            elif name is not None and name.startswith("_") and not name.startswith("__"):
                bad.append(f"{module}:{line}: from {target} import {name}")
        bad += [  # a private name reached through an imported module counts too
            f"{module}:{n.lineno}: {aliases[n.value.id]}.{n.attr}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in aliases
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
        ]
    assert bad == []


def test_the_import_graph_has_no_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, tree in MODULES.items():
        for _, target, name, _ in _imports(tree):
            target = f"{target}.{name}" if f"{target}.{name}" in MODULES else target
            if target in MODULES and target != module:
                graph[module].add(target)
    done: set[str] = set()
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        if v in path:
            cycles.append([*path[path.index(v) :], v])
            return
        if v in done:
            return
        path.append(v)
        for w in sorted(graph[v]):
            visit(w)
        path.pop()
        done.add(v)

    for v in sorted(graph):
        visit(v)
    assert cycles == []


def test_every_error_type_lives_in_errors() -> None:
    bad = [
        f"{name}:{n.lineno}: {n.name}"
        for name, tree in MODULES.items()
        if name != "elastic_idl._errors"
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef) and not n.name.startswith("_") and n.name.endswith(("Error", "Warning"))
    ]
    assert bad == []
