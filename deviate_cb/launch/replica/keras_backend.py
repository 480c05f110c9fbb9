"""The Keras backend of the replicas: ``--keras-backend`` checked in the launcher, the backend guarded in a replica.

Example:
    >>> check_keras_backend(None) is None
    True
    >>> missing_backend("torch", lambda name: True) is None
    True
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import NamedTuple, Optional

from deviate_cb.errors import UsageError

__all__ = [
    "KERAS_BACKENDS",
    "BackendPackage",
    "KerasBackendNotInstalled",
    "backend_error",
    "check_keras_backend",
    "configured_keras_backend",
    "install_backend_guard",
    "missing_backend",
]


class BackendPackage(NamedTuple):
    """What a Keras backend needs: the modules that must be importable, a display name, the install command."""

    modules: tuple[str, ...]
    display: str
    install: str


KERAS_BACKENDS: dict[str, BackendPackage] = {
    "tensorflow": BackendPackage(
        ("tensorflow",), "TensorFlow", "pip install tensorflow (or tensorflow-cpu on machines without a GPU)"
    ),
    "torch": BackendPackage(("torch",), "PyTorch", "pip install torch"),
    "jax": BackendPackage(("jax", "jaxlib"), "JAX", "pip install 'jax[cpu]' (or jax[cuda12] for GPUs)"),
}


class KerasBackendNotInstalled(ModuleNotFoundError):
    """Keras was imported in a replica with a backend whose package is not installed."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_backend(backend: str, installed: Callable[[str], bool] = _installed) -> Optional[str]:
    """The first module ``backend`` needs that is not installed, or ``None`` (also for unknown backends).

    Example:
        >>> missing_backend("jax", lambda name: name != "jaxlib")
        'jaxlib'
    """
    package = KERAS_BACKENDS.get(backend)
    if package is None:
        return None
    return next((module for module in package.modules if not installed(module)), None)


def check_keras_backend(backend: Optional[str], installed: Callable[[str], bool] = _installed) -> Optional[str]:
    """Validate ``--keras-backend`` in the launcher (imports nothing); return it, or ``None`` when not given.

    Raises:
        UsageError: An unknown backend, Keras 3 not installed, or the backend's package not installed.

    Example:
        >>> check_keras_backend("jax", lambda name: True)
        'jax'
        >>> try:
        ...     check_keras_backend("mxnet")
        ... except UsageError as exc:
        ...     print(exc)
        `--keras-backend` must be one of tensorflow, torch, jax. Received: --keras-backend=mxnet.
    """
    if backend is None:
        return None
    received = f"Received: --keras-backend={backend}."
    if backend not in KERAS_BACKENDS:
        raise UsageError(f"`--keras-backend` must be one of {', '.join(KERAS_BACKENDS)}. {received}")
    if not installed("keras"):
        raise UsageError(
            f"`--keras-backend` needs Keras 3, which is not installed. "
            f"Install it with: pip install 'deviate-cb[keras]'. {received}"
        )
    version = _keras_version()
    major = (version or "").split(".")[0]
    if major.isdigit() and int(major) < 3:
        raise UsageError(
            f"`--keras-backend` needs Keras 3, but Keras {version} is installed. "
            f"Install it with: pip install -U 'keras>=3'. {received}"
        )
    missing = missing_backend(backend, installed)
    if missing is not None:
        package = KERAS_BACKENDS[backend]
        raise UsageError(
            f"`--keras-backend` {backend} needs {package.display}, which is not installed"
            f"{f' ({missing} is missing)' if missing != package.modules[0] else ''}. "
            f"Install it with: {package.install}. {received}"
        )
    return backend


def _keras_version() -> Optional[str]:
    try:
        return importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:  # importable but not installed as a distribution
        return None


def configured_keras_backend(environ: Optional[Mapping[str, str]] = None) -> tuple[str, str]:
    """The backend Keras will load, and where that comes from, read the way Keras reads it (no import).

    ``KERAS_BACKEND`` wins; then ``keras.json`` in ``KERAS_HOME`` (default ``~/.keras``); else ``tensorflow``.

    Example:
        >>> configured_keras_backend({"KERAS_BACKEND": "jax"})
        ('jax', 'KERAS_BACKEND=jax')
    """
    environ = os.environ if environ is None else environ
    if environ.get("KERAS_BACKEND"):
        return environ["KERAS_BACKEND"], f"KERAS_BACKEND={environ['KERAS_BACKEND']}"
    home = Path(environ.get("KERAS_HOME") or Path(environ.get("HOME") or "~").expanduser() / ".keras")
    config = home / "keras.json"
    try:
        backend = json.loads(config.read_text()).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    if isinstance(backend, str) and backend:
        return backend, f"{config} says backend {backend}"
    return "tensorflow", "Keras' default; KERAS_BACKEND is not set"


def backend_error(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The one-line message for a configured backend whose package is missing, or ``None`` when it is fine.

    Example:
        >>> print(backend_error({"KERAS_BACKEND": "torch"}) if missing_backend("torch") else None)
        None
    """
    backend, source = configured_keras_backend(environ)
    missing = missing_backend(backend)
    if missing is None:
        return None
    package = KERAS_BACKENDS[backend]
    others = "|".join(name for name in KERAS_BACKENDS if name != backend)
    return (
        f"Keras is set to the {backend} backend ({source}), but {package.display} is not installed "
        f"(no module named {missing!r}). Install it with: {package.install}; or choose another backend with "
        f"`deviate-replicate --keras-backend {others}`."
    )


class _KerasGuard(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the ``keras`` package so that it checks the backend first.

    Raising in ``find_spec`` would break code that merely asks whether Keras is installed; the check runs when
    Keras is executed instead, before any of its own code.
    """

    def __init__(self) -> None:
        self._busy = False

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "keras" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            message = backend_error()
            if message is not None:
                raise KerasBackendNotInstalled(message, name=missing_backend(configured_keras_backend()[0]))
            _remove_guard()
            original(module)

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]
        except AttributeError:
            return None
        return spec


_guard: Optional[_KerasGuard] = None


def install_backend_guard() -> None:
    """In a replica: make ``import keras`` fail with one clear line when its backend's package is missing.

    Example:
        >>> install_backend_guard()  # in a replica, before the user's module is imported  # doctest: +SKIP
    """
    global _guard
    if _guard is None and "keras" not in sys.modules:
        _guard = _KerasGuard()
        sys.meta_path.insert(0, _guard)


def _remove_guard() -> None:
    global _guard
    if _guard is not None and _guard in sys.meta_path:
        sys.meta_path.remove(_guard)
    _guard = None
