"""The report from Python and notebooks: :func:`load` a study and get the same answers as ``deviate report``.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.manifest import LaunchEnd, LaunchStart
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for variant, values in (("control", [0.9, 0.9, 0.9]), ("algo", [0.88, 0.91, 0.9, 0.89])):
    ...     for k, acc in enumerate(values):
    ...         run = RunDirectory(run_path(root, "mlp", variant, k))
    ...         _ = run.record(LaunchStart(variant=variant), LaunchEnd(status="completed"))
    ...         _ = run.metrics().append({"step": [9], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                                   "name": ["val_acc"], "value": [acc], "wall_time": [0.0]})
    >>> study = load(root)
    >>> print(study.headlines[0].sentences[0])
    control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs.
    >>> study.tables()["groups"].num_rows
    2
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.report.answers.headline import build_headlines
from deviate_cb.report.answers.records import Effect, Headline, parse_effect
from deviate_cb.report.answers.summary import Report, build_report

__all__ = ["Study", "load", "page_height"]


def load(
    directory: Union[str, os.PathLike[str]],
    *,
    aggregate: str = "last",
    directions: Optional[Mapping[str, str]] = None,
    metrics: Optional[Sequence[str]] = None,
    stage: Optional[str] = None,
    level: float = 0.95,
    seed: int = 0,
    iqm: bool = False,
    effect: Union[str, float, Effect, None] = None,
) -> Study:
    """Read the study under ``directory`` as ``deviate report`` does (the same options, the same numbers).

    Args:
        directory: A study directory, or an ``experiment=``/``variant=`` folder inside one.
        aggregate: Per-run value: ``last``, ``best`` or ``mean``.
        directions: Metric name -> ``max``/``min`` for ``best``.
        metrics: fnmatch patterns of the metrics to report (and to answer for).
        stage: Only this stage (``train``, ``val``, ``test``, ``final``).
        level: Confidence level of every interval.
        seed: Seed of the bootstraps (reports are reproducible).
        iqm: Also the interquartile mean across runs with its interval.
        effect: The smallest difference worth reporting, for the runs-needed answer: a number in the metric's
            units, a percentage string such as ``"1%"`` (the default), or an :class:`Effect`.

    Raises:
        UsageError: A bad argument, a directory without runs, or a filter that matches nothing.
    """
    from deviate_cb.report.answers.problems import find_problems

    chosen = effect if isinstance(effect, Effect) else parse_effect(effect)
    report = build_report(
        Path(os.fspath(directory)),
        aggregate=aggregate,
        directions=directions,
        metrics=metrics,
        stage=stage,
        level=level,
        decompose=True,
        seed=seed,
        iqm=iqm,
    )
    problems = find_problems(report.completed, rows=report.rows)
    return Study(os.fspath(directory), report, tuple(problems), chosen, tuple(metrics or ()))


@dataclass
class Study:
    """One study as the report reads it (see the module docstring); build it with :func:`load`.

    Attributes:
        source: The directory read.
        report: The per-group statistics, decomposition and runs (:class:`~deviate_cb.report.answers.summary.Report`).
        problems: What the numbers alone hide (:class:`~deviate_cb.report.answers.findings.Problem`).
        effect: The smallest difference worth reporting.
        metrics: The metric patterns asked for (empty: the report's choice).
        warnings: Everything met on the way that a command would print as a warning.
    """

    source: str
    report: Report
    problems: tuple[Any, ...] = ()
    effect: Effect = field(default_factory=Effect)
    metrics: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.warnings[:0] = list(self.report.warnings)

    @cached_property
    def headlines(self) -> list[Headline]:
        """The answers, per experiment and metric of interest (:mod:`deviate_cb.report.answers.headline`)."""
        return build_headlines(self.report, problems=self.problems, metrics=self.metrics or None, effect=self.effect)

    @cached_property
    def sequences(self) -> list[dict[str, Any]]:
        """The decisions of the groups replicated in rounds (``deviate-replicate --until-decided`` or
        ``--until-precision``), with their numbers: :func:`~deviate_cb.report.answers.sequential.sequential_answers`."""
        from deviate_cb.report.answers.sequential import study_answers

        return study_answers(self.source)

    @property
    def sequence_lines(self) -> list[str]:
        """:attr:`sequences` as the lines of the report's "Replicated until decided" section."""
        return [line for answer in self.sequences for line in answer["sentences"]]

    @cached_property
    def stability(self) -> list[Any]:
        """The stability groups (empty when no run saved predictions or weights)."""
        from deviate_cb.report.answers.stability.build import build_stability

        return build_stability(self.source, warnings=self.warnings, runs=self.report.completed)

    @cached_property
    def timings(self) -> list[Any]:
        """The step-time groups (empty when no run timed its steps)."""
        from deviate_cb.report.answers.timings import build_timings

        return build_timings(self.report.completed, warnings=self.warnings)

    def tables(self) -> dict[str, Any]:
        """The tables as ``pyarrow.Table``: ``groups`` (per group and metric), ``headline`` (one row per answer),
        ``decomposition``, ``excluded`` (runs left out, with why), ``timings`` and ``problems``; ``headline`` opens
        with the sequential decisions (kind ``sequential``), as the report does."""
        import pyarrow as pa

        from deviate_cb.report.answers.decomposition import DECOMPOSITION_COLUMNS
        from deviate_cb.report.answers.records import HEADLINE_COLUMNS
        from deviate_cb.report.answers.sequential import answer_record
        from deviate_cb.report.answers.summary import COLUMNS, IQM_COLUMNS
        from deviate_cb.report.answers.timings import TIMING_COLUMNS, timing_rows
        from deviate_cb.report.reading.loading import excluded_line

        iqm = any(row.iqm is not None for row in self.report.rows)
        excluded = [
            {"experiment": r.experiment, "variant": r.variant, "replica": str(r.replica), "status": r.status,
             "why": excluded_line(r)}
            for r in self.report.excluded
        ]  # fmt: skip
        # groups: every group a problem touches (one cause, such as a path written by two experiments, is one row)
        problems = [
            {"experiment": p.experiment, "variant": p.variant, "kind": p.kind, "replicas": list(p.replicas),
             "message": p.line(), "groups": [{**vars(g), "replicas": list(g.replicas)} for g in p.groups]}
            for p in self.problems
        ]  # fmt: skip
        answers = [r for h in self.headlines for r in h.records()]
        return {
            "groups": _table(pa, [r.as_dict() for r in self.report.rows], COLUMNS + (IQM_COLUMNS if iqm else ())),
            "headline": _table(pa, [*map(answer_record, self.sequences), *answers], HEADLINE_COLUMNS),
            "decomposition": _table(pa, [d.as_dict() for d in self.report.decomposition], DECOMPOSITION_COLUMNS),
            "excluded": _table(pa, excluded, ("experiment", "variant", "replica", "status", "why")),
            "timings": _table(pa, timing_rows(self.timings), TIMING_COLUMNS),
            "problems": _table(pa, problems, ("experiment", "variant", "kind", "replicas", "message", "groups")),
        }

    def text(self, width: int = 100) -> str:
        """The terminal report (the sequential decisions, the answers, tables, problems, runs left out), ``width``
        columns wide: what ``deviate report`` prints before its step-time and stability sections."""
        import io

        from deviate_cb.report.answers.sequential import write_sequences
        from deviate_cb.report.rendering.formats import print_table

        buffer = io.StringIO()
        write_sequences(self.sequence_lines, buffer, width=width)
        print_table(self.report, buffer, width=width, problems=self.problems, headlines=self.headlines)
        return buffer.getvalue()

    def html(self) -> str:
        """The page of ``deviate report --format html`` (needs matplotlib: the ``report`` extra); drawn once."""
        return self._page

    @cached_property
    def _page(self) -> str:
        from deviate_cb.report.rendering.html.build import study_page

        return study_page(self)

    def figures(self) -> dict[str, str]:
        """The page's figures, keyed by what each shows (``"distribution of val_acc per run (experiment mlp)"``),
        each an inline SVG or PNG: the fragments of :meth:`html`."""
        from deviate_cb.report.rendering.html.build import page_figures

        return page_figures(self.html())

    def _repr_html_(self) -> str:
        """Jupyter: the HTML page, in a frame of its own (its styles stay out of the notebook's) as high as the page.

        The frame's ``onload`` sets its height to the page's and keeps it so when the notebook's width reflows it;
        where the notebook runs no handler (an untrusted notebook), the frame starts at :func:`page_height`, an
        estimate at least as high as the page, so no figure is cut either way. The page runs no script of its own
        (``sandbox``); ``allow-same-origin`` lets the notebook read its height.
        """
        page = self.html()
        return (
            f'<iframe srcdoc="{html.escape(page, quote=True)}" title="deviate-cb report" sandbox="allow-same-origin" '
            f'style="width: 100%; height: {page_height(page)}px; border: 0; display: block" scrolling="no" '
            f'onload="{html.escape(_FIT, quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        groups = len(self.report.groups)
        return f"Study({self.source!r}: {self.report.n_runs} runs in {groups} groups, {len(self.headlines)} answers)"


# The frame's onload, run by the notebook: the page's height, again whenever the page reflows (a resized notebook)
_FIT = (
    "var frame = this, page = frame.contentDocument; if (!page) return; "
    "var fit = function () { frame.style.height = Math.ceil(page.documentElement.getBoundingClientRect().height) "
    "+ 'px'; }; fit(); if (window.ResizeObserver) new ResizeObserver(fit).observe(page.documentElement);"
)
_SVG = re.compile(r"<svg\b[^>]*?\bheight=\"([0-9.]+)(pt|px)?\"", re.S)
_PNG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/]{32})')
_BLOCK = re.compile(r"<(?:p|li|tr|h[1-6]|figcaption|pre|summary)\b")
_LINE_PX, _PAGE_PX = 64, 240  # a block of text (a wrapped paragraph, a row, a heading), the margins and title


def page_height(page: str) -> int:
    """A height in CSS pixels that holds ``page`` in a frame of a notebook's width: every figure one below the
    other (SVG heights in pt or px, PNG heights from their header) and every block of text (a paragraph, a list
    item, a table row, a heading, a caption) at about three lines.

    Example:
        >>> page_height('<h1>t</h1><svg width="10pt" height="150pt"></svg><p>a</p>')
        568
    """
    figures = 0.0
    for height, unit in _SVG.findall(page):
        figures += float(height) * (4 / 3 if unit == "pt" else 1.0)
    for head in _PNG.findall(page):
        raw = base64.b64decode(head)
        figures += int.from_bytes(raw[20:24], "big") if raw[12:16] == b"IHDR" else 480
    text = _BLOCK.findall(re.sub(r"<svg\b.*?</svg>", "", page, flags=re.S))
    return int(_PAGE_PX + figures + _LINE_PX * len(text))


def _table(pa: Any, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Any:
    """An Arrow table of ``columns`` (all present even with no rows); NaN stays NaN in float columns."""
    if not rows:
        return pa.table({c: pa.array([], type=pa.null()) for c in columns})
    return pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows])
