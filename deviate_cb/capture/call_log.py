"""The record of a takeover's calls: each distinct call once, in first-seen order, counted, at most 50.

Example:
    >>> seen = []
    >>> log = CallLog("calls", lambda: {"calls": log.copy()[0]}, seen.append)
    >>> log.count(("f", "1"), {"call": "f", "asked": 1}); log.count(("f", "1"), {"call": "f", "asked": 1})
    >>> log.copy(), len(seen)
    (([{'call': 'f', 'asked': 1, 'count': 2}], 0), 1)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable
from typing import Any, Optional

__all__ = ["MAX_ENTRIES", "CallLog"]

MAX_ENTRIES = 50


class CallLog:
    """Distinct calls of a takeover, counted, handed to ``on_record`` with ``snapshot()`` as they appear.

    Args:
        what: What the calls are, for the warning when ``on_record`` fails (``"seeding calls"``).
        snapshot: The takeover's whole record (which holds :meth:`copy`), given to ``on_record``.
        on_record: Called with ``snapshot()`` for each new pair and the first one past the limit; ``None``: not
            recorded (a process that does not write the manifest).
        limit: The most pairs kept.
    """

    def __init__(
        self,
        what: str,
        snapshot: Callable[[], Optional[dict[str, Any]]],
        on_record: Optional[Callable[[dict[str, Any]], None]],
        limit: int = MAX_ENTRIES,
    ) -> None:
        self._what, self._snapshot, self._on_record, self._limit = what, snapshot, on_record, limit
        self._lock = threading.RLock()
        self._entries: list[dict[str, Any]] = []
        self._index: dict[Hashable, dict[str, Any]] = {}
        self._more = 0
        self._warned = False

    def count(self, key: Hashable, entry: dict[str, Any], *, new: bool = True, refresh: tuple[str, ...] = ()) -> None:
        """Count ``entry`` under ``key``; a pair already kept only counts (its ``refresh`` fields take the new
        values); ``new=False`` (a re-application) counts only a pair already kept."""
        with self._lock:
            known = self._index.get(key)
            if known is not None:
                known["count"] += 1
                known.update((name, entry[name]) for name in refresh)
                return
            if not new:
                return
            if len(self._entries) < self._limit:
                self._index[key] = {**entry, "count": 1}
                self._entries.append(self._index[key])
            else:
                self._more += 1
                if self._more > 1:
                    return
        self._publish()

    def copy(self) -> tuple[list[dict[str, Any]], int]:
        """The pairs kept (copies, first-seen order) and how many more were left out."""
        with self._lock:
            return [dict(entry) for entry in self._entries], self._more

    def _publish(self) -> None:
        record = self._snapshot()
        if self._on_record is None or record is None:
            return
        try:
            self._on_record(record)
        except Exception as exc:  # never fail the project's call on the record's account
            if not self._warned:
                self._warned = True
                print(f"deviate: warning: could not record the project's {self._what}: {exc!r}", file=sys.stderr)
