"""Problems the metrics show: seeded replicas that came out bit-identical, control replicas that differ.

Example:
    >>> metric_problems("mlp", "control", [], {}, [])
    []
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.report.answers.findings import Problem, seeds_differ
from deviate_cb.report.reading.configurations import replica_list
from deviate_cb.report.reading.metrics.names import display_names
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.stats.directions import is_timing_metric
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.footer_summary import footer_summary, valid_summary
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["IDENTICAL_REASON", "audit_hint", "metric_problems"]

IDENTICAL_REASON = "the seeds did not reach the training (the project may seed itself; see run.json 'seeding')"
_MAX_METRICS = 5  # metrics named in a control_differs line

# A run's metrics as compared: ("summary" | "values", ((key, exact value...), ...)) with every item as text
_Fingerprint = tuple[str, tuple[tuple[str, ...], ...]]


def metric_problems(
    experiment: str,
    variant: str,
    manifests: Sequence[tuple[int, RunRecord, RunManifest]],
    values: Mapping[tuple[str, str, str], Mapping[str, float]],
    rows: Sequence[Any],
) -> list[Problem]:
    seeded, control = seeds_differ(variant), variant == "control"
    if not (seeded or control) or len(manifests) < 2:
        return []
    where = f"experiment={experiment} variant={variant}"
    prints: dict[int, _Fingerprint] = {}
    for replica, run, manifest in manifests:
        fingerprint = _fingerprint(run, manifest, values.get((experiment, variant, run.replica)))
        if fingerprint is not None:
            prints[replica] = fingerprint
    kinds = [kind for kind, _ in prints.values()]
    if len(set(kinds)) > 1:  # summaries and values are not comparable: keep the kind most runs have
        keep = max(("summary", "values"), key=kinds.count)
        prints = {replica: fingerprint for replica, fingerprint in prints.items() if fingerprint[0] == keep}
    everyone = tuple(replica for replica, _, _ in manifests)
    hint = "" if seeded else audit_hint(manifests)
    if len(prints) < 2:
        return _row_problems(experiment, variant, everyone, rows, seeded, hint)
    if seeded:
        classes: dict[_Fingerprint, list[int]] = {}
        for replica, fingerprint in prints.items():
            classes.setdefault(fingerprint, []).append(replica)
        return [
            Problem(
                experiment,
                variant,
                "identical_replicas",
                tuple(same),
                f"{where}: {replica_list(same)} came out bit-identical on every metric: {IDENTICAL_REASON}",
            )
            for same in sorted(sorted(r) for r in classes.values() if len(r) > 1)
        ]
    differing = _differing_metrics(prints)
    if not differing:
        return []
    replicas = tuple(sorted(prints))
    message = _control_message(where, replicas, differing) + hint
    return [Problem(experiment, variant, "control_differs", replicas, message)]


def _row_problems(
    experiment: str, variant: str, replicas: tuple[int, ...], rows: Sequence[Any], seeded: bool, hint: str = ""
) -> list[Problem]:
    """From the report's rows, for a group whose runs could not be compared one by one."""
    spread: list[tuple[str, float]] = []
    for row in rows:
        n, std = getattr(row, "n", 0), getattr(row, "std", math.nan)
        if isinstance(n, int) and n >= 2 and isinstance(std, (int, float)):
            spread.append((str(getattr(row, "metric", "?")), float(std)))
    if not spread:
        return []
    where = f"experiment={experiment} variant={variant}"
    if seeded and all(std == 0.0 for _, std in spread):
        message = f"{where}: {replica_list(replicas)} came out identical on every metric (std 0): {IDENTICAL_REASON}"
        return [Problem(experiment, variant, "identical_replicas", replicas, message)]
    differing = sorted(metric for metric, std in spread if std != 0.0 and not math.isnan(std))
    if not seeded and differing:
        message = _control_message(where, replicas, differing) + hint
        return [Problem(experiment, variant, "control_differs", replicas, message)]
    return []


def audit_hint(manifests: Sequence[tuple[int, RunRecord, RunManifest]]) -> str:
    """What to add to a ``control_differs`` line: where the replicas' audit records first differ, when they have
    them (``audit.parquet``), else the ``deviate audit`` command that finds it.

    Example:
        >>> from pathlib import Path
        >>> run = RunRecord(Path("/nonexistent/replica=0"), "e", "control", "0", "completed")
        >>> audit_hint([(0, run, RunManifest.from_json({"trainer": "train.py:main"}))])
        '; find where with `deviate audit --trainer train.py:main`'
    """
    from deviate_cb.audit.divergence import compare_audits
    from deviate_cb.store.audit import AUDIT_FILE, read_audit

    records = {}
    for replica, run, _ in manifests:
        if (run.path / AUDIT_FILE).is_file():
            with contextlib.suppress(OSError, ValueError):
                records[replica] = read_audit(run.path)
    records = {replica: rows for replica, rows in records.items() if rows}
    if len(records) >= 2:
        first = compare_audits(records).first
        if first is not None:
            return (
                f"; their audit records first differ at training step {first.step}: {first.kind} "
                f"`{first.name}` (replicas {', '.join(map(str, first.replicas))})"
            )
    manifest = manifests[0][2] if manifests else RunManifest.from_json({})
    trainer, command = manifest.trainer, manifest.command
    if trainer:
        suggestion = f"deviate audit --trainer {shlex.quote(trainer)}"
    elif command and all(isinstance(word, str) for word in command):
        suggestion = f"deviate audit -- {shlex.join(command)}"
    else:
        suggestion = "deviate audit"
    return f"; find where with `{suggestion}`"


def _control_message(where: str, replicas: tuple[int, ...], metrics: Sequence[str]) -> str:
    named = ", ".join(metrics[:_MAX_METRICS])
    if len(metrics) > _MAX_METRICS:
        named += f", ... ({len(metrics)} in all)"
    label = "metric" if len(metrics) == 1 else "metrics"
    return (
        f"{where}: {replica_list(replicas)}: control replicas differ ({label} {named}): "
        "something nondeterministic is not controlled"
    )


def _fingerprint(
    run: RunRecord, manifest: RunManifest, values: Optional[Mapping[str, float]]
) -> Optional[_Fingerprint]:
    """The run's metrics as compared: its series summary (the manifest's current copy, else the file's footer),
    else the values the caller read; ``None`` when there is neither or it holds no series.

    Each item is ``(stage, name, exact values...)``; ``stage`` is ``""`` for a caller's value, whose ``name`` is
    the metric's display name. Timings logged as metrics (``train_runtime``: :func:`~deviate_cb.stats.directions.
    is_timing_metric`) are left out: bit-identical runs never take the same time.
    """
    series = _series(run, manifest)
    if series is not None:
        items = []
        for entry in series:
            if not isinstance(entry, (list, tuple)) or len(entry) < 3:
                return None  # not a summary this reader understands
            if not is_timing_metric(str(entry[1])):
                items.append((str(entry[0]), str(entry[1]), *(_exact(x) for x in entry[2:])))
        return ("summary", tuple(sorted(items))) if items else None
    if values:
        kept = [("", str(m), _exact(value)) for m, value in values.items() if not is_timing_metric(str(m))]
        return ("values", tuple(sorted(kept))) if kept else None
    return None


def _series(run: RunRecord, manifest: RunManifest) -> Optional[list[Any]]:
    path = os.path.join(run.path, METRICS_FILE)
    try:
        stat = os.stat(path)
    except OSError:
        return None  # no metrics file: nothing to compare
    copy = valid_summary(manifest.metrics_summary) or valid_summary(run.metrics_summary)
    if copy is not None and (copy.get("file_size"), copy.get("file_mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
        return list(copy["series"])
    try:  # no current copy in the manifest: the footer (metadata only, no values)
        import pyarrow as pa
    except ImportError:
        return None
    try:
        summary = footer_summary(check_parquet(path))  # a FIFO, too many rows: HostileFileError (a ValueError)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return list(summary["series"]) if summary is not None else None


def _exact(x: Any) -> str:
    """``x`` as text that tells apart any two different values (floats bit for bit)."""
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, bool) or x is None:
        return repr(x)
    if isinstance(x, int):
        return float(x).hex() if abs(x) < 2**53 else repr(x)  # 1 and 1.0 are one value in JSON
    return repr(x)


def _differing_metrics(prints: Mapping[int, _Fingerprint]) -> list[str]:
    """The metrics whose series are not the same in every run (by display name), sorted."""
    per_run = [{(item[0], item[1]): item for item in items} for _, items in prints.values()]
    keys = sorted({key for items in per_run for key in items})
    differing = [key for key in keys if len({items.get(key) for items in per_run}) > 1]
    names = display_names(keys)
    return sorted({names[key] for key in differing})
