"""Architecture: outside the store, run.json is written as typed sections and read as a typed RunManifest.

No module of deviate_cb/ outside deviate_cb/store/ writes manifest fields by name (`update_manifest(**fields)`,
`merge_manifest`), reads the untyped manifest (`read_manifest()`, `read_manifest_file`), or reads a manifest field
by its key (`manifest.get("status")`, `manifest["seed"]`, `"pid" in manifest`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "deviate_cb"
STORE = PACKAGE / "store"
_UNTYPED = {"update_manifest", "merge_manifest", "read_manifest", "read_manifest_file"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STORE not in p.parents)


def _names_a_manifest(node: ast.AST) -> bool:
    """Whether ``node`` is a manifest itself (``manifest``, ``r.manifest``, ``manifests[k]``, ``run.manifest()``),
    not a block read from one (``manifest.audit``: the writer's own JSON object)."""
    if isinstance(node, ast.Name):
        return "manifest" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "manifest" in node.attr.lower()
    if isinstance(node, ast.Subscript):
        return _names_a_manifest(node.value)
    if isinstance(node, ast.Call):
        return _names_a_manifest(node.func)
    return False


def _key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _violations(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in _UNTYPED:
            found.append((line, f"uses `{node.attr}`: record a section / read a RunManifest"))
        elif isinstance(node, (ast.Name, ast.alias)) and getattr(node, "id", getattr(node, "name", "")) in _UNTYPED:
            found.append((line, f"uses `{getattr(node, 'id', getattr(node, 'name', ''))}`"))
        elif (isinstance(node, ast.Subscript) and _key(node.slice) and _names_a_manifest(node.value)) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and _key(node.args[0])
            and _names_a_manifest(node.func.value)
        ):
            found.append((line, f"reads {ast.unparse(node)} by key"))
        elif (
            isinstance(node, ast.Compare)
            and _key(node.left)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and any(_names_a_manifest(c) for c in node.comparators)
        ):
            found.append((line, f"tests {ast.unparse(node)} by key"))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_untyped_manifest_access_outside_the_store(path: Path) -> None:
    found = _violations(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, "\n".join(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for line, what in found)


def test_the_check_sees_each_kind_of_access() -> None:
    source = """
run.update_manifest(status="x")
m = read_manifest_file(p)
a = manifest.get("status")
b = r.manifest["seed"]
c = "pid" in manifest
d = manifests["resumed"].get("resume")
ok = manifest.status
ok2 = manifest.audit["steps"] if False else None
e = run.manifest()["status"]
"""
    lines = [line for line, _ in _violations(ast.parse(source))]
    assert sorted(set(lines)) == [2, 3, 4, 5, 6, 7, 10]
