"""Check a project's Python source without running it: the launcher refuses a wrong target in about a second.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "train.py"
    >>> _ = path.write_text("import os\\ndef main():\\n    pass\\nif True:\\n    alt = main\\n")
    >>> check_python_source(path), defines_name(path, "main"), defines_name(path, "alt"), defines_name(path, "x")
    ('', True, True, False)
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Optional

__all__ = ["check_python_source", "defined_functions", "defines_name", "find_module_file", "top_level_imports"]


def check_python_source(path: Path) -> str:
    """Why the Python file at ``path`` cannot run (unreadable, a syntax error), or ``""``; runs nothing.

    Example:
        >>> import tempfile
        >>> bad = Path(tempfile.mkdtemp()) / "train.py"
        >>> _ = bad.write_text("def main(:\\n    pass\\n")
        >>> check_python_source(bad)
        'has a syntax error: invalid syntax (line 1)'
    """
    try:
        source = path.read_bytes()
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"has a syntax error: {exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # null bytes
        return f"is not Python source ({exc})"
    return ""


def defines_name(path: Path, name: str) -> Optional[bool]:
    """Whether the module at ``path`` binds ``name`` at top level; ``None`` when that cannot be told from the source.

    Top level includes ``if``/``try``/``with`` blocks; a star import or a module ``__getattr__`` makes any name
    possible (``None``), and so does source that does not parse.
    """
    tree = _parse(path)
    if tree is None:
        return None
    bound: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.AsyncWith)):
            for target in ast.walk(node):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    bound.add(target.id)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            bound.add(node.target.id)
    if "__getattr__" in bound:
        return None
    return name in bound


def defined_functions(path: Path) -> list[str]:
    """The functions the file at ``path`` defines at top level, in order (none when it does not parse)."""
    tree = _parse(path)
    body = [] if tree is None else tree.body
    return [node.name for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def top_level_imports(path: Path) -> list[str]:
    """The modules the file at ``path`` imports at top level (``import a.b``, ``from a.b import c``: ``a.b``), in
    order and without repeats; relative imports and files that do not parse give none.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "train.py"
        >>> _ = path.write_text("import torch.nn as nn\\nfrom lightning import Trainer\\nfrom . import x\\n"
        ...                     "def main():\\n    import keras\\n")
        >>> top_level_imports(path)
        ['torch.nn', 'lightning']
    """
    tree = _parse(path)
    found: list[str] = []
    for node in [] if tree is None else _top_level(tree.body):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend(name for name in names if name not in found)
    return found


def _parse(path: Path) -> Optional[ast.Module]:
    try:
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _top_level(body: list[ast.stmt]) -> list[ast.AST]:
    """The statements of a module body, with those nested in ``if``/``try``/``with``/``for``/``while`` blocks."""
    found: list[ast.AST] = []
    for node in body:
        found.append(node)
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.extend(_top_level(inner))
        for handler in getattr(node, "handlers", []) or []:
            found.extend(_top_level(handler.body))
    return found


def find_module_file(name: str, cwd: Path, *, package_main: bool = True) -> Optional[Path]:
    """The file of module ``name``, found from ``cwd`` and ``sys.path`` without importing any package.

    For a package: its ``__main__.py`` (what ``python -m`` runs; ``package_main=True``) or its ``__init__.py``.
    """
    search: Optional[list[str]] = [str(cwd), *sys.path]
    spec = None
    parts = name.split(".")
    for i in range(len(parts)):
        fullname = ".".join(parts[: i + 1])
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, search)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            if i == 0:  # a built-in or frozen top-level module (`python -m json.tool`)
                try:
                    spec = importlib.util.find_spec(fullname)
                except (ImportError, ValueError):
                    spec = None
            if spec is None:
                return None
        search = list(spec.submodule_search_locations or []) or None
        if i < len(parts) - 1 and search is None:
            return None
    if spec is None:
        return None
    if spec.submodule_search_locations and not package_main:
        return Path(spec.origin) if spec.origin else None  # a namespace package has no file
    if spec.submodule_search_locations:  # a package: python -m runs its __main__
        for location in spec.submodule_search_locations:
            main = Path(location) / "__main__.py"
            if main.is_file():
                return main
        return None
    return Path(spec.origin or name)  # "built-in"/"frozen" origins are no .py file: nothing to compile
