"""Run a function right after a module is imported (or now, if it already is).

Used to apply seeds and determinism switches to a framework the moment it is imported (so replicas that
never use torch do not pay for importing it) and to patch Lightning's ``Trainer`` in replicas.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Optional

__all__ = ["when_imported"]

_lock = threading.RLock()
_pending: dict[str, list[Callable[[ModuleType], None]]] = {}
_finder: Optional[_PostImportFinder] = None


def when_imported(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(module)`` once module ``name`` has been imported: immediately if it already is.

    Example:
        >>> seen = []
        >>> when_imported("json", lambda m: seen.append(m.__name__))
        >>> seen
        ['json']
    """
    global _finder
    with _lock:
        module = sys.modules.get(name)
        if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
            _pending.setdefault(name, []).append(hook)
            if _finder is None:
                _finder = _PostImportFinder()
                sys.meta_path.insert(0, _finder)
            return
    hook(module)


def _run_hooks(name: str) -> None:
    with _lock:
        hooks = _pending.pop(name, [])
    module = sys.modules[name]
    for hook in hooks:
        hook(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the rest of ``sys.meta_path`` and wraps the loader of watched modules."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in _pending or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            _run_hooks(fullname)

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]
        except AttributeError:  # loaders without a writable attribute: watch no further
            return spec
        return spec
