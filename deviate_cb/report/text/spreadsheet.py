"""CSV cells a spreadsheet would run as formulas are written as text: ``'=HYPERLINK(...)``, never ``=HYPERLINK(...)``.

Example:
    >>> [safe_cell(v) for v in ("=1+1", "-0.5", -0.5, "@SUM(A1)", "val_acc", "-inf")]
    ["'=1+1", '-0.5', -0.5, "'@SUM(A1)", 'val_acc', "'-inf"]
    >>> with counted_escapes() as escaped:
    ...     _ = safe_cell('=HYPERLINK("http://x","click")')
    >>> escaped.count
    1
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["FORMULA_STARTS", "EscapedCells", "counted_escapes", "escape_note", "safe_cell"]

# What a spreadsheet reads as the start of a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass
class EscapedCells:
    """How many cells :func:`safe_cell` escaped while :func:`counted_escapes` was open."""

    count: int = 0


_COUNTER: ContextVar[Optional[EscapedCells]] = ContextVar("deviate_escaped_cells", default=None)


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet never runs: text that begins like a formula gets a leading ``'``.

    Numbers, and text that is a plain decimal number (``-0.5``, ``+1e-3``), are returned as they are.
    """
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS) or _NUMBER.fullmatch(value):
        return value
    counter = _COUNTER.get()
    if counter is not None:
        counter.count += 1
    return "'" + value


@contextmanager
def counted_escapes() -> Iterator[EscapedCells]:
    """Count the cells :func:`safe_cell` escapes inside the block (for the CLI's note)."""
    counter = EscapedCells()
    token = _COUNTER.set(counter)
    try:
        yield counter
    finally:
        _COUNTER.reset(token)


def escape_note(count: int) -> Optional[str]:
    """The stderr line that says ``count`` cells were escaped; ``None`` for none.

    Example:
        >>> print(escape_note(2))  # doctest: +NORMALIZE_WHITESPACE
        2 CSV cells began with =, +, -, @, a tab or a carriage return and were written with a leading ' so that a
        spreadsheet shows them as text, not as a formula (--format json keeps every value as it is).
    """
    if not count:
        return None
    cells = f"{count} CSV cell{'s' * (count != 1)} began"
    return (
        f"{cells} with =, +, -, @, a tab or a carriage return and were written with a leading ' so that a "
        "spreadsheet shows them as text, not as a formula (--format json keeps every value as it is)."
    )
