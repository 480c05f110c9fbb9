"""The HTML pages give the answer every other format gives, and read in the light and the dark scheme (issue 44,
item 7).

A real study replicated until decided (``trainers/sequential_study.py``: a tiny Lightning classifier, group
``slow`` made first, then group ``fast`` run ``--until-decided --against experiment=slow`` through the
``deviate-replicate`` console script) is compared and reported:

- the compare page carries the note ``deviate compare`` prints on its terminal (the groups were replicated until a
  sequential test decided), word for word, with the answers; JSON and CSV carry it as ``sequential_note``;
- the report page lists the metrics the answers are about (``val_acc``, ``val_loss``, and ``val_error``, which
  only the second experiment logs) before ``train_loss``, in its answers and in its per-metric sections, figures
  included;
- in headless Chromium, light and dark: every figure's caption contrasts with its card (WCAG 4.5:1), the SVG
  plots' text too, and each PNG plot (every step's ``train_loss`` of 3 replicas per group: too many marks for SVG)
  sits on a card of its own background colour.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import missing_browser, screenshot

from tests.helpers.replicate_helpers import child_env

REPO = Path(__file__).resolve().parents[2]
TRAINER = Path(__file__).resolve().parent / "trainers" / "sequential_study.py"

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def _command(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A console script of the package, as a user runs it (``python -m`` where the venv has none)."""
    script = BIN / name
    module = "deviate_cb.cli." + ("main" if name == "deviate" else "replicate")
    head = [str(script)] if script.is_file() else [sys.executable, "-m", module]
    return subprocess.run([*head, *args], cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("decided")
    common = ("-n", "3", "--parallel", "2", "--variant", "algo", "--out", "runs")
    slow = _command("deviate-replicate", "--trainer", f"{TRAINER}:slow", *common, "--experiment", "slow", cwd=root)
    assert slow.returncode == 0, slow.stdout + slow.stderr
    fast = _command(
        "deviate-replicate", "--trainer", f"{TRAINER}:fast", *common, "--experiment", "fast", "--until-decided",
        "--against", "experiment=slow", "--metric", "val_loss", "--max-runs", "6", cwd=root,
    )  # fmt: skip
    assert fast.returncode == 0, fast.stdout + fast.stderr
    assert ": A better" in fast.stdout, fast.stdout  # decided: the note below has a decision to carry
    return root


COMPARE = ("compare", "runs", "--a", "experiment=fast", "--b", "experiment=slow")


def _words(value: str) -> str:
    return " ".join(value.split())


@pytest.fixture(scope="module")
def compare_page(study: Path) -> Path:
    done = _command("deviate", *COMPARE, "--format", "html", "-o", "compare.html", cwd=study)
    assert done.returncode == 0, done.stderr
    return study / "compare.html"


@pytest.fixture(scope="module")
def report_page(study: Path) -> Path:
    done = _command("deviate", "report", "runs", "--format", "html", "-o", "report.html", cwd=study)
    assert done.returncode == 0, done.stderr
    return study / "report.html"


def test_every_compare_format_carries_the_sequential_note(study: Path, compare_page: Path) -> None:
    terminal = _command("deviate", *COMPARE, cwd=study)
    assert terminal.returncode == 0, terminal.stderr
    said = _words(terminal.stderr)
    found = re.search(
        r"deviate: note: (these groups were replicated until a sequential test decided .*?error rate\.)", said
    )
    assert found, said
    note = found.group(1)
    assert "val_loss, A = experiment=fast variant=algo vs B = experiment=slow variant=algo: A better" in note
    # JSON and CSV: a field of every row, the same words
    records = json.loads(_command("deviate", *COMPARE, "--format", "json", cwd=study).stdout)
    assert records and all(_words(r["sequential_note"]) == note for r in records), records
    rows = list(csv.DictReader(io.StringIO(_command("deviate", *COMPARE, "--format", "csv", cwd=study).stdout)))
    assert rows and all(_words(r["sequential_note"]) == note for r in rows)
    # The page: the same words, with the answers (before the figures and the results table)
    page = compare_page.read_text()
    answers = page[page.index("<h2>Answers</h2>") : page.index("<figure")]
    items = [_words(html.unescape(re.sub(r"<[^>]+>", " ", li))) for li in re.findall(r"<li\b.*?</li>", answers)]
    assert any(item.endswith(note) for item in items), items


def test_the_report_page_lists_the_metrics_of_interest_first(report_page: Path) -> None:
    page = report_page.read_text()
    body = page[page.index("<h2>Metrics</h2>") :]
    sections = [html.unescape(m) for m in re.findall(r'<h3 id="m\d+">([^<]*)</h3>', body)]
    assert sections[-1] == "train_loss" and set(sections[:-1]) == {"val_acc", "val_error", "val_loss"}, sections
    links = [html.unescape(m) for m in re.findall(r'<a href="#m\d+">([^<]*)</a>', body.split("</nav>")[0])]
    assert links == sections
    answered = [html.unescape(m) for m in re.findall(r'<h3 class="answer"><a href="#m\d+">([^<]*)</a>', page)]
    assert set(answered) == set(sections[:-1])  # the answers are about them
    labels = re.findall(r'(?:aria-label|alt)="(?:training curves|distribution) of ([^" ]+)', body)
    assert list(dict.fromkeys(labels)) == sections, labels  # the figures follow the sections
    assert '<figure class="figure raster" data-kind="curves"><img class="plot"' in body  # a PNG to check below


# Per figure on the page: the contrast of its caption, and of its plot's text (SVG) or its PNG's own background,
# with the card it sits on (WCAG 2 relative luminance; the first opaque background up the tree)
_CONTRASTS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 :
      Math.pow((v + 0.055) / 1.055, 2.4); }).reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const background = (el) => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c.slice(0, 3); } return [255, 255, 255]; };
  return [...document.querySelectorAll('figure.figure')].map((fig) => {
    const card = background(fig), out = {kind: fig.dataset.kind || '', raster: fig.classList.contains('raster')};
    const caption = fig.querySelector('figcaption');
    if (caption) out.caption = ratio(rgb(getComputedStyle(caption).color), card);
    const label = fig.querySelector('svg.plot text');
    if (label) out.text = ratio(rgb(getComputedStyle(label).fill), card);
    const img = fig.querySelector('img.plot');
    if (img) { const canvas = document.createElement('canvas'); canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight; const ctx = canvas.getContext('2d'); ctx.drawImage(img, 0, 0);
      out.image = ratio([...ctx.getImageData(1, 1, 1, 1).data].slice(0, 3), card); }
    return out;
  });
}"""


def _readable(figures: list[dict]) -> None:
    assert figures and any(f["raster"] for f in figures), figures  # a PNG among them
    for figure in figures:
        assert figure.get("caption", 21) >= 4.5, figure  # a caption that can be read on its card
        assert figure.get("text", 21) >= 4.5, figure  # an SVG's axes and labels too
        assert figure.get("image", 1.0) < 1.1, figure  # a PNG on a card of its own colour, no white patch


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_figures_read_in_both_schemes(compare_page: Path, report_page: Path, scheme: str, artifact) -> None:
    def compare_check(loaded) -> None:
        _readable(loaded.evaluate(_CONTRASTS))
        note = loaded.locator("#answers li.sequential")  # the note, shown with the answers, above the figures
        assert note.count() == 1 and note.is_visible()
        assert note.bounding_box()["y"] < loaded.locator("figure").first.bounding_box()["y"]

    def report_check(loaded) -> None:
        _readable(loaded.evaluate(_CONTRASTS))

    for page, check in ((compare_page, compare_check), (report_page, report_check)):
        shot = artifact(f"decided-{page.stem}-{scheme}.png")
        assert screenshot(page, shot, color_scheme=scheme, check=check, clip_height=2400) == []
