"""The layout's invariants, checked on the source (AST, nothing imported): one home per fact,
no private name of another module, no import cycle, every error type in _errors."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "elastic_idl"
MODULES = {
    ".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): ast.parse(p.read_text())
    for p in sorted(SRC.rglob("*.py"))
}


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
