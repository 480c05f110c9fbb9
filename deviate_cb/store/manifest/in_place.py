"""``run.json`` written within the space its file already holds: the launcher's last resort on a full disk.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "run.json").write_text(json.dumps({"status": "running", "seed": 3, "note": "x" * 40}))
    >>> write_in_place(folder, "run.json", {"status": "failed", "seed": 3, "note": "x" * 40})
    True
    >>> json.loads((folder / "run.json").read_text())["status"]
    'failed'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deviate_cb.store.safe_paths import open_folder

__all__ = ["ESSENTIAL_FIELDS", "write_in_place"]

# What says who the replica was and how it ended: all that is kept when the whole manifest does not fit.
ESSENTIAL_FIELDS = (
    "attempt",
    "backend",
    "base_seed",
    "deterministic",
    "duration_s",
    "ended_at",
    "error",
    "exit_code",
    "experiment",
    "host",
    "launcher_pid",
    "mode",
    "pid",
    "reason",
    "replica",
    "schema_version",
    "seed",
    "signal",
    "started_at",
    "status",
    "trainer",
    "variant",
)


def write_in_place(folder: Path, name: str, recorded: Mapping[str, Any]) -> bool:
    """Write ``recorded`` over ``folder/name`` as compact JSON without new space, then cut the file to length.

    An atomic write needs room for a second copy of the file; here the file's own bytes (its size, or its
    allocated blocks) are all there is. Should the compact object not fit, only :data:`ESSENTIAL_FIELDS` are
    kept, then those with ``error`` shortened to the ``reason``. Returns ``False`` when the file is not there or
    cannot be written even so (then it is unchanged, or at worst unreadable, which a rerun also reruns). Never
    creates the file and never writes through a link, at the file or at its folder.
    """
    short = {key: recorded[key] for key in ESSENTIAL_FIELDS if key in recorded}
    tight = {**short, "error": short.get("reason", short.get("error", ""))}
    try:  # no O_CREAT, no O_TRUNC: no new space; never through a link, at the file or at its folder
        folder_fd = open_folder(folder)
        flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
        try:
            at = folder_fd is not None and os.open in os.supports_dir_fd
            fd = os.open(name, flags, dir_fd=folder_fd) if at else os.open(Path(folder) / name, flags)
        finally:
            if folder_fd is not None:
                os.close(folder_fd)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        room = max(info.st_size, getattr(info, "st_blocks", 0) * 512)
        for candidate in (dict(recorded), short, tight):
            data = (json.dumps(candidate, sort_keys=True, separators=(",", ":"), default=str) + "\n").encode()
            if len(data) <= room:
                break
        else:
            return False
        written = 0
        while written < len(data):
            os.lseek(fd, written, os.SEEK_SET)
            written += os.write(fd, data[written:])
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
