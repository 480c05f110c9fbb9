"""Whether a run that exited with code 0 ended its training: the one rule behind status ``incomplete``.

Example:
    >>> from deviate_cb.store.manifest import RunManifest
    >>> manifest = RunManifest.from_json({"framework": "lightning", "fit": "started",
    ...                                   "fit_steps": {"done": 7, "planned": 47}, "exception": "SystemExit: 0"})
    >>> why_incomplete(manifest)
    'the fit stopped at step 7 of 47 and never reached on_fit_end; SystemExit: 0'
    >>> incomplete_reason(manifest) == INCOMPLETE_PREFIX + why_incomplete(manifest)
    True
    >>> returned = RunManifest.from_json({"mode": "trainer", "fit": "ended", "trainer_end": "sys.exit(0)"})
    >>> incomplete_reason(returned) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = [
    "FIT_ENDED",
    "FIT_STARTED",
    "INCOMPLETE",
    "INCOMPLETE_PREFIX",
    "TRAINER_RETURNED",
    "incomplete_reason",
    "last_recorded_step",
    "why_incomplete",
]

INCOMPLETE = "incomplete"
FIT_STARTED = "started"
FIT_ENDED = "ended"
INCOMPLETE_PREFIX = "exited with code 0 before its training ended: "
TRAINER_RETURNED = "returned"  # `trainer_end` of a function that returned; "sys.exit(0)" when it called that
# The hook whose call ends a fit, per framework (the manifest's `framework`).
_END_HOOKS = {"lightning": "on_fit_end", "keras": "on_train_end"}
_EXCEPTION_CHARS = 200


def why_incomplete(
    manifest: RunManifest, mode: Optional[str] = None, *, run_dir: Union[str, os.PathLike[str], None] = None
) -> Optional[str]:
    """Why a run whose process exited with code 0 did not end its training, or ``None`` when it did (or nothing
    says otherwise). ``mode`` (``trainer`` or ``command``) defaults to the manifest's. ``run_dir``: where to look
    for the last step recorded (:func:`last_recorded_step`) when the manifest does not say where the fit stopped.

    Example:
        >>> from deviate_cb.store.manifest import RunManifest
        >>> why_incomplete(RunManifest.from_json({"mode": "trainer"}))
        'the --trainer function never returned (the process ended inside it, as os._exit(0) does)'
        >>> why_incomplete(RunManifest.from_json({"mode": "command"})) is None  # no evidence either way
        True
        >>> why_incomplete(
        ...     RunManifest.from_json({"framework": "keras", "fit": "started", "fit_steps": {"planned": 8}})
        ... )
        'the fit started (8 steps planned) but never reached on_train_end'
    """
    mode = manifest.mode if mode is None else mode
    if manifest.fit == FIT_STARTED:
        hook = _END_HOOKS.get(str(manifest.framework), "its end")
        done, planned = _steps(manifest.fit_steps)
        of = f" of {planned}" if planned is not None else ""
        recorded = last_recorded_step(run_dir) if done is None and run_dir is not None else None
        if done is not None:
            why = f"the fit stopped at step {done}{of} and never reached {hook}"
        elif recorded is not None:
            why = f"the fit started (step {recorded}{of} recorded) but never reached {hook}"
        else:
            plan = f" ({planned} step{'s' * (planned != 1)} planned)" if planned is not None else ""
            why = f"the fit started{plan} but never reached {hook}"
    elif mode == "trainer" and manifest.trainer_end is None:
        why = "the --trainer function never returned (the process ended inside it, as os._exit(0) does)"
    else:
        return None
    exception = manifest.exception
    if exception is not None and exception.strip():
        line = " ".join(exception.split())
        why += f"; {line[: _EXCEPTION_CHARS - 3]}..." if len(line) > _EXCEPTION_CHARS else f"; {line}"
    return why


def incomplete_reason(
    manifest: RunManifest, mode: Optional[str] = None, *, run_dir: Union[str, os.PathLike[str], None] = None
) -> Optional[str]:
    """The ``reason`` of a run that exited with code 0 before its training ended (:func:`why_incomplete`, after
    :data:`INCOMPLETE_PREFIX`), or ``None`` when it is completed.

    Example:
        >>> from deviate_cb.store.manifest import RunManifest
        >>> incomplete_reason(RunManifest.from_json({"fit": "ended"})) is None
        True
    """
    why = why_incomplete(manifest, mode, run_dir=run_dir)
    return None if why is None else INCOMPLETE_PREFIX + why


def last_recorded_step(run_dir: Union[str, os.PathLike[str]]) -> Optional[int]:
    """The highest ``step`` in the run's ``metrics.parquet``, from the footer's column statistics (no row is read);
    ``None`` when there is no file, or its footer does not tell.

    Example:
        >>> import tempfile
        >>> from deviate_cb.store.metrics import MetricsFile
        >>> run_dir = tempfile.mkdtemp()
        >>> columns = {"step": [1, 2, 3, 4], "epoch": [0] * 4, "stage": ["train"] * 4, "scope": ["step"] * 4,
        ...            "name": ["loss"] * 4, "value": [0.5] * 4, "wall_time": [0.0] * 4}
        >>> _ = MetricsFile(os.path.join(run_dir, METRICS_FILE)).append(columns)
        >>> last_recorded_step(run_dir), last_recorded_step("/nonexistent")
        (4, None)
    """
    path = os.path.join(run_dir, METRICS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        footer = check_parquet(path)  # a regular file's footer only
        column = footer.schema.to_arrow_schema().get_field_index("step")
        highest: Optional[int] = None
        for group in range(footer.num_row_groups):
            statistics = footer.row_group(group).column(column).statistics
            if statistics is None or not statistics.has_min_max:
                return None
            highest = int(statistics.max) if highest is None else max(highest, int(statistics.max))
        return highest
    except Exception:  # an unreadable file: the reason goes without the step
        return None


def _steps(value: Any) -> tuple[Optional[int], Optional[int]]:
    """``(done, planned)`` of a manifest's ``fit_steps``, each ``None`` when it is not a count."""
    if not isinstance(value, Mapping):
        return None, None
    counts = []
    for key in ("done", "planned"):
        number = value.get(key)
        ok = isinstance(number, int) and not isinstance(number, bool) and number >= 0
        counts.append(number if ok else None)
    return counts[0], counts[1]
