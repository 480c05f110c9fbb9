"""Stored text made safe to print: control characters escaped, and one-line reasons for warnings.

Example:
    >>> printable("loss\\n\\x1b[2J")
    'loss\\\\n\\\\x1b[2J'
    >>> print(printable("résumé: ok"))
    résumé: ok
    >>> print(printable_message("\\x1b[31mValueError\\x1b[0m: bad lr\\x07"))
    ValueError: bad lr\\x07
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from deviate_cb.errors import UsageError

__all__ = [
    "markdown",
    "percent",
    "printable",
    "printable_errors",
    "printable_message",
    "reason",
    "strip_styles",
    "unseen",
]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Styling only: SGR (colours, bold: ESC [ ... m) and OSC 8 hyperlinks (ESC ] 8 ; params ; uri, ended by ST or BEL).
_STYLES = re.compile(r"\x1b\[[0-9;:]*m|\x1b\]8;[^\x07\x1b]*(?:\x07|\x1b\\)")


def percent(ratio: Any, *, sign: bool = False) -> str:
    """A ratio as the percentage every format prints (CV, step-time spreads): 3 significant digits below 10%,
    one decimal from there on, never an exponent; ``-`` for NaN or None.

    Example:
        >>> percent(0.01239), percent(0.684), percent(21.297, sign=True), percent(float("nan"))
        ('1.24%', '68.4%', '+2129.7%', '-')
    """
    if ratio is None or not isinstance(ratio, (int, float)) or ratio != ratio:
        return "-"
    value = float(ratio) * 100.0
    if value in (float("inf"), float("-inf")):
        return ("+" if sign and value > 0 else "") + ("inf%" if value > 0 else "-inf%")
    body = f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return ("+" if sign and value >= 0 else "") + body + "%"


def printable(text: Any) -> str:
    r"""``str(text)`` with every non-printable character escaped as :func:`repr` writes it.

    Printable characters (letters of any script, digits, punctuation, the space) are kept; newlines, tabs,
    control characters (``\x1b``), Unicode separators and format characters (``\u2028``, ``\u202e``) and the
    surrogates that stand for undecodable bytes in file names become ``\n``, ``\t``, ``\x1b``, ``\u2028``,
    ``\udcff``. Applying it twice gives what applying it once gives.

    Example:
        >>> printable("a\tb\u202ec\udcff")
        'a\\tb\\u202ec\\udcff'
        >>> printable(printable("x\ny")) == printable("x\ny")
        True
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def markdown(text: Any) -> str:
    r"""Stored text for a Markdown document: :func:`printable`, then ``&``, ``<`` and ``>`` as HTML entities, so
    a renderer shows a name as typed and never reads it as a tag or an entity (``|`` is left to table cells).

    Example:
        >>> markdown("<script>x</script> & a\x07")
        '&lt;script&gt;x&lt;/script&gt; &amp; a\\x07'
    """
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def strip_styles(text: str) -> str:
    r"""``text`` without terminal colour sequences (SGR: ``\x1b[31m``, ``\x1b[0m``) and hyperlink markers (OSC 8).

    They style a message and carry none of its words; every other escape sequence (``\x1b[2J`` clears the screen)
    is left for :func:`printable` to show.

    Example:
        >>> strip_styles("\x1b[1;31mError\x1b[0m: see \x1b]8;;https://x.org\x1b\\docs\x1b]8;;\x1b\\ \x1b[2J")
        'Error: see docs \x1b[2J'
    """
    return _STYLES.sub("", text) if "\x1b" in text else text


def printable_message(text: Any) -> str:
    r"""A stored message (an exception, a stderr line, a reason) as printable text: its colours and hyperlinks
    dropped (:func:`strip_styles`), every other non-printable character escaped (:func:`printable`).

    Names (experiments, metrics, hosts) go through :func:`printable` alone, which shows every character they hold.

    Example:
        >>> printable_message("\x1b[31mRuntimeError\x1b[0m: boom\x1b[2J\n")
        'RuntimeError: boom\\x1b[2J\\n'
    """
    return printable(strip_styles(str(text)))


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def reason(exc: BaseException, path: Any = None, limit: int = 200) -> str:
    """What ``exc`` says, on one line, without the file's path (the warning names it already), cut to ``limit``.

    Example:
        >>> reason(OSError("Could not open Parquet input source '/r/t.parquet': Parquet magic bytes not found"),
        ...        "/r/t.parquet")
        'Could not open Parquet input source: Parquet magic bytes not found'
        >>> reason(ValueError("/r/w.npz: not a readable .npz file (bad zip)."), "/r/w.npz")
        'not a readable .npz file (bad zip).'
        >>> reason(IsADirectoryError(21, "Is a directory", "/r/run.json"), "/r/run.json")
        'Is a directory'
    """
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror and exc.filename else str(exc)
    if path is not None:
        name = os.fspath(path)
        text = text[len(name) + 2 :] if text.startswith(f"{name}: ") else text
        text = text.replace(f" '{name}'", "").replace(f" {name}", "").replace(name, "the file")
    text = printable(" ".join(text.split())) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unseen(lines: Iterable[str], earlier: Iterable[str]) -> list[str]:
    """``lines`` without those that repeat an ``earlier`` line or name a file (``<path>: ...``) that an earlier
    line, or an earlier one of ``lines``, names first: one warning per damaged file, however often it is read
    (the HTML page reads the metrics files again for its curves).

    Example:
        >>> earlier = ["/r/metrics.parquet: not a readable Parquet file; skipped."]
        >>> unseen(["/r/metrics.parquet: left out of the training curves", "/s/metrics.parquet: bad"], earlier)
        ['/s/metrics.parquet: bad']
    """
    seen = list(earlier)
    named = {_named_file(line) for line in seen} - {None}
    out = []
    for line in lines:
        path = _named_file(line)
        if line in seen or path in named:
            continue
        out.append(line)
        seen.append(line)
        named.add(path)
    return out


def _named_file(line: str) -> Optional[str]:
    """The path a warning starts with (``<path>: ...``: a file such as ``metrics.parquet`` or a ``key=value``
    folder), or ``None`` (``metric `a/b`: ...`` names no file)."""
    head, sep, _ = line.partition(": ")
    name = os.path.basename(head)
    return head if sep and name != head and "`" not in head and ("." in name or "=" in name) else None


@contextmanager
def printable_errors() -> Iterator[None]:
    r"""Re-raise a :class:`~deviate_cb.errors.UsageError` raised inside with its message :func:`printable` (the same
    class), for the commands whose errors quote stored names (a run directory's path, a partition value).

    Example:
        >>> with printable_errors():
        ...     raise UsageError("no runs in /r/experiment=\x1b[2J")
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: no runs in /r/experiment=\x1b[2J
    """
    try:
        yield
    except UsageError as exc:
        text = printable(str(exc))
        if text == str(exc):
            raise
        try:
            clean = type(exc)(text)
        except TypeError:  # a subclass built from other arguments
            clean = UsageError(text)
        raise clean.with_traceback(exc.__traceback__) from exc.__cause__
