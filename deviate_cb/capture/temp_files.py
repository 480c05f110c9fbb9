"""What this process creates through the ``tempfile`` module: temporary files, never the project's outputs.

Example:
    >>> made = TemporaryPaths()
    >>> made.add("/tmp/tmpab12.txt", folder=False); made.add("/tmp/tmpcd34", folder=True)
    >>> made.holds("/tmp/tmpab12.txt"), made.holds("/tmp/tmpcd34/ckpt.pt"), made.holds("/tmp/out/ckpt.pt")
    (True, True, False)
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_REMEMBERED", "TemporaryPaths", "creating", "watch_tempfile"]

MAX_REMEMBERED = 10_000  # files (and as many folders) remembered; the oldest are forgotten first
_MARKER = "__deviate_temp_files__"
_local = threading.local()


def creating() -> bool:
    """Whether this thread is inside a ``tempfile`` call that :func:`watch_tempfile` wrapped.

    Example:
        >>> creating()
        False
    """
    return getattr(_local, "depth", 0) > 0


class TemporaryPaths:
    """The files and folders this process created through ``tempfile`` (absolute and resolved paths)."""

    def __init__(self) -> None:
        self.files: dict[str, None] = {}
        self.folders: dict[str, None] = {}

    def add(self, path: Any, *, folder: bool) -> None:
        """Remember ``path`` (a file, or a folder and everything under it)."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        found = self.folders if folder else self.files
        for form in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
            found[form] = None
        while len(found) > MAX_REMEMBERED:
            del found[next(iter(found))]

    def holds(self, path: str) -> bool:
        """Whether ``path`` (absolute) is a file or inside a folder that ``tempfile`` made here (a look-up per
        folder above it, however many were made)."""
        if path in self.files:
            return True
        if not self.folders:
            return False
        parent = os.path.dirname(path)
        while parent not in self.folders:
            above = os.path.dirname(parent)
            if above == parent:
                return False
            parent = above
        return True


def watch_tempfile(made: TemporaryPaths) -> None:
    """Wrap the ``tempfile`` functions that create paths (once per process): each path they return goes into
    ``made``, and while they run :func:`creating` is true in their thread."""
    returns: dict[str, Callable[[Any], tuple[Any, bool]]] = {
        "mkstemp": lambda result: (result[1], False),
        "mkdtemp": lambda result: (result, True),
        "NamedTemporaryFile": lambda result: (getattr(result, "name", None), False),
        "TemporaryFile": lambda result: (None, False),  # unnamed, or removed at once
    }
    for name, path_of in returns.items():
        original = getattr(tempfile, name, None)
        if original is None or getattr(original, _MARKER, False):
            continue
        setattr(tempfile, name, _wrapped(original, made, path_of))


def _wrapped(
    original: Callable[..., Any], made: TemporaryPaths, path_of: Callable[[Any], tuple[Any, bool]]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            result = original(*args, **kwargs)
        finally:
            _local.depth -= 1
        try:
            path, folder = path_of(result)
            if path is not None:
                made.add(path, folder=folder)
        except Exception:  # never fail the project's call for a record
            pass
        return result

    setattr(call, _MARKER, True)
    return call
