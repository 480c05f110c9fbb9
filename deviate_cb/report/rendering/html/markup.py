"""The page's building blocks: styles, escaped text, numbers formatted as the terminal prints them, tables.

Example:
    >>> text("<b>acc</b>\\x1b[31m")
    '&lt;b&gt;acc&lt;/b&gt;\\\\x1b[31m'
    >>> number(0.123456), percent(0.0124), percent(21.297), signed_percent(2129.66), interval(0.1, 0.25)
    ('0.1235', '1.24%', '2129.7%', '+2129.7%', '[0.1, 0.25]')
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Sequence
from typing import Any, Optional

from deviate_cb.report.text.safe import printable

__all__ = ["STYLE", "figure", "interval", "number", "percent", "shell", "signed_percent", "table", "text"]

STYLE = """
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #5b6470; --line: #d7dce2;
        --card: #ffffff; --accent: #0072B2; --warn: #8a4b00; --warnbg: #fff4e0; --ok: #0b6e4f; --okbg: #e3f5ec; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e8eb; --bg: #15181c; --muted: #a3abb5; --line: #39404a; --card: #1c2026; --accent: #56B4E9;
          --warn: #ffcf8a; --warnbg: #3a2a10; --ok: #8fe0bd; --okbg: #12352a; }
}
* { box-sizing: border-box; }
body { margin: 0; padding: 1.5rem 2rem 3rem; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--fg); background: var(--bg); max-width: 1400px; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid var(--line); }
h3 { margin: 1.6rem 0 .4rem; } h4 { margin: 1rem 0 .3rem; color: var(--muted); font-weight: 600; }
.meta, .note, figcaption { color: var(--muted); font-size: .88rem; }
figcaption { max-width: 34rem; padding: .2rem .3rem 0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .88rem; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .6rem; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.figure { background: var(--card); border-radius: 8px; padding: .4rem; margin: .4rem 0; display: inline-block;
          max-width: 100%; border: 1px solid var(--line); }
.figure.raster { background: #ffffff; color: #1b1f24; border-color: #d7dce2; color-scheme: light; }
.figure.raster figcaption { color: #4d5560; }
.figure svg, .figure img { max-width: 100%; height: auto; display: block; }
.pair { display: flex; flex-wrap: wrap; gap: .8rem; align-items: flex-start; }
ul.problems li { background: var(--warnbg); color: var(--warn); padding: .2rem .5rem; margin: .2rem 0;
                 border-radius: 4px; list-style: none; }
details.problems > summary { cursor: pointer; } details.problems > summary h3 { display: inline; }
ul.answers { padding-left: 0; margin: .3rem 0 .8rem; } ul.answers li { list-style: none; margin: .25rem 0;
  padding: .2rem .5rem; border-left: 3px solid var(--line); }
ul.answers li.ok { background: var(--okbg); color: var(--ok); border-left-color: var(--ok); }
ul.answers li.warn { background: var(--warnbg); color: var(--warn); border-left-color: var(--warn); }
.badge { font-weight: 700; margin-right: .4rem; }
nav a { color: var(--accent); margin-right: .8rem; } code { font-size: .9em; }
.error { font-family: ui-monospace, monospace; font-size: .82rem; white-space: pre-wrap; max-width: 60rem; }
"""


def text(value: Any) -> str:
    """A stored string made safe for the page: control characters escaped, then HTML-escaped."""
    return html.escape(printable(str(value)), quote=True)


def _finite(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def number(value: Any, digits: int = 4) -> str:
    """A number as the terminal prints it: ``digits`` significant digits; NaN and None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return text(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "—" if math.isnan(value) else ("∞" if value > 0 else "-∞")
    return f"{value:.{digits}g}"


def percent(ratio: Any) -> str:
    """A ratio as the percentage every format prints (:func:`deviate_cb.report.text.safe.percent`: ``0.0124`` is
    ``1.24%``, ``0.684`` is ``68.4%``, never an exponent); a dash when missing."""
    from deviate_cb.report.text import safe as words

    return "—" if _finite(ratio) is None else words.percent(ratio)


def signed_percent(pct: Any) -> str:
    """A percentage (already in percent) with its sign, as the terminal's step-time spread (``+2129.7%``)."""
    from deviate_cb.report.text import safe as words

    x = _finite(pct)
    return "—" if x is None else words.percent(x / 100.0, sign=True)


def interval(low: Any, high: Any, digits: int = 4) -> str:
    """``[low, high]`` in one cell; a dash when the interval is missing."""
    if _finite(low) is None and _finite(high) is None:
        return "—"
    return f"[{number(low, digits)}, {number(high, digits)}]"


def table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool] = (), *, raw: bool = False
) -> str:
    """An HTML table in a horizontal scroll container; cells are numbers (formatted) or text (escaped; already
    formatted markup when ``raw``); ``numeric`` right-aligns columns and keeps them on one line."""
    right = list(numeric) + [False] * (len(header) - len(numeric))
    head = "".join(f'<th class="{"num" if r else ""}">{text(h)}</th>' for h, r in zip(header, right, strict=True))
    body = []
    for row in rows:
        cells = []
        for value, r in zip(row, right, strict=True):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                shown = number(value)
            else:
                shown = str(value) if raw else text(value)
            cells.append(f'<td class="{"num" if r else ""}">{shown}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def figure(markup: str, caption: str = "", kind: str = "") -> str:
    """A plot on its card, with an escaped ``caption`` under it; ``kind`` names what it shows (``data-kind``)."""
    raster = " raster" if markup.startswith("<img") else ""
    data = f' data-kind="{text(kind)}"' if kind else ""
    under = f"<figcaption>{text(caption)}</figcaption>" if caption else ""
    return f'<figure class="figure{raster}"{data}>{markup}{under}</figure>'


def shell(title: str, subtitle: str, body: Sequence[str]) -> str:
    """The whole page: ``<head>`` with the styles, a title, ``body`` sections (``subtitle`` is markup)."""
    from deviate_cb import __version__

    made = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head><body>"
        f'<header><h1>{text(title)}</h1><div class="meta">{subtitle} · made {made} by deviate-cb {text(__version__)}'
        "</div></header>" + "".join(body) + "</body></html>\n"
    )
