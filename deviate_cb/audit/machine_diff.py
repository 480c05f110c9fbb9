"""What changed between the machine and library build of two recordings: their fingerprints, field by field.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> ref, here = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> cpu = {"model": "Xeon", "flags": "avx avx2 sse4_2"}
    >>> fp = {"hostname": "a", "threads": {"torch_intra_op": 8}, "cpu": cpu, "python": {"version": "3.11.4"}}
    >>> _ = (ref / "fingerprint.json").write_text(json.dumps(fp))
    >>> fp = {**fp, "hostname": "b", "threads": {"torch_intra_op": 2}, "cpu": {**cpu, "flags": "avx avx512f"}}
    >>> _ = (here / "fingerprint.json").write_text(json.dumps(fp))
    >>> for difference in machine_differences(ref, here):
    ...     print(difference.describe())
    cpu.flags: here +avx512f -avx2 -sse4_2
    threads.torch_intra_op: 8 (reference) -> 2 (here)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.fingerprint.collect import flatten
from deviate_cb.report.reading.fingerprints import compared_field
from deviate_cb.store.bounded_read import load_json
from deviate_cb.store.run_directory import FINGERPRINT_FILE

__all__ = ["MachineDifference", "machine_differences", "read_fingerprint"]

# Fields outside compared_field that differ between machines, not within one study.
_BETWEEN_MACHINES = ("python.version", "python.implementation", "os.machine", "os.system")
_LONG = 40


@dataclass(frozen=True)
class MachineDifference:
    """One fingerprint field whose value differs between the reference and here.

    Attributes:
        field: The dotted field (``threads.torch_intra_op``).
        reference: Its value in the reference (``None``: absent or null).
        here: Its value here.
    """

    field: str
    reference: Any
    here: Any

    def describe(self) -> str:
        """``field: 8 (reference) -> 2 (here)``; ISA flags as what here adds and lacks (``cpu.flags: here +avx512f
        -avx2``)."""
        theirs, ours = _text(self.reference), _text(self.here)
        if self.field.endswith("flags") and isinstance(self.reference, str) and isinstance(self.here, str):
            before, after = set(self.reference.split()), set(self.here.split())
            changes = [f"+{t}" for t in sorted(after - before)] + [f"-{t}" for t in sorted(before - after)]
            return f"{self.field}: here " + " ".join(changes[:8]) + (" ..." if len(changes) > 8 else "")
        return f"{self.field}: {_short(theirs)} (reference) -> {_short(ours)} (here)"

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "reference": self.reference, "here": self.here}


def read_fingerprint(run_dir: Union[str, Path]) -> Optional[dict[str, Any]]:
    """The flattened ``fingerprint.json`` of a run directory; ``None`` when it has none or it cannot be read."""
    try:
        fingerprint = load_json(Path(run_dir) / FINGERPRINT_FILE)  # bounded: FIFO, size and depth refused
    except (OSError, ValueError):
        return None
    if not isinstance(fingerprint, dict):
        return None
    return flatten({k: v for k, v in fingerprint.items() if k != "flat"})


def machine_differences(reference: Union[str, Path], here: Union[str, Path]) -> Optional[list[MachineDifference]]:
    """The fields that differ between the fingerprints of two run directories, sorted by field; ``None`` when
    either has no readable ``fingerprint.json`` (nothing could be compared, which is not "no difference")."""
    theirs, ours = read_fingerprint(reference), read_fingerprint(here)
    if theirs is None or ours is None:
        return None
    fields = sorted(f for f in set(theirs) | set(ours) if compared_field(f) or f in _BETWEEN_MACHINES)
    return [
        MachineDifference(f, theirs.get(f), ours.get(f)) for f in fields if _text(theirs.get(f)) != _text(ours.get(f))
    ]


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(text: str) -> str:
    return text if len(text) <= _LONG else text[: _LONG - 3] + "..."
