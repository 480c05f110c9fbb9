"""``--isolate``: each replica runs in its own working directory that still sees the project's files, and ``..``.

Example:
    >>> import tempfile
    >>> parent = Path(tempfile.mkdtemp()); project = parent / "mnist"; (parent / "data").mkdir()
    >>> project.mkdir(); (project / "main.py").write_text("print(1)")
    8
    >>> run_dir = project / "runs" / "experiment=e" / "variant=algo" / "replica=0"; run_dir.mkdir(parents=True)
    >>> work = make_workdir(run_dir, project, project / "runs")
    >>> work == workdir_of(run_dir, project) == run_dir / WORKDIR / "mnist"
    True
    >>> sorted(p.name for p in work.iterdir()), (work / "main.py").resolve() == (project / "main.py").resolve()
    (['main.py'], True)
    >>> (work / ".." / "data").resolve() == (parent / "data").resolve(), launch_dir_of(str(work)) == str(project)
    (True, True)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from deviate_cb.store.bounded_read import HostileFileError, read_regular

__all__ = [
    "LEVELS",
    "WORKDIR",
    "isolation_note",
    "launch_dir_of",
    "link_target",
    "make_workdir",
    "recorded_launch_dir",
    "workdir_of",
]

WORKDIR = ".workdir"  # deviate_cb.capture.outside_writes resolves paths through it
LEVELS = 1  # how many levels of `..` from the working directory see the launch directory's surroundings
_ORIGIN = ".deviate-launch-dir"  # in the run directory: the launch directory the links point to
_ORIGIN_BYTES = 64 * 1024  # a path: far more than any file system allows
_ROOT_NAME = "root"  # the working directory's name when the launch directory is "/"


def workdir_of(run_dir: Path, launch_dir: Path) -> Path:
    """The replica's working directory with ``--isolate``: ``<run_dir>/.workdir/<launch directory's name>``.

    Example:
        >>> workdir_of(Path("/runs/replica=0"), Path("/home/me/mnist")).as_posix()
        '/runs/replica=0/.workdir/mnist'
    """
    return Path(run_dir) / WORKDIR / (Path(os.path.abspath(launch_dir)).name or _ROOT_NAME)


def link_target(launch_dir: Path, relative: Sequence[str]) -> Path:
    """Where the link at ``<run_dir>/.workdir/<relative>`` points (the links :func:`make_workdir` makes, and
    those :mod:`deviate_cb.launch.replica.copy_on_write` makes when it turns a linked folder into a real one).

    Example:
        >>> link_target(Path("/home/me/mnist"), ["mnist", "scripts", "main.py"]).as_posix()
        '/home/me/mnist/scripts/main.py'
        >>> link_target(Path("/home/me/mnist"), ["data", "train.csv"]).as_posix()
        '/home/me/data/train.csv'
    """
    launch_dir = Path(os.path.abspath(launch_dir))
    if relative and relative[0] == (launch_dir.name or _ROOT_NAME):
        return launch_dir.joinpath(*relative[1:])
    return launch_dir.parent.joinpath(*relative)


def make_workdir(run_dir: Path, launch_dir: Path, out_root: Optional[Path] = None) -> Path:
    """Create the replica's working directory (:func:`workdir_of`) and the links around it; return it.

    ``<run_dir>/.workdir/<name>/`` links each top-level entry of ``launch_dir``, ``<run_dir>/.workdir/`` each
    entry of its parent (when it can be listed) but ``launch_dir`` itself. The entry that holds ``out_root`` is
    left out (a replica would otherwise see the whole study). Entries already there (a rerun into the same run
    directory) are kept.
    """
    launch_dir = Path(os.path.abspath(launch_dir))
    root = Path(run_dir) / WORKDIR
    root.mkdir(exist_ok=True)
    (Path(run_dir) / _ORIGIN).write_text(str(launch_dir))
    work = workdir_of(run_dir, launch_dir)
    work.mkdir(exist_ok=True)
    out = None if out_root is None else Path(os.path.abspath(out_root))
    _link_entries(work, launch_dir, _holding(out, launch_dir))
    parent = launch_dir.parent
    if parent != launch_dir:
        with contextlib.suppress(OSError):  # a parent we may not list: `..` then sees only the launch directory
            _link_entries(root, parent, {launch_dir.name, *_holding(out, parent)})
    return work


def _holding(out: Optional[Path], folder: Path) -> set[str]:
    """The name of ``folder``'s entry that holds ``out`` (``out`` itself or a folder above it), if any."""
    if out is None or out == folder or not out.is_relative_to(folder):
        return set()
    return {out.relative_to(folder).parts[0]}


def _link_entries(into: Path, folder: Path, skip: set[str]) -> None:
    for name in sorted(os.listdir(folder)):
        link = into / name
        if name in skip or os.path.lexists(link):
            continue
        os.symlink(folder / name, link)


def recorded_launch_dir(run_dir: Path) -> Optional[Path]:
    """The launch directory :func:`make_workdir` recorded in ``run_dir``; ``None`` when it made no workdir there,
    or when what is there is not a regular file of at most 64 KiB of UTF-8 (a FIFO planted there never blocks).

    Example:
        >>> import tempfile
        >>> run_dir = Path(tempfile.mkdtemp()); os.mkfifo(run_dir / _ORIGIN)
        >>> recorded_launch_dir(run_dir) is None  # never blocks; one warning line on stderr names the FIFO
        True
    """
    try:
        origin = read_regular(Path(run_dir) / _ORIGIN, _ORIGIN_BYTES).decode("utf-8").strip()
    except HostileFileError as exc:
        sys.stderr.write(f"deviate-replicate: warning: {exc}; the launch directory is not known from it\n")
        return None
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return Path(origin) if origin and os.path.isabs(origin) else None


def launch_dir_of(cwd: str) -> str:
    """The launch directory an ``--isolate`` working directory links to; ``cwd`` itself for any other.

    A warm-start template starts there, so that all replicas of a study share one template.
    """
    path = Path(cwd)
    if path.parent.name != WORKDIR:
        return cwd
    origin = recorded_launch_dir(path.parent.parent)
    return str(origin) if origin is not None and os.path.isdir(origin) else cwd


def isolation_note(cwd: Optional[Path]) -> str:
    """What a failed replica's message adds when it ran in an ``--isolate`` working directory ("" otherwise):
    where it ran, and what ``..`` reaches from there, so that a user sees the working directory moved.

    Example:
        >>> isolation_note(Path("/home/me/project"))
        ''
    """
    if cwd is None or Path(cwd).parent.name != WORKDIR:
        return ""
    launch_dir = recorded_launch_dir(Path(cwd).parent.parent)
    if launch_dir is None:
        return ""
    where = os.path.abspath(cwd)
    return (
        f"it ran with --isolate in {where}, where the launch directory's entries are links; `..` holds links to "
        f"the entries of {launch_dir.parent}, and `../..` is the run directory"
    )
