"""Exceptions shared by every layer, and the helper that names the pip extra for a missing dependency."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["DeviateError", "MissingDependencyError", "SchemaVersionError", "UsageError", "require"]


class DeviateError(Exception):
    """Base class of every error deviate-cb raises on purpose."""


class UsageError(DeviateError, ValueError):
    """The user asked for something that cannot work: a bad argument, path or file.

    The CLIs print the message as one line and exit with status 2.
    """


class SchemaVersionError(UsageError):
    """A run directory was written by a newer deviate-cb than the one reading it."""


class MissingDependencyError(DeviateError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the pip extra to install.

    Example:
        >>> require("json", extra="core").__name__
        'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"`{module}` is required for this feature but is not installed. "
            f"Install it with: pip install 'deviate-cb[{extra}]'"
        ) from exc
