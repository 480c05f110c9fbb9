"""``--format html``: the self-contained page of ``deviate report`` and ``deviate compare``, opened in a real
browser (headless Chromium).

A real small study (``trainers/html_study.py`` replicated under ``algo+impl`` and ``impl``: curves, a metric named
``<b>acc</b>``, predictions and weights) is rendered; Chromium loads the page without a console message, a page
error or a request for anything outside it; every plot is there; the metric's name shows as text (no ``<b>``
element); a screenshot is kept as an artifact (listed under "artifacts" at the end of the test run).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import missing_browser, screenshot

REPO = Path(__file__).resolve().parents[2]
STUDY = Path(__file__).resolve().parent / "trainers" / "html_study.py"
sys.path.insert(0, str(REPO / "tests" / "launch"))

from replicate_helpers import child_env  # noqa: E402

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
    for variant in ("algo+impl", "impl"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "deviate_cb.cli.replicate",
                "--trainer",
                f"{STUDY}:main",
                "-n",
                "3",
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


def test_the_page_is_self_contained_and_escapes_names(page: Path) -> None:
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "&lt;b&gt;acc&lt;/b&gt;" in html and "<b>acc</b>" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|@import""", html)
    for section in ("Summary", "Metrics", "Variance decomposition", "Stability", "Step times"):
        assert f"<h2>{section}</h2>" in html, section
    assert page.stat().st_size < 3_000_000


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_chromium_renders_the_report(page: Path, artifact) -> None:
    def check(loaded) -> None:
        assert loaded.locator("svg.plot").count() + loaded.locator("img.plot").count() >= 8
        assert loaded.get_by_text("<b>acc</b>", exact=True).count() >= 1  # the name as text, as typed
        assert loaded.locator("b").count() == 0  # ... never markup
        assert loaded.locator("h2").all_inner_texts()[:2] == ["Summary", "Metrics"]

    shot = artifact("report-html.png")
    said = screenshot(page, shot, check=check)
    assert said == [], said  # no console message, page error or failed request
    assert shot.stat().st_size > 10_000
    dark = artifact("report-html-dark.png")
    assert screenshot(page, dark, color_scheme="dark", clip_height=900) == []


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
        assert loaded.locator("svg.plot").count() >= 2 and loaded.get_by_text("<b>acc</b>", exact=True).count() >= 1

    assert screenshot(target, artifact("compare-html.png"), check=check) == []


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
