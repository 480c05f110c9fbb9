"""Writes into a run store that never go through a symbolic link the tool did not make.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp()); outside = Path(tempfile.mkdtemp())
    >>> fd = open_append(root, root / ".deviate" / "writes" / "a.jsonl"); os.close(fd)
    >>> (root / ".sequential").symlink_to(outside)
    >>> try:
    ...     make_folders(root, root / ".sequential")
    ... except PlantedLinkError as exc:
    ...     print(str(exc).replace(str(root), "OUT"))
    OUT/.sequential is a symbolic link deviate-cb did not make: nothing is written through it
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Optional, Union

__all__ = ["PlantedLinkError", "in_folder", "make_folders", "open_append", "open_folder"]

PathLike = Union[str, "os.PathLike[str]"]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FD = os.stat in os.supports_dir_fd


class PlantedLinkError(OSError):
    """A path the tool writes through is a symbolic link it did not make (``errno`` ``ELOOP``)."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        super().__init__(
            errno.ELOOP, f"{self.path} is a symbolic link deviate-cb did not make: nothing is written through it"
        )

    def __str__(self) -> str:
        return str(self.args[1])


def _is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def make_folders(root: PathLike, folder: PathLike) -> None:
    """Create ``folder`` (inside ``root``) and its missing parents, refusing any link from ``root`` down.

    ``root`` is created as ``mkdir -p`` would (it may be a link); a folder outside ``root`` is only checked
    itself. Raises :class:`PlantedLinkError` for a link, ``NotADirectoryError`` for a file, ``OSError`` else.
    """
    base, target = os.path.abspath(os.fspath(root)), os.path.abspath(os.fspath(folder))
    try:
        parts = Path(os.path.relpath(target, base)).parts
    except ValueError:  # another drive
        parts = ("..",)
    if parts[:1] == ("..",):
        base, parts = os.path.dirname(target), (os.path.basename(target),)
    os.makedirs(base, exist_ok=True)
    current = base
    for part in parts:
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        with contextlib.suppress(FileExistsError):
            os.mkdir(current)
        mode = os.lstat(current).st_mode
        if stat.S_ISLNK(mode):
            raise PlantedLinkError(current)
        if not stat.S_ISDIR(mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), current)


def open_folder(folder: PathLike) -> Optional[int]:
    """A descriptor of ``folder`` opened without following a link at its last component; raises
    :class:`PlantedLinkError` when it is one. ``None`` where the system cannot open a folder (Windows: no
    ``O_DIRECTORY``), once an ``lstat`` shows it is no link. The caller closes the descriptor."""
    path = os.fspath(folder)
    if not _DIRECTORY:
        if _is_link(path):
            raise PlantedLinkError(path)
        return None
    try:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(path):
            raise PlantedLinkError(path) from None
        raise


def in_folder(fd: int, name: str, folder_fd: Optional[int]) -> bool:
    """Whether the open file ``fd`` is ``name`` in the open folder ``folder_fd`` (not in one a link swapped in
    since the folder was opened); ``True`` where that cannot be told (no folder descriptor, no ``dir_fd``)."""
    if folder_fd is None or not _DIR_FD:
        return True
    try:
        return os.path.samestat(os.fstat(fd), os.stat(name, dir_fd=folder_fd, follow_symlinks=False))
    except OSError:
        return False


def open_append(root: PathLike, path: PathLike) -> int:
    """``path`` (inside ``root``) opened to append, created if missing (mode ``0o666`` less the umask), its folders
    made by :func:`make_folders`; never through a link (:class:`PlantedLinkError`). The caller closes it."""
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    make_folders(root, folder)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC
    folder_fd = open_folder(folder)
    try:
        try:  # the whole path, as an audit hook watching the process's opens expects (no relative dir_fd name)
            fd = os.open(os.path.join(folder, name), flags, 0o666)
        except OSError as exc:
            if exc.errno == errno.ELOOP or _is_link(path):
                raise PlantedLinkError(path) from None
            raise
        if not in_folder(fd, name, folder_fd):  # a folder swapped for a link since it was checked
            os.close(fd)
            raise PlantedLinkError(folder)
        return fd
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
