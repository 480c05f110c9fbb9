"""`deviate compare --on improvement` (issue 42): "A better" when the lower end of P(A>B)'s interval is above
0.75 (Bouthillier et al. 2021). At P(A>B) = 0.75 exactly that decision is wrong; simulated, it must be made at
most (1 - level) / 2 plus a point of the time (and never more than alpha), for normal runs of equal and 3:1
spreads, t(3) and lognormal runs, at 5, 10 and 20 runs per group."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from deviate_cb.report.answers.compare_notes import improvement_verdict
from deviate_cb.stats.effect_size import _delta_interval, _delta_scale, _welch_parts, prob_improvement
from tests.helpers.report_study import run_cli

REPS = 4000  # Monte Carlo error of a rate near 0.025: 0.0025


def _draws(kind: str, g: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    if kind == "normal":
        return g.normal(0, 1, shape), g.normal(0, 1, shape)
    if kind == "normal_3to1":
        return g.normal(0, 3, shape), g.normal(0, 1, shape)
    if kind == "t3":
        return g.standard_t(3, shape), g.standard_t(3, shape)
    return g.lognormal(0, 1, shape), g.lognormal(0, 1, shape)


def _shift_at_075(kind: str) -> float:
    """The shift of A that makes P(A>B) = 0.75."""
    if kind == "normal":
        return math.sqrt(2) * float(ndtri(0.75))
    if kind == "normal_3to1":
        return math.sqrt(10) * float(ndtri(0.75))
    a, b = _draws(kind, np.random.default_rng(0), (400_000,))
    diff = np.sort(b - a)
    return float(brentq(lambda s: np.searchsorted(diff, s) / diff.size - 0.75, -20, 20, xtol=1e-4))


def _lower_ends(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> np.ndarray:
    """The low end of prob_improvement's default interval, vectorised (checked against it below)."""
    diff, se, df = _welch_parts(x, y)
    low, _ = _delta_interval(diff / se, df, _delta_scale(x.shape[-1], y.shape[-1]), level)
    above, tied = x[..., :, None] > y[..., None, :], x[..., :, None] == y[..., None, :]
    p = (above.sum(axis=(-2, -1)) + 0.5 * tied.sum(axis=(-2, -1))) / (x.shape[-1] * y.shape[-1])
    return np.minimum(ndtr(low / math.sqrt(2)), p)


def test_the_vectorised_lower_end_is_the_printed_one() -> None:
    g = np.random.default_rng(1)
    x, y = g.normal(0.5, 1, (6, 5)), g.normal(0, 1, (6, 5))
    expected = [prob_improvement(a, b).confidence_interval().low for a, b in zip(x, y, strict=True)]
    got = [float(_lower_ends(a[None], b[None])[0]) for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("kind", ["normal", "normal_3to1", "t3", "lognormal"])
def test_a_better_is_rarely_wrong_at_the_threshold(kind: str, n: int) -> None:
    g = np.random.default_rng(31 * n + len(kind))
    x, y = _draws(kind, g, (REPS, n))
    wrong = float(np.mean(_lower_ends(x + _shift_at_075(kind), y) > 0.75))
    assert wrong <= 0.025 + 0.01, wrong  # simulated: 1.9-2.2% normal, 2.7-3.2% for 3:1, <= 1.9% t(3), lognormal


def test_words_of_the_decision() -> None:
    row = {"p_a_gt_b": 0.04, "p_a_gt_b_ci_low": 0.0, "p_a_gt_b_ci_high": 0.2, "level": 0.95}
    assert improvement_verdict(row).startswith("B better: P(A>B) 0.04 [0, 0.2] (95% CI), its upper bound below 0.25")
    loss = improvement_verdict({**row, "direction": "min"})  # a lower loss is better: A is lower
    assert loss.startswith("A better (lower is better): P(A<B) 0.96 [0.8, 1] (95% CI)")
    nan = improvement_verdict({**row, "p_a_gt_b_ci_low": math.nan})
    assert nan.startswith("not decided: P(A>B) has no interval")


def _table(path: Path, a: list[float], b: list[float], metric: str = "val_acc") -> str:
    lines = [f"group,{metric}"] + [f"A,{float(v)!r}" for v in a] + [f"B,{float(v)!r}" for v in b]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_cli_on_improvement(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    g = np.random.default_rng(2)
    a, b = list(0.9 + 0.01 * g.standard_normal(10)), list(0.85 + 0.01 * g.standard_normal(10))
    base = ("compare", "--table", _table(tmp_path / "t.csv", a, b), "--group-by", "group", "--a", "A", "--b", "B")
    code, out, err = run_cli(capsys, *base, "--on", "improvement", "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["improvement_threshold"] == 0.75 and row["improvement_verdict"].startswith("A better: P(A>B) 1")
    assert row["verdict"].startswith("improvement: A better; means: A > B")
    code, out, _ = run_cli(capsys, *base, "--on", "improvement")
    assert code == 0 and "improvement" in out and "Bouthillier et al. 2021" in " ".join(out.split())
    code, out, _ = run_cli(capsys, *base, "--format", "json")
    assert json.loads(out)[0]["improvement_verdict"] is None  # only on request
    code, _, err = run_cli(capsys, *base, "--on", "improvement", "--threshold", "0.3")
    assert code == 2 and "`--threshold` must be in [0.5, 1). Received: --threshold=0.3." in err
    code, _, err = run_cli(capsys, *base, "--threshold", "0.8")
    assert code == 2 and "`--threshold` goes with `--on improvement`" in err
    loss = ("compare", "--table", _table(tmp_path / "l.csv", b, a, "val_loss"), "--group-by", "group")
    code, out, _ = run_cli(capsys, *loss, "--a", "A", "--b", "B", "--on", "improvement", "--format", "json")
    assert code == 0 and json.loads(out)[0]["improvement_verdict"].startswith("A better (lower is better): P(A<B)")
