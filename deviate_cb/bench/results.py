"""Results of ``deviate bench``: one :class:`BenchResult` per model, as a table, JSON, and rows in the run store.

Example:
    >>> result = BenchResult(model="small_cnn", framework="torch", device="cpu", device_note="no CUDA",
    ...     windows=[{"window": 0, "mode": "off", "steps": 2, "step_s": 0.01},
    ...              {"window": 0, "mode": "on", "steps": 2, "step_s": 0.012}],
    ...     ratios=[1.2], ops=[], settings={"batch_size": 8})
    >>> round(result.ci.median, 2), round(result.steps_per_s("off"), 1)
    (1.2, 100.0)
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional

from deviate_cb.bench.stats import RatioCI, median_ratio_ci, op_differences

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BENCH_FILE", "BenchResult", "bench_schema", "print_table", "to_json", "write_results"]

BENCH_FILE = "bench.parquet"


@dataclass
class BenchResult:
    """The determinism overhead of one model on one device.

    Attributes:
        model: Built-in model name, or the ``--trainer`` spec.
        framework: ``torch`` or ``keras-tensorflow``.
        device: ``cpu``, ``cuda`` (torch) or ``gpu`` (TensorFlow).
        device_note: Why it ran on CPU, when it did.
        windows: One row per timed window: ``window``, ``mode`` (off/on), ``steps``, ``step_s`` (median).
        ratios: One on/off ratio of median step times per window pair.
        ops: Per mode and op: ``op`` (as recorded), ``device_type``, ``calls``, ``self_us_per_step``,
            ``total_us_per_step``.
        settings: Windows, steps per window, batch size, ...
        level: Confidence level of the ratio's interval.
    """

    model: str
    framework: str
    device: str
    device_note: Optional[str]
    windows: list[dict[str, Any]]
    ratios: list[float]
    ops: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)
    level: float = 0.95

    @property
    def ci(self) -> RatioCI:
        return median_ratio_ci(self.ratios, self.level)

    def steps_per_s(self, mode: str) -> float:
        """Steps per second in a mode: one over the median of its windows' median step times."""
        return 1.0 / statistics.median(w["step_s"] for w in self.windows if w["mode"] == mode)

    def op_differences(self, n: int = 5) -> list[dict[str, Any]]:
        """The ops that changed most between off and on, under their portable names (``raw_ops``: as recorded)."""
        off = [o for o in self.ops if o["mode"] == "off"]
        on = [o for o in self.ops if o["mode"] == "on"]
        source = "tensorflow" if self.framework == "keras-tensorflow" else "torch"
        return op_differences(off, on, n, source=source) if off and on else []

    def summary(self) -> dict[str, Any]:
        """Everything but the per-window and per-op rows, JSON-ready."""
        return {
            "model": self.model,
            "framework": self.framework,
            "device": self.device,
            "device_note": self.device_note,
            "steps_per_s_off": self.steps_per_s("off"),
            "steps_per_s_on": self.steps_per_s("on"),
            "ratio": self.ci.to_dict(),
            "ratios": self.ratios,
            "top_op_differences": self.op_differences(),
            "settings": self.settings,
        }


def to_json(results: list[BenchResult]) -> str:
    """The results as JSON: per model the summary, the windows and the op rows."""
    return json.dumps([{**r.summary(), "windows": r.windows, "ops": r.ops} for r in results], indent=2, default=str)


def print_table(results: list[BenchResult], out: IO[str]) -> None:
    """A rich table: steps/s off and on, the median on/off ratio with its CI, the ops that changed most."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=None if out.isatty() else 140, soft_wrap=False)
    for note in sorted({r.device_note for r in results if r.device_note}):
        console.print(f"Running on CPU: {note}. On a GPU the overhead comes from deterministic CUDA kernels.")
    table = Table(title="deviate bench: determinism overhead (on/off)", box=box.SIMPLE_HEAD)
    for column in ("model", "framework", "device", "steps/s off", "steps/s on", "ratio on/off", "CI", "pairs"):
        table.add_column(column, justify="right" if column.startswith(("steps", "ratio", "pairs")) else "left")
    table.add_column("ops changing most (self µs/step, on - off)", overflow="fold")
    for r in results:
        ci = r.ci
        ops = ", ".join(f"{d['op']} {d['delta_us']:+.0f}" for d in r.op_differences(3)) or "-"
        table.add_row(
            r.model,
            r.framework,
            r.device,
            f"{r.steps_per_s('off'):.2f}",
            f"{r.steps_per_s('on'):.2f}",
            f"{ci.median:.3f}",
            f"[{ci.low:.3f}, {ci.high:.3f}] ({ci.level:.0%})",
            str(ci.n),
            ops,
        )
    console.print(table)


def bench_schema() -> pa.Schema:
    """Columns of ``bench.parquet``: ``kind`` (window|op), model, framework, device, window, mode, steps, step_s,
    steps_per_s (window rows), op, device_type, calls, self_us_per_step, total_us_per_step (op rows)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("kind", pa.string()),
            ("model", pa.string()),
            ("framework", pa.string()),
            ("device", pa.string()),
            ("window", pa.int64()),
            ("mode", pa.string()),
            ("steps", pa.int64()),
            ("step_s", pa.float64()),
            ("steps_per_s", pa.float64()),
            ("op", pa.string()),
            ("device_type", pa.string()),
            ("calls", pa.int64()),
            ("self_us_per_step", pa.float64()),
            ("total_us_per_step", pa.float64()),
        ]
    )


def write_results(out: Path, results: list[BenchResult], *, argv: Optional[list[str]] = None) -> list[Path]:
    """Write each result as a new replica of ``experiment=bench/variant=<model>``; return the run directories."""
    import pyarrow as pa

    from deviate_cb.fingerprint.collect import collect_fingerprint
    from deviate_cb.store.atomic import atomic_write_parquet
    from deviate_cb.store.manifest import BenchRecord
    from deviate_cb.store.run_directory import RunDirectory, claim_replica, iso_time

    paths = []
    for r in results:
        variant = r.model.replace("/", "_").replace(":", "_").replace("=", "_").replace("\\", "_")
        replica, path = claim_replica(Path(out), "bench", variant)
        run = RunDirectory(path)
        base = {"model": r.model, "framework": r.framework, "device": r.device}
        rows = [{"kind": "window", **base, **w, "steps_per_s": 1.0 / w["step_s"]} for w in r.windows]
        rows += [{"kind": "op", **base, **o} for o in r.ops]
        atomic_write_parquet(path / BENCH_FILE, pa.Table.from_pylist(rows, schema=bench_schema()))
        run.write_fingerprint(collect_fingerprint(seed=r.settings.get("seed"), extra={"bench": base}))
        run.record(
            BenchRecord(
                status="completed",
                experiment="bench",
                variant=variant,
                replica=replica,
                seed=r.settings.get("seed"),
                argv=argv,
                end_time=iso_time(),
                bench=r.summary(),
            )
        )
        paths.append(path)
    return paths
