"""The headline of `deviate report`: the answers in words, the same in the terminal, Markdown, CSV and JSON.

Studies are real run directories written with the project's writers (manifest + metrics.parquet); the Morin &
Willetts (2020) replicate results give a study with a measurable implementation share.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from deviate_cb.stats import achieved_power, runs_needed
from deviate_cb.stats.pilot import std_upper_limit
from tests.helpers.report_study import run_cli, write_run


def _study(root: Path, control: list[float], seeds: list[float], impl: list[float] | None = None) -> Path:
    for k, acc in enumerate(control):
        write_run(root, "mlp", "control", k, [("train", "train_loss", 0.5), ("val", "val_acc", acc)])
    for k, acc in enumerate(seeds):
        write_run(root, "mlp", "algo+impl", k, [("train", "train_loss", 0.5 + k / 10), ("val", "val_acc", acc)])
    for k, acc in enumerate(impl or []):
        write_run(root, "mlp", "impl", k, [("train", "train_loss", 0.5), ("val", "val_acc", acc)])
    return root


SEEDS = [0.885, 0.91, 0.89, 0.9]


def _headlines(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> list[dict]:
    code, out, err = run_cli(capsys, "report", str(root), "--headline", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_control_identical_seed_noise_and_runs_needed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [0.91] * 3, SEEDS)
    (h,) = _headlines(capsys, root)  # val_acc only: the metric a user looks at first, not train_loss
    assert (h["experiment"], h["metric"], h["control"]) == ("mlp", "val_acc", "identical")
    assert h["sentences"][0] == "control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs."
    std = float(__import__("numpy").std(SEEDS, ddof=1))
    (noise,) = h["noise"]
    assert noise["variant"] == "algo+impl" and noise["std"] == pytest.approx(std)
    assert noise["std_ci_low"] < std < noise["std_ci_high"]
    assert h["sentences"][1].startswith(f"seed + implementation noise (algo+impl): std {std:.4g} [")
    assert "no impl runs" in h["sentences"][2] and h["share"]["share"] is None
    effect = 0.01 * sum(SEEDS) / 4  # the default: 1% of the mean
    runs = h["runs"]
    assert runs["effect"] == pytest.approx(effect) and runs["effect_basis"] == "1% of the mean"
    # planned on the 80% upper confidence limit of the std, with the plan at the measured std beside it
    upper = std_upper_limit(std, 4)
    assert runs["runs_per_group"] == runs_needed(upper, effect=effect) > runs["runs_at_estimate"]
    assert runs["runs_at_estimate"] == runs_needed(std, effect=effect)
    assert (runs["runs_low"], runs["runs_high"]) == (
        runs_needed(noise["std_ci_low"], effect=effect),
        runs_needed(noise["std_ci_high"], effect=effect),
    )  # at the ends of the interval printed beside the std
    assert runs["expected_power_at_estimate"] < 0.8 < runs["expected_power"]
    assert runs["power_now"] == pytest.approx(achieved_power(4, 4, std, effect=effect))
    # what the runs made detect: 80% power at exactly that difference at the std's upper limit
    assert achieved_power(4, 4, upper, effect=runs["detectable_now"]) == pytest.approx(0.8, abs=1e-3)
    assert achieved_power(4, 4, std, effect=runs["detectable_at_estimate"]) == pytest.approx(0.8, abs=1e-3)
    sentence = h["sentences"][3]
    assert sentence.startswith(f"runs needed: {runs['runs_per_group']} per group to detect a difference")
    assert "with 80% confidence" in sentence and "expected" in sentence
    assert f"{runs['runs_low']} to {runs['runs_high']} across the std's interval" in sentence


def test_effect_option_and_bad_effect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [0.91] * 3, SEEDS)
    (h,) = _headlines(capsys, root, "--effect", "0.02")
    std = float(__import__("numpy").std(SEEDS, ddof=1))
    assert h["runs"]["effect"] == 0.02 and h["runs"]["runs_at_estimate"] == runs_needed(std, effect=0.02)
    assert h["runs"]["runs_per_group"] == runs_needed(std_upper_limit(std, 4), effect=0.02)
    (h,) = _headlines(capsys, root, "--effect", "5%")
    assert h["runs"]["effect_basis"] == "5% of the mean"
    for bad in ("-1", "abc", "0%"):
        code, out, err = run_cli(capsys, "report", str(root), "--effect", bad)
        assert code == 2 and out == ""
        assert err.strip().splitlines() == [
            f"deviate: error: `--effect` must be a positive number in the metric's units or a percentage of the mean "
            f"such as 1%. Received: --effect={bad!r}."
        ]


def test_control_differs_names_deviate_audit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [0.91, 0.905, 0.91], SEEDS)
    (h,) = _headlines(capsys, root)
    assert h["control"] == "differs"
    assert h["sentences"][0].startswith("control: the 3 runs differ: std ")
    assert "determinism does not hold" in h["sentences"][0] and "`deviate audit`" in h["sentences"][0]


def test_control_identical_on_the_metric_but_differs_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for k in range(3):  # val_acc equal, train_loss not: not "bit-identical"
        write_run(tmp_path, "mlp", "control", k, [("train", "train_loss", 0.5 + k), ("val", "val_acc", 0.9)])
    for k, acc in enumerate(SEEDS):
        write_run(tmp_path, "mlp", "algo+impl", k, [("val", "val_acc", acc)])
    (h,) = _headlines(capsys, tmp_path)
    assert h["control"] == "differs" and "bit-identical" not in h["sentences"][0]
    assert h["sentences"][0].startswith("control: identical on val_acc across 3 runs, but the runs differ on other")


def test_no_control_and_identical_impl(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [], SEEDS, impl=[0.9] * 3)
    (h,) = _headlines(capsys, root)
    assert h["control"] is None and h["sentences"][0].startswith("control: no control runs")
    assert h["share"]["share"] == 0.0
    assert "the 3 impl runs are identical (no implementation noise here" in " ".join(h["sentences"])


def test_implementation_share_with_its_interval_on_morin(capsys: pytest.CaptureFixture[str], morin_study: Path) -> None:
    heads = {h["metric"]: h for h in _headlines(capsys, morin_study)}
    assert set(heads) == {"test_acc", "test_loss"}  # test metrics: what a user looks at first
    h = heads["test_acc"]
    share = h["share"]
    assert share["pair"] == "impl / algo+impl" and share["reason"] == ""
    assert 0 <= share["ci_low"] < share["share"] < share["ci_high"]  # not capped at 1: never excludes its estimate
    assert share["variance_share"] == pytest.approx(share["share"] ** 2)
    squared = (share["ci_low"] ** 2, share["ci_high"] ** 2)
    assert (share["variance_ci_low"], share["variance_ci_high"]) == pytest.approx(squared)
    code, out, _ = run_cli(capsys, "report", str(morin_study), "--decomposition", "--format", "json")
    assert code == 0
    (row,) = [d for d in json.loads(out) if d["metric"] == "test_acc"]
    assert (row["share"], row["share_ci_low"], row["share_ci_high"]) == (
        share["share"],
        share["ci_low"],
        share["ci_high"],
    )  # one computation for every format
    sentence = next(s for s in h["sentences"] if s.startswith("implementation share"))
    assert f"std ratio {share['share']:.2g} [{share['ci_low']:.2g}, {share['ci_high']:.2g}] (95% CI)" in sentence
    low, high = share["variance_ci_low"], share["variance_ci_high"]
    v = f"variance share {share['variance_share']:.2g} [{low:.2g}, {high:.2g}]"
    assert v in sentence and "problem" not in sentence
    assert (row["variance_share"], row["variance_share_ci_low"]) == (share["variance_share"], share["variance_ci_low"])


def test_a_share_significantly_above_one_is_a_set_up_problem_in_headline_and_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seeds = [0.900, 0.902, 0.899, 0.901, 0.898, 0.900]
    root = _study(tmp_path, [], seeds, impl=[0.90, 0.91, 0.89, 0.905, 0.885, 0.915])
    (h,) = _headlines(capsys, root)
    share = h["share"]
    assert share["share"] > 1 and 1 < share["ci_low"] <= share["share"] <= share["ci_high"]
    assert share["pvalue"] < 0.05
    sentence = next(s for s in h["sentences"] if s.startswith("implementation share"))
    assert "a set-up problem" in sentence and "within noise" not in sentence and "[1, 1]" not in sentence
    assert any(n.startswith("problem: ") and "mislabelled" in n for n in h["notes"])
    _, out, _ = run_cli(capsys, "report", str(root), "--decomposition", "--format", "json")
    (row,) = [d for d in json.loads(out) if d["metric"] == "val_acc"]
    assert (row["share_ci_low"], row["share_ci_high"]) == (share["ci_low"], share["ci_high"])  # the table agrees
    assert row["note"].startswith("set-up problem") and share["problem"] in row["note"]


def test_identical_variants_are_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [0.9] * 3, [0.9] * 3)
    (h,) = _headlines(capsys, root)
    (noise,) = h["noise"]
    assert noise["identical"] and noise["identical_to"] == ["control"]
    assert (
        "none seen: the 3 runs are identical (std 0; noise that shows in only a few runs cannot be ruled out from 3)"
        in (h["sentences"][1])
    )
    assert h["sentences"][1].endswith("; identical to control.")
    assert h["runs"]["reason"].startswith("the runs are identical")


def test_every_format_opens_with_the_same_sentences(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = _study(tmp_path, [0.91] * 3, SEEDS)
    (h,) = _headlines(capsys, root)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "report", str(root))
    lines = out.splitlines()
    assert code == 0 and lines[0] == "Answers for val_acc (experiment mlp)"
    assert max(map(len, lines)) <= 80
    flat = " ".join(out.split())
    for sentence in h["sentences"]:  # wrapped, but whole and before the first table
        assert sentence in flat and flat.index(sentence) < flat.index("experiment=mlp variant=")
    code, md, _ = run_cli(capsys, "report", str(root), "--format", "md")
    assert md.index("**Answers for val_acc (experiment mlp)**") < md.index("| experiment | variant |")
    for sentence in h["sentences"]:
        assert f"- {sentence.replace('|', chr(92) + '|')}" in md
    code, text, _ = run_cli(capsys, "report", str(root), "--headline", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["kind"] for r in rows] == ["control", "noise", "implementation share", "runs needed"]
    assert [r["sentence"] for r in rows] == h["sentences"]


def test_headline_follows_metric_patterns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = _study(tmp_path, [0.91] * 3, SEEDS)
    heads = _headlines(capsys, root, "--metric", "train_*")
    assert [h["metric"] for h in heads] == ["train_loss"]
    code, _, err = run_cli(capsys, "report", str(root), "--headline")
    assert code == 2 and "`--headline` applies to --format csv or json" in err


def test_impl_noise_in_a_few_runs_is_named_in_the_notes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # two of five impl runs bit-identical: noise that shows in some runs only, where no interval holds its level
    root = _study(tmp_path, [], [0.885, 0.91, 0.89, 0.9, 0.87], impl=[0.9, 0.905, 0.895, 0.9, 0.902])
    (h,) = _headlines(capsys, root)
    assert h["share"]["caveat"].startswith("approximate interval")
    assert any(n.startswith("implementation share: approximate interval") for n in h["notes"])
