"""The output directory of a replication: check it, create what is missing, lock it, undo on failure."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.run_directory import run_path

__all__ = ["LOCK_FILE", "OutputDirectory", "check_store_path"]

LOCK_FILE = ".deviate-replicate.lock"


def check_store_path(path: Path, expected: str, given: str, *, directory: bool = True) -> None:
    """Refuse a symbolic link where the store expects its own directory (or file), and a file for a directory.

    deviate-replicate never follows a link out of the store: a link at ``experiment=``, ``variant=``,
    ``replica=`` (or a file they should hold) would make it move, create or overwrite files elsewhere. ``--out``
    itself may be a link. Raises :class:`UsageError` naming the path and what was expected.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "replica=0").symlink_to(root)
        >>> try:
        ...     check_store_path(root / "replica=0", "a replica directory", "runs")
        ... except UsageError as exc:
        ...     "but that is a symbolic link" in str(exc)
        True
    """
    if path.is_symlink():
        try:
            target = f" (to {os.readlink(path)!r})"
        except OSError:
            target = ""
        found = f"a symbolic link{target}"
    elif directory and path.exists() and not path.is_dir():
        found = "a file"
    else:
        return
    raise UsageError(
        f"`--out` must hold {expected} at {str(path)!r}, but that is {found}; deviate-replicate never follows "
        f"links out of the store or writes over files it does not own. Move it away, or use another --out. "
        f"Received: --out={given}."
    )


class OutputDirectory:
    """The variant directory of one replication, with the bookkeeping to undo its creation.

    Example:
        >>> import tempfile
        >>> out = OutputDirectory(Path(tempfile.mkdtemp()) / "runs", "mlp", "algo")
        >>> out.open().name
        'variant=algo'
        >>> out.close(remove_created=True); out.root.exists()
        False
    """

    def __init__(self, root: Path, experiment: str, variant: str, *, given: Optional[str] = None) -> None:
        self.root = Path(root)
        self.given = str(root) if given is None else given
        self.variant_dir = run_path(self.root, experiment, variant, 0).parent
        self.created: list[Path] = []  # in creation order (parents first)
        self._lock_fd: Optional[int] = None
        self._release: Callable[[], None] = lambda: None

    def open(self) -> Path:
        """Check the path, create the missing directories, and take the lock. Raises :class:`UsageError`."""
        self._check_creatable()
        missing = [p for p in (self.variant_dir, *self.variant_dir.parents) if not p.exists()]
        try:
            for path in reversed(missing):
                try:
                    path.mkdir()
                except FileExistsError:  # created meanwhile by someone else: not ours to remove
                    continue
                self.created.append(path)
            self._lock()
        except OSError as exc:
            self.close(remove_created=True)
            if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):  # not a permission problem
                raise UsageError(
                    f"`--out` must be on a file system with free space, but the disk holding "
                    f"{str(exc.filename or self.variant_dir)!r} is full ({exc.strerror or exc}); free space and "
                    f"rerun. Received: --out={self.given}."
                ) from None
            raise UsageError(
                f"`--out` must be a directory deviate-replicate can write to, but {exc.filename or self.given!r} is "
                f"not writable ({exc.strerror or exc}). Received: --out={self.given}."
            ) from None
        except BaseException:
            self.close(remove_created=True)
            raise
        return self.variant_dir

    def _check_creatable(self) -> None:
        experiment_dir = self.variant_dir.parent
        check_store_path(experiment_dir, "an experiment directory", self.given)
        check_store_path(self.variant_dir, "a variant directory", self.given)
        check_store_path(self.variant_dir / LOCK_FILE, "the launcher's lock file", self.given, directory=False)
        for own in (".deviate", ".deviate/writes", ".sequential"):  # the study's own folders: written by replicas
            check_store_path(self.root / own, f"the study's own folder {own}", self.given)
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(
                f"`--out` must be a directory, but {self.given!r} is a file. Received: --out={self.given}."
            )
        for parent in self.root.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise UsageError(
                        f"`--out` must be a directory path, but {str(parent)!r} on that path is a file. "
                        f"Received: --out={self.given}."
                    )
                break

    def _lock(self) -> None:
        path = self.variant_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)  # never write through a link
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock, the file still proves writability
            self._lock_fd = fd
            self._release = weakref.finalize(self, _release_lock, path, fd, os.getpid())
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode("utf-8", errors="replace").strip() or "unknown"
            os.close(fd)
            raise UsageError(
                f"`--out` is in use: another deviate-replicate ({holder}) is running replicas in "
                f"{str(self.variant_dir)!r}. Wait for it, or use another --out or --experiment. "
                f"Received: --out={self.given}."
            ) from None
        if not _locks_path(fd, path):  # removed as it was opened (its launcher ended): lock the file there now
            os.close(fd)
            return self._lock()
        self._lock_fd = fd  # held: close() releases and removes it, also when the write below fails (disk full)
        # Released and removed at exit at the latest, when an interrupt (SIGTERM) leaves close() unreached
        self._release = weakref.finalize(self, _release_lock, path, fd, os.getpid())
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())

    def close(self, *, remove_created: bool = False, remove_run_dirs: tuple[Path, ...] = ()) -> None:
        """Release the lock; optionally remove the given run directories and every directory this created.

        Directories this created are removed only when empty (nothing written by anyone else is ever lost).
        """
        if self._lock_fd is not None:
            try:
                self._release()
            finally:
                self._lock_fd = None
        for run_dir in remove_run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
        if remove_created:
            for path in reversed(self.created):
                with contextlib.suppress(OSError):  # not empty: someone else's, or kept on purpose
                    path.rmdir()
            self.created = [p for p in self.created if p.exists()]


def _locks_path(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` now (not one removed meanwhile, perhaps replaced by another)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
    except OSError:
        return False


def _release_lock(path: Path, fd: int, owner: int) -> None:
    """Remove the lock file (while still holding it, and only if it is still this lock's), then release it.

    Nothing in a forked child (``owner`` is the process that took the lock): the parent still holds it.
    """
    if os.getpid() != owner:
        return
    try:
        if _locks_path(fd, path):
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)
