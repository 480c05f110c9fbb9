"""The decisions of studies replicated in rounds, as the report, ``compare`` and the HTML page show them.

``deviate-replicate --until-decided`` and ``--until-precision`` record each sequence under ``<out>/.sequential/``
(:mod:`deviate_cb.store.sequential_record`). :func:`sequence_lines` turns them into one answer per sequence, in
the user's words (which group is better, by how much, with the repeated interval, at which look, under which
rule), plus the looks; :func:`compare_note` tells ``deviate compare`` that its two groups were replicated until
decided, since a fixed-n test on runs gathered until a decision does not hold its error rate.

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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.sequential_record import SEQUENTIAL_DIR, read_records

__all__ = ["compare_note", "sequence_lines", "study_sequences"]


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
