"""``--isolate``'s copy-on-write: a replica's write never goes through a link into the launch directory.

Example:
    >>> import tempfile
    >>> from deviate_cb.launch.replica.isolation import make_workdir
    >>> project = Path(tempfile.mkdtemp()) / "app"; (project / "ckpt").mkdir(parents=True)
    >>> (project / "ckpt" / "best.txt").write_text("old")
    3
    >>> run_dir = project.parent / "runs" / "replica=0"; run_dir.mkdir(parents=True)
    >>> work = make_workdir(run_dir, project)
    >>> cow = CopyOnWrite(run_dir, project)
    >>> cow.before_write(str(work / "ckpt" / "best.txt"), "copy")
    >>> (work / "ckpt").is_symlink(), (work / "ckpt" / "best.txt").is_symlink()
    (False, False)
    >>> with open(work / "ckpt" / "best.txt", "a") as f: _ = f.write("+mine")
    >>> (work / "ckpt" / "best.txt").read_text(), (project / "ckpt" / "best.txt").read_text()
    ('old+mine', 'old')
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.launch.replica.isolation import WORKDIR, link_target, recorded_launch_dir

__all__ = ["CopyOnWrite", "install_copy_on_write", "patch_torch_save"]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NEW_ENTRY = {"os.rename": (1, 3), "os.mkdir": (0, 2), "os.symlink": (1, 2), "os.link": (1, 3)}  # event ->
# the positions of the new path and of its dir_fd among the event's arguments
_MADE_KEPT = 1000  # paths kept in CopyOnWrite.made and .failed
_MARKER = "__deviate_copy_on_write__"
_SAVE = "save"  # torch.save, torch.serialization.save
_PROG = "deviate-replicate"
_state: dict[str, Optional[CopyOnWrite]] = {"cow": None}


class CopyOnWrite:
    """Makes the paths a replica writes in its ``--isolate`` working directory its own (see the module).

    Args:
        run_dir: The replica's run directory (its workdir is ``<run_dir>/.workdir``).
        launch_dir: The launch directory the workdir's links point into.
    """

    def __init__(self, run_dir: Path, launch_dir: Path) -> None:
        self.root = os.path.join(os.path.abspath(run_dir), WORKDIR)
        self.prefix = self.root + os.sep
        real = os.path.join(os.path.realpath(self.root), "")  # os.getcwd() spells it so when the run directory's
        self.real_prefix = real if real != self.prefix else None  # path holds a link (--out through one)
        self.launch_dir = Path(os.path.abspath(launch_dir))
        self.made: list[str] = []  # paths made the replica's own, in order (at most _MADE_KEPT)
        self.failed: dict[str, str] = {}  # path -> why it could not be made the replica's own
        self._local = threading.local()

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: write opens, and the new path of a rename, ``mkdir``, link; ``os.truncate``."""
        if event == "open":
            if len(args) >= 3:
                flags, mode = args[2], args[1]
                if isinstance(flags, int) and flags >= 0:
                    if flags & os.O_EXCL:  # creates a new file or fails: only the folders on the way
                        self.before_write(args[0], "parents")
                    elif flags & _WRITE_FLAGS:
                        self.before_write(args[0], "truncate" if flags & os.O_TRUNC else "copy")
                elif isinstance(mode, str) and any(c in mode for c in "wax+"):
                    self.before_write(args[0], "truncate" if "w" in mode else "copy")
        elif event in _NEW_ENTRY:
            position, fd = _NEW_ENTRY[event]
            if event == "os.rename" and len(args) > 2 and (args[2] is None or args[2] == -1):
                self.before_write(args[0], "copy")  # a linked file moved away stays a link, no longer ours: copy it
            if len(args) > position and (len(args) <= fd or args[fd] is None or args[fd] == -1):
                self.before_write(args[position], "parents")
        elif event == "os.truncate" and args:
            self.before_write(args[0], "copy")

    def before_write(self, target: Any, how: str) -> None:
        """Make ``target`` the replica's own before it is written: ``how`` is ``"truncate"`` (rewritten),
        ``"copy"`` (changed in place) or ``"parents"`` (only the folders on the way); never raises."""
        if isinstance(target, int) or getattr(self._local, "busy", False):
            return
        try:
            path = os.fsdecode(target)
            path = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)  # `..` kept: see _make_own
        except (TypeError, ValueError, OSError):
            return
        if self.real_prefix is not None and path.startswith(self.real_prefix):
            path = self.prefix + path[len(self.real_prefix) :]
        if "__pycache__" in path or (self.prefix not in path and not os.path.abspath(path).startswith(self.prefix)):
            return
        self._local.busy = True
        try:
            self._make_own(path, how)
        except Exception as exc:  # never fail the project's write for it
            self._warn(os.path.abspath(path), exc)
        finally:
            self._local.busy = False

    def _make_own(self, path: str, how: str) -> None:
        """Walk ``path`` as the kernel will: every linked folder of ours it passes through becomes a real one
        (also before a ``..``: ``scripts/../best.pt`` would otherwise reach the launch directory's ``best.pt``
        through ``scripts``' link), then the last entry is made the replica's own."""
        names = [name for name in path.split(os.sep) if name not in ("", ".")]
        current = os.sep
        for depth, name in enumerate(names):
            last = depth == len(names) - 1
            if name == "..":
                current = os.path.dirname(current)  # a real folder: no link of ours was followed to reach it
                continue
            current = os.path.join(current, name)
            if not current.startswith(self.prefix):
                continue
            if not os.path.islink(current):
                if last or not os.path.isdir(current):
                    return  # the replica's own already, or not there (the write fails or creates it)
                continue
            if not self._ours(current, current[len(self.prefix) :].split(os.sep)):
                return  # a link the project made: left as it is
            if last:
                if how != "parents" and not os.path.isdir(current):
                    self._own_file(current, how)
                return
            if not os.path.isdir(current):
                return  # a linked file on the way: the write fails as it would have
            self._own_folder(current)

    def _ours(self, link: str, relative: list[str]) -> bool:
        return os.readlink(link) == str(link_target(self.launch_dir, relative))

    def _own_folder(self, link: str) -> None:
        """Replace a link to a folder by a real folder holding a link to each of its entries."""
        target = os.readlink(link)
        staging = f"{link}.deviate-{os.getpid()}-{threading.get_ident()}"
        os.mkdir(staging)
        try:
            for name in sorted(os.listdir(target)):
                os.symlink(os.path.join(target, name), os.path.join(staging, name))
            if os.path.islink(link):
                os.unlink(link)
            os.rename(staging, link)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if os.path.islink(link) or not os.path.isdir(link):
                raise
            return  # another process of the replica made it first
        self._made(link)

    def _own_file(self, link: str, how: str) -> None:
        """Replace a link to a file by an empty file of the replica's own (rewritten) or by a copy of the file
        (changed in place); a link to nothing is removed (the write creates the file, if it creates one)."""
        if not os.path.exists(link):
            os.unlink(link)
            self._made(link)
            return
        staging = f"{link}.deviate-{os.getpid()}-{threading.get_ident()}"
        try:
            if how == "truncate":
                os.close(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, os.stat(link).st_mode & 0o777))
            else:
                shutil.copy2(link, staging)
            os.unlink(link)  # not replaced by the rename: the watch would resolve the target through the link
            os.rename(staging, link)
        except OSError:
            if os.path.lexists(staging):
                os.unlink(staging)
            if os.path.lexists(link) and not os.path.islink(link):
                return  # another process of the replica made it its own first
            raise
        self._made(link)

    def _made(self, path: str) -> None:
        if len(self.made) < _MADE_KEPT:
            self.made.append(path)

    def _warn(self, path: str, exc: Exception) -> None:
        if path in self.failed or len(self.failed) >= _MADE_KEPT:
            return
        self.failed[path] = str(exc)
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"{_PROG}: warning: --isolate could not make {path} this replica's own ({exc}); the write goes "
                "to the launch directory's file, shared with the other replicas\n"
            )


def install_copy_on_write(run_dir: Path) -> Optional[CopyOnWrite]:
    """Install the audit hook in this process when ``run_dir`` has an ``--isolate`` working directory (once per
    process); ``None`` when it has none. Call it before the outside-writes watch is installed."""
    cow = _state["cow"]
    if cow is not None:
        return cow
    launch_dir = recorded_launch_dir(run_dir)
    if launch_dir is None or not (Path(run_dir) / WORKDIR).is_dir():
        return None
    cow = _state["cow"] = CopyOnWrite(run_dir, launch_dir)
    sys.addaudithook(cow.audit)
    return cow


def patch_torch_save() -> None:
    """``torch.save`` given a path (written by C++, without an audit event) makes the path the replica's own first.

    Call it after the outside-writes watch patched ``torch.save``: this wrapper is then the outer one, so the
    watch sees the replica's own file.
    """
    when_imported("torch", _patch_torch)


def _patch_torch(module: ModuleType) -> None:
    for owner in (module, getattr(module, "serialization", None)):
        original = getattr(owner, _SAVE, None)
        if owner is not None and original is not None and not getattr(original, _MARKER, False):
            setattr(owner, _SAVE, _private(original))


def _private(original: Callable[..., Any]) -> Callable[..., Any]:
    def save(*args: Any, **kwargs: Any) -> Any:
        target = args[1] if len(args) > 1 else kwargs.get("f")
        cow = _state["cow"]
        if cow is not None and isinstance(target, (str, bytes, os.PathLike)):
            cow.before_write(target, "truncate")
        return original(*args, **kwargs)

    save.__wrapped__ = original  # type: ignore[attr-defined]
    save.__doc__, save.__name__ = original.__doc__, getattr(original, "__name__", "save")
    setattr(save, _MARKER, True)
    return save
