"""The weight sketch: equal to the dense projection, and within its stated bound of the exact distance."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from stability_models import train_tiny

from deviate_cb.errors import UsageError
from deviate_cb.stats import jl_epsilon, sketch_vector, weight_distance, weight_distance_from_sketches
from deviate_cb.stats.stability.sketch import SKETCH_CHUNK, SketchAccumulator, rademacher_signs, weight_distance_blocks
from deviate_cb.store.weights import iter_full_weights, read_full_weights, read_weight_sketches, write_weights


@pytest.mark.parametrize("size", [1, 7, 8, 63, SKETCH_CHUNK, SKETCH_CHUNK + 5, 3 * SKETCH_CHUNK - 1])
def test_the_chunked_sketch_equals_the_dense_projection(size: int) -> None:
    x = np.random.default_rng(size).normal(size=size)
    signs = rademacher_signs(size, sketch_dim=24, sketch_seed=5, position=2)
    assert set(np.unique(signs)) <= {-1, 1}
    acc = SketchAccumulator(24, 5)
    acc.add(2, x)
    sketch, norm, count = acc.result()
    np.testing.assert_allclose(sketch, signs @ x / (math.sqrt(24) * np.linalg.norm(x)), rtol=1e-10, atol=1e-12)
    assert (count, norm) == (size, pytest.approx(np.linalg.norm(x)))


def test_the_projection_depends_on_seed_dim_and_position_only() -> None:
    a = rademacher_signs(100, sketch_dim=8, sketch_seed=0, position=0)
    np.testing.assert_array_equal(a, rademacher_signs(100, sketch_dim=8, sketch_seed=0, position=0))
    assert not np.array_equal(a, rademacher_signs(100, sketch_dim=8, sketch_seed=1, position=0))
    assert not np.array_equal(a, rademacher_signs(100, sketch_dim=8, sketch_seed=0, position=1))
    # about half the signs are +1
    assert abs(rademacher_signs(SKETCH_CHUNK, sketch_dim=64).mean()) < 0.01


def test_jl_epsilon_solves_its_equation() -> None:
    for k, delta in [(256, 0.05), (1024, 0.01), (64, 0.5)]:
        eps = jl_epsilon(k, delta)
        assert k * (eps**2 / 4 - eps**3 / 6) == pytest.approx(math.log(2 / delta))
    assert jl_epsilon(8, 0.01) == math.inf
    with pytest.raises(ValueError, match="`delta` must be in \\(0, 1\\)"):
        jl_epsilon(256, 0.0)


def test_exact_distance_of_identical_and_scaled_models_is_zero() -> None:
    w = np.random.default_rng(0).normal(size=(1, 10_000))
    d = weight_distance(np.vstack([w, w, 3 * w, -w]))
    assert d.matrix[0, 1] == 0.0 and d.matrix[0, 2] < 1e-12
    assert d.matrix[0, 3] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="`weights` must be a 2-D array of shape \\(runs, params\\) with at least 2"):
        weight_distance(w)


def test_blockwise_distance_equals_the_whole_and_streams_full_weight_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=70_000)
    w = np.stack([base, base, base + 1e-7 * rng.normal(size=base.size), rng.normal(size=base.size)])
    whole = weight_distance(w)
    parts = weight_distance_blocks(lambda: (w[:, :5], w[:, 5:69_999], w[:, 69_999:]), n_runs=4)
    np.testing.assert_allclose(parts.matrix, whole.matrix, rtol=1e-9, atol=1e-15)
    assert whole.matrix[0, 1] == 0.0 and 0 < whole.matrix[0, 2] < 1e-6  # recomputed from the difference
    diff = w[0] / np.linalg.norm(w[0]) - w[2] / np.linalg.norm(w[2])
    assert whole.matrix[0, 2] == pytest.approx(np.linalg.norm(diff), rel=1e-6)
    for k, row in enumerate(w):
        write_weights(tmp_path / f"r{k}", [("a", row[:10].reshape(2, 5)), ("b", row[10:])], full=True)
    runs = [tmp_path / f"r{k}" for k in range(4)]
    streamed = weight_distance_blocks(lambda: iter_full_weights(runs), n_runs=4)
    np.testing.assert_allclose(streamed.matrix, whole.matrix, rtol=1e-9, atol=1e-15)
    write_weights(tmp_path / "other", [("a", w[0, :11]), ("b", w[0, 11:])], full=True)
    with pytest.raises(UsageError, match="parameter layout differs from"):
        list(iter_full_weights([runs[0], tmp_path / "other"]))
    with pytest.raises(UsageError, match=r"weights\.npz: no such file"):
        list(iter_full_weights([runs[0], tmp_path]))


def _flat(weights: list[tuple[str, np.ndarray]]) -> np.ndarray:
    return np.concatenate([a.reshape(-1) for _, a in weights]).astype(np.float64)


def test_real_tiny_models_sketch_within_its_bound(tmp_path: Path) -> None:
    """Five tiny MLPs (two of them with the same seed) trained for 30 steps: sketches vs exact distances."""
    seeds = [0, 1, 2, 3, 0]
    runs = []
    for k, seed in enumerate(seeds):
        weights, _, _ = train_tiny(seed)
        write_weights(tmp_path / f"r{k}", weights, sketch_dim=256, sketch_seed=11, full=True)
        runs.append(tmp_path / f"r{k}")
    full = np.stack([np.concatenate(list(read_full_weights(r).values())) for r in runs]).astype(np.float64)
    exact = weight_distance(full)
    sketches = np.stack([s.sketch for s in read_weight_sketches(runs)])
    for delta in (0.05, 0.01):
        est = weight_distance_from_sketches(sketches, delta=delta)
        upper = np.triu_indices(len(runs), k=1)
        assert np.all(est.lower[upper] <= exact.matrix[upper]) and np.all(exact.matrix[upper] <= est.upper[upper])
    # the same seed gives the same model: both distances exactly 0
    assert exact.matrix[0, 4] == 0.0 and est.matrix[0, 4] == 0.0
    assert exact.min > 0.1 or exact.matrix[0, 1] > 0.1  # different seeds: far apart
    relative = (
        np.abs(est.matrix[upper] - exact.matrix[upper])[exact.matrix[upper] > 0]
        / exact.matrix[upper][exact.matrix[upper] > 0]
    )
    assert relative.max() < 0.2  # typical error ~ 1/sqrt(2k) = 4.4%


def test_the_bound_fails_at_most_delta_of_the_time() -> None:
    """Over 300 independent projections of one real pair of models, the 95% interval misses at most 5%."""
    a, b = (_flat(train_tiny(seed)[0]) for seed in (0, 1))
    exact = weight_distance(np.stack([a, b])).matrix[0, 1]
    misses = 0
    errors = []
    for seed in range(300):
        est = weight_distance_from_sketches(
            np.stack([sketch_vector(v, sketch_dim=64, sketch_seed=seed) for v in (a, b)]), delta=0.05
        )
        misses += not (est.lower[0, 1] <= exact <= est.upper[0, 1])
        errors.append(est.matrix[0, 1] ** 2 / exact**2 - 1)
    assert misses <= 15  # the Chernoff bound is conservative: in practice none miss
    assert abs(np.mean(errors)) < 0.03 and np.std(errors) == pytest.approx(math.sqrt(2 / 64), rel=0.25)
