"""deviate-replicate with DeviateCallback(predictions=..., weights=...) on real Lightning training (CPU).

See trainers/lightning_stability.py. ``control`` replicas must agree on every prediction (churn exactly 0) and
have identical weights (sketch and full: distance exactly 0); ``algo+impl`` replicas (different seeds, a short
training on noisy labels) must disagree on some samples (churn > 0) and have different weights, and the
sketch's distance interval must hold the exact distance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deviate_cb.stats.stability.predictions import prediction_churn
from deviate_cb.stats.stability.sketch import weight_distance, weight_distance_from_sketches
from deviate_cb.store.predictions import read_predictions
from deviate_cb.store.weights import read_full_weights, read_weight_sketches
from tests.helpers.replicate_helpers import Completed, manifest, start_cli, trainer

pytestmark = pytest.mark.slow

EXPERIMENT = "lightning_stability"
SNAPSHOTS = ["epoch=0", "epoch=1", "final"]
N_EVAL = 300


def _replicate(tmp: Path, variant: str) -> Completed:
    out = tmp / "runs"
    args = ["--trainer", trainer("lightning_stability.py:main"), "-n", "2", "--variant", variant, "--parallel", "2"]
    proc = start_cli([*args, "--out", str(out)], cwd=tmp)
    stdout, stderr = proc.communicate(timeout=300)
    return Completed(proc.returncode, stdout, stderr, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Completed]:
    tmp = tmp_path_factory.mktemp("stability")
    return {variant: _replicate(tmp, variant) for variant in ("control", "algo+impl")}


def _dirs(done: Completed, variant: str) -> list[Path]:
    return [done.run_dir(EXPERIMENT, variant, k) for k in range(2)]


def _final(run_dir: Path) -> dict[str, list]:
    rows = read_predictions(run_dir).to_pydict()
    keep = [i for i, s in enumerate(rows["snapshot"]) if s == "final"]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


def _predicted(done: Completed, variant: str) -> np.ndarray:
    return np.array([_final(d)["predicted"] for d in _dirs(done, variant)])


def _full(run_dir: Path) -> np.ndarray:
    return np.concatenate(list(read_full_weights(run_dir).values()))


@pytest.mark.parametrize("variant", ["control", "algo+impl"])
def test_replicas_complete_with_snapshots_groups_and_weights(runs: dict[str, Completed], variant: str) -> None:
    done = runs[variant]
    assert done.returncode == 0, done.stderr[-3000:]
    for run_dir in _dirs(done, variant):
        rows = read_predictions(run_dir).to_pydict()
        assert list(dict.fromkeys(rows["snapshot"])) == SNAPSHOTS
        assert len(rows["snapshot"]) == len(SNAPSHOTS) * N_EVAL
        final = _final(run_dir)
        assert final["sample"] == list(range(N_EVAL))
        assert set(final["group_band"]) == {"high", "low"} and set(final["label"]) == {0, 1, 2}
        record = manifest(run_dir)
        assert record["status"] == "completed"
        assert record["predictions"]["snapshots"] == SNAPSHOTS and record["predictions"]["score"] == "probability"
        assert record["weights"]["sketch_dim"] == 64 and record["weights"]["full"] is True


def test_control_replicas_agree_exactly(runs: dict[str, Completed]) -> None:
    done = runs["control"]
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = _dirs(done, "control")
    assert prediction_churn(_predicted(done, "control")).mean == 0.0
    assert _final(first)["score"] == _final(second)["score"]  # bit-identical probabilities, not just classes
    sketches = read_weight_sketches([first, second])
    assert np.array_equal(sketches[0].sketch, sketches[1].sketch)
    assert weight_distance_from_sketches(np.stack([s.sketch for s in sketches])).matrix[0, 1] == 0.0
    assert weight_distance(np.stack([_full(first), _full(second)])).matrix[0, 1] == 0.0


def test_algo_impl_replicas_disagree_and_the_sketch_bounds_the_distance(runs: dict[str, Completed]) -> None:
    done = runs["algo+impl"]
    assert done.returncode == 0, done.stderr[-3000:]
    churn = prediction_churn(_predicted(done, "algo+impl"))
    assert churn.mean > 0.0, "replicas with different seeds made identical predictions"
    first, second = _dirs(done, "algo+impl")
    exact = weight_distance(np.stack([_full(first), _full(second)])).matrix[0, 1]
    sketches = read_weight_sketches([first, second])
    estimate = weight_distance_from_sketches(np.stack([s.sketch for s in sketches]), delta=0.05)
    assert exact > 0.0
    assert estimate.lower[0, 1] <= exact <= estimate.upper[0, 1]
    print(f"algo+impl: churn {churn.mean:.4f}, weight distance exact {exact:.4f}, sketch {estimate.matrix[0, 1]:.4f}")
