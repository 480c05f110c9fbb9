"""Warn when the replicas of one group ran on different fingerprints, and say which fields differ.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> for replica, threads in enumerate([2, 2, 8]):
    ...     run = root / "experiment=mlp" / "variant=algo" / f"replica={replica}"
    ...     run.mkdir(parents=True)
    ...     fp = {"seed": replica, "hostname": f"node{replica}", "threads": {"torch_intra_op": threads}}
    ...     _ = (run / "fingerprint.json").write_text(json.dumps(fp))
    >>> runs = sorted(root.glob("*/*/replica=*"))
    >>> [difference.describe() for difference in fingerprint_differences(runs)]
    ['threads.torch_intra_op = 2 (replicas 0, 1) | 8 (replica 2)']
    >>> fingerprint_warnings(runs)[0]
    'experiment=mlp variant=algo: replicas ran on different fingerprints (1 field): threads.torch_intra_op = ...'
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.fingerprint.collect import flatten
from deviate_cb.report.text.safe import reason
from deviate_cb.store.bounded_read import loads_json, read_regular
from deviate_cb.store.run_directory import FINGERPRINT_FILE

__all__ = ["FingerprintDifference", "compared_field", "fingerprint_differences", "fingerprint_warnings"]

_COMPARED = (
    "torch.*",
    "lightning.*",
    "keras.*",
    "tensorflow.*",
    "jax.*",
    "packages.*",
    "cuda.*",
    "gpus.count",
    "gpus.devices.*",
    "cpu.model",
    "cpu.flags",
    "blas.*",
    "threads.*",
    "determinism.*",
    "dataloader_workers",
)
_IGNORED = (
    "*.reason",
    "*.uuid_sha256",
    "*.index",
    "*.nvml_index",
    "*.sm_clock_max_mhz",
    "*.power_limit_w",
    "*.ecc_mode",
    "*.memory_total",
    "*.total_memory",
    "torch.cuda_initialized",
    "torch.gpus.*",
    "determinism.torch.initial_seed",
    "determinism.torch.cuda_initialized",
    "determinism.keras.global_random_seed",
    "determinism.env.PYTHONHASHSEED",
    "determinism.env.DEVIATE_HASH_SEED",
    "determinism.env.PL_GLOBAL_SEED",
    "determinism.env.CUDA_VISIBLE_DEVICES",
    "determinism.python_hash_randomization",
    "jax.devices.*",
    "tensorflow.devices.*",
)
_LONG = 40

RunLike = Union[str, Path, Any]


def compared_field(field: str) -> bool:
    """Whether a dotted fingerprint field takes part in the comparison.

    Example:
        >>> compared_field("gpus.devices.0.sm_count"), compared_field("hostname"), compared_field("seed")
        (True, False, False)
    """
    return any(fnmatch.fnmatchcase(field, p) for p in _COMPARED) and not any(
        fnmatch.fnmatchcase(field, p) for p in _IGNORED
    )


@dataclass(frozen=True)
class FingerprintDifference:
    """One field whose value differs between the replicas of a group.

    Attributes:
        experiment: The group's experiment.
        variant: The group's variant.
        field: The dotted fingerprint field (``gpus.devices.0.sm_count``).
        values: Each value seen (as JSON text) with the replicas that had it, most common first.
    """

    experiment: str
    variant: str
    field: str
    values: tuple[tuple[str, tuple[str, ...]], ...]

    def describe(self) -> str:
        """``field = value (replicas 0, 1) | other (replica 2)``; long space-separated values (ISA flags) as changes."""
        base = set(self.values[0][0].strip('"').split())
        parts = []
        for index, (value, replicas) in enumerate(self.values):
            shown = value
            if len(value) > _LONG and index > 0 and " " in value:
                tokens = set(value.strip('"').split())
                changes = [f"+{t}" for t in sorted(tokens - base)] + [f"-{t}" for t in sorted(base - tokens)]
                shown = " ".join(changes[:6]) + (" ..." if len(changes) > 6 else "") or value[:_LONG] + "..."
            elif len(value) > _LONG:
                shown = value[: _LONG - 3] + "..."
            label = "replica" if len(replicas) == 1 else "replicas"
            parts.append(f"{shown} ({label} {', '.join(replicas)})")
        return f"{self.field} = {' | '.join(parts)}"


def fingerprint_differences(
    runs: Iterable[RunLike], *, unreadable: Optional[list[str]] = None
) -> list[FingerprintDifference]:
    """The compared fields whose values differ between replicas of the same (experiment, variant) group.

    Args:
        runs: Run directories (``.../experiment=<e>/variant=<v>/replica=<k>``), or records with ``path``
            (and ``experiment``, ``variant``, ``replica``), e.g. :class:`deviate_cb.report.reading.runs.RunRecord`.
            Runs without a ``fingerprint.json`` are skipped; so are runs whose file cannot be read, each with a
            line appended to ``unreadable``.
        unreadable: Where to append one line per ``fingerprint.json`` that exists but cannot be read.
    """
    groups: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for run in runs:
        key, replica, path = _identify(run)
        file = os.path.join(path, FINGERPRINT_FILE)
        try:
            flat = _read_flat(file)
        except (OSError, ValueError) as exc:
            if unreadable is not None:
                unreadable.append(
                    f"{file}: not a readable fingerprint ({reason(exc, file)}); the run is left out of "
                    "the fingerprint comparison."
                )
            continue
        if flat is not None:
            groups.setdefault(key, []).append((replica, flat))
    differences = []
    for (experiment, variant), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        fields = sorted({f for _, flat in members for f in flat if compared_field(f)})
        for field in fields:
            seen: dict[str, list[str]] = {}
            for replica, flat in members:
                seen.setdefault(json.dumps(flat.get(field), sort_keys=True, default=str), []).append(replica)
            if len(seen) > 1:
                ordered = sorted(seen.items(), key=lambda item: (-len(item[1]), _replica_order(item[1][0])))
                values = tuple((value, tuple(sorted(rs, key=_replica_order))) for value, rs in ordered)
                differences.append(FingerprintDifference(experiment, variant, field, values))
    return differences


def fingerprint_warnings(runs: Iterable[RunLike], *, max_fields: int = 8) -> list[str]:
    """One line per group whose replicas ran on different fingerprints, listing the fields and their values.

    Args:
        runs: As for :func:`fingerprint_differences`.
        max_fields: Fields spelled out per line; the rest are counted.

    A ``fingerprint.json`` that exists but cannot be read gives a line of its own, before the others.
    """
    lines: list[str] = []  # first the files that cannot be read
    by_group: dict[tuple[str, str], list[FingerprintDifference]] = {}
    for difference in fingerprint_differences(runs, unreadable=lines):
        by_group.setdefault((difference.experiment, difference.variant), []).append(difference)
    for (experiment, variant), differences in by_group.items():
        shown = "; ".join(d.describe() for d in differences[:max_fields])
        more = len(differences) - max_fields
        noun = "field" if len(differences) == 1 else "fields"
        lines.append(
            f"experiment={experiment} variant={variant}: replicas ran on different fingerprints "
            f"({len(differences)} {noun}): {shown}" + (f"; and {more} more" if more > 0 else "")
        )
    return lines


def _identify(run: RunLike) -> tuple[tuple[str, str], str, Path]:
    if all(hasattr(run, name) for name in ("path", "experiment", "variant", "replica")):  # a RunRecord
        record: Any = run
        return (str(record.experiment), str(record.variant)), str(record.replica), Path(record.path)
    path = Path(getattr(run, "path", run))
    parts = _partitions(path)
    experiment = getattr(run, "experiment", parts.get("experiment", ""))
    variant = getattr(run, "variant", parts.get("variant", ""))
    return (str(experiment), str(variant)), str(getattr(run, "replica", parts.get("replica", path.name))), path


def _partitions(path: Path) -> dict[str, str]:
    return dict(part.split("=", 1) for part in path.parts if "=" in part)


def _read_flat(path: str) -> Any:
    """The flattened fingerprint at ``path``; ``None`` when there is no file.

    Raises:
        OSError, ValueError: The file cannot be read, is not JSON (``UnicodeDecodeError`` is a ``ValueError``),
            or does not hold a JSON object.
    """
    try:
        data = read_regular(path)  # a FIFO, a device or a huge file: HostileFileError (a ValueError)
    except FileNotFoundError:
        return None
    fingerprint = loads_json(data, path)  # the depth is checked first: never a RecursionError
    if not isinstance(fingerprint, dict):
        raise ValueError(f"a JSON {type(fingerprint).__name__}, not an object")
    return flatten({k: v for k, v in fingerprint.items() if k != "flat"})


def _replica_order(replica: str) -> tuple[int, str]:
    return (int(replica), "") if replica.isdigit() else (1 << 30, replica)
