"""Churn, majority vote, per-sample instability, per-class and sub-group spread: hand-checked and loop references."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from deviate_cb.stats import (
    align_runs,
    majority_vote,
    per_class_accuracy,
    prediction_churn,
    sample_instability,
    subgroup_rates,
)

# 3 runs x 6 samples, binary. Class 1: samples 0, 2, 3; class 0: samples 1, 4, 5. Group a: 0-2, group b: 3-5.
LABELS = [1, 0, 1, 1, 0, 0]
PREDS = [
    [1, 0, 1, 1, 0, 0],  # all right
    [1, 1, 1, 0, 0, 0],  # wrong on 1 (a false positive) and 3 (a false negative)
    [0, 0, 0, 1, 0, 0],  # wrong on 0 and 2 (false negatives)
]
GROUPS = ["a", "a", "a", "b", "b", "b"]
R3 = math.sqrt(3) / 9  # the std (ddof=1) of three values {x + 2/9, x - 1/9, x - 1/9}, as several below


def test_churn_by_hand() -> None:
    c = prediction_churn(PREDS)
    # (0,1) differ on samples 1 and 3; (0,2) on 0 and 2; (1,2) on 0, 1, 2 and 3.
    np.testing.assert_allclose(c.matrix, [[0, 2 / 6, 2 / 6], [2 / 6, 0, 4 / 6], [2 / 6, 4 / 6, 0]])
    assert (c.mean, c.std, c.min, c.max) == pytest.approx((4 / 9, R3, 1 / 3, 2 / 3))
    assert (c.n_runs, c.n_pairs, c.n_samples) == (3, 3, 6)
    # the majority vote is the label everywhere
    np.testing.assert_allclose(c.majority_agreement, [1, 4 / 6, 4 / 6])
    d = c.to_dict()
    assert d["churn_mean"] == pytest.approx(4 / 9) and d["majority_agreement_min"] == pytest.approx(4 / 6)


def test_per_class_by_hand() -> None:
    pc = per_class_accuracy(PREDS, LABELS)
    assert pc.classes.tolist() == [0, 1] and pc.n_samples.tolist() == [3, 3]
    # class 0: runs get 3/3, 2/3, 3/3; class 1: 3/3, 2/3, 1/3
    np.testing.assert_allclose(pc.per_run, [[1, 1], [2 / 3, 2 / 3], [1, 1 / 3]])
    np.testing.assert_allclose(pc.std, [R3, 1 / 3])
    np.testing.assert_allclose(pc.overall, [1, 4 / 6, 4 / 6])
    assert pc.overall_std == pytest.approx(R3)
    assert (pc.worst_class, pc.max_std, pc.ratio) == (1, pytest.approx(1 / 3), pytest.approx(math.sqrt(3)))
    assert pc.to_dict()["classes"][1] == {
        "class": 1,
        "n_samples": 3,
        "mean": pytest.approx(2 / 3),
        "std": pytest.approx(1 / 3),
        "std_ratio": pytest.approx(math.sqrt(3)),
    }


def test_subgroups_by_hand() -> None:
    sg = subgroup_rates(PREDS, LABELS, GROUPS)
    rows = {r["group"]: r for r in sg.rows}
    assert list(rows) == ["(all)", "a", "b"]
    s = math.sqrt(1 / 3)  # std of {0, 0, 1}
    # group a (labels 1, 0, 1): run0 all right; run1 one FP (FPR 1/1); run2 two FN (FNR 2/2)
    np.testing.assert_allclose(sg.accuracy[:, 0], [1, 2 / 3, 1 / 3])
    np.testing.assert_allclose(sg.fpr[:, 0], [0, 1, 0])
    np.testing.assert_allclose(sg.fnr[:, 0], [0, 0, 1])
    a = rows["a"]
    assert (a["accuracy_mean"], a["accuracy_std"], a["accuracy_ratio"]) == pytest.approx((2 / 3, 1 / 3, math.sqrt(3)))
    assert (a["fpr_mean"], a["fpr_std"], a["fpr_ratio"]) == pytest.approx((1 / 3, s, s / R3))
    assert (a["fnr_mean"], a["fnr_std"]) == pytest.approx((1 / 3, s))
    # group b (labels 1, 0, 0): only run1 errs, a FN on sample 3
    b = rows["b"]
    assert (b["accuracy_mean"], b["fpr_mean"], b["fpr_std"], b["fnr_mean"]) == pytest.approx((8 / 9, 0, 0, 1 / 3))
    # everyone: run1 has FP 1 of 3 negatives and FN 1 of 3 positives; run2 FN 2 of 3
    np.testing.assert_allclose(sg.fpr.shape, (3, 2))
    everyone = rows["(all)"]
    assert (everyone["fpr_mean"], everyone["fnr_mean"], everyone["accuracy_ratio"]) == pytest.approx((1 / 9, 1 / 3, 1))
    assert sg.overall_accuracy_std == pytest.approx(R3)


def test_subgroup_rates_with_another_positive_class_and_undefined_rates() -> None:
    # multi-class, positive class 2 one-vs-rest: run 1 predicts 2 for sample 1 (class 0: a false positive) and
    # 0 for sample 3 (class 2: a false negative), both in group 2; a group with no positive has no FNR
    sg = subgroup_rates([[2, 0, 1, 2], [2, 2, 1, 0]], labels=[2, 0, 1, 2], groups=[1, 2, 1, 2], positive=2)
    rows = {r["group"]: r for r in sg.rows}
    assert rows["1"]["fnr_mean"] == 0 and rows["1"]["fpr_mean"] == 0
    assert rows["2"]["fpr_mean"] == pytest.approx(0.5) and rows["2"]["fnr_mean"] == pytest.approx(0.5)
    only_negatives = subgroup_rates([[0, 1]], labels=[0, 0], groups=["x", "x"])
    assert math.isnan(only_negatives.rows[1]["fnr_mean"]) and only_negatives.rows[1]["fpr_mean"] == 0.5
    assert only_negatives.to_dict()["rows"][1]["fnr_mean"] is None


def test_instability_by_hand() -> None:
    s = sample_instability(PREDS, LABELS)
    entropy = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert s.sample.tolist() == [0, 1, 2, 3, 4, 5] and s.n_unstable == 4
    np.testing.assert_allclose(s.flip_rate, [1 / 3] * 4 + [0, 0])
    np.testing.assert_allclose(s.entropy, [entropy] * 4 + [0, 0])
    np.testing.assert_allclose(s.correct_rate, [2 / 3] * 4 + [1, 1])
    # ties: four different votes -> the smallest class wins; entropy ranks equal flip rates
    t = sample_instability([[0, 2, 5], [1, 2, 5], [2, 1, 5], [3, 1, 5]], sample_ids=[7, 8, 9])
    assert t.sample.tolist() == [7, 8, 9]
    assert t.majority.tolist() == [0, 1, 5]
    np.testing.assert_allclose(t.flip_rate, [0.75, 0.5, 0])
    np.testing.assert_allclose(t.entropy, [math.log(4), math.log(2), 0])
    assert t.top(1) == [
        {
            "sample": 7,
            "majority": 0,
            "flip_rate": 0.75,
            "entropy": pytest.approx(math.log(4)),
            "n_distinct": 4,
            "correct_rate": None,
        }
    ]


def _reference(preds: np.ndarray, labels: np.ndarray, groups: np.ndarray, positive: int) -> dict:
    runs, n = preds.shape
    churn = np.zeros((runs, runs))
    for i in range(runs):
        for j in range(runs):
            churn[i, j] = sum(preds[i, s] != preds[j, s] for s in range(n)) / n
    majority, top = [], []
    for s in range(n):
        counts = Counter(preds[:, s].tolist())
        best = max(counts.values())
        majority.append(min(c for c, k in counts.items() if k == best))
        top.append(best)
    per_class = {}
    for c in sorted(set(labels.tolist())):
        idx = [s for s in range(n) if labels[s] == c]
        per_class[c] = [sum(preds[r, s] == c for s in idx) / len(idx) for r in range(runs)]
    rates = {}
    for g in sorted(set(groups.tolist())):
        idx = [s for s in range(n) if groups[s] == g]
        acc, fpr, fnr = [], [], []
        for r in range(runs):
            tp = sum(preds[r, s] == positive and labels[s] == positive for s in idx)
            fp = sum(preds[r, s] == positive and labels[s] != positive for s in idx)
            tn = sum(preds[r, s] != positive and labels[s] != positive for s in idx)
            fn = sum(preds[r, s] != positive and labels[s] == positive for s in idx)
            acc.append(sum(preds[r, s] == labels[s] for s in idx) / len(idx))
            fpr.append(fp / (fp + tn) if fp + tn else math.nan)
            fnr.append(fn / (fn + tp) if fn + tp else math.nan)
        rates[str(g)] = (acc, fpr, fnr)
    return {"churn": churn, "majority": majority, "top": top, "per_class": per_class, "rates": rates}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_a_plain_loop_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs, n, classes = 7, 120, 4
    labels = rng.integers(0, classes, n)
    preds = np.where(rng.random((runs, n)) < 0.7, labels, rng.integers(0, classes, (runs, n)))
    groups = rng.integers(0, 3, n)
    ref = _reference(preds, labels, groups, positive=1)
    c = prediction_churn(preds)
    np.testing.assert_allclose(c.matrix, ref["churn"])
    pairs = ref["churn"][np.triu_indices(runs, 1)]
    assert (c.mean, c.std) == pytest.approx((pairs.mean(), pairs.std(ddof=1)))
    votes, top = majority_vote(preds)
    assert votes.tolist() == ref["majority"] and top.tolist() == ref["top"]
    np.testing.assert_allclose(c.majority_agreement, (preds == np.array(ref["majority"])).mean(axis=1))
    inst = sample_instability(preds, labels)
    np.testing.assert_allclose(inst.flip_rate, np.sort(1 - np.array(ref["top"]) / runs)[::-1])
    pc = per_class_accuracy(preds, labels)
    np.testing.assert_allclose(pc.per_run, np.array(list(ref["per_class"].values())).T)
    np.testing.assert_allclose(pc.std, np.array(list(ref["per_class"].values())).std(axis=1, ddof=1))
    sg = subgroup_rates(preds, labels, groups)
    for k, name in enumerate(sg.groups):
        acc, fpr, fnr = ref["rates"][name]
        np.testing.assert_allclose(sg.accuracy[:, k], acc)
        np.testing.assert_allclose(sg.fpr[:, k], fpr)
        np.testing.assert_allclose(sg.fnr[:, k], fnr)


def test_identical_runs_have_zero_churn_and_nothing_to_rank() -> None:
    preds = np.tile(np.arange(50) % 7, (5, 1))
    c = prediction_churn(preds)
    assert (c.mean, c.std, c.max) == (0.0, 0.0, 0.0) and np.all(c.majority_agreement == 1)
    assert sample_instability(preds).n_unstable == 0
    pc = per_class_accuracy(preds, np.arange(50) % 7)
    assert pc.overall_std == 0 and math.isnan(pc.ratio)


def test_large_inputs_are_vectorised() -> None:
    rng = np.random.default_rng(0)
    preds = rng.integers(0, 10, (20, 10_000))
    import time

    start = time.perf_counter()
    c = prediction_churn(preds)
    sample_instability(preds)
    assert time.perf_counter() - start < 5.0  # about 0.03 s; a loop over samples or pairs of samples takes minutes
    assert c.n_pairs == 190 and 0.85 < c.mean < 0.95


def test_align_runs() -> None:
    ids, m = align_runs([[3, 1, 2], [1, 2, 3]], [[30, 10, 20], [11, 21, 31]])
    assert ids.tolist() == [1, 2, 3] and m.tolist() == [[10, 20, 30], [11, 21, 31]]
    with pytest.raises(ValueError, match="run 1 has 1 sample\\(s\\) run 0 lacks and lacks 1 of run 0's"):
        align_runs([[0, 1, 2], [0, 1, 5]], [[0, 0, 0], [0, 0, 0]])
    ids, m = align_runs([[0, 1, 2], [5, 1, 0]], [[0, 1, 2], [5, 1, 0]], on_mismatch="intersect")
    assert ids.tolist() == [0, 1] and m.tolist() == [[0, 1], [0, 1]]
    with pytest.raises(ValueError, match="run 0: the sample indices are not distinct"):
        align_runs([[0, 0]], [[1, 2]])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: prediction_churn([1, 2, 3, 4, 5]),
            "`predictions` must be a 2-D array of shape (runs, samples). Received: shape (5,).",
        ),
        (lambda: prediction_churn([[1, 2, 3]]), "`predictions` must hold at least 2 run(s) and 1 sample."),
        (lambda: prediction_churn([[0.5, 1.0], [1.0, 0.0]]), "`predictions` must hold integer class predictions."),
        (
            lambda: per_class_accuracy([[0, 1]], [0, 1, 1]),
            "`labels` must have one entry per sample. Received: 3 labels for 2 samples.",
        ),
        (
            lambda: subgroup_rates([[0, 1]], [0, 1], ["a"]),
            "`groups` must have one entry per sample. Received: 1 groups for 2 samples.",
        ),
        (lambda: align_runs([[0]], [[1]], on_mismatch="union"), "`on_mismatch` must be 'refuse' or 'intersect'."),
    ],
)
def test_bad_arguments_are_one_line(call, message: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
