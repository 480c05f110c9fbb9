"""A profiling window over a few training steps: per-op rows from ``torch.profiler`` or the TensorFlow profiler.

:class:`ProfileWindow` says which steps are profiled: after ``wait`` plain steps, ``warmup`` steps let the
profiler start up (their records are thrown away), then ``active`` steps are recorded; the cycle runs ``repeat``
times. A driver (:class:`TorchProfileWindow`, :class:`TensorFlowProfileWindow`) runs the framework's profiler
over those steps only and turns what it recorded into op rows of ``timings.parquet`` (see
:mod:`deviate_cb.timing`). Outside its windows a driver holds no profiler at all, so unprofiled steps cost
nothing extra; steps for which :attr:`~TorchProfileWindow.profiling` is True are slower and the step timer
flags them so that statistics leave them out.

How an adapter uses it (``step()`` after the step's ``end_step``, so profiler start-up and trace processing fall
between timed steps)::

    window = profile_window(ProfileWindow(wait=5, warmup=1, active=3), framework="torch")
    window.start()
    for each step:
        timer.start_step(); <train one step>; timer.end_step(stage, epoch, step, profiled=window.profiling)
        window.step()
    window.stop()
    write_timings(run_dir, timer.rows(), window.rows())

Torch: ``torch.profiler.profile(activities=[CPU] + [CUDA if available], schedule=schedule(wait=0, warmup, active))``
per window; ``key_averages()`` gives one row per op (``aten::...``, device ``cpu``: ``self_cpu_time_total``,
``cpu_time_total``) and per CUDA kernel (device ``cuda``: ``self_device_time_total``, ``device_time_total``).
TensorFlow: ``tf.profiler.experimental.start/stop`` over the active steps; the XSpace it writes is converted with
TensorFlow's own profiler-plugin converter (``framework_op_stats``, the tool behind TensorBoard's "TF Stats")
into one row per op type and device (``cpu`` for host ops, ``gpu`` for device ops).

Example:
    >>> window = ProfileWindow(wait=2, warmup=1, active=2)
    >>> [window.phase(step) for step in range(6)]
    ['wait', 'wait', 'warmup', 'active', 'active', 'done']
    >>> ProfileWindow(wait=-1)
    Traceback (most recent call last):
    ...
    ValueError: `wait` must be a non-negative integer. Received: wait=-1.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional, Union

__all__ = ["ProfileWindow", "TensorFlowProfileWindow", "TorchProfileWindow", "profile_window"]

_PROFILING_PHASES = ("warmup", "active")


@dataclasses.dataclass(frozen=True)
class ProfileWindow:
    """Which steps to profile: ``wait`` plain, ``warmup`` start-up and ``active`` recorded steps, ``repeat`` times.

    Args:
        wait: Steps before each window (non-negative).
        warmup: Steps the profiler runs without keeping their records (non-negative).
        active: Steps recorded (at least 1).
        repeat: Number of windows (at least 1).
    """

    wait: int = 5
    warmup: int = 1
    active: int = 3
    repeat: int = 1

    def __post_init__(self) -> None:
        for name, low in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                kind = "a non-negative integer" if low == 0 else "a positive integer"
                raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}.")

    @classmethod
    def coerce(cls, value: Union[bool, dict, ProfileWindow, None]) -> Optional[ProfileWindow]:
        """Read a ``profile=`` argument: ``None``/``False`` (off), ``True`` (defaults), a dict, or a ProfileWindow.

        Example:
            >>> ProfileWindow.coerce({"wait": 1, "active": 2})
            ProfileWindow(wait=1, warmup=1, active=2, repeat=1)
            >>> ProfileWindow.coerce(False) is None
            True
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
            if unknown:
                raise ValueError(
                    f"`profile` keys must be among wait, warmup, active, repeat. Received: profile={value!r}."
                )
            return cls(**value)
        raise TypeError(
            "`profile` must be True, False, None, a dict of wait/warmup/active/repeat or a ProfileWindow. "
            f"Received: profile={value!r}."
        )

    @property
    def cycle(self) -> int:
        """Steps in one window, waiting steps included."""
        return self.wait + self.warmup + self.active

    def phase(self, step: int) -> str:
        """``wait``, ``warmup``, ``active`` or ``done`` for the step with this 0-based index."""
        if step >= self.cycle * self.repeat:
            return "done"
        offset = step % self.cycle
        if offset < self.wait:
            return "wait"
        return "warmup" if offset < self.wait + self.warmup else "active"

    def window_of(self, step: int) -> int:
        """The 0-based window a step belongs to."""
        return step // self.cycle


class _Driver:
    """Step counting shared by the framework drivers; subclasses open and close the profiler."""

    def __init__(self, window: ProfileWindow) -> None:
        if not isinstance(window, ProfileWindow):
            raise TypeError(f"`window` must be a ProfileWindow. Received: window={window!r}.")
        self.window = window
        self._step = -1  # not started
        self._rows: list[dict[str, Any]] = []
        self._open = False

    @property
    def profiling(self) -> bool:
        """True while the current step is in a window (warm-up or recorded): its wall time is not representative."""
        return self._step >= 0 and self.window.phase(self._step) in _PROFILING_PHASES

    def start(self) -> None:
        """Begin counting steps; call before the first step."""
        self._step = 0
        self._enter_phase()

    def step(self) -> None:
        """Call after each step: advances the window, starting or finishing the profiler as needed."""
        if self._step < 0:
            self.start()
            return
        self._advance()
        self._step += 1
        self._enter_phase()

    def stop(self) -> None:
        """Finish: a window still open is closed and its records kept."""
        if self._open:
            self._close()
        self._step = max(self._step, self.window.cycle * self.window.repeat)

    def rows(self) -> list[dict[str, Any]]:
        """The op rows of every finished window (columns of ``timings.parquet``'s op rows)."""
        return list(self._rows)

    def __enter__(self) -> _Driver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _enter_phase(self) -> None:
        raise NotImplementedError

    def _advance(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class TorchProfileWindow(_Driver):
    """Drive ``torch.profiler`` over the steps of a :class:`ProfileWindow` and keep ``key_averages()`` as op rows.

    Example:
        >>> import torch
        >>> window = TorchProfileWindow(ProfileWindow(wait=1, warmup=1, active=1))
        >>> window.start()
        >>> for _ in range(4):
        ...     _ = torch.ones(8, 8) @ torch.ones(8, 8)
        ...     window.step()
        >>> window.stop()
        >>> "aten::mm" in {row["op"] for row in window.rows()}
        True
    """

    def __init__(self, window: ProfileWindow, *, cuda: Optional[bool] = None) -> None:
        super().__init__(window)
        self._cuda = cuda
        self._profiler: Any = None
        self._window_id = 0
        self._collected: set[int] = set()

    def _enter_phase(self) -> None:
        if self._open or self.window.phase(self._step) not in _PROFILING_PHASES:
            return
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        cuda = torch.cuda.is_available() if self._cuda is None else self._cuda
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self._window_id = self.window.window_of(self._step)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "won't be using warmup" when warmup=0: asked for
            plan = schedule(wait=0, warmup=self.window.warmup, active=self.window.active, repeat=1)
            self._profiler = profile(activities=activities, schedule=plan, on_trace_ready=self._collect)
            self._profiler.start()
        self._open = True

    def _advance(self) -> None:
        if not self._open:
            return
        self._profiler.step()  # the step that ends the active phase calls _collect
        if (
            self.window.phase(self._step + 1) not in _PROFILING_PHASES
            or self.window.window_of(self._step + 1) != self._window_id
        ):
            self._close()

    def _close(self) -> None:
        profiler, self._profiler, self._open = self._profiler, None, False
        profiler.stop()
        if self.window.phase(self._step) == "active":
            self._collect(profiler)  # stopped inside the active phase: keep what its steps recorded

    def _collect(self, profiler: Any) -> None:
        if self._window_id in self._collected:  # torch may report a finished trace again on stop()
            return
        self._collected.add(self._window_id)
        for event in profiler.key_averages():
            if event.key.startswith("ProfilerStep"):
                continue
            device = getattr(event.device_type, "name", str(event.device_type)).lower()
            on_cpu = device == "cpu"
            self._rows.append(
                {
                    "op": event.key,
                    "device_type": device,
                    "calls": int(event.count),
                    "self_time_us": float(event.self_cpu_time_total if on_cpu else event.self_device_time_total),
                    "total_time_us": float(event.cpu_time_total if on_cpu else event.device_time_total),
                    "window": self._window_id,
                    "source": "torch",
                }
            )


class TensorFlowProfileWindow(_Driver):
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


def profile_window(window: ProfileWindow, framework: str) -> Union[TorchProfileWindow, TensorFlowProfileWindow]:
    """The driver of ``window`` for a framework: ``torch`` (Lightning, Keras on torch) or ``tensorflow``.

    Example:
        >>> type(profile_window(ProfileWindow(), "torch")).__name__
        'TorchProfileWindow'
        >>> profile_window(ProfileWindow(), "jax")
        Traceback (most recent call last):
        ...
        ValueError: `framework` must be 'torch' or 'tensorflow'. Received: framework='jax'.
    """
    if framework == "torch":
        return TorchProfileWindow(window)
    if framework == "tensorflow":
        return TensorFlowProfileWindow(window)
    raise ValueError(f"`framework` must be 'torch' or 'tensorflow'. Received: framework={framework!r}.")
