"""Terminal tables that fit: the width to write for, and rich tables split by columns where they are too wide.

Example:
    >>> import io
    >>> from rich.table import Table
    >>> table = Table(box=None, pad_edge=False)
    >>> for header in ("metric", "mean A", "mean B", "diff [CI]"):
    ...     table.add_column(header, no_wrap=True)
    >>> table.add_row("val/acc", "0.8312", "0.8103", "0.02088 [0.01012, 0.03164]")
    >>> out = io.StringIO()
    >>> print_fitted(make_console(out, width=40), table)
    >>> for line in out.getvalue().splitlines():
    ...     print(line.rstrip())
    metric   mean A  mean B
    val/acc  0.8312  0.8103
    <BLANKLINE>
    metric   diff [CI]
    val/acc  0.02088 [0.01012, 0.03164]
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "DEFAULT_WIDTH",
    "FALLBACK_WIDTH",
    "FOLD_WIDTH",
    "MIN_WIDTH",
    "make_console",
    "print_fitted",
    "print_wrapped",
    "terminal_width",
    "wrap_lines",
]

DEFAULT_WIDTH = 160  # neither COLUMNS nor a terminal: a file or a pipe
FALLBACK_WIDTH = 80  # a terminal whose size is unknown or absurd (0x0 under `script`, some CI and Docker terminals)
MIN_WIDTH = 40  # narrower than this, a width (COLUMNS or the terminal's) is taken for no width at all
FOLD_WIDTH = 24  # a column that may wrap is never squeezed below this (or its own width)
_UNBOUNDED = 100_000


def terminal_width(file: Optional[IO[str]] = None) -> int:
    """The width to write ``file`` (default stdout) for: ``COLUMNS`` when it is at least :data:`MIN_WIDTH`, else the
    terminal's (:data:`FALLBACK_WIDTH` when it reports a size below :data:`MIN_WIDTH`, such as 0x0), else
    :data:`DEFAULT_WIDTH` (no terminal: a file or a pipe).

    Example:
        >>> import io
        >>> from unittest import mock
        >>> with mock.patch.dict(os.environ, {"COLUMNS": "100"}):
        ...     terminal_width(io.StringIO())
        100
        >>> with mock.patch.dict(os.environ, {"COLUMNS": "0"}):  # no width; no terminal either: a file or a pipe
        ...     terminal_width(io.StringIO())
        160
    """
    import sys

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) >= MIN_WIDTH:
        return int(columns)
    file = sys.stdout if file is None else file
    try:
        if file.isatty():
            size = os.get_terminal_size(file.fileno()).columns
            return size if size >= MIN_WIDTH else FALLBACK_WIDTH
    except (AttributeError, OSError, ValueError):  # no descriptor (a StringIO), a closed one, not a terminal
        pass
    return DEFAULT_WIDTH


def make_console(file: Optional[IO[str]] = None, *, width: Optional[int] = None) -> Console:
    """A rich console on ``file`` that reads no markup and highlights nothing (stored text is text), ``width`` wide
    (default :func:`terminal_width`)."""
    from rich.console import Console

    width = terminal_width(file) if width is None else width
    return Console(file=file, width=width, highlight=False, soft_wrap=False, markup=False)


def print_fitted(console: Console, table: Table, *, keep: int = 1) -> None:
    """Print ``table`` within ``console.width``: whole when it fits, else as several tables of consecutive columns,
    each starting with the first ``keep`` columns, one blank line apart."""
    width = console.width
    if len(table.columns) <= keep or _needed(console, table) <= width:
        console.print(table)
        return
    head = list(range(keep))
    chunks: list[list[int]] = []
    current: list[int] = []
    for index in range(keep, len(table.columns)):
        if current and _needed(console, _columns(table, [*head, *current, index])) > width:
            chunks.append(current)
            current = []
        current.append(index)
    chunks.append(current)
    for n, chunk in enumerate(chunks):
        part = _columns(table, [*head, *chunk])
        if _needed(console, part) > width:  # too wide even alone: fold every column rather than cut a value
            part = _columns(table, [*head, *chunk], fold=True)
        if n:
            console.print()
        console.print(part)


def _needed(console: Console, table: Table) -> int:
    """The width ``table`` needs: its natural width, with each column that may wrap counted at most
    :data:`FOLD_WIDTH` wide."""
    from rich.measure import Measurement

    probe = _columns(table, range(len(table.columns)), cap=FOLD_WIDTH)
    return Measurement.get(console, console.options.update_width(_UNBOUNDED), probe).maximum


def _columns(table: Table, indices: Sequence[int], *, cap: Optional[int] = None, fold: bool = False) -> Table:
    """A copy of ``table`` with the columns at ``indices`` only; ``cap`` bounds the width of columns that may wrap,
    ``fold`` lets every column wrap (folding words longer than the column)."""
    part = copy.copy(table)
    part.columns, part.rows = [], []
    for i in indices:
        column = table.columns[i]
        wraps = fold or not column.no_wrap
        options: dict[str, Any] = {
            "header_style": column.header_style,
            "style": column.style,
            "justify": column.justify,
            "vertical": column.vertical,
            "overflow": "fold" if fold else column.overflow,
            "width": column.width,
            "min_width": column.min_width,
            "max_width": cap if cap is not None and wraps and column.max_width is None else column.max_width,
            "no_wrap": not wraps,
        }
        part.add_column(column.header, **options)
    cells = [list(table.columns[i].cells) for i in indices]
    for row in zip(*cells, strict=True):
        part.add_row(*row)
    return part


def wrap_lines(text: str, width: int, *, first: str = "", indent: Optional[str] = None) -> list[str]:
    """``first + text`` as lines of at most ``width`` characters, continued under ``indent`` (default: as wide as
    ``first``); words longer than a line are broken, so no line is ever wider than ``width``.

    Example:
        >>> wrap_lines("control: the 3 runs are bit-identical on val_acc.", 30, first="  ")
        ['  control: the 3 runs are', '  bit-identical on val_acc.']
    """
    import textwrap

    indent = " " * len(first) if indent is None else indent
    width = max(width, len(indent) + 10, len(first) + 10)
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def print_wrapped(
    console: Console, text: str, *, first: str = "", indent: Optional[str] = None, style: str = ""
) -> None:
    """Print ``first + text`` wrapped at the console's width (:func:`wrap_lines`), each line styled ``style``."""
    from rich.text import Text

    for line in wrap_lines(text, console.width, first=first, indent=indent):
        console.print(Text(line, style=style), soft_wrap=True)
