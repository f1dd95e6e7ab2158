"""The layering of ``src/tenure`` holds (docs/architecture.md): no import cycle, no module over
600 lines.

The import graph is read from the source (``ast``): an import at module level and one inside a
function both count, since both run; an import under ``if TYPE_CHECKING:`` does not (it never
runs). ``from package import name`` is an edge to ``package.name`` when that is a module, else to
``package``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tenure"
MAX_LINES = 600


def module_name(path: Path, root: Path = SRC) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(tree: ast.Module, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports when it runs (see the docstring)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    visit_one(other)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names]
            found.update(s for s in subs if s in modules)
            if not all(s in modules for s in subs):
                found.add(target)
        else:
            visit(node)

    visit(tree)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", modules)
            for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_import_graph_of_src_tenure_has_no_cycle() -> None:
    graph = import_graph()
    assert "tenure.worker.core" in graph and "tenure.jobs" in graph["tenure.store"]
    found = cycles(graph)
    assert found == [], "import cycles (module-level and function-level imports count):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(("b_text", "cyclic"), [
    ("from . import a\n", True),                                  # module level
    ("def f():\n    from .a import x\n", True),                   # inside a function: it runs too
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n", False),  # never runs
    ("import os\n", False),
])
def test_the_cycle_check_can_fail(tmp_path: Path, b_text: str, cyclic: bool) -> None:
    root = _package(tmp_path, {"__init__.py": "", "a.py": "from .b import y\nx = 1\n", "b.py": b_text})
    found = cycles(import_graph(root))
    assert found == ([["pkg.a", "pkg.b"]] if cyclic else [])


def test_no_module_in_src_tenure_is_over_600_lines() -> None:
    long = {module_name(p): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines (split them by concern): {long}"
