"""Replicate in rounds until the answer is known: ``--until-decided`` and ``--until-precision``.

``--until-decided --against KEY=VALUE`` runs the new group A and tops up the group B it is compared with in the
same rounds (a round: ``--parallel`` replicas of each, or one), relaunching B exactly as its manifests record it
(:func:`against_launch`: its trainer or command, arguments, variant, base seed, backend of Keras, flags, launch
directory; its seed series simply continues), once its replicas' run.json files agree with each other and with
their own argv, and with ``--yes`` or a ``y`` when it runs another program than A
(:mod:`deviate_cb.launch.relaunch_check`). After each round, a group-sequential test of the metric's
difference (:func:`deviate_cb.stats.sequential.sequential_look`, planned over the looks before the first round,
so the error rate is spent once over the whole sequence) decides: A better, B better, no difference of at least
``--effect`` (when given), or on to the next round; at ``--max-runs`` runs per group the sequence ends undecided,
with the repeated confidence interval of the difference (``--on improvement``: of P(A>B), against ``--threshold``).
``--until-precision REL`` runs one group in rounds until
Bonett's interval of its std is within ``REL`` of the std (half-width over std), or ``--max-runs``
(:func:`deviate_cb.stats.precision.precision_look`: no interval, and no stop, while the runs show fewer than 3
distinct values or one or two runs apart from the rest; equal runs stop only the ``control`` variant).

Every look is written to the sequence's record (:mod:`deviate_cb.store.sequential_record`) before the next round
starts, so an interrupted launcher, rerun with the same command, continues from the looks recorded; a rerun with
another plan (another ``--max-runs``, round size, alpha, effect or metric) is refused in one line, since it would
start the error spending again over the same runs. Each round is an ordinary :func:`~deviate_cb.launch.runner.
replicate` call, so command mode, warm start, Slurm and Ray work as they do for ``-n``.

Example:
    >>> _looks(3, 5, 20), _runs_text(((3, 4), (5, 5), (7, 7)))
    ([3, 8, 13, 18, 20], '3/4 (A/B), 5, 7')
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO, cast

from deviate_cb.errors import UsageError
from deviate_cb.launch.progress import OnceSkipped, write_line
from deviate_cb.launch.relaunch_check import agreed_configuration, confirm_relaunch
from deviate_cb.store.run_directory import read_manifest_file, run_path
from deviate_cb.store.sequential_record import read_record, record_path, write_record

__all__ = ["RoundsResult", "against_launch", "replicate_until"]

_PROG = "deviate-replicate"
_FINAL = ("A better", "B better")


@dataclass(frozen=True)
class RoundsResult:
    """What a sequence ended with: ``decision`` (``None`` while it must go on), the exit status, the record."""

    exit_status: int
    decision: Optional[str]
    record: Path


def replicate_until(
    *,
    launch: Mapping[str, Any],
    metric: str,
    max_runs: int,
    against: Sequence[str] = (),
    precision: Optional[float] = None,
    direction: Optional[str] = None,
    effect: Optional[float] = None,
    alpha: float = 0.05,
    on: str = "mean",
    level: float = 0.95,
    boundary: Optional[str] = None,
    threshold: Optional[float] = None,
    stream: Optional[TextIO] = None,
    yes: bool = False,
) -> RoundsResult:
    """Run ``launch`` (the keyword arguments of :func:`~deviate_cb.launch.runner.replicate`) in rounds.

    With ``against`` (``KEY=VALUE`` terms naming the group B), until the sequential test decides; with
    ``precision``, until the std of ``metric`` is known to ``precision`` (relative half-width of its interval).
    ``boundary`` (``"obf"`` or ``"pocock"``; ``None``: the one a recorded sequence was planned with, else
    ``"obf"``) shapes the sequential test's levels over the looks. ``on="improvement"`` decides on P(A>B) against
    ``threshold`` (default 0.75, Bouthillier et al. 2021) instead of the mean difference. ``yes``: relaunch B even
    when it runs another program than ``launch`` (:func:`~deviate_cb.launch.relaunch_check.confirm_relaunch`).

    Raises:
        UsageError: A bad option, a group B that does not exist, has no such metric, or cannot be relaunched as
            recorded, or a recorded sequence with another plan; nothing is launched.
    """
    from deviate_cb.launch.runner import experiment_name

    stream = sys.stdout if stream is None else stream
    runs = int(launch.get("runs", 1))
    parallel = launch.get("parallel")
    _check(metric, max_runs, runs, against, precision, alpha, effect, on, level)
    threshold = _check_threshold(on, threshold, effect)
    if boundary is not None and boundary not in ("obf", "pocock"):
        raise UsageError(f"`--boundary` must be obf or pocock. Received: --boundary={boundary}.")
    if precision is None and max_runs < 3:
        raise UsageError(
            f"`--max-runs` must be at least 3 with --until-decided (a look needs 3 runs a group: the test's "
            f"skewness term needs each group's third cumulant). Received: --max-runs={max_runs}."
        )
    out = Path(str(launch.get("out", "deviate_runs"))).absolute()
    experiment = experiment_name(
        launch.get("trainer"), launch.get("command"), launch.get("trainer_args", ()), launch.get("experiment")
    )
    variant = str(launch.get("variant", "algo+impl"))
    group = (experiment, variant)
    step = int(parallel) if isinstance(parallel, int) and parallel > 0 else 1
    if precision is not None:
        return _until_precision(launch, out, group, metric, runs, step, max_runs, precision, level, stream)
    b_launch, b_group, b_done = against_launch(out, against, metric, exclude=group, launch=launch)
    from deviate_cb.stats.sequential import DEFAULT_BOUNDARY, SequentialPlan, plan_looks, plan_sequential

    path = record_path(out, group, b_group)
    if boundary is None:  # a sequence under way keeps the boundary it was planned with (before: Pocock's)
        recorded_plan = (read_record(path) or {}).get("plan")
        planned = recorded_plan.get("boundary", "pocock") if isinstance(recorded_plan, dict) else None
        boundary = DEFAULT_BOUNDARY if launch.get("force") or planned is None else str(planned)
    options: dict[str, Any] = {"runs": runs, "round": step, "max_runs": max_runs, "alpha": alpha, "on": on,
                               "effect": effect, "boundary": boundary}  # fmt: skip
    if threshold is not None:  # only P(A>B) sequences record one: the others' records stay as they were
        options["threshold"] = threshold
    header = {
        "kind": "until-decided",
        "metric": metric,
        "direction": direction or "max",
        "group": {"experiment": group[0], "variant": group[1]},
        "against": {"experiment": b_group[0], "variant": b_group[1]},
        "options": options,
    }
    record = _resume(path, header, bool(launch.get("force")))
    if "plan" in record:  # a sequence under way: its plan as recorded, never planned again
        plan = SequentialPlan.from_dict(record["plan"])
    else:
        if b_done > max_runs:
            raise UsageError(
                f"`--max-runs` must be at least the {b_done} completed runs of {_label(b_group)}, the group "
                f"--against names. Received: --max-runs={max_runs}."
            )
        looks = plan_looks(runs, b_done, step, max_runs, on=on)
        plan = plan_sequential(
            looks, alpha=alpha, on=on, effect=effect, direction=direction or "max", boundary=boundary,
            threshold=threshold,
        )  # fmt: skip
        record.update(plan=plan.to_dict(), against_terms=list(against))
    looks = plan.looks
    _say(stream, _plan_line(plan, looks, metric, group, b_group))
    done = {int(look["k"]) for look in record["looks"]}
    if record.get("decision"):
        _say(stream, f"{_PROG}: already decided at look {len(done)}: {record['decision_text']}")
        _say(stream, f"{_PROG}: {_answer(record['looks'][-1], metric, plan, group, b_group)}")
        return RoundsResult(0, record["decision"], path)
    confirm_relaunch(b_launch, launch, _label(b_group), yes=yes, stdin=sys.stdin, stderr=sys.stderr)
    b_dir = b_launch.pop("launch_dir", None)
    said: set[str] = set()  # the problem lines the rounds printed
    force = bool(launch.get("force"))  # a new sequence reruns A's replicas of its first look, not every round's
    for k, (n_a, n_b) in enumerate(looks, start=1):
        if k in done:
            continue
        a_result = _round(dict(launch, runs=n_a, force=force), stream, said)
        force = False
        with _chdir(b_dir):
            b_result = _round(dict(b_launch, runs=n_b), stream, said)
        study = _study_runs(out)  # once per look: both groups' values come from one read of the study
        a_values = _values(study, group, metric, n_a)
        b_values = _values(study, b_group, metric, n_b)
        unknown = _unknown_metric(study, group, metric, n_a)
        if unknown:  # no run of A has it: a misspelt --metric, not replicas to retry
            _say(stream, f"{_PROG}: error: {unknown}")
            write_record(path, record)
            return RoundsResult(2, None, path)
        if len(a_values) < n_a or len(b_values) < n_b:
            _say(stream, _short_line(k, (n_a, n_b), group, b_group, a_values, b_values, a_result, b_result))
            for who, g, n in (("A", group, n_a), ("B", b_group, n_b)):
                bad = _not_finite(study, g, metric, n)
                if bad:
                    _say(stream, _diverged_line(who, g, metric, bad))
            write_record(path, record)
            return RoundsResult(1, None, path)
        from deviate_cb.stats.sequential import sequential_look

        look = sequential_look(plan, a_values, b_values)
        entry = {**look.to_dict(), "n": n_a, "at": time.time()}
        record["looks"].append(entry)
        if entry["decision"] != "continue":
            record.update(decision=entry["decision"], decision_text=entry["text"], decided_at=time.time())
        write_record(path, record)
        _say(stream, f"{_PROG}: {entry['text']}")
        if entry["decision"] != "continue":
            _say(stream, f"{_PROG}: {_answer(entry, metric, plan, group, b_group)}")
            break
    return RoundsResult(0, record.get("decision"), path)


def _answer(look: Mapping[str, Any], metric: str, plan: Any, a: tuple[str, str], b: tuple[str, str]) -> str:
    """The sequence's answer in the user's words: which group is better, by how much, after how many runs.

    Example:
        >>> from deviate_cb.stats.sequential import SequentialPlan
        >>> plan = SequentialPlan(((3, 3), (6, 6)), 0.05, "mean", None, "min", (0.01, 0.04), 0, 1000)
        >>> look = {"n_a": 6, "n_b": 6, "k": 2, "level": 0.95, "statistic": -0.08275, "low": -0.1499,
        ...         "high": -0.01558, "decision": "A better"}
        >>> _answer(look, "loss", plan, ("new", "algo"), ("old", "algo")).split(" (95%")[0]
        'decided: experiment=new variant=algo has the better loss (lower), by 0.08275 [0.01558, 0.1499]'
    """
    runs = f"{look['n_a']} runs per group" if look["n_a"] == look["n_b"] else f"{look['n_a']} and {look['n_b']} runs"
    where = f"after {runs} (look {look['k']} of {len(plan.looks)}; alpha {plan.alpha:g} over the whole sequence)"
    level = f"{look['level']:.0%} repeated CI"
    if plan.on == "improvement":
        return _improvement_answer(look, metric, plan, a, b, where, level)
    low, high = _bound(look.get("low"), -math.inf), _bound(look.get("high"), math.inf)
    if look["decision"] in ("A better", "B better") and plan.on == "mean":
        winner = a if look["decision"] == "A better" else b
        # the winner's margin is |A-B|: the interval excludes 0, so it is (low, high) or (-high, -low), as the
        # estimate's sign says (not the winner's: for a lower-is-better metric the winner has the lower mean)
        lo, hi = (low, high) if look["statistic"] > 0 else (-high, -low)
        higher = "higher" if plan.direction == "max" else "lower"
        adjusted = _bound(look.get("adjusted"), math.nan)
        bias = f"; {abs(adjusted):.4g} adjusted for the stopping's bias" if math.isfinite(adjusted) else ""
        return (
            f"decided: {_label(winner)} has the better {metric} ({higher}), by {abs(look['statistic']):.4g} "
            f"[{lo:.4g}, {hi:.4g}] ({level}{bias}), {where}."
        )
    if look["decision"] in ("A better", "B better"):
        winner = a if look["decision"] == "A better" else b
        return (
            f"decided: {_label(winner)} spreads less on {metric}: std A/B = {look['statistic']:.4g} [{low:.4g}, "
            f"{high:.4g}] ({level}), {where}."
        )
    if look["decision"] == "undecided" and math.isinf(low) and math.isinf(high):
        return (
            f"undecided at --max-runs: both groups' {metric} were constant at every run, so no difference can be "
            f"claimed from them, {where}."
        )
    if look["decision"] == "undecided":
        name = "the difference A-B" if plan.on == "mean" else "std A/B"
        return f"undecided at --max-runs: {name} of {metric} is within [{low:.4g}, {high:.4g}] ({level}), {where}."
    return f"decided: {look['decision']} in {metric}: within [{low:.4g}, {high:.4g}] ({level}), {where}."


def _improvement_answer(
    look: Mapping[str, Any], metric: str, plan: Any, a: tuple[str, str], b: tuple[str, str], where: str, level: str
) -> str:
    """The P(A>B) sequence's answer: who wins a run against a run, how often, and what that rests on.

    Example:
        >>> from deviate_cb.stats.sequential import SequentialPlan
        >>> plan = SequentialPlan(((3, 3), (6, 6)), 0.05, "improvement", None, "max", (0.01, 0.04), 0, 1000,
        ...                       threshold=0.75)
        >>> look = {"n_a": 6, "n_b": 6, "k": 2, "level": 0.95, "statistic": 0.97, "low": 0.8, "high": 1.0,
        ...         "decision": "A better"}
        >>> print(_answer(look, "acc", plan, ("new", "algo"), ("old", "algo")).split(" (95%")[0])
        ... # doctest: +NORMALIZE_WHITESPACE
        decided: experiment=new variant=algo is better on acc: a run of it beats a run of experiment=old
        variant=algo in 97% of pairs, P(A>B) = 0.97 [0.8, 1]
    """
    low, high = _bound(look.get("low"), 0.0), _bound(look.get("high"), 1.0)
    name = "P(A<B)" if plan.direction == "min" else "P(A>B)"
    better = "lower" if plan.direction == "min" else "higher"
    meaning = f"{name}: the chance a run of A has the {better} {metric} than a run of B, ties half"
    shown = f"{name} = {look['statistic']:.3g} [{low:.3g}, {high:.3g}] ({level}; {meaning})"
    threshold = plan.threshold
    if look["decision"] in ("A better", "B better"):
        winner, loser = (a, b) if look["decision"] == "A better" else (b, a)
        share = look["statistic"] if look["decision"] == "A better" else 1.0 - look["statistic"]
        return (
            f"decided: {_label(winner)} is better on {metric}: a run of it beats a run of {_label(loser)} in "
            f"{share:.0%} of pairs, {shown}, with confidence above {threshold:g}, {where}."
        )
    if look["decision"] == "undecided":
        return (
            f"undecided at --max-runs: {shown} is neither above {threshold:g} nor below {1 - threshold:g}, nor "
            f"inside both, {where}."
        )
    return f"decided: {look['decision']} on {metric}: {shown} lies within ({1 - threshold:g}, {threshold:g}), {where}."


def _check_threshold(on: str, threshold: Optional[float], effect: Optional[float]) -> Optional[float]:
    """The P(A>B) threshold: default 0.75 with ``--on improvement``, refused otherwise."""
    if on != "improvement":
        if threshold is not None:
            raise UsageError(f"`--threshold` goes with `--on improvement`. Received: --threshold={threshold}.")
        return None
    if effect is not None:
        raise UsageError(
            "`--effect` does not go with `--on improvement`: --threshold says what matters. "
            f"Received: --effect={effect}."
        )
    from deviate_cb.stats.improvement_look import DEFAULT_THRESHOLD

    if threshold is None:
        return DEFAULT_THRESHOLD
    if isinstance(threshold, bool) or not 0.5 < threshold < 1:
        raise UsageError(f"`--threshold` must be in (0.5, 1), e.g. 0.75. Received: --threshold={threshold}.")
    return float(threshold)


def _bound(value: Any, missing: float) -> float:
    """An interval's end as recorded (JSON has no infinity: ``None`` is the unbounded end)."""
    return float(value) if _finite(value) else missing


def against_launch(
    out: Path, against: Sequence[str], metric: str, *, exclude: tuple[str, str], launch: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, str], int]:
    """How to relaunch the group ``against`` names exactly as its manifests record it.

    Returns:
        ``(keyword arguments of replicate, (experiment, variant), completed runs)``; ``launch_dir`` (where its
        launcher ran) is among the arguments, for the caller to run it from.

    Raises:
        UsageError: No such group, several, the group itself, no completed run with ``metric``, or a group whose
            replicas record no configuration or several.
    """
    from deviate_cb.report.selection import parse_term, select, store_runs

    terms = [parse_term(text, "--against") for text in against]
    try:
        runs = store_runs(str(out), metrics=None, warnings=[])
    except UsageError as exc:
        raise UsageError(f"`--against` names no group: {out} holds no run yet ({exc}).") from None
    chosen = select(runs, terms, "--against")
    groups = sorted({(r.keys["experiment"], r.keys["variant"]) for r in chosen})
    if len(groups) != 1:
        named = ", ".join(_label(g) for g in groups)
        raise UsageError(
            f"`--against` must name one group (add experiment=... and variant=...). Received: "
            f"--against={' '.join(against)}, which matches {named}."
        )
    b_group = groups[0]
    if b_group == exclude:
        raise UsageError(
            f"`--against` names the group being replicated itself. Received: --against={' '.join(against)}."
        )
    with_metric = [r for r in chosen if _finite(r.values.get(metric))]
    if not with_metric:
        names = sorted({m for r in chosen for m in r.values})
        raise UsageError(
            f"`--metric` {metric!r} is not a metric of {_label(b_group)}, the group --against names. Received: "
            f"--metric {metric}. Its metrics: {', '.join(names) or 'none'}."
        )
    manifests, launch_dirs = [], set()
    for run in chosen:
        file = run_path(out, b_group[0], b_group[1], int(run.keys["replica"])) / "run.json"
        manifest = read_manifest_file(str(file)) or {}
        manifests.append((file, manifest))
        if isinstance(manifest.get("launch_dir"), str):
            launch_dirs.add(manifest["launch_dir"])
    config = agreed_configuration(manifests, _label(b_group))  # every replica, its fields and its argv agree
    if len(launch_dirs) > 1:
        raise UsageError(
            f"{_label(b_group)} cannot be relaunched as it was: its replicas record different launch directories."
        )
    relaunch: dict[str, Any] = {
        key: launch[key]
        for key in ("out", "parallel", "timeout", "gpus", "backend", "backend_options", "cold", "force", "argv")
        if key in launch
    }
    relaunch.update(out=str(out), experiment=b_group[0], variant=config.get("variant", b_group[1]))
    argv = manifests[0][1].get("argv")
    if isinstance(argv, list):  # B's replicas record B's command line, which their check reads, not A's
        relaunch["argv"] = argv
    if config.get("mode") == "trainer":
        relaunch.update(trainer=config.get("trainer"), trainer_args=tuple(config.get("trainer_args") or ()))
    else:
        relaunch.update(command=list(config.get("command") or []))
    for key, name in (("base_seed", "seed"), ("keras_backend", "keras_backend"), ("audit_steps", "audit")):
        if config.get(key) is not None:
            relaunch[name] = config[key]
    relaunch["metric_regex"] = tuple(config.get("metric_regex") or ())
    for flag in ("keep_project_seeds", "keep_project_determinism", "isolate"):
        if config.get(flag):
            relaunch[flag] = True
    relaunch["force"] = False  # B's completed runs are its data: never rerun them
    if launch_dirs:
        (directory,) = launch_dirs
        if not os.path.isdir(directory):
            raise UsageError(
                f"{_label(b_group)} cannot be relaunched as it was: it was launched from {directory}, which does not "
                "exist here."
            )
        relaunch["launch_dir"] = directory
    return relaunch, b_group, len(with_metric)


# -- the rounds -----------------------------------------------------------------------------------------------


def _until_precision(
    launch: Mapping[str, Any],
    out: Path,
    group: tuple[str, str],
    metric: str,
    runs: int,
    step: int,
    max_runs: int,
    precision: float,
    level: float,
    stream: TextIO,
) -> RoundsResult:
    from deviate_cb.stats.precision import precision_look

    path = record_path(out, group)
    looks = _looks(runs, step, max_runs)
    header: dict[str, Any] = {
        "kind": "until-precision",
        "metric": metric,
        "group": {"experiment": group[0], "variant": group[1]},
        "plan": {"precision": precision, "level": level, "looks": looks, "interval": "bonett"},
    }
    record = _resume(path, header, bool(launch.get("force")))
    _say(stream, f"{_PROG}: replicating {_label(group)} until the std of {metric} is known to ±{precision:.0%} "
         f"(the half-width of its {level:.0%} Bonett interval over the std, its width from the largest kurtosis "
         f"the runs show), at most {max_runs} runs")  # fmt: skip
    if record.get("decision"):
        _say(stream, f"{_PROG}: {record['decision_text']}")
        return RoundsResult(0, record["decision"], path)
    force = bool(launch.get("force"))
    for n in looks:
        if any(look["n"] == n for look in record["looks"]):
            continue
        result = _round(dict(launch, runs=n, force=force), stream, set())
        force = False
        study = _study_runs(out)
        values = _values(study, group, metric, n)
        unknown = _unknown_metric(study, group, metric, n)
        if unknown:  # no run has it: a misspelt --metric, not replicas to retry
            _say(stream, f"{_PROG}: error: {unknown}")
            write_record(path, record)
            return RoundsResult(2, None, path)
        if len(values) < n:
            _say(stream, f"{_PROG}: error: {_label(group)} has {len(values)} completed runs with {metric}, not {n}: "
                 f"{result.summary()}; rerun the same command to retry the failed replicas")  # fmt: skip
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
        _say(stream, f"{_PROG}: {text}")
        if look.stop:
            break
    return RoundsResult(0, record.get("decision"), path)


def _round(kwargs: dict[str, Any], stream: TextIO, said: set[str]) -> Any:
    """One round: :func:`~deviate_cb.launch.runner.replicate`; a problem line already said by an earlier round
    (of either group: a path both groups wrote is one problem) is not said again."""
    from deviate_cb.launch.runner import replicate

    once = cast(TextIO, OnceSkipped(stream))  # the replicas earlier rounds ran: counted in one line
    return replicate(**kwargs, stream=once, said_problems=said)


def _values(runs: Sequence[Any], group: tuple[str, str], metric: str, n: int) -> list[float]:
    """The metric's per-run values (last value, as the report) of the group's completed replicas 0..n-1.

    A completed run whose value is NaN or infinite (a diverged training) has none: it is named by
    :func:`_not_finite`, since rerunning the command does not change it.
    """
    found = []
    for run in _group_runs(runs, group, n):
        value = run.values.get(metric)
        if _finite(value):
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
        f"`--metric` names no metric of {_label(group)}: none of its {len(chosen)} completed runs recorded it. "
        f"Received: --metric {metric}. Its metrics: {', '.join(names)}."
    )


def _not_finite(runs: Sequence[Any], group: tuple[str, str], metric: str, n: int) -> list[str]:
    """The replicas of the group (below ``n``) that completed with a NaN or infinite ``metric``."""
    return [
        str(run.keys["replica"])
        for run in _group_runs(runs, group, n)
        if metric in run.values and not _finite(run.values[metric])
    ]


def _study_runs(out: Path) -> list[Any]:
    """The study's completed runs with their per-run values (:func:`deviate_cb.report.selection.store_runs`)."""
    from deviate_cb.report.selection import store_runs

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


def _check(
    metric: str,
    max_runs: int,
    runs: int,
    against: Sequence[str],
    precision: Optional[float],
    alpha: float,
    effect: Optional[float],
    on: str,
    level: float,
) -> None:
    if not metric:
        raise UsageError("`--metric` is required with --until-decided and --until-precision. Received: none.")
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 2:
        raise UsageError(f"`--max-runs` must be an integer >= 2. Received: --max-runs={max_runs!r}.")
    if max_runs < runs:
        raise UsageError(f"`--max-runs` must be at least -n ({runs}). Received: --max-runs={max_runs}.")
    if precision is None and not against:
        raise UsageError("`--until-decided` needs `--against KEY=VALUE`, the group to compare with. Received: none.")
    if precision is not None and against:
        raise UsageError("`--until-precision` replicates one group; `--against` belongs to --until-decided.")
    if precision is not None and not 0 < precision < 1:
        raise UsageError(f"`--until-precision` must be in (0, 1), e.g. 0.25. Received: --until-precision={precision}.")
    if precision is not None and max_runs < 3:
        raise UsageError(f"`--max-runs` must be at least 3 with --until-precision (a std's interval needs 3 runs that "
                         f"differ). Received: --max-runs={max_runs}.")  # fmt: skip
    if not 0 < alpha < 0.5:
        raise UsageError(f"`--alpha` must be in (0, 0.5). Received: --alpha={alpha}.")
    if effect is not None and not (math.isfinite(effect) and effect > 0):
        raise UsageError(f"`--effect` must be a positive number in the metric's units. Received: --effect={effect}.")
    if on not in ("mean", "spread", "improvement"):
        raise UsageError(f"`--on` must be mean, spread or improvement. Received: --on={on}.")
    if not 0 < level < 1:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={level}.")


def _plan_line(plan: Any, looks: Sequence[tuple[int, int]], metric: str, a: tuple[str, str], b: tuple[str, str]) -> str:
    if plan.on == "improvement":
        what = f"P(A>B) against the threshold {plan.threshold:g}"
    else:
        what = "the difference of the means" if plan.on == "mean" else "the spread ratio"
    first, last = plan.nominals[0], plan.nominals[-1]
    levels = f"{last:.4g}" if first == last else f"from {first:.3g} at the first look to {last:.4g} at the last"
    widened = ", before the skewness widening" if getattr(plan, "kappa", 0.0) > 0 else ""
    return (
        f"{_PROG}: replicating A = {_label(a)} against B = {_label(b)} in rounds until {what} of {metric} is decided: "
        f"{len(looks)} looks at {_runs_text(looks)} runs per group, {plan.method} at alpha "
        f"{plan.alpha:g} (nominal level per look {levels}{widened})"
    )


def _runs_text(looks: Sequence[tuple[int, int]]) -> str:
    """``3, 5, 7`` runs per group; ``3/4`` where A and B have different numbers of runs at a look."""
    shown = [str(a) if a == b else f"{a}/{b} (A/B)" for a, b in looks]
    return ", ".join(shown) if len(shown) <= 6 else f"{shown[0]}, {shown[1]}, ..., {shown[-1]}"


def _short_line(
    k: int,
    sizes: tuple[int, int],
    a: tuple[str, str],
    b: tuple[str, str],
    a_values: list[float],
    b_values: list[float],
    ra: Any,
    rb: Any,
) -> str:
    need = (
        f"{sizes[0]} completed runs with the metric in each group"
        if sizes[0] == sizes[1]
        else f"{sizes[0]} completed runs with the metric in A and {sizes[1]} in B"
    )
    return (
        f"{_PROG}: error: look {k} needs {need}; A ({_label(a)}) has {len(a_values)}, B ({_label(b)}) has "
        f"{len(b_values)} ({ra.summary()}; {rb.summary()}). Failed runs are never counted: rerun the same command "
        "to retry them and continue the sequence."
    )


def _diverged_line(who: str, group: tuple[str, str], metric: str, replicas: Sequence[str]) -> str:
    return (
        f"{_PROG}: error: {who} ({_label(group)}) completed replica{'s' * (len(replicas) > 1)} "
        f"{', '.join(replicas)} with a {metric} that is NaN or infinite (the training diverged): the sequential test "
        "needs a number from every run. Decide what such a run means for your comparison; the sequence cannot go on "
        "until it has a finite value (rerun it with the same seed only if the divergence was not the model's own)."
    )


def _label(group: tuple[str, str]) -> str:
    return f"experiment={group[0]} variant={group[1]}"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
