"""The training curves of the HTML page are read several files ahead in threads: the result and the warnings
must be those of reading the files one by one, in run order, whatever order the threads finish in."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deviate_cb.report.reading.runs import find_runs
from deviate_cb.report.rendering.html.curves import read_curves
from deviate_cb.store.run_directory import METRICS_FILE
from tests.helpers.report_study import write_run


def test_threads_give_the_sequential_result_and_warnings_in_run_order(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    values = {k: list(g.normal(0.5, 0.1, 6)) for k in range(12)}
    for k, series in values.items():
        write_run(tmp_path, "mlp", "algo", k, [("train", "loss", float(v)) for v in series])
    broken = [3, 7, 8]
    for k in broken:  # completed runs whose metrics file cannot be read
        (tmp_path / "experiment=mlp" / "variant=algo" / f"replica={k}" / METRICS_FILE).write_bytes(b"not parquet")
    warnings: list[str] = []
    curves = read_curves(find_runs(tmp_path), warnings)
    assert [int(line.split("replica=")[1].split("/")[0]) for line in warnings] == broken
    assert all("left out of the training curves" in line for line in warnings)
    curve = curves[("mlp", "algo", "loss")]
    kept = [values[k] for k in values if k not in broken]
    assert curve.n_runs == len(kept) == 9
    np.testing.assert_allclose(curve.mean, np.mean(kept, axis=0), rtol=1e-12)
    np.testing.assert_allclose(curve.std, np.std(kept, axis=0, ddof=1), rtol=1e-12)
    drawn = [list(v) for _, v in curve.replicas]  # in replica order, the broken ones skipped
    np.testing.assert_allclose(drawn, kept, rtol=1e-12)
