"""The stability section as Markdown (``md``) or terminal (``table``) text: one block per group.

Example:
    >>> import sys
    >>> from deviate_cb.report.answers.stability.build import StabilityGroup
    >>> group = StabilityGroup(
    ...     "mlp", "algo", n_runs=3, n_samples=4, task="regression",
    ...     regression={"value_std_mean": 0.25, "value_std_max": 0.5},
    ... )
    >>> write_stability([group], "table", sys.stdout)
    Stability: experiment=mlp variant=algo
    3 runs with predictions (snapshot final, 4 samples, regression).
      per-sample std of predictions  mean 0.25, max 0.5
    <BLANKLINE>
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from deviate_cb.report.answers.stability.rows import shown_per_class, shown_subgroup_rows
from deviate_cb.report.text.safe import printable

if TYPE_CHECKING:
    from deviate_cb.report.answers.stability.build import StabilityGroup
    from deviate_cb.stats.stability.groups import PerClassAccuracy

__all__ = ["write_stability"]


def write_stability(groups: Sequence[StabilityGroup], fmt: str, out: IO[str], top: int = 10) -> None:
    """Write the stability section as Markdown (``md``) or terminal tables (``table``) to ``out``."""
    from deviate_cb.report.text.tables import render_records

    for g in groups:
        title = printable(f"Stability: experiment={g.experiment} variant={g.variant}")
        if fmt == "md":
            out.write(f"\n## {title}\n\n{_headline(g)}\n\n")
        summary = _summary(g)
        if fmt == "md":
            out.write(render_records(summary, ("measure", "value"), "md"))
        else:
            from deviate_cb.report.text.terminal import terminal_width, wrap_lines

            columns = terminal_width(out)  # every line wraps at the width, continued under the value
            lines = [*wrap_lines(title, columns, indent="  "), *wrap_lines(_headline(g), columns, indent="  ")]
            width = max(len(r["measure"]) for r in summary) if summary else 0
            for r in summary:
                first = f"  {r['measure']:<{width}}  "
                lines += wrap_lines(str(r["value"]), columns, first=first, indent=" " * min(len(first), 24))
            out.write("".join(f"{line}\n" for line in lines))
        for name, sg in g.subgroups.items():
            sub_title = printable(
                f"Sub-groups by {name} (FPR, FNR: positive class {sg.positive}; ratio: std / overall-accuracy std)"
            )
            out.write(f"\n### {sub_title}\n\n" if fmt == "md" else "\n")
            out.write(
                render_records(
                    shown_subgroup_rows(sg.rows),
                    tuple(_SUBGROUP_CELLS),
                    fmt,
                    human=_SUBGROUP_CELLS,
                    file=out,
                    title="" if fmt == "md" else sub_title,
                )
            )
        if g.instability is not None and g.instability.n_unstable:
            top_title = f"Top-{top} unstable samples (flip rate: share of runs that disagree with the majority)"
            out.write(f"\n### {top_title}\n\n" if fmt == "md" else "\n")
            rows = [r for r in g.instability.top(top) if r["flip_rate"] > 0]
            out.write(render_records(rows, tuple(rows[0]), fmt, file=out, title="" if fmt == "md" else top_title))
        if fmt == "table":
            out.write("\n")


def _headline(g: StabilityGroup) -> str:
    parts = []
    if g.n_runs:
        parts.append(f"{g.n_runs} runs with predictions (snapshot {g.snapshot}, {g.n_samples} samples, {g.task})")
    if g.n_weight_runs:
        parts.append(f"{g.n_weight_runs} runs with weights")
    return printable("; ".join(parts + list(g.notes)) + ".")


def _per_class_text(p: PerClassAccuracy) -> str:
    classes = f"{len(p.classes)} classes"
    shown = shown_per_class(p)  # residue of a mean of equal values shown as the 0 it is
    if math.isnan(shown.ratio):
        return f"std {_f(shown.max_std)} in every class ({classes})"
    ratio = (
        "the overall-accuracy std is 0" if math.isinf(shown.ratio) else f"{shown.ratio:.3g}x the overall-accuracy std"
    )
    return f"largest std {_f(shown.max_std)} (class {shown.worst_class}): {ratio} ({classes})"


def _f(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def _summary(g: StabilityGroup) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if g.churn is not None:
        c = g.churn
        rows.append(
            {
                "measure": "churn (pairwise disagreement)",
                "value": f"mean {_f(c.mean)}, std {_f(c.std)} over {c.n_pairs} pairs (min {_f(c.min)}, "
                f"max {_f(c.max)})",
            }
        )
        a = c.majority_agreement
        rows.append(
            {
                "measure": "agreement with the majority vote",
                "value": f"mean {_f(float(a.mean()))} (min {_f(float(a.min()))})",
            }
        )
    if g.per_class is not None:
        p = g.per_class
        std = shown_per_class(p).overall_std
        rows.append({"measure": "accuracy", "value": f"mean {_f(float(p.overall.mean()))}, std {_f(std)}"})
        rows.append({"measure": "per-class accuracy", "value": _per_class_text(p)})
    if g.sampling is not None:
        rows.append({"measure": "test-set sampling spread", "value": g.sampling.sentence()})
    if g.instability is not None:
        inst = g.instability
        rows.append(
            {"measure": "unstable samples", "value": f"{inst.n_unstable} of {g.n_samples} flip in at least one run"}
        )
    if g.regression is not None:
        reg = g.regression
        rows.append(
            {
                "measure": "per-sample std of predictions",
                "value": f"mean {_f(reg['value_std_mean'])}, max {_f(reg['value_std_max'])}",
            }
        )
        if "rmse_mean" in reg:
            rows.append({"measure": "rmse", "value": f"mean {_f(reg['rmse_mean'])}, std {_f(reg['rmse_std'])}"})
    if g.weights is not None:
        w = g.weights
        value = f"mean {_f(w.mean)}, std {_f(w.std)} (min {_f(w.min)}, max {_f(w.max)})"
        if w.method == "sketch" and not w.epsilon < 1.0:  # too few dimensions for a Johnson-Lindenstrauss bound
            value += f"; sketch estimate (k={w.sketch_dim}): too small a sketch to bound its error"
        elif w.method == "sketch":
            value += (
                f"; sketch estimate (k={w.sketch_dim}): each pair's exact distance lies in "
                f"x{_f(1 / math.sqrt(1 + w.epsilon))}..x{_f(1 / math.sqrt(1 - w.epsilon))} of its estimate "
                f"with probability >= {1 - w.delta:g}"
            )
        else:
            value += "; exact"
        rows.append({"measure": "normalized weight distance", "value": value})
    return rows


_SUBGROUP_CELLS = {
    "group": lambda r: str(r["group"]),
    "n": lambda r: str(r["n_samples"]),
    "accuracy": lambda r: _f(r["accuracy_mean"]),
    "acc std": lambda r: _f(r["accuracy_std"]),
    "acc ratio": lambda r: _f(r["accuracy_ratio"]),
    "FPR": lambda r: _f(r["fpr_mean"]),
    "FPR std": lambda r: _f(r["fpr_std"]),
    "FPR ratio": lambda r: _f(r["fpr_ratio"]),
    "FNR": lambda r: _f(r["fnr_mean"]),
    "FNR std": lambda r: _f(r["fnr_std"]),
    "FNR ratio": lambda r: _f(r["fnr_ratio"]),
}
