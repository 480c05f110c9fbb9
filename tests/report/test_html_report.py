"""``--format html``: the self-contained page of ``deviate report`` and ``deviate compare``, opened in a real
browser (headless Chromium).

A real small study (``trainers/html_study.py`` replicated under ``algo+impl``, ``impl`` and ``control``: curves, a
metric named ``<b>acc</b>``, a single-value test metric named ``test_$acc$`` and a control character, predictions
and weights) is rendered; Chromium loads the page without a console message, a page error or a request for
anything outside it; the answers come before the first figure; every figure has data marks, each with its value on
hover; the names show as text (no ``<b>`` element, no mathtext); the single-value metric is a strip of runs, not a
curve; screenshots in light and dark mode are kept as artifacts (listed under "artifacts" at the end of the test
run). The compare page has the probability-of-improvement and forest plots and a results table that fits 1400
pixels; the ``--by`` page has the epsilon heatmap.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import missing_browser, screenshot

from tests.helpers.replicate_helpers import child_env

REPO = Path(__file__).resolve().parents[2]
STUDY = Path(__file__).resolve().parent / "trainers" / "html_study.py"

pytestmark = pytest.mark.slow


def _deviate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html-study")
    for variant, n in (("algo+impl", 3), ("impl", 3), ("control", 2)):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "deviate_cb.cli.replicate",
                "--trainer",
                f"{STUDY}:main",
                "-n",
                str(n),
                "--parallel",
                "2",
                "--variant",
                variant,
                "--out",
                str(root / "runs"),
                "--experiment",
                "tiny",
            ],
            cwd=root,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
    return root / "runs"


@pytest.fixture(scope="module")
def page(study: Path) -> Path:
    target = study.parent / "report.html"
    done = _deviate("report", str(study), "--format", "html", "-o", str(target), cwd=study.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # -o: the page went to the file
    return target


SINGLE = "test_$acc$\\x07"  # the single-value metric's name as the page shows it (the BEL escaped)
# Per figure: its data marks (elements with a hover title) holding something drawn
_MARKS = (
    "() => [...document.querySelectorAll('svg.plot')].map(svg => [...svg.querySelectorAll('g.mark')]"
    ".filter(g => g.querySelector('title') && g.querySelector('path, use, rect, image')).length)"
)


def test_the_page_is_self_contained_and_escapes_names(page: Path) -> None:
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "&lt;b&gt;acc&lt;/b&gt;" in html and "<b>acc</b>" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|@import""", html)
    for section in ("Answers", "Summary", "Metrics", "Variance decomposition", "Stability", "Step times"):
        assert f"<h2>{section}</h2>" in html, section
    assert html.index('id="answers"') < html.index("<svg")  # the answers above the first figure
    assert "\x07" not in html and "e+0" not in html.split("<svg")[0]  # no raw control character, no 1e+03%
    assert page.stat().st_size < 3_000_000


def _section(loaded, heading: str):
    """The metric section (its h3 up to the next h3) as a locator of its figures."""
    return loaded.locator(f"xpath=//h3[normalize-space(.)='{heading}']/following-sibling::div[1]//figure")


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_chromium_renders_the_report(page: Path, artifact) -> None:
    def check(loaded) -> None:
        assert loaded.locator("svg.plot").count() + loaded.locator("img.plot").count() >= 10
        assert loaded.get_by_text("<b>acc</b>", exact=True).count() >= 1  # the name as text, as typed
        assert loaded.locator("b").count() == 0  # ... never markup
        # the answers and why (the decomposition) first, then the summary with the problems, then the details
        assert loaded.locator("h2").all_inner_texts()[:4] == ["Answers", "Variance decomposition", "Summary", "Metrics"]
        answers = loaded.locator("#answers ul.answers li")
        assert answers.count() >= 4 and loaded.locator("#answers li.ok").count() >= 1  # control identical: ok
        first = loaded.locator("figure").first.bounding_box()
        assert loaded.locator("#answers li").first.bounding_box()["y"] < first["y"]
        marks = loaded.evaluate(_MARKS)
        assert marks and min(marks) >= 1, marks  # no empty axes: every figure draws data, each with a title
        # The single-value metric: a strip of runs, no curve; its name drawn as typed ($ is no mathtext)
        single = _section(loaded, SINGLE)
        kinds = [single.nth(i).get_attribute("data-kind") for i in range(single.count())]
        assert "strip" in kinds and "curves" not in kinds, kinds
        assert loaded.locator("svg.plot text", has_text="test_$acc$").count() >= 1
        assert loaded.get_by_text(SINGLE, exact=True).count() >= 1
        # Identical groups told apart: impl and control coincide on CPU
        assert loaded.locator("svg.plot text", has_text="identical to").count() >= 1
        assert loaded.locator('figure[data-kind="power"]').count() >= 1
        assert loaded.locator('figure[data-kind="decomposition"]').count() >= 1

    shot = artifact("report-html.png")
    said = screenshot(page, shot, check=check)
    assert said == [], said  # no console message, page error or failed request
    assert shot.stat().st_size > 10_000

    def dark_text(loaded) -> None:  # the plots take the page's text colour: light on the dark page
        colour = loaded.evaluate(
            "() => getComputedStyle(document.querySelector('svg.plot text')).fill || "
            "getComputedStyle(document.querySelector('svg.plot text')).color"
        )
        assert colour in ("rgb(230, 232, 235)",), colour

    dark = artifact("report-html-dark.png")
    assert screenshot(page, dark, color_scheme="dark", check=dark_text) == []


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_chromium_renders_the_comparison(study: Path, artifact) -> None:
    target = study.parent / "compare.html"
    done = _deviate(
        "compare",
        str(study),
        "--a",
        "variant=algo+impl",
        "--b",
        "variant=impl",
        "--format",
        "html",
        "-o",
        str(target),
        cwd=study.parent,
    )
    assert done.returncode == 0, done.stderr

    def check(loaded) -> None:
        assert loaded.get_by_text("<b>acc</b>", exact=True).count() >= 1
        for kind in ("poi", "forest", "curves", "distribution"):
            assert loaded.locator(f'figure[data-kind="{kind}"] svg.plot').count() >= 1, kind
        marks = loaded.evaluate(_MARKS)
        assert marks and min(marks) >= 1, marks
        table = loaded.locator("table").first
        width = table.evaluate("t => t.getBoundingClientRect().width")
        assert width <= 1400 - 64, width  # fits the page: no scrolling at 1400 pixels
        assert loaded.get_by_text("no significant difference", exact=False).count() >= 1

    assert screenshot(target, artifact("compare-html.png"), check=check, width=1400) == []


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_chromium_renders_the_ranking(study: Path, artifact) -> None:
    target = study.parent / "by.html"
    done = _deviate("compare", str(study), "--by", "variant", "--format", "html", "-o", str(target), cwd=study.parent)
    assert done.returncode == 0, done.stderr
    html = target.read_text()
    assert " > ".join(["algo+impl", "control", "impl"]) not in html  # no strict chain where none dominates

    def check(loaded) -> None:
        assert loaded.locator('figure[data-kind="heatmap"] svg.plot').count() >= 1
        marks = loaded.evaluate(_MARKS)
        assert marks and min(marks) >= 1, marks

    assert screenshot(target, artifact("ranking-html.png"), check=check) == []


def test_without_matplotlib_html_says_which_extra(tmp_path: Path, study: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('blocked for the test')\n")
    env = child_env()
    env["PYTHONPATH"] = f"{blocker}:{env.get('PYTHONPATH', '')}"
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "report", str(study), "--format", "html"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "pip install 'deviate-cb[report]'" in done.stderr


def test_output_file_errors_are_one_line(tmp_path: Path, study: Path) -> None:
    done = _deviate(
        "report", str(study), "--format", "csv", "-o", str(tmp_path / "no" / "such" / "r.csv"), cwd=tmp_path
    )
    assert done.returncode == 2 and "`-o` must be a file that can be written" in done.stderr
    assert done.stderr.count("\n") == 1


def test_curves_fold_run_by_run_whatever_the_order_of_steps(tmp_path: Path) -> None:
    from deviate_cb.report.reading.runs import find_runs
    from deviate_cb.report.rendering.html.curves import read_curves
    from deviate_cb.store.run_directory import RunDirectory, run_path

    for k, (steps, values) in enumerate((([2, 0, 1, 2], [9.0, 1.0, 2.0, 3.0]), ([0, 1, 2], [3.0, 4.0, 5.0]))):
        run = RunDirectory(run_path(tmp_path, "e", "algo", k))
        run.update_manifest(status="completed")
        n = len(steps)
        run.metrics().append({"step": steps, "epoch": [0] * n, "stage": ["val"] * n, "scope": ["step"] * n,
                              "name": ["acc"] * n, "value": values, "wall_time": [0.0] * n})  # fmt: skip
    curves = read_curves(find_runs(tmp_path), [])
    (key,) = curves
    c = curves[key]
    # run 0: steps sorted, step 2 logged twice keeps its last value (3.0); the mean with run 1 per step
    assert c.steps.tolist() == [0, 1, 2] and c.mean.tolist() == [2.0, 3.0, 4.0] and c.n_runs == 2
