"""Flat records as a table: JSON, CSV, Markdown or a terminal table fitted to its width, and the cells of each.

Example:
    >>> cell(0.123456), cell(None), md_cell("a|b")
    ('0.1235', '-', 'a\\\\|b')
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import IO, Any, Optional

from deviate_cb.report.text.safe import markdown, printable
from deviate_cb.report.text.spreadsheet import safe_cell
from deviate_cb.report.text.terminal import make_console, print_fitted, print_wrapped
from deviate_cb.stats._results import json_value

__all__ = ["cell", "is_nan", "md_cell", "render_records"]


def render_records(
    records: list[dict[str, Any]],
    columns: tuple[str, ...],
    fmt: str,
    *,
    title: str = "",
    human: Optional[dict[str, Any]] = None,
    notes: tuple[str, ...] = (),
    file: Optional[IO[str]] = None,
    below: tuple[str, ...] = (),
    keep: int = 1,
) -> str:
    r"""Flat records as ``json`` (a list of objects), ``csv`` (``columns``; formula-like text escaped), ``md`` or
    ``table``.

    ``human`` maps a header to a function of the record giving the cell, for ``md`` and ``table``; ``table``
    is printed to ``file`` (rich) and returns ``""``. It fits the terminal's width (split by columns, each part
    starting with the first ``keep`` columns, where it is too wide:
    :func:`~deviate_cb.report.text.terminal.print_fitted`); columns of short cells never wrap, the first column and
    columns of long text fold. The headers in ``below`` (a sentence per record, such as a verdict) are printed under the
    table instead, one line per record after its first cell, where they are read whole.

    Example:
        >>> render_records([{"metric": "acc", "p": float("nan")}], ("metric", "p"), "csv")
        'metric,p\nacc,\n'
    """
    if fmt == "json":
        rows = [{k: json_value(r.get(k)) for k in columns} for r in records]
        return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([safe_cell(c) for c in columns])
        for r in records:  # text a spreadsheet would run as a formula gets a leading ' (numbers never change)
            writer.writerow(["" if r.get(k) is None or is_nan(r.get(k)) else safe_cell(r.get(k)) for k in columns])
        return buffer.getvalue()
    cells = human or {c: (lambda r, c=c: cell(r.get(c))) for c in columns}
    if fmt == "md":
        lines = [f"# {markdown(title)}", ""] if title else []
        lines.append("| " + " | ".join(map(md_cell, cells)) + " |")
        lines.append("|" + "---|" * len(cells))
        lines += ["| " + " | ".join(md_cell(f(r)) for f in cells.values()) + " |" for r in records]
        lines += ["", *map(markdown, notes)] if notes else []
        return "\n".join(lines) + "\n"
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console(file)
    if title:
        console.print(Text(printable(title), style="bold"))
    shown = {header: f for header, f in cells.items() if header not in below}
    texts = [[printable(f(r)) for f in shown.values()] for r in records]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, header in enumerate(shown):
        long = i == 0 or any(len(row[i]) > _LONG_CELL for row in texts)  # the name, or long text: may fold
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold", no_wrap=not long)
    for row in texts:
        table.add_row(*row)
    print_fitted(console, table, keep=keep)
    labels = [row[0] if row else "" for row in texts]
    width = max(map(len, labels), default=0)
    for header in (h for h in below if h in cells):
        console.print()
        console.print(Text(header, style="bold"))
        for label, r in zip(labels, records, strict=True):  # wrapped at the width, continued under the text
            first = f"  {label:<{width}}  "
            print_wrapped(console, printable(cells[header](r)), first=first, indent=" " * min(len(first), 24))
    for note in notes:
        console.print(printable(note), style="dim")
    return ""


_LONG_CELL = 40  # a column holding a longer cell (a list of names, a sentence) may wrap


def cell(x: Any) -> str:
    """``x`` as a table shows it: ``-`` for none or NaN, a float to 4 significant digits."""
    if x is None or is_nan(x):
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def md_cell(text: Any) -> str:
    """Markdown text, or a table cell: control characters escaped (so a newline cannot end the row), HTML
    escaped (:func:`~deviate_cb.report.text.safe.markdown`), ``|`` escaped."""
    return markdown(text).replace("|", "\\|")


def is_nan(x: Any) -> bool:
    """Whether ``x`` is a float that is NaN or infinite."""
    return isinstance(x, float) and not math.isfinite(x)
