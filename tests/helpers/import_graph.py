"""The import graph of a package, read with ``ast`` (nothing is imported), for the layering tests.

An edge ``a -> b`` means module ``a`` imports module ``b`` somewhere: at the top, inside a function or under
``if TYPE_CHECKING``; all of them are dependencies of the code. ``from pkg import name`` is an edge to
``pkg.name`` when that is a module of the package, else to ``pkg``. Importing ``a.b`` also runs ``a/__init__.py``;
that implicit edge is not counted (a package's ``__init__`` is its own module in the graph).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Edge", "import_cycles", "import_edges", "module_files"]


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` at ``line`` of ``path``."""

    importer: str
    imported: str
    path: Path
    line: int


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root`` (the folder that holds ``package``), by dotted name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_edges(root: Path, package: str) -> list[Edge]:
    """The imports between the package's own modules."""
    modules = module_files(root, package)
    edges = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, path, node)
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            for target in targets:
                while target and target not in modules:  # `import pkg.mod.attr` style: the longest module prefix
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.append(Edge(module, target, path, node.lineno))
    return edges


def import_cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; empty when acyclic."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)
