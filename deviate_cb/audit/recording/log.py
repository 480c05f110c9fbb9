"""The audit's record, framework-free: what was digested at each training step, in execution order.

Example:
    >>> log = AuditLog(steps=1)
    >>> log.begin_step(0)
    >>> log.add("loss", "loss", None, "float32", (), 1, HEADER + 1)
    >>> words = np.array([1, 2, *np.array([0.5, 0.5, 0.5]).view(np.int64)], dtype=np.int64)
    >>> rows = log.end_step([words])
    >>> rows[0]["digest"], rows[0]["values"], log.done
    ('00000000000000010000000000000002', [0.5], True)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from deviate_cb.audit.recording.digest import hex_digest

__all__ = ["DEFAULT_STEPS", "DEFAULT_VALUES_MAX", "HEADER", "KINDS", "AuditLog", "PendingEntry"]

KINDS = ("input", "forward_input", "forward", "loss", "grad_output", "gradient", "parameter")
DEFAULT_STEPS = 20
DEFAULT_VALUES_MAX = 4096  # tensors up to this many elements keep their values: differences are then exact
HEADER = 4  # words before the values: h_0, h_1, bits of the sum, bits of the largest absolute value


@dataclass(frozen=True)
class PendingEntry:
    """A digest announced during a step, waiting for its words."""

    kind: str
    name: str
    module: Optional[str]
    dtype: str
    shape: tuple[int, ...]
    numel: int
    words: int


class AuditLog:
    """Rows of ``audit.parquet`` for the first ``steps`` training steps.

    Args:
        steps: How many training steps to record (from the first one the adapter sees).
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.rows: list[dict[str, Any]] = []
        self.recorded_steps = 0
        self.step: Optional[int] = None
        self._pending: list[PendingEntry] = []

    @property
    def done(self) -> bool:
        """Whether ``steps`` steps have been recorded."""
        return self.recorded_steps >= self.steps

    @property
    def active(self) -> bool:
        """Whether a step is being recorded (between :meth:`begin_step` and :meth:`end_step`)."""
        return self.step is not None

    def begin_step(self, step: int) -> None:
        """Start recording training step ``step`` (0-based); a step left open is dropped."""
        self.step, self._pending = step, []

    def add(
        self, kind: str, name: str, module: Optional[str], dtype: str, shape: Sequence[int], numel: int, words: int
    ) -> None:
        """Announce the next digest of the step (its packed row has ``words`` int64 words)."""
        self._pending.append(PendingEntry(kind, name, module, dtype, tuple(int(s) for s in shape), numel, words))

    def end_step(self, words: Sequence[np.ndarray]) -> list[dict[str, Any]]:
        """Decode the step's packed rows (one int64 array per :meth:`add`, in order); return the new rows."""
        if self.step is None:
            return []
        if len(words) != len(self._pending):
            raise ValueError(f"{len(words)} packed rows for {len(self._pending)} digests announced")
        seen: Counter[tuple[str, str]] = Counter()
        new = []
        for seq, (entry, row) in enumerate(zip(self._pending, words, strict=True)):
            row = np.asarray(row, dtype=np.int64)
            summary = row[2:HEADER].view(np.float64)
            values = row[HEADER:].view(np.float64)
            new.append(
                {
                    "step": self.step,
                    "seq": seq,
                    "kind": entry.kind,
                    "name": entry.name,
                    "module": entry.module,
                    "occurrence": seen[(entry.kind, entry.name)],
                    "dtype": entry.dtype,
                    "shape": list(entry.shape),
                    "numel": entry.numel,
                    "digest": hex_digest((int(row[0]), int(row[1]))),
                    "sum": float(summary[0]),
                    "abs_max": float(summary[1]),
                    "values": values.tolist() if values.size else None,
                }
            )
            seen[(entry.kind, entry.name)] += 1
        self.rows.extend(new)
        self.recorded_steps += 1
        self.step, self._pending = None, []
        return new

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "recorded_steps": self.recorded_steps, "rows": list(self.rows)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.steps = int(state["steps"])
        self.recorded_steps = int(state["recorded_steps"])
        self.rows = list(state["rows"])
