"""Stored names reach every page as typed: a ``$`` is a dollar sign (never matplotlib's mathtext, which fails on
``cost_$_per_$_item``), markup is text, a control character is a visible escape and never a raw byte.

A real study (manifests and metrics written by the store) holds metrics named ``cost_$_per_$_item``, ``<b>x</b>``,
``a|b``, ``p&l`` and ``bell\\x07x``, with training curves; ``deviate report`` and ``deviate compare`` write their
HTML and Markdown pages in-process.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.report_study import run_cli, write_run

pytest.importorskip("matplotlib")

DOLLARS, MARKUP, PIPE, AMPERSAND, BELL = "cost_$_per_$_item", "<b>x</b>", "a|b", "p&l", "bell\x07x"
NAMES = (DOLLARS, MARKUP, PIPE, AMPERSAND, BELL)
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # never valid in a page (tab and newline are markup)


def _study(root: Path) -> Path:
    """Three replicas of algo, impl, algo+impl and control; every metric a short series (training curves)."""
    for v, variant in enumerate(("algo", "impl", "algo+impl", "control")):
        for k in range(3):
            rows = [
                ("val", name, 0.5 + i / 10 + step / 100 + (k + v) / 1000)
                for step in range(4)
                for i, name in enumerate(NAMES)
            ]
            write_run(root, "mlp", variant, k, rows)
    return root


def _svg_texts(page: str) -> list[str]:
    """The text of every ``<text>`` element of the page's figures, as drawn (entities decoded)."""
    import html

    return [html.unescape(t) for t in re.findall(r"<text\b[^>]*>([^<]*)</text>", page)]


def _check_page(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert RAW_CONTROL.search(page) is None  # no control character reaches the page, its SVG text included
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page  # markup shown as text, never as markup
    texts = _svg_texts(page)
    # each name drawn as typed in the figures: one text, the dollars kept (no mathtext), the bell as \x07
    for shown in (DOLLARS, MARKUP, PIPE, AMPERSAND, "bell\\x07x"):
        assert any(shown in t for t in texts), (shown, [t for t in texts if t[:3] in shown])
    assert not any("\\$" in t for t in texts)  # no escape left visible either
    assert "bell\\x07x" in page.split("<svg")[0]  # and in the page's own text


def test_report_html_draws_names_as_typed(capsys, tmp_path: Path) -> None:
    root = _study(tmp_path / "study")
    page_file = tmp_path / "report.html"
    code, _, err = run_cli(capsys, "report", str(root), "--format", "html", "-o", str(page_file))
    assert code == 0, err
    _check_page(page_file.read_text(encoding="utf-8"))


def test_compare_html_draws_names_as_typed(capsys, tmp_path: Path) -> None:
    root = _study(tmp_path / "study")
    page_file = tmp_path / "compare.html"
    args = ("compare", str(root), "--a", "variant=algo", "--b", "variant=impl", "--format", "html")
    code, _, err = run_cli(capsys, *args, "-o", str(page_file))
    assert code == 0, err
    page = page_file.read_text(encoding="utf-8")
    _check_page(page)
    assert 'data-kind="curves"' in page and 'data-kind="forest"' in page


def test_no_figure_text_is_read_as_math() -> None:
    """Whatever text a figure is given, a `$` is drawn as typed and no control character is written: the guarantee
    is the figure code's, not each caller's (an axis label here is not passed through `label`)."""
    from deviate_cb.report.rendering.html.figures import bar_figure

    svg = bar_figure("bars", ["$x$", DOLLARS], [1.0, 2.0], xlabel=f"{DOLLARS} and $y$ at 5$ {BELL}")
    texts = _svg_texts(svg)
    assert f"{DOLLARS} and $y$ at 5$ bell\\x07x" in texts and "$x$" in texts and DOLLARS in texts
    assert RAW_CONTROL.search(svg) is None


def _md_rows(md: str, name: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("|") and name in line]


@pytest.mark.parametrize("command", ["report", "compare"])
def test_markdown_escapes_html_in_names(capsys, tmp_path: Path, command: str) -> None:
    root = _study(tmp_path)
    pair = ("--a", "variant=algo", "--b", "variant=impl") if command == "compare" else ()
    code, md, err = run_cli(capsys, command, str(root), *pair, "--format", "md")
    assert code == 0, err
    assert RAW_CONTROL.search(md) is None
    assert "<b>" not in md and "<" not in md.replace("&lt;", "")  # no tag from a name reaches a renderer
    assert _md_rows(md, "&lt;b&gt;x&lt;/b&gt;")  # ... it reads as typed
    assert _md_rows(md, "p&amp;l") and not re.search(r"p&l\b", md)
    assert _md_rows(md, "a\\|b")  # a pipe in a name does not split its cell
    assert _md_rows(md, "bell\\x07x") and _md_rows(md, DOLLARS)
    for table in _tables(md):  # every row keeps its table's number of cells
        assert {len(_CELL_BAR.findall(row)) for row in table} == {len(_CELL_BAR.findall(table[0]))}, table


_CELL_BAR = re.compile(r"(?<!\\)\|")  # a | that is not escaped: it separates cells


def _tables(md: str) -> list[list[str]]:
    tables: list[list[str]] = []
    previous = False
    for line in md.splitlines():
        row = line.startswith("|")
        if row and not previous:
            tables.append([])
        if row:
            tables[-1].append(line)
        previous = row
    return tables
