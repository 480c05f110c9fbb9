"""One answer everywhere: ``deviate_cb.report.load`` gives what ``deviate report`` prints, the sequential decision
of a study replicated until decided included, in its text, HTML page, tables and notebook view, and in
``deviate report --headline`` csv and json; every group lists its metrics in the same order, the metric of
interest first; a stability std that is rounding residue reads 0.

A real study (:mod:`decided_study`: torch classifiers replicated by the ``deviate-replicate`` console script,
``--until-decided``), read by the ``deviate`` console script and by the Python API.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from browser import browser_page, missing_browser
from decided_study import decided_study, deviate

import deviate_cb.report
from deviate_cb.report.answers.stability.build import StabilityGroup
from deviate_cb.report.answers.stability.rows import stability_rows
from deviate_cb.report.rendering.html.sections import stability_section
from deviate_cb.report.rendering.stability import write_stability
from deviate_cb.stats.stability.groups import per_class_accuracy, subgroup_rates

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return decided_study(tmp_path_factory)


def _record(study: Path) -> dict:
    (path,) = (study / ".sequential").glob("*.json")
    return json.loads(path.read_text())


def test_the_text_is_the_reports(study: Path) -> None:
    printed = deviate("report", str(study), env={"COLUMNS": "100"})
    assert printed.returncode == 0, printed.stderr
    text = deviate_cb.report.load(study).text(width=100)
    assert text.startswith("Replicated until decided\n  val_acc, A = experiment=poor variant=algo+impl vs B =")
    # the command prints the same, then its step-time section (and a closing summary) after it
    assert printed.stdout.startswith(text), (text, printed.stdout)
    assert max(map(len, text.splitlines())) <= 100


def test_the_headline_json_and_csv_carry_the_decision(study: Path) -> None:
    record, loaded = _record(study), deviate_cb.report.load(study)
    done = deviate("report", str(study), "--headline", "--format", "json")
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    first, rest = answers[0], answers[1:]
    assert first["kind"] == "sequential" and first["sequence"] == "until-decided"
    last = record["looks"][-1]
    assert first["decision"] == record["decision"] == "B better"
    assert (first["experiment"], first["variant"], first["metric"]) == ("poor", "algo+impl", "val_acc")
    assert first["against"] == {"experiment": "good", "variant": "algo+impl"}
    assert (first["look"], first["n_a"], first["n_b"]) == (len(record["looks"]), last["n_a"], last["n_b"])
    assert (first["statistic"], first["ci_low"], first["ci_high"]) == (last["statistic"], last["low"], last["high"])
    assert first["sentences"][0].startswith("val_acc, A = experiment=poor variant=algo+impl vs B = experiment=good")
    assert answers[:1] == loaded.sequences and rest == [h.to_dict() for h in loaded.headlines]
    done = deviate("report", str(study), "--headline", "--format", "csv")
    assert done.returncode == 0, done.stderr
    row = next(csv.DictReader(io.StringIO(done.stdout)))
    assert (row["kind"], row["experiment"], row["n"]) == ("sequential", "poor", str(last["n_a"]))
    assert row["detail"] == "B better against experiment=good variant=algo+impl"
    assert row["sentence"] == first["sentences"][0]


def test_the_page_tables_and_notebook_view_carry_the_decision(study: Path) -> None:
    loaded = deviate_cb.report.load(study)
    (line,) = loaded.sequence_lines
    page = loaded.html()
    assert "Replicated until decided" in page and html.escape(line) in page
    assert html.escape(html.escape(line)) in loaded._repr_html_()  # the page, escaped once more into srcdoc
    headline = loaded.tables()["headline"].to_pylist()
    assert headline[0]["kind"] == "sequential" and headline[0]["sentence"] == line
    assert [r["kind"] for r in headline[1:]] == [r["kind"] for h in loaded.headlines for r in h.records()]


def test_every_group_lists_its_metrics_in_the_same_order(study: Path) -> None:
    done = deviate("report", str(study), "--format", "json")
    assert done.returncode == 0, done.stderr
    order: dict[str, list[str]] = {}
    for row in json.loads(done.stdout):
        order.setdefault(row["experiment"], []).append(row["metric"])
    # by CV the poor group would put val_acc (CV ~10%) first and the good one val_loss (CV ~20%): now the same
    assert order == {"good": ["val_acc", "val_loss", "train_loss"], "poor": ["val_acc", "val_loss", "train_loss"]}
    printed = deviate("report", str(study), env={"COLUMNS": "200"}).stdout.splitlines()
    first_rows = [printed[i + 2].split()[0] for i, line in enumerate(printed) if line.startswith("metric ")]
    assert first_rows == ["val_acc", "val_acc"]  # the metric of interest heads every group's table


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_the_notebook_view_is_as_high_as_the_page(study: Path) -> None:
    """The view inserted into a page as Jupyter inserts an output (``innerHTML`` of its output area), in Chromium:
    the frame takes the page's height (no inner scrolling, the first figure whole); with its handler stripped (an
    untrusted notebook) its starting height still holds the page."""
    view = deviate_cb.report.load(study)._repr_html_()
    stripped = re.sub(r' onload="[^"]*"', "", view)
    host = "<!doctype html><html><body><div id='out' style='width: 860px'></div></body></html>"
    for snippet in (view, stripped):
        with browser_page(width=1000) as (page, messages):
            page.set_content(host)
            page.evaluate("markup => { document.getElementById('out').innerHTML = markup; }", snippet)
            page.wait_for_function("() => document.querySelector('iframe').contentDocument.readyState == 'complete'")
            page.wait_for_timeout(300)
            frame = page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().height")
            inner = page.frames[1]
            content = inner.evaluate("() => document.documentElement.getBoundingClientRect().height")
            figure = inner.evaluate("() => document.querySelector('svg, img').getBoundingClientRect().bottom")
            assert content > 720  # taller than the frame's fixed height before
            assert figure < content <= frame + 1, (frame, content)
            if snippet is view:
                assert abs(frame - content) <= 1  # fitted, not merely large
            assert [m for m in messages if m[0] in ("error", "pageerror")] == []


def test_stability_residue_reads_zero() -> None:
    """Three runs that agree on every sample (a control study): the per-class and sub-group stds are 0, not the
    1.4e-16 a floating-point mean of equal accuracies (0.8) leaves, and nothing is "inf" times a zero std."""
    predictions = np.array([[0, 0, 0, 0, 1, 1, 1, 0, 1, 1]] * 3)
    labels = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    per_class = per_class_accuracy(predictions, labels)
    rates = subgroup_rates(predictions, labels, ["a", "a", "a", "a", "a", "b", "b", "b", "b", "b"])
    assert 0 < max(per_class.std) < 1e-15  # the statistics keep what they computed
    group = StabilityGroup("mlp", "control", n_runs=3, n_samples=10, per_class=per_class, subgroups={"site": rates})
    for fmt in ("table", "md"):
        out = io.StringIO()
        write_stability([group], fmt, out)
        assert "e-1" not in out.getvalue() and "inf" not in out.getvalue(), out.getvalue()
        assert "std 0 in every class" in out.getvalue()
    page = stability_section([group])  # the HTML page's sub-group table says what the terminal's says
    table = page[page.index("sub-groups by site") :]
    assert "e-1" not in table and "inf" not in table, table
    rows = stability_rows([group])
    assert all(r["std"] in (0.0, None) for r in rows if r["measure"].startswith(("class_", "subgroup_")))
    assert all(r["ratio"] is None for r in rows if r["measure"].startswith(("class_", "subgroup_")))
