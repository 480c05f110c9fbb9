"""Lightning's loggers in a replica: each replica its own version folder, recorded; a folder shared anyway, named.

Example:
    >>> replica_version("train", "algo+impl", 3)
    'train.algo+impl.replica_3'
    >>> version_folder("tb_logs", "lightning_logs", 0), version_folder("logs", "", "mine")
    ('tb_logs/lightning_logs/version_0', 'logs/mine')
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Union

from deviate_cb.capture.call_log import CallLog
from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.capture.outside_writes import note_outside_write

__all__ = [
    "LOGGER_MODULES",
    "free_version",
    "install_logger_versions",
    "patch_logger_class",
    "replica_version",
    "version_folder",
]

#: The modules of Lightning's numbering loggers, and the logger classes each defines.
LOGGER_MODULES = {
    "lightning.fabric.loggers.tensorboard": ("TensorBoardLogger",),
    "lightning.fabric.loggers.csv_logs": ("CSVLogger",),
    "lightning_fabric.loggers.tensorboard": ("TensorBoardLogger",),
    "lightning_fabric.loggers.csv_logs": ("CSVLogger",),
}
_MARKER = "__deviate_logger_version__"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
_MAX_SUFFIX = 1000
_Version = Union[int, str]


def replica_version(experiment: str, variant: str, replica: int) -> str:
    """The version a replica's logger gets: ``<experiment>.<variant>.replica_<k>``, safe as a folder name.

    Example:
        >>> replica_version("my exp/1", "control", 0)
        'my_exp_1.control.replica_0'
    """
    return _UNSAFE.sub("_", f"{experiment}.{variant}.replica_{replica}")


def version_folder(save_dir: Union[str, os.PathLike[str]], name: Optional[str], version: _Version) -> str:
    """The folder a Lightning logger writes to: ``<save_dir>/<name>/<version>``, ``version_<N>`` for an int.

    ``~`` and environment variables are expanded, as ``TensorBoardLogger.log_dir`` does.

    Example:
        >>> version_folder("logs", None, 2)
        'logs/version_2'
    """
    folder = version if isinstance(version, str) else f"version_{version}"
    path = os.path.join(os.fspath(save_dir), name or "", folder)
    return os.path.expanduser(os.path.expandvars(path))


def free_version(root: Union[str, os.PathLike[str]], version: str) -> str:
    """``version``, or the first ``<version>.2``, ``<version>.3``, ... whose folder under ``root`` is not there.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> free_version(root, "e.algo.replica_0")
        'e.algo.replica_0'
        >>> os.mkdir(os.path.join(root, "e.algo.replica_0"))
        >>> free_version(root, "e.algo.replica_0")
        'e.algo.replica_0.2'
    """
    candidate = version
    for suffix in range(2, _MAX_SUFFIX):
        if not os.path.lexists(os.path.join(root, candidate)):
            return candidate
        candidate = f"{version}.{suffix}"
    return candidate


class _Loggers:
    """This process's loggers: the version each gets, and the record of them."""

    def __init__(
        self, run_dir: Path, version: str, on_record: Optional[Callable[[dict[str, Any]], None]] = None
    ) -> None:
        self.run_dir = os.path.join(os.path.realpath(run_dir), "")
        self.version = version
        self.log = CallLog("logger versions", self.snapshot, on_record)

    def snapshot(self) -> dict[str, Any]:
        loggers, more = self.log.copy()
        return {"loggers": loggers, "more": more}

    def inside_run_dir(self, folder: str) -> bool:
        return os.path.join(os.path.realpath(folder), "").startswith(self.run_dir)

    def choose(self, cls: type, save_dir: Any, name: Optional[str], asked: Optional[_Version]) -> Optional[_Version]:
        """The version a new logger of ``cls`` gets (``asked`` unless it is ``None`` and outside), recorded."""
        if not isinstance(save_dir, (str, os.PathLike)):
            return asked
        remote = "://" in os.fspath(save_dir)
        root = version_folder(save_dir, name, "")  # <save_dir>/<name>/
        applied: Optional[_Version] = asked
        if asked is None and not remote and not self.inside_run_dir(root):
            applied = free_version(root, self.version)
        kind = f"{cls.__module__}.{cls.__qualname__}"
        entry: dict[str, Any] = {"class": kind, "root": root if remote else os.path.abspath(root)}
        if applied is not None:  # else left to Lightning's numbering (inside the run directory, or remote)
            folder = version_folder(save_dir, name, applied)
            entry["log_dir"] = folder if remote else os.path.abspath(folder)
            if not remote and not self.inside_run_dir(folder):
                note_outside_write(entry["log_dir"])
        entry.update(asked=asked, applied=applied)
        self.log.count((kind, entry.get("log_dir", entry["root"]), repr(asked)), entry)
        return applied


_state: dict[str, Optional[_Loggers]] = {"loggers": None}


def install_logger_versions(
    run_dir: Path,
    experiment: str,
    variant: str,
    replica: int,
    on_record: Optional[Callable[[dict[str, Any]], None]] = None,
) -> None:
    """Give this replica's Lightning loggers its own version folder (see the module), once per process.

    Args:
        run_dir: The replica's run directory; loggers writing inside it are left alone.
        experiment, variant, replica: The replica, which names the version (:func:`replica_version`).
        on_record: Called with the ``logger_versions`` record as each new logger appears; ``None`` in processes
            that do not write the manifest.

    Example:
        >>> install_logger_versions(Path("runs/e/v/r0"), "e", "algo", 0)  # in a replica's bootstrap  # doctest: +SKIP
    """
    if _state["loggers"] is not None:
        return
    loggers = _state["loggers"] = _Loggers(run_dir, replica_version(experiment, variant, replica), on_record)
    for module_name, classes in LOGGER_MODULES.items():
        when_imported(module_name, functools.partial(_patch_module, classes=classes, choose=loggers.choose))


def _patch_module(module: ModuleType, classes: tuple[str, ...], choose: Callable[..., Optional[_Version]]) -> None:
    for name in classes:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            patch_logger_class(cls, choose)


def patch_logger_class(cls: type, choose: Callable[..., Optional[_Version]]) -> None:
    """Wrap ``cls.__init__`` (``root_dir``/``save_dir``, ``name``, ``version``) so that ``choose(type(self),
    save_dir, name, version)`` gives the version it runs with (idempotent). An error of ``choose`` leaves the
    logger as the project made it, with one warning.

    Example:
        >>> class Logger:
        ...     def __init__(self, root_dir, name="lightning_logs", version=None):
        ...         self.version = version
        >>> patch_logger_class(Logger, lambda cls, root, name, version: "mine" if version is None else version)
        >>> Logger("logs").version, Logger("logs", "x", 3).version, Logger("logs", version=0).version
        ('mine', 3, 0)
    """
    original = cls.__dict__.get("__init__")
    if original is None or getattr(original, _MARKER, False):
        return
    try:
        signature: Optional[inspect.Signature] = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None
    if signature is None or "version" not in signature.parameters:
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # Lightning's own error, as the project would get it
            original(self, *args, **kwargs)
            return
        arguments = bound.arguments
        save_dir = arguments.get("root_dir", arguments.get("save_dir"))
        name = arguments.get("name", signature.parameters["name"].default if "name" in signature.parameters else "")
        asked = arguments.get("version")
        try:
            applied = choose(type(self), save_dir, name, asked)
        except Exception as exc:  # never cost the project its logger
            sys.stderr.write(f"deviate-replicate: warning: the logger's version was left as it was: {exc}\n")
            applied = asked
        if applied is not asked:
            arguments["version"] = applied
        original(*bound.args, **bound.kwargs)

    setattr(__init__, _MARKER, True)
    setattr(cls, "__init__", __init__)  # noqa: B010
