"""`deviate_cb.report.load`: the report from Python and notebooks gives what `deviate report` prints, as objects,
Arrow tables, figures and a page that a notebook shows (checked in headless Chromium, as a notebook renders it).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from browser import browser_page, missing_browser

import deviate_cb.report
from deviate_cb.errors import UsageError
from tests.helpers.report_study import run_cli, write_run

SEEDS = [0.885, 0.91, 0.89, 0.9]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("study")
    for k in range(3):
        rows = [("train", "loss", 0.9 - s / 10) for s in range(5)] + [("val", "val_acc", 0.91)]
        write_run(root, "mlp", "control", k, rows)
    for k, acc in enumerate(SEEDS):
        rows = [("train", "loss", 0.9 - s / 10 + k / 50) for s in range(5)] + [("val", "val_acc", acc)]
        write_run(root, "mlp", "algo+impl", k, rows)
    write_run(root, "mlp", "algo+impl", 9, status="failed", error="RuntimeError: <boom>")
    return root


def test_the_answers_and_tables_are_the_commands(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    study = deviate_cb.report.load(root, effect="2%")
    code, out, _ = run_cli(capsys, "report", str(root), "--headline", "--format", "json", "--effect", "2%")
    assert code == 0 and [h.to_dict() for h in study.headlines] == json.loads(out)
    tables = study.tables()
    assert set(tables) == {"groups", "headline", "decomposition", "excluded", "timings", "problems"}
    assert all(isinstance(t, pa.Table) for t in tables.values())
    code, out, _ = run_cli(capsys, "report", str(root), "--format", "json")
    assert tables["groups"].to_pylist() == json.loads(out)
    assert tables["headline"].column("sentence").to_pylist() == list(study.headlines[0].sentences)
    (left,) = tables["excluded"].to_pylist()
    assert (left["replica"], left["status"]) == ("9", "failed") and "RuntimeError: <boom>" in left["why"]
    assert tables["decomposition"].num_rows == 0 and tables["decomposition"].column_names[0] == "experiment"
    text = study.text(width=80)
    assert text.startswith("Answers for val_acc (experiment mlp)\n") and max(map(len, text.splitlines())) <= 80
    assert repr(study) == f"Study({str(root)!r}: 8 runs in 2 groups, 1 answers)"


def _without_time(page: str) -> str:
    return re.sub(r"made \d{4}-\d\d-\d\d \d\d:\d\d UTC", "made", page)


def test_figures_and_page(root: Path) -> None:
    pytest.importorskip("matplotlib")
    study = deviate_cb.report.load(root)
    page = study.html()
    assert page.startswith("<!DOCTYPE html>") and "the 3 runs are bit-identical" in page
    figures = study.figures()
    assert "runs needed in experiment mlp" in figures
    assert "training curves of loss (experiment mlp)" in figures  # a series: curves
    assert not any(key.startswith("training curves of val_acc") for key in figures)  # one value per run: no curve
    for key, markup in figures.items():
        assert markup.lstrip().startswith(("<svg", "<img")), key
        assert markup in page  # the page's own fragments
    frame = study._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and 'sandbox="allow-same-origin"' in frame
    shown = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert _without_time(shown) == _without_time(page)


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_a_notebook_shows_the_page(root: Path, tmp_path: Path) -> None:
    """What Jupyter does with _repr_html_: put it in the notebook's page; the report shows, the notebook's own
    styles stay as they were."""
    pytest.importorskip("matplotlib")
    study = deviate_cb.report.load(root)
    notebook = tmp_path / "notebook.html"
    notebook.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>body { background: rgb(1, 2, 3); }</style></head>'
        f'<body><div class="output">{study._repr_html_()}</div></body></html>'
    )
    with browser_page() as (page, messages):
        page.goto(notebook.resolve().as_uri())
        page.wait_for_load_state("load")
        (frame,) = [f for f in page.frames if f != page.main_frame]
        frame.wait_for_selector("h2")
        answers = frame.inner_text("body")
        assert "control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs." in answers
        assert frame.locator("svg").count() >= 3
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(1, 2, 3)"
    assert messages == []


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^`DIR` does not exist\. Received: DIR="):
        deviate_cb.report.load(tmp_path / "nowhere")
    write_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.9)])
    with pytest.raises(UsageError, match=r"^`--effect` must be a positive number"):
        deviate_cb.report.load(tmp_path, effect="-1")
