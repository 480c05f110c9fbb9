"""The test set's own sampling spread (`sampling_spread`) and where the report prints it.

Against reference computations (the binomial formula, `scipy.stats.bootstrap`), Morin & Willetts' CIFAR-10 runs
(tests/helpers/morin_data.py), coverage simulations, and runs that recorded real predictions (tiny torch models).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from stability_models import train_tiny

from deviate_cb.report.answers.stability.build import build_stability
from deviate_cb.report.answers.stability.rows import stability_rows
from deviate_cb.report.rendering.stability import write_stability
from deviate_cb.stats.stability.sampling import COMPARABLE, sampling_spread
from deviate_cb.store.predictions import write_predictions
from tests.helpers.morin_data import morin
from tests.helpers.report_study import run_cli, write_run


def _runs_with_accuracies(accuracies: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """(runs, n) right/wrong matrices whose rows have exactly the given accuracies, errors on shared hard
    examples (as real runs have: most errors fall on the same images)."""
    rng = np.random.default_rng(seed)
    hardness = rng.permutation(n)  # example i is the hardness[i]-th hardest
    wrong = np.round((1.0 - np.asarray(accuracies)) * n).astype(int)
    out = np.ones((len(accuracies), n), dtype=bool)
    for r, k in enumerate(wrong):
        jitter = hardness + rng.integers(0, n // 20, n)  # each run errs mostly on the hard ones, not all alike
        out[r, np.argsort(jitter)[:k]] = False
    return out


def test_morin_runs_are_a_claim_about_the_test_set_only() -> None:
    """The 50 seeds' CIFAR-10 accuracies spread no more than 10,000 test images sample: the report says so."""
    accuracies = morin("algo+impl")[:, 1]
    correct = _runs_with_accuracies(accuracies, 10_000)
    np.testing.assert_allclose(correct.mean(axis=1), accuracies, atol=1e-9)
    s = sampling_spread(correct, n_resamples=2000, seed=0)
    p = accuracies.mean()
    assert s.binomial_std == pytest.approx(math.sqrt(p * (1 - p) / 10_000), rel=1e-12)
    assert s.binomial_std == pytest.approx(0.0036, abs=5e-5)  # the number
    assert s.run_std == pytest.approx(np.std(accuracies, ddof=1), rel=1e-12)
    assert s.sampling_std == pytest.approx(s.binomial_std, rel=0.05)  # the bootstrap agrees with the formula
    assert s.ratio < 1.0 < COMPARABLE and s.test_set_only is True and s.reliable
    assert "claim about this test set only" in s.sentence() and "binomial std 0.003" in s.sentence()


def test_bootstrap_matches_scipy_and_the_binomial_formula_per_run() -> None:
    rng = np.random.default_rng(3)
    hard = rng.random(4000) < 0.2
    correct = np.where(hard[None, :], rng.random((6, 4000)) < 0.4, rng.random((6, 4000)) < 0.97)
    s = sampling_spread(correct, n_resamples=4000, seed=5)
    per_run = correct.mean(axis=1)
    binomial_each = np.sqrt(per_run * (1 - per_run) / correct.shape[1])
    assert s.sampling_std == pytest.approx(np.sqrt(np.mean(binomial_each**2)), rel=1e-12)  # the exact bootstrap
    resampled = np.array([correct[:, idx].mean() for idx in np.random.default_rng(4).integers(0, 4000, (400, 4000))])
    assert np.std(resampled) == pytest.approx(np.sqrt(np.var(correct.mean(axis=0)) / 4000), rel=0.1)
    reference = stats.bootstrap(
        (correct.mean(axis=0),), np.mean, method="percentile", n_resamples=4000, random_state=11
    )
    half = (reference.confidence_interval.high - reference.confidence_interval.low) / 2
    assert s.ci_low == pytest.approx(reference.confidence_interval.low, abs=0.08 * half)
    assert s.ci_high == pytest.approx(reference.confidence_interval.high, abs=0.08 * half)
    assert s.ci_low < s.estimate < s.ci_high


def test_seeded_and_non_binary_scores() -> None:
    rng = np.random.default_rng(0)
    losses = rng.gamma(0.5, 1.0, size=(4, 300))  # skewed per-example losses: a mean score, no binomial std
    a, b = sampling_spread(losses, seed=9), sampling_spread(losses, seed=9)
    assert a == b and a.metric == "mean score" and math.isnan(a.binomial_std)
    assert a.sampling_std == pytest.approx(np.sqrt(np.mean(np.var(losses, axis=1) / 300)), rel=1e-12)
    reference = stats.bootstrap((losses.mean(axis=0),), np.mean, method="percentile", random_state=2)
    half = (reference.confidence_interval.high - reference.confidence_interval.low) / 2
    assert a.ci_low == pytest.approx(reference.confidence_interval.low, abs=0.1 * half)
    assert a.ci_high == pytest.approx(reference.confidence_interval.high, abs=0.1 * half)


@pytest.mark.parametrize(("n", "a", "reliable"), [(200, 5.67, True), (500, 19.0, True)])
def test_interval_covers_the_population_accuracy(n: int, a: float, reliable: bool) -> None:
    """Examples drawn from a population with per-example difficulty q ~ Beta(a, 1); run r is right with
    probability q**k_r, so its population accuracy is a / (a + k_r): the interval covers their mean at 95%."""
    rng = np.random.default_rng(n)
    k = np.array([0.8, 1.0, 1.2])
    target = float(np.mean(a / (a + k)))
    studies = 600
    hits, flagged = 0, 0
    for i in range(studies):
        q = rng.beta(a, 1.0, size=n)
        correct = rng.random((3, n)) < q[None, :] ** k[:, None]
        s = sampling_spread(correct, n_resamples=400, seed=i)
        hits += s.ci_low <= target <= s.ci_high
        flagged += s.reliable
    se = math.sqrt(0.95 * 0.05 / studies)
    assert abs(hits / studies - 0.95) < 3.5 * se
    assert flagged == studies * reliable


def test_skewed_losses_cover_from_100_samples_and_fewer_are_flagged() -> None:
    """Per-example losses from gamma(0.5) (skewness 2.8), mean 0.5 in every run."""
    rng = np.random.default_rng(7)
    studies = 600
    for n, reliable in ((100, True), (20, False)):
        hits = 0
        for i in range(studies):
            s = sampling_spread(rng.gamma(0.5, 1.0, (3, n)), n_resamples=400, seed=i)
            hits += s.ci_low <= 0.5 <= s.ci_high
            assert s.reliable is reliable
        if reliable:
            assert abs(hits / studies - 0.95) < 3.5 * math.sqrt(0.95 * 0.05 / studies)
        else:
            assert hits / studies < 0.93


def test_rare_outcomes_undercover_and_the_answer_says_so() -> None:
    """50 samples at accuracy 0.95: the percentile interval undercovers; every such answer is flagged."""
    rng = np.random.default_rng(1)
    studies = 600
    hits, flagged = 0, 0
    for i in range(studies):
        correct = rng.random((1, 50)) < 0.95
        s = sampling_spread(correct, n_resamples=400, seed=i)
        hits += s.ci_low <= 0.95 <= s.ci_high
        flagged += not s.reliable
    assert hits / studies < 0.93 and flagged == studies
    assert "may cover less than 95%" in s.sentence()


def test_verdicts_in_words() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(2000) < 0.9
    identical = sampling_spread(np.stack([base] * 3))
    assert identical.run_std == 0.0 and identical.test_set_only is True and "identical runs" in identical.sentence()
    spread = _runs_with_accuracies(np.array([0.70, 0.80, 0.90, 0.75, 0.85]), 2000)
    wide = sampling_spread(spread)
    assert wide.ratio > COMPARABLE and wide.test_set_only is False and "carries it too" in wide.sentence()
    one = sampling_spread(base[None, :])
    assert one.test_set_only is None and math.isnan(one.ratio) and "one run" in one.sentence()
    perfect = sampling_spread(np.ones((3, 100)))
    assert perfect.sampling_std == 0.0 and perfect.test_set_only is None
    assert "cannot tell" in perfect.sentence()
    assert identical.to_dict()["sentence"] == identical.sentence()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [1, 0, 1]}, "`scores` must be a 2-D array"),
        ({"scores": [[1.0, float("nan")]]}, "`scores` must hold finite numbers"),
        ({"scores": [[1, 0]], "n_resamples": 99}, "`n_resamples` must be an integer of at least 100"),
        ({"scores": [[1, 0]], "level": 1.5}, "`level` must be a number in (0, 1). Received: level=1.5."),
        ({"scores": [[1, 0]], "seed": -1}, "`seed` must be a non-negative integer. Received: seed=-1."),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match="^" + __import__("re").escape(message)):
        sampling_spread(**kwargs)


ACCURACIES: list[float] = []  # the recorded runs' accuracies, as the fixture computed them


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real tiny torch runs that recorded their predictions (4 seeds), and a run that recorded none."""
    root = tmp_path_factory.mktemp("sampling")
    for k in range(4):
        _, logits, labels = train_tiny(k, steps=8)
        acc = float((logits.argmax(1) == labels).mean())
        ACCURACIES.append(acc)
        path = write_run(root, "mlp", "algo", k, [("val", "val_acc", acc)])
        write_predictions(path, outputs=logits, labels=labels)
    for k in range(3):  # an accuracy whose test-set size is known from elsewhere, but no predictions
        write_run(root, "bare", "algo", k, [("val", "val_acc", 0.8 + 0.01 * k)])
    return root


def test_the_stability_section_reports_the_recorded_runs(capsys, recorded: Path) -> None:
    group = build_stability(recorded)[0]
    s = group.sampling
    assert s is not None and s.n_samples == 256 and s.n_runs == 4
    accs = np.array(ACCURACIES)
    assert s.estimate == pytest.approx(accs.mean()) and s.run_std == pytest.approx(np.std(accs, ddof=1))
    assert s.binomial_std == pytest.approx(math.sqrt(accs.mean() * (1 - accs.mean()) / 256))
    row = next(r for r in stability_rows([group]) if r["measure"] == "test_set_sampling")
    assert (row["low"], row["mean"], row["high"], row["std"]) == (s.ci_low, s.estimate, s.ci_high, s.sampling_std)
    buffer = io.StringIO()
    write_stability([group], "md", buffer)
    assert s.sentence() in buffer.getvalue()
    code, md, _ = run_cli(capsys, "report", str(recorded), "--format", "md")
    assert code == 0 and "| test-set sampling spread | test-set sampling: accuracy" in md
    code, page, _ = run_cli(capsys, "report", str(recorded), "--format", "html")
    assert code == 0 and "test-set sampling: accuracy" in page


def test_nothing_is_claimed_without_predictions(capsys, recorded: Path) -> None:
    """An accuracy without recorded predictions: the test-set size is not guessed, nothing is said."""
    code, md, _ = run_cli(capsys, "report", str(recorded), "--format", "md")
    assert code == 0 and "experiment bare" in md and md.count("test-set sampling:") == 1
    groups = build_stability(recorded)
    assert [g.experiment for g in groups] == ["mlp"]
    buffer = io.StringIO()
    write_stability(groups, "table", buffer)
    assert buffer.getvalue().count("test-set sampling:") == 1
