"""The closing summary of ``deviate report``'s terminal output: the answers once more, last, where the eye lands.

Example:
    >>> from deviate_cb.report.answers.summary import Report, ReportRow
    >>> from deviate_cb.report.answers.headline import build_headlines
    >>> rows = (ReportRow("mlp", "control", "val_acc", "last", 3, 0.9, 0.0, 0.0, 0.9, 0.9, 0.0, 0.0, 0.0),)
    >>> values = {("mlp", "control", "val_acc"): (0.9, 0.9, 0.9)}
    >>> headlines = build_headlines(Report(rows, (), groups=(("mlp", "control", 3),), values=values))
    >>> print("\\n".join(closing_lines(headlines, [], ["deviate", "report", "runs/"])))
    In short
      Answers for val_acc (experiment mlp)
        control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs.
      The HTML page (plots of every run): deviate report runs/ --format html -o report.html
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import IO, Any, Optional

from deviate_cb.report.text.safe import printable
from deviate_cb.report.text.terminal import make_console, print_wrapped

__all__ = ["TITLE", "closing_lines", "html_command", "write_closing"]

TITLE = "In short"
_INDENT = "  "
# The opening's sentences that answer nothing in this study (they say how to get the answer): left out here
_NO_ANSWER = ("control: no control runs", "implementation share (")
_UNDECIDED = (": not decided yet", ": in progress")


def html_command(report_args: Sequence[str]) -> str:
    """The command that writes the HTML page of the study ``report_args`` names (``deviate report DIR`` or
    ``deviate report --table FILE --group-by COLUMN``), each argument quoted for a POSIX shell.

    Example:
        >>> html_command(["deviate", "report", "my runs/"])
        "deviate report 'my runs/' --format html -o report.html"
    """
    return shlex.join([*report_args, "--format", "html", "-o", "report.html"])


def closing_lines(headlines: Sequence[Any], sequences: Sequence[str], report_args: Sequence[str]) -> list[str]:
    """The summary's lines, indented (unwrapped): the sequences' decisions, each headline's answers, the HTML
    command; empty when the report answered nothing (no headline, no sequence)."""
    body: list[str] = []
    for line in sequences:
        body.append(_INDENT + _decision(line))
    for h in headlines:
        answers = [_short(s) for s in h.sentences if not _unanswered(s)]
        notes = [f"note: {note}" for note in h.notes]
        if not answers and not notes:
            continue
        body.append(_INDENT + h.title())
        body.extend(_INDENT * 2 + text for text in (*answers, *notes))
    if not body:
        return []
    html = f"{_INDENT}The HTML page (plots of every run): {html_command(report_args)}"
    return [TITLE, *body, html]


def write_closing(
    headlines: Sequence[Any],
    sequences: Sequence[str],
    report_args: Sequence[str],
    out: IO[str],
    *,
    width: Optional[int] = None,
) -> None:
    """Print :func:`closing_lines` after a blank line, each wrapped at the width the report's tables use
    (continued 2 spaces further in); nothing when the report answered nothing."""
    from rich.text import Text

    lines = closing_lines(headlines, sequences, report_args)
    if not lines:
        return
    console = make_console(out, width=width)
    console.print()
    console.print(Text(lines[0], style="bold"))
    for line in lines[1:]:
        text = line.lstrip(" ")
        lead = line[: len(line) - len(text)]
        style = "bold" if lead == _INDENT and text.startswith("Answers for ") else ""
        print_wrapped(console, printable(text), first=lead, indent=lead + _INDENT, style=style)


def _unanswered(sentence: str) -> bool:
    """A sentence that answers nothing here: no control runs, an implementation share not measurable."""
    if sentence.startswith(_NO_ANSWER[0]):
        return True
    return sentence.startswith(_NO_ANSWER[1]) and ": not measurable here:" in sentence


def _short(sentence: str) -> str:
    """``runs needed``: the plan's first clause (runs per group, the difference, the power), cut where the
    opening's sentence goes on to how it was planned; every other sentence whole."""
    cut = sentence.find(" (Welch t")
    if sentence.startswith("runs needed: ") and cut > 0:
        return sentence[:cut] + "."
    return sentence


def _decision(line: str) -> str:
    """A decided sequence: its answer and interval, cut before the rule it was reached under; one not decided
    yet whole (it says how to continue)."""
    if any(word in line for word in _UNDECIDED):
        return line
    head, sep, _ = line.partition("; ")
    return head + "." if sep else line
