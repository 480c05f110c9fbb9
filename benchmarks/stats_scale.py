"""How long the variance report of a large study takes, next to a bare pyarrow read of the same files.

Builds a synthetic study (default 1,000 runs x 20 metrics x 1,000 steps = 20M rows) in the run-store format
(``<dir>/experiment=E/variant=V/replica=K/metrics.parquet`` + ``run.json``; seeded; cached in ``--dir`` between
invocations), then times each method in its own fresh process (so peak RSS is per method; whole process,
interpreter start and imports included; warm page cache: one untimed read first), best of ``--repeat`` rounds
(methods interleaved round by round, so that drift in the speed of a shared machine hits all alike):

* ``floor``: the bare pyarrow read of the needed columns (``seq``, ``name``, ``value``) of every metrics file;
* ``report``: :func:`deviate_cb.report.answers.summary.build_report` (``--aggregate``, default ``last``), exactly what
  ``deviate report`` computes: the per-run values from the copies of the per-series summaries that the store's
  session keeps in each ``run.json`` (checked against the metrics file's size and mtime), then ``describe``;
* ``cli``: the command itself, ``deviate report DIR --format csv`` (argument parsing, the step-time and
  stability look-ups and the output included), its CSV parsed back for the check;
* ``html``: ``deviate report DIR --format html -o FILE``: the self-contained page with every plot (training curves
  folded run by run, distributions, step times); its size is printed (needs matplotlib, the ``report`` extra);
* ``report-footers``: ``report`` when the manifests hold no copy: the summaries from each file's Parquet footer
  (:mod:`deviate_cb.store.footer_summary`);
* ``report-scan``: the same on files without summaries (another writer, an older deviate-cb): a streamed
  DuckDB scan; ``scan-pa``: the same without DuckDB (pyarrow batches);
* peers when installed: ``duckdb`` (``arg_max`` in SQL), ``polars`` (lazy, streaming), ``pyarrow`` ``group_by``.

Every method's statistics (n, mean, std, min, max per metric) are checked against a plain NumPy computation
(``numpy``: each file read whole, ``last`` by ``seq``); the largest absolute difference is printed.
Goal (issue 4, section 5): ``report`` at most 0.7x the floor and under 256 MiB peak.

Measured 2026-11-22, full size (341 MB), 2-core VM, best of 3, ``--aggregate last``:

    method          process s  peak MiB  x floor
    floor                1.64       964    1.00x
    report               0.83        73    0.51x   summaries from run.json; loads no pyarrow
    cli                  0.75        74    0.46x   deviate report --format csv
    report-footers       1.39       115    0.85x   summaries from the Parquet footers
    report-scan          2.60       185    1.59x   DuckDB scan (no summaries)
    scan-pa              2.46       194    1.50x   pyarrow batches
    duckdb               0.96        96    0.59x
    polars               1.42        95    0.87x
    pyarrow              9.78      2184    5.97x
    numpy               29.19       113   17.81x   (the reference)

All equal NumPy to <= 1e-16 (``best`` and ``mean``: <= 1e-15). Over five runs that day (``last`` three times,
``best``, ``mean``; the last one after the module splits) ``report`` took 0.79-0.94 s and ``cli`` 0.75-0.97 s, 73-74
MiB, while the floor took 1.64-2.62 s (0.30x-0.51x). The floor is the noisy side: on this VM its 964 MiB of fresh
allocations cost more or less from one hour to the next (1.32-1.59 s the day before); against the lowest floor
measured here (1.32 s) the slowest ``report`` would be 0.71x, the fastest 0.60x. What is left is start-up: numpy and
deviate_cb imports (0.2 s), SciPy's special functions for the chi-square and t quantiles of the intervals (0.19 s,
most of it SciPy's array-API layer importing NumPy's f2py and testing modules), 1,000 manifests (0.14 s, a third of
it JSON parsing), the per-run values (0.06 s), the walk (0.03 s) and interpreter exit.

The HTML page (issue 17), measured 2026-11-25 on the same VM, best of 3, ``--methods floor,cli,html``:

    method          process s  peak MiB  x floor
    floor                1.74       959    1.00x
    cli                  0.66        78    0.38x
    html                 7.53       490    4.32x   a 2.19 MB page: 20 metrics x (curves + distribution)

Most of the page's time is reading every run's series for the training curves (1,000 files folded run by run,
about 3 ms each) and drawing 40 matplotlib figures (about 0.15 s each).

The page with the answers (issue 24: the headline block and runs-needed curves, mean and IQM intervals under
each distribution, hover titles), later the same day, when the VM ran about 2.2x slower than above; the page of
the commit before issue 24 was measured in the same run, from a worktree of it, best of 3 each:

    method          process s  peak MiB  x floor
    floor                2.22       969    1.00x
    html before         16.51       491    7.45x   the same command on the commit before issue 24
    floor                2.40       964    1.00x
    html                14.59       234    6.07x   a 2.44 MB page: 0.88x the time, half the memory

Files are now read four ahead in threads while the current one is folded (Parquet decoding releases the GIL;
read_curves alone 5.4 s -> 3.1-3.4 s here) and folded as they are read (the series of every run were held
before: 491 -> 234 MiB). At the speed of the first measurement the page would take about 6.6 s.

    python benchmarks/stats_scale.py [--runs 1000] [--metrics 20] [--steps 1000] [--dir DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEED = 20261121
# The per-run aggregate of ``report`` and of the NumPy reference (``--aggregate``; the other methods do ``last``).
AGGREGATE = os.environ.get("STATS_SCALE_AGGREGATE", "last")
EXPERIMENT, VARIANT = "scale", "base"
STAGES = ("train", "val")


# ----------------------------------------------------------------------------------------------- the study
def build_study(root: Path, runs: int, metrics: int, steps: int) -> Path:
    """Write the study under ``root`` (skipped when a study of the same shape is already there)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deviate_cb.store.footer_summary import SERIES_KEY, SUMMARY_VERSION, with_summary
    from deviate_cb.store.metrics import metrics_schema
    from deviate_cb.store.run_directory import SCHEMA_VERSION, run_path

    stamp = root / f".stats_scale-{runs}x{metrics}x{steps}-{SEED}-summary{SUMMARY_VERSION}-values-copy"
    if stamp.is_file():
        return root
    rng = np.random.default_rng(SEED)
    names = metric_names(metrics)
    per_step = np.arange(steps, dtype=np.int64)
    step = np.repeat(per_step, metrics)
    epoch = step // max(1, steps // 10)
    stage = pa.array([STAGES[m % 2] for m in range(metrics)] * steps, type=pa.string())
    name = pa.array(names * steps, type=pa.string())
    scope = pa.array(["step"] * (metrics * steps), type=pa.string())
    seq = np.arange(metrics * steps, dtype=np.int64)
    for k in range(runs):
        path = run_path(root, EXPERIMENT, VARIANT, k)
        path.mkdir(parents=True, exist_ok=True)
        curve = 1.0 / (1.0 + per_step / 100.0)
        value = (curve[:, None] * rng.uniform(0.5, 1.5, metrics) + rng.normal(0, 0.01, (steps, metrics))).ravel()
        wall = np.repeat(1.7e9 + k * 1e4 + np.cumsum(rng.exponential(0.05, steps)), metrics)  # one time per step
        table = pa.table(
            [seq, step, epoch, stage, scope, name, value, np.isfinite(value), wall], schema=metrics_schema()
        )
        table = with_summary(table)
        pq.write_table(table, path / "metrics.parquet")  # as MetricsFile writes it
        stat = (path / "metrics.parquet").stat()  # and the copy the session keeps in run.json
        copy = {**json.loads(table.schema.metadata[SERIES_KEY]), "file_size": stat.st_size}
        copy["file_mtime_ns"] = stat.st_mtime_ns
        manifest = {"schema_version": SCHEMA_VERSION, "status": "completed", "seed": k, "variant": VARIANT}
        manifest["metrics_summary"] = copy
        (path / "run.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    stamp.write_text("ok\n")
    return root


def metric_files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("experiment=*/variant=*/replica=*/metrics.parquet"))


# ------------------------------------------------------------------------------------------------ methods
# Each returns {metric: [n, mean, std, min, max]} (or None for the floor, which computes nothing).
def m_floor(root: Path) -> None:
    import pyarrow.dataset as ds

    table = ds.dataset(metric_files(root), format="parquet").to_table(columns=["seq", "name", "value"])
    assert table.num_rows > 0


def _stats(values: list[float]) -> list[float]:
    from deviate_cb.stats import describe

    d = describe(values)
    return [d.n, d.mean, d.std, d.min, d.max]


def metric_names(metrics: int) -> list[str]:
    return [f"{STAGES[m % 2]}_metric_{m:02d}" for m in range(metrics)]


def _directions() -> dict[str, str] | None:
    """For ``best``: the synthetic names say nothing about direction; smaller is better, as for NumPy."""
    if AGGREGATE != "best":
        return None
    return dict.fromkeys(metric_names(int(os.environ["STATS_SCALE_METRICS"])), "min")


def m_report(root: Path) -> dict:
    from deviate_cb.report.answers.summary import build_report

    report = build_report(root, aggregate=AGGREGATE, directions=_directions())
    return {r.metric: [r.n, r.mean, r.std, r.min, r.max] for r in report.rows}


def m_cli(root: Path) -> dict:
    """``deviate report DIR --format csv``, the command itself (argument parsing and output included)."""
    import contextlib
    import csv
    import io

    from deviate_cb.cli.main import main

    argv = ["report", str(root), "--format", "csv", "--aggregate", AGGREGATE]
    for name, direction in (_directions() or {}).items():
        argv += ["--direction", f"{name}={direction}"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    if status != 0:
        raise SystemExit(f"deviate report exited {status}")
    rows = csv.DictReader(io.StringIO(out.getvalue()))
    return {r["metric"]: [int(r["n"]), *(float(r[k]) for k in ("mean", "std", "min", "max"))] for r in rows}


def m_html(root: Path) -> None:
    """``deviate report DIR --format html -o FILE`` (issue 17): the whole page, curves and plots included; prints
    the page's size. Returns no statistics (the page holds the same rows as ``cli``)."""
    from deviate_cb.cli.main import main

    page = Path(tempfile.mkdtemp()) / "report.html"
    status = main(["report", str(root), "--format", "html", "-o", str(page), "--aggregate", AGGREGATE])
    if status != 0:
        raise SystemExit(f"deviate report --format html exited {status}")
    print(f"html page: {page.stat().st_size / 1e6:.2f} MB ({page})", flush=True)
    return None


def m_report_footers(root: Path) -> dict:
    """``report`` when the manifests hold no copy of the summaries: one footer read per run."""
    from deviate_cb.report import loading

    loading.manifest_values = lambda runs, reduce: ({}, set())
    return m_report(root)


def m_report_scan(root: Path, duckdb: bool = True) -> dict:
    """``report`` on files without summaries (another writer, an older deviate-cb): a full scan, by DuckDB or
    (``duckdb=False``, as without the ``report`` extra) by pyarrow batches."""
    from deviate_cb.report import loading
    from deviate_cb.report.reading.metrics import footers, scan

    loading.manifest_values = lambda runs, reduce: ({}, set())
    footers.footer_summary = lambda metadata: None
    if not duckdb:
        scan.import_duckdb = lambda required: None
    return m_report(root)


def m_numpy(root: Path) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    from deviate_cb.stats import infer_direction

    series: dict[str, list[float]] = {}
    for path in metric_files(root):
        t = pq.read_table(path, columns=["seq", "name", "value"])
        seq, value = t.column("seq").to_numpy(), t.column("value").to_numpy()
        names = np.asarray(t.column("name").to_pylist(), dtype=object)
        for name in np.unique(names):
            rows = np.flatnonzero(names == name)
            if AGGREGATE == "last":
                x = float(value[rows[np.argmax(seq[rows])]])
            else:
                finite = value[rows][np.isfinite(value[rows])]
                best = np.max if infer_direction(str(name)) == "max" else np.min  # the report is told: min
                x = float(finite.mean() if AGGREGATE == "mean" else best(finite)) if finite.size else math.nan
            series.setdefault(str(name), []).append(x)
    out = {}
    for name, values in series.items():
        x = np.asarray(values)
        x = x[np.isfinite(x)]
        out[name] = [x.size, float(x.mean()), float(x.std(ddof=1)), float(x.min()), float(x.max())]
    return out


def m_duckdb(root: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    pattern = str(root / "experiment=*/variant=*/replica=*/metrics.parquet")
    rows = con.execute(
        f"""
        WITH last AS (
            SELECT experiment, variant, replica, name, arg_max(value, seq) AS v
            FROM read_parquet('{pattern}', hive_partitioning = true)
            GROUP BY ALL
        )
        SELECT name, count(v), avg(v), stddev_samp(v), min(v), max(v) FROM last GROUP BY name
        """
    ).fetchall()
    return {r[0]: list(r[1:]) for r in rows}


def m_polars(root: Path) -> dict:
    import polars as pl

    pattern = str(root / "experiment=*/variant=*/replica=*/metrics.parquet")
    last = (
        pl.scan_parquet(pattern, hive_partitioning=True)
        .select("experiment", "variant", "replica", "seq", "name", "value")
        .group_by("experiment", "variant", "replica", "name")
        .agg(pl.col("value").sort_by("seq").last())
    )
    stats = last.group_by("name").agg(
        pl.col("value").count().alias("n"),
        pl.col("value").mean().alias("mean"),
        pl.col("value").std().alias("std"),
        pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"),
    )
    df = stats.collect(engine="streaming")
    return {r[0]: list(r[1:]) for r in df.iter_rows()}


def m_pyarrow(root: Path) -> dict:
    import pyarrow.dataset as ds

    files = metric_files(root)
    table = ds.dataset(files, format="parquet").to_table(columns=["__fragment_index", "seq", "name", "value"])
    table = table.sort_by([("__fragment_index", "ascending"), ("seq", "ascending")])
    last = table.group_by(["__fragment_index", "name"], use_threads=False).aggregate([("value", "last")])
    series: dict[str, list[float]] = {}
    for name, value in zip(last.column("name").to_pylist(), last.column("value_last").to_pylist(), strict=True):
        series.setdefault(name, []).append(value)
    return {name: _stats(values) for name, values in series.items()}


METHODS = {
    "floor": m_floor,
    "report": m_report,
    "cli": m_cli,
    "html": m_html,
    "report-footers": m_report_footers,
    "report-scan": m_report_scan,
    "scan-pa": lambda root: m_report_scan(root, duckdb=False),
    "duckdb": m_duckdb,
    "polars": m_polars,
    "pyarrow": m_pyarrow,
    "numpy": m_numpy,
}
OPTIONAL = {"duckdb": "duckdb", "polars": "polars", "html": "matplotlib"}


def child(method: str, root: Path, out: Path) -> None:
    start = time.perf_counter()
    result = METHODS[method](root)
    elapsed = time.perf_counter() - start
    out.write_text(json.dumps({"inner_s": elapsed, "result": result}))


def run_child(method: str, root: Path) -> tuple[float, float, dict]:
    """Whole-process wall seconds, peak RSS (MiB) and the child's output."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    try:
        args = [sys.executable, __file__, "--child", method, "--dir", str(root), "--out", str(out)]
        start = time.perf_counter()
        proc = subprocess.Popen(args)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"method {method} failed (exit {proc.returncode})")
        return wall, usage.ru_maxrss / 1024.0, json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def max_abs_diff(got: dict, ref: dict) -> float:
    if set(got) != set(ref):
        return math.inf
    worst = 0.0
    for name, row in ref.items():
        for a, b in zip(got[name], row, strict=True):
            if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
                return math.inf
            worst = max(worst, abs(float(a) - float(b)))
    return worst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="where the study is built and cached")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    parser.add_argument(
        "--aggregate",
        choices=("last", "best", "mean"),
        default="last",
        help="per-run aggregate of `report` and the NumPy reference (the peers always compute `last`)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.dir, args.out)
        return
    os.environ["STATS_SCALE_AGGREGATE"] = args.aggregate  # inherited by every child process
    os.environ["STATS_SCALE_METRICS"] = str(args.metrics)
    if args.aggregate != "last":
        keep = ("floor", "report", "cli", "report-footers", "report-scan", "numpy")
        args.methods = ",".join(m for m in args.methods.split(",") if m.strip() in keep)
    root = args.dir or Path(tempfile.gettempdir()) / f"deviate-stats-scale-{args.runs}x{args.metrics}x{args.steps}"
    start = time.perf_counter()
    build_study(root, args.runs, args.metrics, args.steps)
    files = metric_files(root)
    size = sum(os.path.getsize(f) for f in files) / 1e6
    rows = args.runs * args.metrics * args.steps
    ready = time.perf_counter() - start
    print(f"study: {root} ({len(files)} runs, {rows:,} rows, {size:.0f} MB; ready in {ready:.1f} s)")
    for f in files:  # warm the page cache
        Path(f).read_bytes()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    import importlib.util

    methods = [m for m in methods if m not in OPTIONAL or importlib.util.find_spec(OPTIONAL[m]) is not None]
    wall, rss, out = run_child("numpy", root)  # the reference, timed once
    ref = out["result"]
    results: dict[str, tuple[float, float, float, dict | None]] = {}
    if "numpy" in methods:
        results["numpy"] = (wall, rss, out["inner_s"], ref)
    timed = [m for m in methods if m != "numpy"]
    for _ in range(args.repeat):  # round by round, so that drift in machine speed hits every method alike
        for method in timed:
            wall, rss, out = run_child(method, root)
            if method not in results or wall < results[method][0]:
                results[method] = (wall, rss, out["inner_s"], out["result"])
    results = {m: results[m] for m in methods if m in results}
    floor = results.get("floor", (math.nan,))[0]
    print(f"{'method':<9} {'process s':>9} {'work s':>7} {'peak MiB':>9} {'x floor':>8} {'max |diff| vs NumPy':>20}")
    for method, (wall, rss, inner, result) in results.items():
        diff = "-" if result is None else f"{max_abs_diff(result, ref):.3g}"
        print(f"{method:<9} {wall:>9.2f} {inner:>7.2f} {rss:>9.0f} {wall / floor:>7.2f}x {diff:>20}")
    print("goal: report <= 0.70x floor, < 256 MiB peak, equal to NumPy")


if __name__ == "__main__":
    main()
