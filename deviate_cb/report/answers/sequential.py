"""The decisions of studies replicated in rounds, as the report, ``compare`` and the HTML page show them.

Example:
    >>> look = {"k": 2, "n_a": 4, "n_b": 4, "statistic": 0.01, "low": 0.002, "high": 0.018, "level": 0.95}
    >>> record = {"kind": "until-decided", "metric": "val_acc", "group": {"experiment": "b", "variant": "algo"},
    ...           "against": {"experiment": "a", "variant": "algo"}, "decision": "A better", "looks": [look],
    ...           "plan": {"method": "Pocock-type group-sequential t-test", "alpha": 0.05, "looks": [[3, 3], [4, 4]]}}
    >>> print(sequence_lines([record])[0])  # doctest: +NORMALIZE_WHITESPACE
    val_acc, A = experiment=b variant=algo vs B = experiment=a variant=algo: A better (look 2 of 2, 4 runs per
    group): A-B = 0.01 [0.002, 0.018] (95% repeated CI); Pocock-type group-sequential t-test, alpha 0.05 over the
    whole sequence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Optional, Union

from deviate_cb.report.answers.records import HEADLINE_COLUMNS
from deviate_cb.report.text.safe import markdown as markdown_text
from deviate_cb.report.text.safe import printable
from deviate_cb.report.text.terminal import terminal_width, wrap_lines
from deviate_cb.store.sequential_record import SEQUENTIAL_DIR, read_records

__all__ = [
    "SECTION_TITLE",
    "answer_record",
    "compare_note",
    "sequence_lines",
    "sequential_answers",
    "study_answers",
    "study_sequences",
    "write_sequences",
]

SECTION_TITLE = "Replicated until decided"


def study_sequences(directory: Path) -> list[dict[str, Any]]:
    """The sequences recorded for the study at ``directory`` (or the study holding an ``experiment=`` folder)."""
    directory = Path(directory)
    for candidate in (directory, *directory.parents[:2]):
        if (candidate / SEQUENTIAL_DIR).is_dir():
            return read_records(candidate)
    return []


def sequence_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per recorded sequence: its answer first, then how it was reached."""
    lines = []
    for record in records:
        line = _line(record)
        if line:
            lines.append(line)
    return lines


def sequential_answers(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each recorded sequence's answer as numbers, JSON-ready, with its line (:func:`sequence_lines`) as
    ``sentences``: ``kind`` ``"sequential"``, ``sequence`` (``until-decided`` or ``until-precision``), the group
    (``experiment``, ``variant``), ``against`` (B, or ``None``), ``metric``, ``decision`` (``None`` while under way),
    and at the last look made ``look``, ``looks_planned``, ``n_a``, ``n_b``, ``statistic``, ``ci_low``, ``ci_high``,
    ``level``, with the plan's ``on``, ``method`` and ``alpha``.

    Example:
        >>> look = {"k": 1, "n_a": 3, "n_b": 3, "statistic": 0.1, "low": 0.05, "high": 0.15, "level": 0.95}
        >>> record = {"kind": "until-decided", "metric": "acc", "group": {"experiment": "b", "variant": "algo"},
        ...           "against": {"experiment": "a", "variant": "algo"}, "decision": "A better", "looks": [look],
        ...           "plan": {"method": "t-test", "alpha": 0.05, "looks": [[3, 3], [6, 6]]}}
        >>> answer = sequential_answers([record])[0]
        >>> answer["decision"], answer["against"], answer["ci_low"], answer["looks_planned"]
        ('A better', {'experiment': 'a', 'variant': 'algo'}, 0.05, 2)
    """
    out = []
    for record in records:
        line = _line(record)
        if not line:
            continue
        found_looks, found_plan = record.get("looks"), record.get("plan")
        looks = [x for x in found_looks if isinstance(x, Mapping)] if isinstance(found_looks, list) else []
        plan: Mapping[str, Any] = found_plan if isinstance(found_plan, Mapping) else {}
        last: Mapping[str, Any] = looks[-1] if looks else {}
        planned = plan.get("looks")
        experiment, variant = _group(record.get("group"))
        against = record.get("against")
        precision = record.get("kind") == "until-precision"
        out.append(
            {
                "kind": "sequential",
                "sequence": str(record.get("kind")),
                "experiment": experiment,
                "variant": variant,
                "against": {"experiment": _group(against)[0], "variant": _group(against)[1]} if against else None,
                "metric": str(record.get("metric", "?")),
                "decision": record.get("decision") or None,
                "look": last.get("k", len(looks) or None),
                "looks_planned": len(planned) if isinstance(planned, list) else None,
                "n_a": last.get("n_a", last.get("n")),
                "n_b": None if precision else last.get("n_b", last.get("n")),
                "statistic": _finite(last.get("statistic", last.get("std"))),
                "ci_low": _finite(last.get("low")),
                "ci_high": _finite(last.get("high")),
                "level": _finite(last.get("level", plan.get("level"))),
                "on": "precision" if precision else str(plan.get("on", "mean")),
                "method": plan.get("method"),
                "alpha": _finite(plan.get("alpha")),
                "sentences": [line],
            }
        )
    return out


def answer_record(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A :func:`sequential_answers` answer as a row of the answers' table (``deviate report --headline --format csv``,
    ``Study.tables()["headline"]``): kind ``sequential``, the statistic at the last look with its repeated interval,
    the decision and group B in ``detail``."""
    against = answer.get("against")
    versus = f" against {_label(against)}" if against else ""
    row = {
        "experiment": answer["experiment"], "metric": answer["metric"], "kind": "sequential",
        "variant": answer["variant"], "n": answer["n_a"], "value": answer["statistic"], "ci_low": answer["ci_low"],
        "ci_high": answer["ci_high"], "level": answer["level"],
        "detail": f"{answer['decision'] or 'not decided yet'}{versus}",
        "sentence": answer["sentences"][0],
    }  # fmt: skip
    return {name: row.get(name) for name in HEADLINE_COLUMNS}


def write_sequences(lines: Sequence[str], out: IO[str], *, markdown: bool = False, width: Optional[int] = None) -> None:
    """The "Replicated until decided" section (``lines``: :func:`sequence_lines`), then a blank line; nothing when
    there are no lines. The terminal text wraps each answer at ``width`` (default: the width ``out`` is written
    for, :func:`~deviate_cb.report.text.terminal.terminal_width`), continued indented; Markdown keeps each whole.

    Example:
        >>> import io
        >>> buffer = io.StringIO()
        >>> write_sequences(["acc, A = x vs B = y: A better (look 1 of 3, 3 runs per group)."], buffer, width=40)
        >>> print(buffer.getvalue(), end="")
        Replicated until decided
          acc, A = x vs B = y: A better (look 1
            of 3, 3 runs per group).
        <BLANKLINE>
    """
    if not lines:
        return
    if markdown:  # the sequences' decisions first: they answer "is A better" with the error rate the rounds kept
        out.write(f"## {SECTION_TITLE}\n\n" + "".join(f"- {markdown_text(line)}\n" for line in lines) + "\n")
        return
    columns = terminal_width(out) if width is None else width
    wrapped = [part for line in lines for part in wrap_lines(printable(line), columns, first="  ", indent="    ")]
    out.write(SECTION_TITLE + "\n" + "".join(f"{part}\n" for part in wrapped) + "\n")


def study_answers(directory: Union[str, os.PathLike[str], None]) -> list[dict[str, Any]]:
    """:func:`sequential_answers` of the study at ``directory`` (none for ``None``: a ``--table`` report)."""
    return [] if directory is None else sequential_answers(study_sequences(Path(os.fspath(directory))))


def compare_note(records: Sequence[Mapping[str, Any]], a: Mapping[str, str], b: Mapping[str, str]) -> Optional[str]:
    """What ``compare`` must say when its groups ``a`` and ``b`` (partition keys) were replicated until decided."""
    for record in records:
        if record.get("kind") != "until-decided":
            continue
        group, against = _group(record.get("group")), _group(record.get("against"))
        if {group, against} != {_group(a), _group(b)}:
            continue
        answer = _line(record)
        return (
            f"these groups were replicated until a sequential test decided ({answer}) The tests in this table are "
            "fixed-n tests: on runs gathered until a decision they understate p and narrow the intervals; the "
            "sequential decision is the one that holds its error rate."
        )
    return None


def _line(record: Mapping[str, Any]) -> str:
    metric = str(record.get("metric", "?"))
    found_looks, found_plan = record.get("looks"), record.get("plan")
    looks: list[Any] = found_looks if isinstance(found_looks, list) else []
    plan: Mapping[str, Any] = found_plan if isinstance(found_plan, Mapping) else {}
    if record.get("kind") == "until-precision":
        who = _label(record.get("group"))
        if record.get("decision"):
            return f"{metric}, {who}: {record.get('decision_text', '')}."
        last = looks[-1]["text"] if looks and isinstance(looks[-1], Mapping) else "no round finished yet"
        return f"{metric}, {who}: in progress ({last}); rerun the launcher's command to continue."
    if record.get("kind") != "until-decided":
        return ""
    who = f"A = {_label(record.get('group'))} vs B = {_label(record.get('against'))}"
    found_planned = plan.get("looks")
    planned: list[Any] = found_planned if isinstance(found_planned, list) else []
    rule = f"{plan.get('method', 'group-sequential test')}, alpha {plan.get('alpha', '?')} over the whole sequence"
    last = looks[-1] if looks and isinstance(looks[-1], Mapping) else None
    if last is None:
        return f"{metric}, {who}: not decided yet, no look made ({rule}); rerun the launcher's command to continue."
    where = f"look {last.get('k')} of {len(planned)}, {_sizes(last)}"
    p_name = "P(A<B)" if record.get("direction") == "min" else "P(A>B)"  # --on improvement
    name = {"mean": "A-B", "spread": "std A/B"}.get(str(plan.get("on", "mean")), p_name)
    level = last.get("level")
    interval = (
        f"{name} = {_number(last.get('statistic'))} [{_number(last.get('low'))}, {_number(last.get('high'))}] "
        f"({_percent(level)} repeated CI)"
    )
    if last.get("low") is None and last.get("high") is None and last.get("statistic") is not None:
        # no interval: both groups constant, no spread to test a difference against (never a decision)
        interval = f"{name} = {_number(last.get('statistic'))}, both groups constant: no difference can be claimed"
    if record.get("decision"):
        return f"{metric}, {who}: {record['decision']} ({where}): {interval}; {rule}."
    return (
        f"{metric}, {who}: not decided yet ({where} of the plan made): {interval}; {rule}; rerun the launcher's "
        "command to continue."
    )


def _sizes(look: Mapping[str, Any]) -> str:
    n_a, n_b = look.get("n_a", look.get("n")), look.get("n_b", look.get("n"))
    return f"{n_a} runs per group" if n_a == n_b else f"{n_a} runs of A, {n_b} of B"


def _finite(value: Any) -> Optional[float]:
    """A recorded number for JSON: ``None`` for anything else, NaN or an infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if float(value) - float(value) == 0 else None


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _percent(level: Any) -> str:
    return f"{level:.0%}" if isinstance(level, float) else "?"


def _group(value: Any) -> tuple[str, str]:
    if isinstance(value, Mapping):
        return str(value.get("experiment")), str(value.get("variant"))
    return ("", "")


def _label(value: Any) -> str:
    experiment, variant = _group(value)
    return f"experiment={experiment} variant={variant}"
