"""``--isolate``: each replica runs in its own working directory that still sees the project's files.

A project that writes to fixed relative paths (``history.json``, ``./out-shakespeare/ckpt.pt``) makes parallel
replicas overwrite each other's files (:mod:`deviate_cb.capture.outside_writes` finds it). With ``--isolate``
a replica's working directory is ``<run_dir>/.workdir/``, which holds a symbolic link to every top-level entry of
the directory ``deviate-replicate`` was started in (nothing is copied): the project's scripts, packages,
configuration and data are where they were, and a file or folder the project creates at the top level lands in
the replica's own ``.workdir`` (a dot-folder: ``pyarrow.dataset`` over the study and the run finder skip it,
so the linked project files never join a study's tables). The launcher creates it just before the replica
starts (after an earlier attempt was moved away), on every backend (the run directory is on storage the nodes
see; the links point to the launch directory's absolute paths, so Slurm and Ray nodes must see it at the same
path, as for the working directory without ``--isolate``).

Limits: a folder that already exists in the project is a link, so what the project writes into it is still
shared (and still detected and named); absolute paths are not redirected; the entry holding ``--out`` (when
``--out`` is inside the launch directory) is not linked; entries created in the launch directory after the
replica started are not seen.

Example:
    >>> import tempfile
    >>> project = Path(tempfile.mkdtemp()); (project / "train.py").write_text("print(1)"); (project / "data").mkdir()
    8
    >>> run_dir = project / "runs" / "experiment=e" / "variant=algo" / "replica=0"; run_dir.mkdir(parents=True)
    >>> work = make_workdir(run_dir, project, project / "runs")
    >>> sorted(p.name for p in work.iterdir()), (work / "train.py").resolve() == (project / "train.py").resolve()
    (['data', 'train.py'], True)
    >>> launch_dir_of(str(work)) == str(project)
    True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

__all__ = ["WORKDIR", "launch_dir_of", "make_workdir"]

WORKDIR = ".workdir"  # deviate_cb.capture.outside_writes resolves paths through it
_ORIGIN = ".deviate-launch-dir"  # in the run directory: the launch directory the links point to


def make_workdir(run_dir: Path, launch_dir: Path, out_root: Optional[Path] = None) -> Path:
    """Create ``<run_dir>/.workdir`` with a link to each top-level entry of ``launch_dir``; return it.

    The entry that holds ``out_root`` is left out (a replica would otherwise see the whole study). Entries
    already there (a rerun into the same run directory) are kept.
    """
    launch_dir = Path(os.path.abspath(launch_dir))
    workdir = Path(run_dir) / WORKDIR
    workdir.mkdir(exist_ok=True)
    (Path(run_dir) / _ORIGIN).write_text(str(launch_dir))
    skip: Optional[str] = None
    if out_root is not None:
        out = Path(os.path.abspath(out_root))
        if out != launch_dir and out.is_relative_to(launch_dir):
            skip = out.relative_to(launch_dir).parts[0]
    for name in sorted(os.listdir(launch_dir)):
        link = workdir / name
        if name == skip or os.path.lexists(link):
            continue
        os.symlink(launch_dir / name, link)
    return workdir


def launch_dir_of(cwd: str) -> str:
    """The launch directory an ``--isolate`` working directory links to; ``cwd`` itself for any other.

    A warm-start template starts there, so that all replicas of a study share one template.
    """
    path = Path(cwd)
    if path.name != WORKDIR:
        return cwd
    try:
        origin = (path.parent / _ORIGIN).read_text().strip()
    except OSError:
        return cwd
    return origin if origin and os.path.isdir(origin) else cwd
