"""A ``--trainer`` for disk-full tests: one replica writes a checkpoint of ``FILLER_BYTES`` zero bytes into its run
directory, as a real checkpoint would; on a file system too small for it the write fails part-way with the disk
full and leaves the disk full. Switched through the environment, so that a rerun is the same command:

- ``FILLER_BYTES``: the checkpoint's size (default 0);
- ``FILLER_REPLICA``: the replica that writes it (default 0);
- ``FILLER_AFTER``: a replica whose process must have recorded itself (``pid`` in its ``run.json``) before the
  checkpoint is written, so that it is running when the disk fills;
- ``FILLER_MARKER``: a file the writer creates once its checkpoint is written; the other replicas wait for it (or
  for their SIGTERM), so they are still running when the disk fills, and finish when it did not.

Every replica returns its seed, so replicas differ as their variant says.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from deviate_cb.context import RunContext

_WAIT_S = 120.0


def main(ctx: RunContext) -> dict[str, float]:
    """Write the checkpoint (the filler replica) or wait for it (the others); return its size and the seed."""
    size = int(os.environ.get("FILLER_BYTES", "0"))
    marker = os.environ.get("FILLER_MARKER")
    if ctx.replica == int(os.environ.get("FILLER_REPLICA", "0")):
        after = os.environ.get("FILLER_AFTER")
        if after:
            _wait(lambda: "pid" in _manifest(ctx.run_dir.parent / f"replica={after}"))
        (ctx.run_dir / "checkpoint.bin").write_bytes(bytes(size))
        if marker:
            Path(marker).touch()
    elif marker:
        _wait(lambda: Path(marker).exists())
    return {"checkpoint_bytes": float(size), "seed": float(ctx.seed)}


def _manifest(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def _wait(ready) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("filler_fn: waited too long")
        time.sleep(0.05)
