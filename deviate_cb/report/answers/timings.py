"""The step-time spread across the replicas of each group, and the ops that took the time.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> from deviate_cb.report.reading.runs import find_runs
    >>> from deviate_cb.store.timings import write_timings
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, seconds in enumerate([0.010, 0.012]):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     steps = [{"stage": "train", "epoch": 0, "step": s, "wall_s": seconds, "profiled": False} for s in range(4)]
    ...     _ = write_timings(run.path, steps, [])
    >>> (group,) = build_timings(find_runs(root))
    >>> group.n_runs, round(group.slowest_over_fastest_pct, 1)
    (2, 20.0)
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Optional

from deviate_cb.report.answers.contention import contention_caveats
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.report.text.safe import percent, printable, reason
from deviate_cb.store.manifest import RunManifest

__all__ = ["TIMING_COLUMNS", "TimingGroup", "build_timings", "timing_rows", "write_timings_section"]

# What the step statistics read; a file without them is not a timings file (op rows are read where present).
_NEEDED = ("kind", "stage", "wall_s", "profiled")
TIMING_COLUMNS = (
    "experiment",
    "variant",
    "n_runs",
    "steps_per_run",
    "median_step_s_mean",
    "median_step_s_std",
    "cv",
    "median_step_s_min",
    "median_step_s_max",
    "slowest_over_fastest_pct",
)


@dataclass(frozen=True)
class TimingGroup:
    """The step times of the runs of one (experiment, variant) group.

    Attributes:
        medians: Each run's median training step time in seconds (unprofiled steps), by replica.
        top_ops: The ops with the most self time, mean per profiled run: dicts with ``op`` (the portable name,
            :func:`~deviate_cb.profiling.ops.canonical_op`), ``raw_ops`` (the names as recorded, sorted),
            ``device_type``, ``calls``, ``self_ms`` (per run), ``share`` (of the self time of all ops of that device).
        caveats: One line per reason the spread may be the machine's rather than the model's (replicas that ran
            at once on fewer cores, a busy machine: :func:`~deviate_cb.report.answers.contention.contention_caveats`).
    """

    experiment: str
    variant: str
    medians: dict[str, float]
    steps_per_run: float
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    profiled_runs: int = 0
    caveats: tuple[str, ...] = ()

    @property
    def n_runs(self) -> int:
        return len(self.medians)

    @property
    def slowest_over_fastest_pct(self) -> float:
        """How much longer the slowest run's median step took than the fastest's, in percent."""
        values = list(self.medians.values())
        return (max(values) / min(values) - 1.0) * 100.0 if values and min(values) > 0 else math.nan

    def row(self) -> dict[str, Any]:
        values = list(self.medians.values())
        mean = statistics.fmean(values)
        std = statistics.stdev(values) if len(values) > 1 else math.nan
        return {
            "experiment": self.experiment,
            "variant": self.variant,
            "n_runs": self.n_runs,
            "steps_per_run": self.steps_per_run,
            "median_step_s_mean": mean,
            "median_step_s_std": std,
            "cv": std / mean if mean else math.nan,
            "median_step_s_min": min(values),
            "median_step_s_max": max(values),
            "slowest_over_fastest_pct": self.slowest_over_fastest_pct,
        }


def build_timings(
    runs: Sequence[RunRecord], *, stage: str = "train", top: int = 10, warnings: Optional[list[str]] = None
) -> list[TimingGroup]:
    """Per (experiment, variant): the completed runs' step times and top ops, from their ``timings.parquet``.

    Args:
        runs: The runs (those not completed, and those without step times of ``stage``, are left out).
        stage: Whose steps: ``train`` (the callbacks time training steps).
        top: How many ops to keep per group.
        warnings: Where to append one line per ``timings.parquet`` that is left out (unreadable, or not a
            timings file); the other runs are reported.
    """
    from deviate_cb.capture.step_timer import step_statistics
    from deviate_cb.profiling.ops import top_ops
    from deviate_cb.store.timings import TIMINGS_FILE, read_timings

    timed = [r for r in runs if r.completed and os.path.isfile(os.path.join(r.path, TIMINGS_FILE))]
    if not timed:
        return []  # without loading pyarrow
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = warnings if warnings is not None else []
    manifests = _manifests(runs)  # where and when every run ran, beside the timed ones
    per_group: dict[tuple[str, str], dict[str, Any]] = {}
    for run in timed:
        path = run.path / TIMINGS_FILE
        try:
            missing = [c for c in _NEEDED if c not in pq.read_schema(path).names]  # the footer only
            if missing:
                sink.append(f"{path}: not a timings file (no column {', '.join(missing)}); skipped.")
                continue
            rows = read_timings(run.path).to_pylist()
            steps = [r for r in rows if r["kind"] == "step" and r["stage"] == stage]
            summary = step_statistics(steps).get(stage)
        except (OSError, pa.ArrowException, ValueError, TypeError) as exc:  # damaged, or rows without a wall time
            sink.append(f"{path}: unreadable ({reason(exc, path).rstrip('.')}); skipped.")
            continue
        if not summary or not summary["steps"]:
            continue
        group = per_group.setdefault(
            (run.experiment, run.variant), {"medians": {}, "steps": [], "ops": [], "n": 0, "paths": {}}
        )
        group["medians"][run.replica] = summary["median_s"]
        group["paths"][run.replica] = run.path
        group["steps"].append(summary["steps"])
        ops = [r for r in rows if r["kind"] == "op"]
        group["ops"] += ops
        group["n"] += bool(ops)
    groups = []
    for (experiment, variant), g in sorted(per_group.items()):
        # Summed over the group's windows, op by op (portable names) on each device, by profiling.ops.top_ops.
        per_device = [
            total
            for device in sorted({r["device_type"] for r in g["ops"]})
            for total in top_ops(g["ops"], n=len(g["ops"]), device_type=device)
        ]
        device_total: dict[str, float] = {}
        for total in per_device:
            device_total[total["device_type"]] = device_total.get(total["device_type"], 0.0) + total["self_time_us"]
        ranked = sorted(per_device, key=lambda t: (-t["self_time_us"], t["op"], t["device_type"]))[:top]
        ops_per_run = [
            {
                "op": t["op"],
                "raw_ops": t["raw_ops"],
                "device_type": t["device_type"],
                "calls": t["calls"] / g["n"],
                "self_ms": t["self_time_us"] / g["n"] / 1e3,
                "share": _share(t["self_time_us"], device_total[t["device_type"]]),
            }
            for t in ranked
        ]
        empty = RunManifest.from_json({})
        timed_here = {replica: manifests.get(path, empty) for replica, path in g["paths"].items()}
        mine = set(g["paths"].values())
        others = [m for path, m in manifests.items() if path not in mine]
        caveats = tuple(contention_caveats(experiment, variant, timed_here, others))
        steps_per_run = statistics.fmean(g["steps"])
        groups.append(TimingGroup(experiment, variant, g["medians"], steps_per_run, ops_per_run, g["n"], caveats))
    return groups


def _manifests(runs: Sequence[RunRecord]) -> dict[Any, RunManifest]:
    """Each run's manifest by run directory; one that cannot be read (the report warned already) is left out."""
    from deviate_cb.errors import UsageError
    from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

    found = {}
    for run in runs:
        try:
            found[run.path] = read_run_manifest(os.path.join(run.path, MANIFEST_FILE))
        except (OSError, ValueError, UsageError):  # unreadable, or from a newer deviate-cb: no caveat from it
            continue
    return found


def _share(part: float, whole: float) -> float:
    return part / whole if whole else math.nan


def timing_rows(groups: Sequence[TimingGroup]) -> list[dict[str, Any]]:
    """One row per group with the keys of :data:`TIMING_COLUMNS` (for csv and json)."""
    return [g.row() for g in groups]


_STEP_CELLS = {
    "experiment": lambda r: r["experiment"],
    "variant": lambda r: r["variant"],
    "runs": lambda r: str(r["n_runs"]),
    "median step s (mean)": lambda r: _fmt(r["median_step_s_mean"]),
    "std": lambda r: _fmt(r["median_step_s_std"]),
    "cv": lambda r: percent(r["cv"]),
    "fastest": lambda r: _fmt(r["median_step_s_min"]),
    "slowest": lambda r: _fmt(r["median_step_s_max"]),
    "slowest vs fastest": lambda r: percent(r["slowest_over_fastest_pct"] / 100.0, sign=True),
}
_OP_CELLS = {
    "op": lambda r: r["op"],
    "device": lambda r: r["device_type"],
    "calls/run": lambda r: _fmt(r["calls"]),
    "self ms/run": lambda r: _fmt(r["self_ms"]),
    "share of device time": lambda r: "" if math.isnan(r["share"]) else f"{r['share']:.1%}",
}
_RAW_OPS_CELL = {"recorded as": lambda r: ", ".join(r["raw_ops"])}


def write_timings_section(groups: Sequence[TimingGroup], fmt: str, out: IO[str]) -> None:
    """Write the step-time section as Markdown (``md``) or terminal tables (``table``) to ``out``."""
    from deviate_cb.report.text.tables import render_records

    if not groups:
        return
    title = "Step time across replicas (each run's median training step; profiled steps left out)"
    out.write(f"\n## {title}\n\n" if fmt == "md" else "\n")
    rows = timing_rows(groups)
    out.write(render_records(rows, TIMING_COLUMNS, fmt, human=_STEP_CELLS, file=out, title=title, keep=2))
    _write_caveats([line for g in groups for line in g.caveats], fmt, out)
    for g in groups:
        if g.top_ops:
            heading = printable(
                f"Top ops by self time: experiment={g.experiment} variant={g.variant} ({g.profiled_runs} profiled)"
            )
            out.write(f"\n### {heading}\n\n" if fmt == "md" else "\n")
            columns: tuple[str, ...] = ("op", "device_type", "calls", "self_ms", "share")
            human = _OP_CELLS
            if any(t["raw_ops"] != [t["op"]] for t in g.top_ops):  # recorded under other names (oneDNN, fusion)
                columns, human = (*columns, "raw_ops"), {**_OP_CELLS, **_RAW_OPS_CELL}
            out.write(render_records(g.top_ops, columns, fmt, human=human, file=out, title=heading))


def _write_caveats(lines: Sequence[str], fmt: str, out: IO[str]) -> None:
    """The caveats under the step-time table: one unwrapped line each (``caveat: ...``), a list in Markdown."""
    if not lines:
        return
    if fmt == "md":
        out.write("\n" + "".join(f"- **caveat**: {printable(line)}\n" for line in lines))
        return
    from deviate_cb.report.text.terminal import make_console, print_wrapped

    console = make_console(out)
    for line in lines:  # wrapped at the terminal's width, continued under the text
        print_wrapped(console, printable(line), first="caveat: ", indent="  ", style="yellow")


def _fmt(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.4g}"
