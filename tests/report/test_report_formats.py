"""Every output format of the report: JSON, CSV, Markdown and the rich terminal table."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from deviate_cb.report.answers.summary import COLUMNS, build_report
from deviate_cb.report.rendering.formats import FORMATS, render

KEYS = {"experiment", "variant", "metric", "aggregate", "n", "mean", "std", "cv", "min", "max", "range"}
KEYS |= {"std_ci_low", "std_ci_high"}


@pytest.fixture
def report(morin_study: Path, tmp_path: Path, make_run):
    return build_report(morin_study)


@pytest.fixture
def mixed(tmp_path: Path, make_run):
    """Two completed runs, a single-run group (NaN std) and a failed run."""
    make_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.80), ("val", "val_loss", 0.5)])
    make_run(tmp_path, "mlp", "algo", 1, [("val", "val_acc", 0.84), ("val", "val_loss", 0.6)])
    make_run(tmp_path, "mlp", "control", 0, [("val", "val_acc", 0.81)])
    make_run(tmp_path, "mlp", "algo", 2, status="failed", exit_code=3, error="RuntimeError: boom | pipe")
    return build_report(tmp_path)


def test_json_is_a_list_of_objects_with_the_documented_keys(report) -> None:
    rows = json.loads(render(report, "json"))
    assert isinstance(rows, list) and len(rows) == 4
    for obj in rows:
        assert set(obj) == KEYS | {"n_nonfinite"}
        assert list(obj) == list(COLUMNS)
    first = rows[0]
    assert (first["experiment"], first["variant"], first["metric"], first["aggregate"]) == (
        "resnet_cifar10",
        "algo+impl",
        "test_acc",
        "last",
    )
    assert first["std"] == report.rows[0].std and first["n"] == 50


def test_json_writes_nan_as_null(mixed) -> None:
    text = render(mixed, "json")
    assert "NaN" not in text
    control = [r for r in json.loads(text) if r["variant"] == "control"]
    assert control[0]["n"] == 1 and control[0]["std"] is None and control[0]["std_ci_low"] is None
    assert render(type(mixed)((), ()), "json") == "[]"


def test_csv_has_the_same_columns_and_full_precision(report, mixed) -> None:
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert len(rows) == 4 and tuple(rows[0]) == COLUMNS
    for parsed, row in zip(rows, report.rows, strict=True):
        assert float(parsed["std"]) == row.std and int(parsed["n"]) == row.n and parsed["metric"] == row.metric
    control = [r for r in csv.DictReader(io.StringIO(render(mixed, "csv"))) if r["variant"] == "control"]
    assert control[0]["std"] == "" and control[0]["cv"] == ""


def test_markdown_table_and_excluded_runs(mixed) -> None:
    text = render(mixed, "md")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| experiment | variant | metric |"))
    assert set(lines[header + 1]) <= set("|-")
    body = lines[header + 2 : lines.index("", header)]
    assert len(body) == 3
    assert body[0].startswith("| mlp | algo | val_acc | 2 |")  # by name, whatever the cv: the same in every group
    assert "## Runs left out of the statistics" in text
    assert "| mlp | algo | 2 | failed | 3 | RuntimeError: boom \\| pipe |" in text
    assert all(line.count("|") - line.count("\\|") == lines[header].count("|") for line in body)


def test_terminal_table(mixed) -> None:
    text = render(mixed, "table")
    assert "experiment=mlp  variant=algo  (2 completed runs, aggregate=last)" in text
    assert "experiment=mlp  variant=control  (1 completed run, aggregate=last)" in text
    assert "Runs left out of the statistics" in text and "RuntimeError: boom" in text
    assert text.index("val_acc") < text.index("val_loss")  # by name, in every group
    assert "95% Bonett interval" in text


def test_terminal_table_on_morin(report) -> None:
    text = render(report, "table")
    assert "0.02656" in text and "[0.02167, 0.03388]" in text and "2.68%" in text


def test_unknown_format(report) -> None:
    assert FORMATS == ("table", "md", "csv", "json")
    with pytest.raises(ValueError, match=r"`fmt` must be one of table, md, csv, json\. Received: fmt='xml'\."):
        render(report, "xml")


def test_nonfinite_column_only_when_needed(tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "e", "v", 0, [("val", "val_loss", math.nan)])
    make_run(tmp_path, "e", "v", 1, [("val", "val_loss", 0.5)])
    make_run(tmp_path, "e", "v", 2, [("val", "val_loss", 0.7)])
    report = build_report(tmp_path)
    assert "non-finite" in render(report, "table")
    assert json.loads(render(report, "json"))[0]["n_nonfinite"] == 1
