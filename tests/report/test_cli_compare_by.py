"""`deviate compare DIR --by KEY`: k groups ranked per metric by multi-group ASO, checked against stats.multi_aso."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from morin_tables import load, write_store, write_tables

from deviate_cb.report.answers.ranking import RANKING_COLUMNS
from deviate_cb.stats import multi_aso
from tests.helpers.report_study import run_cli

MEANS = {"algo": 0.80, "algo+impl": 0.82, "impl": 0.85}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple[float, float]]]]:
    from tests.helpers.report_study import write_run

    root = tmp_path_factory.mktemp("by_variant")
    g = np.random.default_rng(0)
    values: dict[str, list[tuple[float, float]]] = {}
    for variant, mean in MEANS.items():
        for k in range(8):
            acc, loss = mean + g.normal(0, 0.01), 1 - mean + g.normal(0, 0.01)
            values.setdefault(variant, []).append((acc, loss))
            write_run(root, "mlp", variant, k, [("val", "val_acc", acc), ("val", "val_loss", loss)])
    write_run(root, "mlp", "solo", 0, [("val", "val_acc", 0.9), ("val", "val_loss", 0.1)])  # one run: left out
    return root, values


def test_json_rows_are_multi_aso_of_the_groups(capsys, study) -> None:
    root, values = study
    code, out, err = run_cli(capsys, "compare", str(root), "--by", "variant", "--format", "json", "--seed", "3")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert all(list(r) == list(RANKING_COLUMNS) for r in rows)
    for metric, column, sign in (("val_acc", 0, 1.0), ("val_loss", 1, -1.0)):  # a loss is ranked negated
        expected = multi_aso({v: [sign * x[column] for x in xs] for v, xs in values.items()}, rng=3)
        mine = [r for r in rows if r["metric"] == metric]
        assert len(mine) == 6  # 3 groups: 6 ordered pairs; "solo" left out
        for row in mine:
            i, j = expected.groups.index(row["a"]), expected.groups.index(row["b"])
            assert row["eps_min"] == expected.eps_min[i, j]
            assert row["violation_ratio"] == expected.violation_ratio[i, j]
            assert row["rank_a"] == expected.ranking.index(row["a"]) + 1
            assert row["a_dominates_b"] == bool(expected.dominant[i, j])
            assert row["mean_a"] == pytest.approx(np.mean([x[column] for x in values[row["a"]]]))
            assert (row["pair_alpha"], row["n_comparisons"], row["left_out"]) == (0.05 / 6, 6, "solo")
            assert row["direction"] == ("max" if sign > 0 else "min")
    # The best variant on accuracy is the best on loss too: impl first, algo last.
    firsts = {r["metric"]: r["a"] for r in rows if r["rank_a"] == 1}
    assert firsts == {"val_acc": "impl", "val_loss": "impl"}


def test_table_and_markdown_show_the_matrix_in_ranking_order(capsys, study) -> None:
    root, _ = study
    code, out, _ = run_cli(capsys, "compare", str(root), "--by", "variant")
    assert code == 0
    assert out.startswith("Almost Stochastic Order by variant: algo (8 runs), algo+impl (8 runs), impl (8 runs), solo")
    assert "val_acc (larger is better): impl > algo+impl > algo" in out
    assert "val_loss (smaller is better): impl > algo+impl > algo" in out
    assert "Left out (fewer than 2 finite runs): solo." in out
    code, md, _ = run_cli(capsys, "compare", str(root), "--by", "variant", "--format", "md")
    assert code == 0 and "## val_acc (larger is better): impl > algo+impl > algo" in md
    assert "| rank | group | n | mean | dominates | vs impl | vs algo+impl | vs algo |" in md
    assert "| 1 | impl | 8 |" in md
    code, text, _ = run_cli(capsys, "compare", str(root), "--by", "variant", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert code == 0 and len(rows) == 12 and list(rows[0]) == list(RANKING_COLUMNS)


def test_two_groups_and_a_table_column(capsys, tmp_path: Path) -> None:
    paths = write_tables(tmp_path)
    code, out, err = run_cli(capsys, "compare", "--table", str(paths["all"]), "--by", "setting", "--format", "json")
    assert code == 0 and "non-numeric column ignored" in err
    rows = json.loads(out)
    acc = [r for r in rows if r["metric"] == "test_acc"]
    expected = multi_aso({s: load(s)[:, 1] for s in ("algo+impl", "impl")}, rng=0)
    assert {(r["a"], r["b"]) for r in acc} == {("algo+impl", "impl"), ("impl", "algo+impl")}
    for row in acc:
        i, j = expected.groups.index(row["a"]), expected.groups.index(row["b"])
        assert row["eps_min"] == expected.eps_min[i, j] and row["n_comparisons"] == 2


def test_experiments_pooled_are_refused_unless_pool(capsys, tmp_path: Path, make_run) -> None:
    for experiment in ("a", "b"):
        for variant, base in (("x", 0.1), ("y", 0.2)):
            for k in range(3):
                make_run(tmp_path, experiment, variant, k, [("val", "val_acc", base + 0.01 * k)])
    code, _, err = run_cli(capsys, "compare", str(tmp_path), "--by", "variant", "--format", "json")
    assert code == 2
    assert "group x holds runs of 2 configurations" in err and "--by variant,experiment" in err
    code, out, err = run_cli(capsys, "compare", str(tmp_path), "--by", "variant", "--format", "json", "--pool")
    assert code == 0 and "group x pools 2 configurations" in err
    assert all("x pools 2 configurations" in row["pooled"] for row in json.loads(out))
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "experiment=a"), "--by", "variant", "--format", "json")
    assert (code, err) == (0, "")


def test_a_metric_in_too_few_groups_is_skipped(capsys, tmp_path: Path, make_run) -> None:
    for k in range(3):
        make_run(tmp_path, "mlp", "x", k, [("val", "val_acc", 0.1 + 0.01 * k), ("val", "only_x", 1.0 + k)])
        make_run(tmp_path, "mlp", "y", k, [("val", "val_acc", 0.2 + 0.01 * k)])
    code, out, err = run_cli(capsys, "compare", str(tmp_path), "--by", "variant", "--format", "json")
    assert code == 0
    (skipped,) = [r for r in json.loads(out) if r["metric"] == "only_x"]
    assert skipped["status"] == "skipped" and skipped["reason"] == "fewer than 2 groups with 2 finite runs (1 of 2)"
    assert "metric `only_x` not compared: fewer than 2 groups with 2 finite runs (1 of 2)." in err
    code, out, _ = run_cli(capsys, "compare", str(tmp_path), "--by", "variant")
    assert code == 0 and "only_x: not compared: fewer than 2 groups with 2 finite runs (1 of 2)." in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ("--by", "foo"),
            "deviate: error: `--by` must be a partition key of the runs (experiment, replica, variant). "
            "Received: --by=foo.",
        ),
        (
            ("--by", "experiment"),
            "deviate: error: `--by` must split the runs into at least 2 groups to rank. Received: --by=experiment, "
            "which gives 1 group (experiment=resnet).",
        ),
        (("--by", "variant", "--a", "variant=impl"), "deviate: error: give `--by` or `--a`/`--b`, not both."),
    ],
)
def test_usage_errors_are_one_line(capsys, tmp_path: Path, extra, message) -> None:
    store = write_store(tmp_path)
    code, out, err = run_cli(capsys, "compare", str(store), *extra)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_the_order_claims_no_more_than_the_tests(capsys, tmp_path: Path) -> None:
    """Three groups drawn from one distribution: no group dominates another, so no '>' in the heading."""
    from tests.helpers.report_study import write_run

    g = np.random.default_rng(1)
    for variant in ("a", "b", "c"):
        for k in range(4):
            write_run(tmp_path, "mlp", variant, k, [("val", "val_acc", 0.8 + g.normal(0, 0.01))])
    code, out, err = run_cli(capsys, "compare", str(tmp_path), "--by", "variant")
    assert code == 0, err
    (heading,) = [line for line in out.splitlines() if line.startswith("val_acc (")]
    assert ">" not in heading and heading.count(" ~ ") == 2
    # 4 runs each among 3 groups: 1 / C(8, 4) = 0.014 > 0.05 / 6, so no claim is possible at all, and it says so
    assert heading.endswith("(too few runs to claim that any group almost dominates another)")
    assert "'almost dominates' cannot be claimed there at this n" in " ".join(out.split())


def test_the_order_marks_dominance(capsys, study) -> None:
    root, values = study
    code, out, _ = run_cli(capsys, "compare", str(root), "--by", "variant", "--seed", "3")
    assert code == 0
    expected = multi_aso({v: [x[0] for x in xs] for v, xs in values.items()}, rng=3)
    (heading,) = [line for line in out.splitlines() if line.startswith("val_acc (")]
    index = {name: i for i, name in enumerate(expected.groups)}
    signs = [
        ">" if expected.dominant[index[a], index[b]] else "~"
        for a, b in zip(expected.ranking, expected.ranking[1:], strict=False)
    ]
    words = heading.split(": ", 1)[1].split()
    assert words[1:4:2] == signs and words[0:5:2] == list(expected.ranking)
