"""Replicate in rounds until the answer is known: ``--until-decided`` tests the new group against the group
``--against`` names, and ``--until-precision`` runs one group until its std is known to ``REL``. Every look is
recorded before the next round, so a rerun of the same command continues the sequence.

Example:
    >>> _looks(3, 5, 20)
    [3, 8, 13, 18, 20]
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO, cast

from deviate_cb.errors import UsageError
from deviate_cb.launch.against_group import against_spec
from deviate_cb.launch.progress import OnceSkipped, write_line
from deviate_cb.launch.relaunch_check import confirm_relaunch
from deviate_cb.launch.sequence_lines import (
    PROG,
    answer_line,
    diverged_line,
    finite,
    group_label,
    plan_line,
    short_line,
)
from deviate_cb.launch.spec import ReplicationSpec
from deviate_cb.launch.stopping_rule import StoppingRule
from deviate_cb.store.sequential_record import read_record, record_path, write_record

__all__ = ["RoundsResult", "replicate_until"]


@dataclass(frozen=True)
class RoundsResult:
    """What a sequence ended with: ``decision`` (``None`` while it must go on), the exit status, the record."""

    exit_status: int
    decision: Optional[str]
    record: Path


def replicate_until(
    spec: ReplicationSpec, rule: StoppingRule, *, stream: Optional[TextIO] = None, yes: bool = False
) -> RoundsResult:
    """Run the replication ``spec`` describes in rounds of ``spec.round_size`` replicas until ``rule`` says stop:
    until the sequential test against ``rule.against`` decides, or until the std of ``rule.metric`` is known to
    ``rule.precision``. ``yes``: relaunch B even when it runs another program than ``spec``
    (:func:`~deviate_cb.launch.relaunch_check.confirm_relaunch`).

    Raises:
        UsageError: A first round larger than ``rule.max_runs``, a group B that does not exist, has no such
            metric, or cannot be relaunched as recorded, or a recorded sequence with another plan; nothing is
            launched.
    """
    from deviate_cb.launch.runner import experiment_name

    stream = sys.stdout if stream is None else stream
    runs = spec.runs
    rule.check_runs(runs)
    metric, max_runs, against, effect, on = rule.metric, rule.max_runs, rule.against, rule.effect, rule.on
    out = Path(str(spec.out)).absolute()
    group = (experiment_name(spec.trainer, spec.command, spec.trainer_args, spec.experiment), spec.variant)
    step = spec.round_size
    if rule.precision is not None:
        return _until_precision(spec, out, group, rule, rule.precision, runs, step, stream)
    b_spec, b_group, b_done, b_dir = against_spec(out, against, metric, exclude=group, spec=spec)
    from deviate_cb.stats.sequential import DEFAULT_BOUNDARY, SequentialPlan, plan_looks, plan_sequential

    path = record_path(out, group, b_group)
    boundary = rule.boundary
    if boundary is None:  # a sequence under way keeps the boundary it was planned with (before: Pocock's)
        recorded_plan = (read_record(path) or {}).get("plan")
        planned = recorded_plan.get("boundary", "pocock") if isinstance(recorded_plan, dict) else None
        boundary = DEFAULT_BOUNDARY if spec.force or planned is None else str(planned)
    options: dict[str, Any] = {"runs": runs, "round": step, "max_runs": max_runs, "alpha": rule.alpha, "on": on,
                               "effect": effect, "boundary": boundary}  # fmt: skip
    if rule.threshold is not None:  # only P(A>B) sequences record one: the others' records stay as they were
        options["threshold"] = rule.threshold
    header = {
        "kind": "until-decided",
        "metric": metric,
        "direction": rule.direction or "max",
        "group": {"experiment": group[0], "variant": group[1]},
        "against": {"experiment": b_group[0], "variant": b_group[1]},
        "options": options,
    }
    record = _resume(path, header, spec.force)
    if "plan" in record:  # a sequence under way: its plan as recorded, never planned again
        plan = SequentialPlan.from_dict(record["plan"])
    else:
        if b_done > max_runs:
            raise UsageError(
                f"`--max-runs` must be at least the {b_done} completed runs of {group_label(b_group)}, the group "
                f"--against names. Received: --max-runs={max_runs}."
            )
        looks = plan_looks(runs, b_done, step, max_runs, on=on)
        plan = plan_sequential(
            looks, alpha=rule.alpha, on=on, effect=effect, direction=rule.direction or "max", boundary=boundary,
            threshold=rule.threshold,
        )  # fmt: skip
        record.update(plan=plan.to_dict(), against_terms=list(against))
    looks = plan.looks
    _say(stream, plan_line(plan, looks, metric, group, b_group))
    done = {int(look["k"]) for look in record["looks"]}
    if record.get("decision"):
        _say(stream, f"{PROG}: already decided at look {len(done)}: {record['decision_text']}")
        _say(stream, f"{PROG}: {answer_line(record['looks'][-1], metric, plan, group, b_group)}")
        return RoundsResult(0, record["decision"], path)
    label = group_label(b_group)
    confirm_relaunch(b_spec, spec, label, launch_dir=b_dir, yes=yes, stdin=sys.stdin, stderr=sys.stderr)
    said: set[str] = set()  # the problem lines the rounds printed
    force = spec.force  # a new sequence reruns A's replicas of its first look, not every round's
    for k, (n_a, n_b) in enumerate(looks, start=1):
        if k in done:
            continue
        a_result = _round(spec.with_changes(runs=n_a, force=force), stream, said)
        force = False
        with _chdir(b_dir):
            b_result = _round(b_spec.with_changes(runs=n_b), stream, said)
        study = _study_runs(out)  # once per look: both groups' values come from one read of the study
        a_values = _values(study, group, metric, n_a)
        b_values = _values(study, b_group, metric, n_b)
        unknown = _unknown_metric(study, group, metric, n_a)
        if unknown:  # no run of A has it: a misspelt --metric, not replicas to retry
            _say(stream, f"{PROG}: error: {unknown}")
            write_record(path, record)
            return RoundsResult(2, None, path)
        if len(a_values) < n_a or len(b_values) < n_b:
            _say(stream, short_line(k, (n_a, n_b), group, b_group, a_values, b_values, a_result, b_result))
            for who, g, n in (("A", group, n_a), ("B", b_group, n_b)):
                bad = _notfinite(study, g, metric, n)
                if bad:
                    _say(stream, diverged_line(who, g, metric, bad))
            write_record(path, record)
            return RoundsResult(1, None, path)
        from deviate_cb.stats.sequential import sequential_look

        look = sequential_look(plan, a_values, b_values)
        entry = {**look.to_dict(), "n": n_a, "at": time.time()}
        record["looks"].append(entry)
        if entry["decision"] != "continue":
            record.update(decision=entry["decision"], decision_text=entry["text"], decided_at=time.time())
        write_record(path, record)
        _say(stream, f"{PROG}: {entry['text']}")
        if entry["decision"] != "continue":
            _say(stream, f"{PROG}: {answer_line(entry, metric, plan, group, b_group)}")
            break
    return RoundsResult(0, record.get("decision"), path)


def _until_precision(
    spec: ReplicationSpec,
    out: Path,
    group: tuple[str, str],
    rule: StoppingRule,
    precision: float,
    runs: int,
    step: int,
    stream: TextIO,
) -> RoundsResult:
    from deviate_cb.stats.precision import precision_look

    metric, max_runs, level = rule.metric, rule.max_runs, rule.level

    path = record_path(out, group)
    looks = _looks(runs, step, max_runs)
    header: dict[str, Any] = {
        "kind": "until-precision",
        "metric": metric,
        "group": {"experiment": group[0], "variant": group[1]},
        "plan": {"precision": precision, "level": level, "looks": looks, "interval": "bonett"},
    }
    record = _resume(path, header, spec.force)
    _say(stream, f"{PROG}: replicating {group_label(group)} until the std of {metric} is known to ±{precision:.0%} "
         f"(the half-width of its {level:.0%} Bonett interval over the std, its width from the largest kurtosis "
         f"the runs show), at most {max_runs} runs")  # fmt: skip
    if record.get("decision"):
        _say(stream, f"{PROG}: {record['decision_text']}")
        return RoundsResult(0, record["decision"], path)
    force = spec.force
    for n in looks:
        if any(look["n"] == n for look in record["looks"]):
            continue
        result = _round(spec.with_changes(runs=n, force=force), stream, set())
        force = False
        study = _study_runs(out)
        values = _values(study, group, metric, n)
        unknown = _unknown_metric(study, group, metric, n)
        if unknown:  # no run has it: a misspelt --metric, not replicas to retry
            _say(stream, f"{PROG}: error: {unknown}")
            write_record(path, record)
            return RoundsResult(2, None, path)
        if len(values) < n:
            _say(stream, f"{PROG}: error: {group_label(group)} has {len(values)} completed runs with {metric}, not "
                 f"{n}: {result.summary()}; rerun the same command to retry the failed replicas")  # fmt: skip
            write_record(path, record)
            return RoundsResult(1, None, path)
        # Equal runs are std 0 known exactly only where the group is bit-identical by design (control).
        look = precision_look(values, precision, looks=[m for m in looks if m < n], level=level,
                              last=n >= max_runs, by_design=group[1] == "control", name=metric)  # fmt: skip
        text = look.text + (f"; stopped at --max-runs {max_runs}" if look.decision == "not known" else "")
        record["looks"].append({**look.to_dict(), "text": text})
        if look.stop:
            record.update(decision=look.decision, decision_text=text, decided_at=time.time())
        write_record(path, record)
        _say(stream, f"{PROG}: {text}")
        if look.stop:
            break
    return RoundsResult(0, record.get("decision"), path)


def _round(spec: ReplicationSpec, stream: TextIO, said: set[str]) -> Any:
    """One round: :func:`~deviate_cb.launch.runner.run_replication`; a problem line already said by an earlier round
    (of either group: a path both groups wrote is one problem) is not said again."""
    from deviate_cb.launch.runner import run_replication

    once = cast(TextIO, OnceSkipped(stream))  # the replicas earlier rounds ran: counted in one line
    return run_replication(spec, stream=once, said_problems=said)


def _values(runs: Sequence[Any], group: tuple[str, str], metric: str, n: int) -> list[float]:
    """The metric's per-run values (last value, as the report) of the group's completed replicas 0..n-1.

    A completed run whose value is NaN or infinite (a diverged training) has none: it is named by
    :func:`_not_finite`, since rerunning the command does not change it.
    """
    found = []
    for run in _group_runs(runs, group, n):
        value = run.values.get(metric)
        if finite(value):
            found.append(float(value))
    return found


def _unknown_metric(runs: Sequence[Any], group: tuple[str, str], metric: str, n: int) -> str:
    """The line when the group's completed runs (below ``n``) hold metrics but none of them ``metric``; ``""`` when
    one holds it, or none holds any metric (the launcher's line said what was recorded: nothing)."""
    chosen = _group_runs(runs, group, n)
    names = sorted({name for run in chosen for name in run.values})
    if not names or metric in names:
        return ""
    return (
        f"`--metric` names no metric of {group_label(group)}: none of its {len(chosen)} completed runs recorded it. "
        f"Received: --metric {metric}. Its metrics: {', '.join(names)}."
    )


def _notfinite(runs: Sequence[Any], group: tuple[str, str], metric: str, n: int) -> list[str]:
    """The replicas of the group (below ``n``) that completed with a NaN or infinite ``metric``."""
    return [
        str(run.keys["replica"])
        for run in _group_runs(runs, group, n)
        if metric in run.values and not finite(run.values[metric])
    ]


def _study_runs(out: Path) -> list[Any]:
    """The study's completed runs with their per-run values (:func:`deviate_cb.report.reading.selection.store_runs`)."""
    from deviate_cb.report.reading.selection import store_runs

    return store_runs(str(out), metrics=None, warnings=[])


def _group_runs(runs: Sequence[Any], group: tuple[str, str], n: int) -> list[Any]:
    """The runs of ``group`` among ``runs`` whose replica is below ``n``, in replica order."""
    chosen = [r for r in runs if (r.keys["experiment"], r.keys["variant"]) == group and int(r.keys["replica"]) < n]
    return sorted(chosen, key=lambda r: int(r.keys["replica"]))


_OPTION_NAMES = {
    "runs": "-n",
    "round": "round size (--parallel)",
    "max_runs": "--max-runs",
    "alpha": "--alpha",
    "on": "--on",
    "effect": "--effect",
    "precision": "--until-precision",
    "level": "--level",
    "boundary": "--boundary",
    "threshold": "--threshold",
    "looks": "looks",
}


def _resume(path: Path, header: dict[str, Any], force: bool) -> dict[str, Any]:
    recorded = read_record(path)
    if recorded is None or force:
        return {**header, "looks": [], "decision": None, "started_at": time.time()}
    changed = []
    for key, value in header.items():
        if recorded.get(key) == value:
            continue
        if isinstance(value, dict) and isinstance(recorded.get(key), dict) and key in ("options", "plan"):
            for option, now in value.items():
                # a sequence recorded before --boundary existed was planned with Pocock's
                before = recorded[key].get(option, "pocock" if option == "boundary" else None)
                if before != now:
                    changed.append(f"{_OPTION_NAMES.get(option, option)} {before!r}, not {now!r}")
        else:
            changed.append(f"--{key} {recorded.get(key)!r}, not {value!r}")
    if changed:
        raise UsageError(
            f"{path} records a sequence started with {'; '.join(changed)}: continuing it with other options would "
            "spend the test's error rate again over the same runs. Rerun with the options it was started with, or "
            "--force to rerun every replica and start a new sequence."
        )
    return recorded


def _looks(first: int, step: int, max_runs: int) -> list[int]:
    looks = list(range(first, max_runs + 1, step))
    if looks[-1] != max_runs:
        looks.append(max_runs)
    return looks


def _say(stream: TextIO, line: str) -> None:
    write_line(stream, line)  # a reader gone (`| head -1`) stops no round


@contextlib.contextmanager
def _chdir(directory: Optional[str]) -> Iterator[None]:
    if directory is None:
        yield
        return
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)
