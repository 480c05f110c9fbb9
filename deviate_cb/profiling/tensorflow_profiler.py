"""The TensorFlow profiler driver of a profiling window: one op row per op type and device of each window.

Example:
    >>> driver = TensorFlowProfileWindow(ProfileWindow(wait=1, active=2))
    >>> driver.start()
    >>> driver.profiling, driver.rows()
    (False, [])
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional

from deviate_cb.profiling.window import ProfileDriver, ProfileWindow

__all__ = ["TensorFlowProfileWindow"]


class TensorFlowProfileWindow(ProfileDriver):
    """Drive the TensorFlow profiler over the active steps of a :class:`ProfileWindow`; keep per-op-type rows.

    The warm-up steps run unprofiled (the TensorFlow profiler has no warm-up phase) but count as profiling steps.
    Op statistics come from TensorFlow's own converter (``framework_op_stats``); where it is missing, the window
    warns once and records no op rows.

    Example:
        >>> TensorFlowProfileWindow(ProfileWindow(active=2)).profiling
        False
    """

    def __init__(self, window: ProfileWindow) -> None:
        super().__init__(window)
        self._logdir: Optional[str] = None
        self._window_id = 0

    def _enter_phase(self) -> None:
        if self._open or self.window.phase(self._step) != "active":
            return
        import tensorflow as tf

        self._window_id = self.window.window_of(self._step)
        self._logdir = tempfile.mkdtemp(prefix="deviate-tfprof-")
        try:
            tf.profiler.experimental.start(self._logdir)
        except Exception as exc:  # another profiler session is running in this process
            warnings.warn(f"TensorFlow profiler window not recorded: {exc}", stacklevel=2)
            shutil.rmtree(self._logdir, ignore_errors=True)
            return
        self._open = True

    def _advance(self) -> None:
        next_step = self._step + 1
        if self._open and (
            self.window.phase(next_step) != "active" or self.window.window_of(next_step) != self._window_id
        ):
            self._close()

    def _close(self) -> None:
        import tensorflow as tf

        self._open = False
        logdir, self._logdir = self._logdir, None
        try:
            tf.profiler.experimental.stop()
            self._rows.extend(_tensorflow_op_rows(Path(str(logdir)), self._window_id))
        finally:
            shutil.rmtree(str(logdir), ignore_errors=True)


def _tensorflow_op_rows(logdir: Path, window: int) -> list[dict[str, Any]]:
    """Per op type and device: calls, self and total time, from the XSpace files the profiler wrote."""
    paths = sorted(str(p) for p in logdir.rglob("*.xplane.pb"))
    try:
        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin
    except ImportError as exc:
        warnings.warn(f"TensorFlow op rows left out: its profiler converter is missing ({exc}).", stacklevel=3)
        return []
    if not paths:
        warnings.warn(f"TensorFlow op rows left out: the profiler wrote no trace under {logdir}.", stacklevel=3)
        return []
    data, ok = plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
    if not ok:
        text = data.decode(errors="replace") if isinstance(data, bytes) else data
        warnings.warn(f"TensorFlow op rows left out: {text}", stacklevel=3)
        return []
    tables = json.loads(data)
    table = next((t for t in tables if all(_cell(r, t, "type") != "IDLE" for r in t["rows"])), tables[-1])
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in table["rows"]:
        kind = _cell(row, table, "type")
        if kind == "IDLE":
            continue
        device = "cpu" if _cell(row, table, "host_or_device") == "Host" else "gpu"
        total = totals.setdefault(
            (kind, device),
            {"op": kind, "device_type": device, "calls": 0, "self_time_us": 0.0, "total_time_us": 0.0},
        )
        total["calls"] += int(_cell(row, table, "occurrences") or 0)
        total["self_time_us"] += float(_cell(row, table, "total_self_time") or 0.0)
        total["total_time_us"] += float(_cell(row, table, "total_time") or 0.0)
    return [{**row, "window": window, "source": "tensorflow"} for row in totals.values()]


def _cell(row: dict[str, Any], table: dict[str, Any], column: str) -> Any:
    index = next(i for i, c in enumerate(table["cols"]) if c["id"] == column)
    return row["c"][index].get("v")
