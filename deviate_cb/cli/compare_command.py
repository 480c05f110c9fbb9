"""``deviate compare``: is A really better than B?"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import IO, Any, Optional

from deviate_cb.cli._common import add_output_arguments, check_html, output_to, per_run_options, say
from deviate_cb.cli.sources import (
    add_sources,
    check_alpha,
    load_runs,
    one_group,
    parse_terms,
    pooled_words,
    say_pooled,
    warn_problems,
)
from deviate_cb.errors import UsageError
from deviate_cb.report.text.safe import printable, printable_errors, unseen
from deviate_cb.report.text.spreadsheet import counted_escapes, escape_note

__all__ = ["add_compare"]


def add_compare(commands: argparse._SubParsersAction) -> None:

    p = commands.add_parser(
        "compare",
        help="is A really better than B? every test and effect size, per metric",
        description="Compare two groups of completed runs, per metric present in both, on both questions: do the "
        "means differ (the mean difference with Welch's t interval, Welch's t with p raw and corrected over the "
        "metrics of interest (--metric, else the validation and test metrics), Cohen's d, Hedges' g and P(A>B) "
        "with intervals that invert the same test, Mann-Whitney U, Almost Stochastic Order's epsilon_min of A over "
        "B in the metric's direction) and do the spreads differ (std(A)/std(B) with the "
        "interval that inverts the Brown-Forsythe test, its p raw and corrected); a verdict sentence for each. "
        "Groups: `DIR --a KEY=VALUE --b KEY=VALUE` (any partition "
        "key; several --a terms are ANDed), `DIR_A DIR_B`, `--table A.csv --table B.csv`, or `--table ALL.csv "
        "--group-by COLUMN --a VALUE --b VALUE`. Metrics in one group only, or with fewer than 2 runs in a group, "
        "are listed with the reason. `DIR --by KEY` ranks the k groups of one key's values instead (k >= 2): per "
        "metric, Almost Stochastic Order's epsilon_min of every ordered pair at alpha / (k (k - 1)) (Bonferroni), "
        "a claim of dominance also needing a permutation test at that level (so that all claims hold together), "
        "and the groups ordered by how many others each almost dominates. A group is one configuration: one that "
        "holds runs of several (another experiment or variant, other text columns of a --table, other recorded "
        "configurations) is refused, naming them, unless --pool pools them on purpose (then said in the title, on "
        "stderr and in the `pooled` column).",
    )
    add_sources(p, "one study directory (with --a/--b) or two (A then B)")
    p.add_argument("--a", action="append", default=[], metavar="KEY=VALUE", help="runs of group A (repeatable, ANDed)")
    p.add_argument("--b", action="append", default=[], metavar="KEY=VALUE", help="runs of group B (repeatable, ANDed)")
    p.add_argument(
        "--by",
        metavar="KEY",
        help="instead of --a/--b: one group per value of this partition key (experiment, variant, ...; with "
        "--table, a text column; several joined by commas, e.g. experiment,variant: one group per configuration), "
        "ranked per metric by Almost Stochastic Order; each group must be one configuration (else --pool)",
    )
    p.add_argument(
        "--correction",
        choices=("holm", "bh", "bonferroni", "none"),
        default="holm",
        help="multiple-comparison correction over the metrics of interest: those named with --metric, else the "
        "validation and test metrics (the other metrics form a family of their own) (default: holm)",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstraps (default 0: reproducible)")
    p.add_argument(
        "--on",
        choices=("means", "improvement"),
        default="means",
        help="what decides first: the means (default), or `improvement`: A better when the lower end of P(A>B)'s "
        "interval is above --threshold, B when the upper end is below 1 - --threshold (Bouthillier et al. 2021)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="with --on improvement: the P(A>B) to exceed with confidence, in [0.5, 1) (default 0.75)",
    )
    add_output_arguments(p, "result")
    p.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    check_html(args)  # before any reading: the missing extra is one line
    # csv: text a spreadsheet would run is escaped, and said so at the end; errors may quote stored names
    with counted_escapes() as escaped, printable_errors(), output_to(args.output, out) as target:
        code = _compare(args, target, err)
    if note := escape_note(escaped.count):
        say(err, "note", note)
    return code


def _compare(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.answers.compare_notes import IMPROVEMENT_THRESHOLD
    from deviate_cb.report.answers.comparison import (
        COMPARE_COLUMNS,
        COMPARE_HUMAN,
        IMPROVEMENT_HUMAN,
        compare_groups,
    )
    from deviate_cb.report.reading.selection import select
    from deviate_cb.report.text.tables import render_records

    check_alpha(args.alpha)
    per_run_options(args)
    if not 0.0 < args.level < 1.0:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={args.level!r}.")
    if args.seed < 0:  # a bootstrap's seed
        raise UsageError(f"`--seed` must be a non-negative integer. Received: --seed={args.seed}.")
    if args.threshold is not None and args.on != "improvement":
        raise UsageError(f"`--threshold` goes with `--on improvement`. Received: --threshold={args.threshold!r}.")
    if args.threshold is not None and not 0.5 <= args.threshold < 1.0:
        raise UsageError(f"`--threshold` must be in [0.5, 1). Received: --threshold={args.threshold!r}.")
    sources = [*args.dirs, *args.table]
    if args.dirs and args.table:
        raise UsageError(f"give DIR or `--table`, not both. Received: DIR={args.dirs[0]!r}, --table={args.table[0]!r}.")
    if args.by is not None:
        return _compare_by(args, sources, out, err)
    if len(sources) not in (1, 2):
        what = "DIR" if args.dirs else "--table"
        raise UsageError(f"`compare` takes one or two sources ({what}). Received: {len(sources)}.")
    a_terms, b_terms = parse_terms(args, args.a, "--a"), parse_terms(args, args.b, "--b")
    warnings: list[str] = []
    if len(sources) == 1:
        if not a_terms or not b_terms:
            raise UsageError("with one source, both `--a` and `--b` are required. Received: " + _received(args))
        runs = load_runs(args, sources[0], warnings)
        group_a, group_b = select(runs, a_terms, "--a"), select(runs, b_terms, "--b")
        label_a = " ".join(f"{k}={v}" for k, v in a_terms)
        label_b = " ".join(f"{k}={v}" for k, v in b_terms)
        pooled_a = one_group(args, group_a, "--a", " ".join(f"--a {k}={v}" for k, v in a_terms))
        pooled_b = one_group(args, group_b, "--b", " ".join(f"--b {k}={v}" for k, v in b_terms))
    else:
        runs_a, runs_b = load_runs(args, sources[0], warnings), load_runs(args, sources[1], warnings)
        group_a = select(runs_a, a_terms, "--a") if a_terms else runs_a
        group_b = select(runs_b, b_terms, "--b") if b_terms else runs_b
        label_a, label_b = sources
        pooled_a, pooled_b = (
            one_group(
                args, group, option, " ".join([source, *(f"{option} {k}={v}" for k, v in terms)]),
                subject=f"group {name} ({source}) holds",
            )
            for group, option, source, terms, name in (
                (group_a, "--a", sources[0], a_terms, "A"), (group_b, "--b", sources[1], b_terms, "B")
            )
        )  # fmt: skip
    if not group_a or not group_b:
        raise UsageError(f"group {'A' if not group_a else 'B'} holds no completed run. Received: " + _received(args))
    say_pooled(err, "group A", pooled_a)
    say_pooled(err, "group B", pooled_b)
    for line in warnings:
        say(err, "warning", printable(line))
    if len(sources) == 1:
        warn_problems(args, [(sources[0], [*group_a, *group_b])], err)
    else:
        warn_problems(args, [(sources[0], group_a), (sources[1], group_b)], err)
    sequential = _sequential_note(sources, group_a, group_b) if args.dirs and len(sources) == 1 else None
    if sequential:
        say(err, "note", printable(sequential))
    correction = None if args.correction == "none" else args.correction
    threshold = None if args.on != "improvement" else (args.threshold or IMPROVEMENT_THRESHOLD)
    rows = compare_groups(
        group_a, group_b, alpha=args.alpha, correction=correction, level=args.level, seed=args.seed,
        directions=dict(args.direction), interest=args.metric or None, improvement_threshold=threshold,
        pool=args.pool,
    )  # fmt: skip
    for row in rows:  # the sequential note in every format: a JSON/CSV field, the HTML page's answers
        row["sequential_note"] = sequential
    human = {**IMPROVEMENT_HUMAN, **COMPARE_HUMAN} if threshold is not None else COMPARE_HUMAN
    for row in rows:
        if row["status"] == "skipped" and args.format in ("csv", "json"):
            say(err, "warning", printable(f"metric `{row['metric']}` not compared: {row['reason']}."))
    how = "" if args.table else f"  aggregate={args.aggregate}"
    title = (
        f"A: {label_a} ({len(group_a)} runs{pooled_words(pooled_a, '; ')})  vs  "
        f"B: {label_b} ({len(group_b)} runs{pooled_words(pooled_b, '; ')}){how}"
    )
    interest = sorted(r["metric"] for r in rows if r.get("family") == "interest")
    family = (
        f"the metrics named with --metric ({', '.join(interest)})"
        if args.metric
        else f"the metrics of interest ({', '.join(interest) or 'none'}: validation and test metrics, else all)"
    )
    notes: tuple[str, ...] = (
        f"diff: mean(A) - mean(B) with Welch's {args.level:.0%} t interval; p: Welch t, p adj: {args.correction} over "
        f"{family}, the other metrics corrected among themselves; d: Cohen's d and P(A>B): the share of pairs where "
        "A's run is higher, each with the interval that inverts Welch's test (it excludes 0, or 0.5, exactly when p <= "
        f"{1 - args.level:.2g}; normal runs assumed); std A/B: the spread ratio with the interval that inverts the "
        "Brown-Forsythe test, spread p adj its p corrected; ASO eps: epsilon_min of A over B in the metric's "
        "direction (a lower-is-better metric, from its name or --direction, is compared negated and marked "
        "(min); (max?): direction unknown, larger taken as better; < 0.2: A almost dominates, i.e. is better). "
        "Intervals are per metric, not corrected; a verdict's 'significant' uses the corrected p.",
    )
    if threshold is not None:
        notes = (
            f"improvement: A better when the lower end of P(A>B)'s {args.level:.0%} interval is above {threshold:g}, "
            f"B better when its upper end is below {1 - threshold:g} (P(A<B) for a lower-is-better metric; "
            "Bouthillier et al. 2021); wrong 'A better' at P(A>B) = 0.75 in simulation: 2-3% of studies.",
            *notes,
        )
    if args.format == "html":
        from deviate_cb.report.rendering.html.compare_page import compare_curves, compare_page

        curves: dict[str, list] = {}
        if args.dirs:  # the runs' directories are known: both groups' training curves
            unread: list[str] = []
            curves = compare_curves([("A", sources[0], group_a), ("B", sources[-1], group_b)], unread)
            for line in unseen(unread, warnings):  # a file the runs' reading warned about: warned once
                say(err, "warning", printable(line))
        page = compare_page(
            rows, group_a, group_b, label_a=label_a, label_b=label_b, title=title, notes=notes, human=human,
            curves=curves, level=args.level,
        )  # fmt: skip
        out.write(page)
        out.flush()
        return 0
    text = render_records(  # the verdicts under the table, one line each: a last column of a wide table wraps
        rows,
        COMPARE_COLUMNS,
        args.format,
        title=title,
        human=human,
        notes=notes,
        file=out,
        below=("improvement", "means", "spread"),
    )
    out.write(text + ("\n" if args.format == "json" else ""))
    out.flush()
    return 0


def _sequential_note(sources: Sequence[str], group_a: Sequence[Any], group_b: Sequence[Any]) -> Optional[str]:
    """The note for two groups replicated until decided (``deviate-replicate --until-decided``), if they were."""
    from pathlib import Path

    from deviate_cb.report.answers.sequential import compare_note, study_sequences

    groups = [{(r.keys.get("experiment"), r.keys.get("variant")) for r in g} for g in (group_a, group_b)]
    if any(len(g) != 1 for g in groups):
        return None
    (a,), (b,) = groups
    records = study_sequences(Path(sources[0]))
    return compare_note(records, {"experiment": a[0], "variant": a[1]}, {"experiment": b[0], "variant": b[1]})


def _compare_by(args: argparse.Namespace, sources: list[str], out: IO[str], err: IO[str]) -> int:
    """``compare DIR --by KEY``: the k groups of one key's values, ranked per metric by multi-group ASO."""
    from deviate_cb.report.answers.ranking import RANKING_COLUMNS, pair_rows, rank_metrics, split_by, write_rankings
    from deviate_cb.report.text.tables import render_records

    if args.a or args.b:
        raise UsageError(f"give `--by` or `--a`/`--b`, not both. Received: --by={args.by}, {_received(args)}")
    if len(sources) != 1:
        raise UsageError(f"`--by` takes one source (DIR or --table). Received: {len(sources)}.")
    warnings: list[str] = []
    runs = load_runs(args, sources[0], warnings)
    groups = split_by(runs, args.by)
    pooled = {}
    for name, group in groups:  # each group one configuration: a key other than experiment/variant pools them
        words = one_group(
            args, group, "--by", f"--by {args.by}", subject=f"`--by {args.by}` group {name} holds",
            fix=f"Rank one configuration per group (--by {args.by},{{key}}; {{key}}: {{values}})",
        )  # fmt: skip
        if words:
            pooled[name] = words
    for line in warnings:
        say(err, "warning", printable(line))
    for name, words in pooled.items():
        say_pooled(err, f"group {name}", words)
    warn_problems(args, [(sources[0], runs)], err)
    rankings = rank_metrics(
        groups, alpha=args.alpha, seed=args.seed, directions=dict(args.direction), pool=args.pool
    )  # fmt: skip
    if args.format in ("csv", "json"):
        for ranked in rankings:
            if ranked.result is None:
                say(err, "warning", printable(f"metric `{ranked.metric}` not compared: {ranked.reason}."))
        out.write(render_records(pair_rows(rankings), RANKING_COLUMNS, args.format))
        out.write("\n" if args.format == "json" else "")
        out.flush()
        return 0
    how = "" if args.table else f"  aggregate={args.aggregate}"
    names = ", ".join(
        f"{name} ({len(group)} run{'s' if len(group) != 1 else ''}{pooled_words(pooled.get(name, ''), '; ')})"
        for name, group in groups
    )
    if args.format == "html":  # the ranking per metric and each metric's eps_min matrix as a heatmap
        from deviate_cb.report.rendering.html.ranking_page import ranking_page

        out.write(ranking_page(rankings, title=f"Almost Stochastic Order by {args.by}: {names}{how}", key=args.by))
        out.flush()
        return 0
    write_rankings(rankings, args.format, out, title=f"Almost Stochastic Order by {args.by}: {names}{how}")
    return 0


def _received(args: argparse.Namespace) -> str:
    return f"--a={args.a!r}, --b={args.b!r}."
