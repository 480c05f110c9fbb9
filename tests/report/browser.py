"""Open an HTML report in a real browser, headless Chromium (Debian's ``chromium``, which ``make test`` installs),
driven by Playwright: what its console said, the errors the page raised, and a screenshot.

Also the maker of the README's screenshot: ``python tests/report/browser.py PAGE.html docs/report.png`` (``make
screenshot`` renders the demo study's page and calls this).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

CHROMIUM_FLAGS = (  # as root, offline: no sandbox, no GPU, nothing fetched in the background
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> Optional[str]:
    """Debian's Chromium, or ``DEVIATE_CHROMIUM``; ``None`` when neither is there."""
    for candidate in (os.environ.get("DEVIATE_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def missing_browser() -> Optional[str]:
    """Why the browser test cannot run here (``None`` when it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if chromium_path() is None:
        return "Chromium is not installed (make test installs Debian's chromium as root)"
    return None


@contextmanager
def browser_page(color_scheme: str = "light", width: int = 1280) -> Iterator[tuple[Any, list[tuple[str, str]]]]:
    """A Playwright page of headless Chromium and the list its console messages and page errors go to."""
    from playwright.sync_api import sync_playwright

    messages: list[tuple[str, str]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_FLAGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=color_scheme)
            page.on("console", lambda message: messages.append((message.type, message.text)))
            page.on("pageerror", lambda error: messages.append(("pageerror", str(error))))
            page.on("requestfailed", lambda request: messages.append(("requestfailed", request.url)))
            yield page, messages
        finally:
            browser.close()


def screenshot(
    page_path: Path,
    png: Path,
    *,
    color_scheme: str = "light",
    clip_height: Optional[int] = None,
    check: Optional[Callable[[Any], None]] = None,
    width: int = 1280,
) -> list[tuple[str, str]]:
    """Load ``page_path`` in a window ``width`` pixels wide, run ``check(page)``, save a screenshot to ``png``
    (the top ``clip_height`` pixels, or the whole page); return what the console said."""
    with browser_page(color_scheme, width) as (page, messages):
        page.goto(Path(page_path).resolve().as_uri())
        page.wait_for_load_state("load")
        if check is not None:
            check(page)
        clip = None if clip_height is None else {"x": 0, "y": 0, "width": width, "height": clip_height}
        page.screenshot(path=str(png), full_page=True, clip=clip)
    return messages


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python tests/report/browser.py PAGE.html OUT.png")
    said = screenshot(Path(sys.argv[1]), Path(sys.argv[2]), clip_height=1500)
    for kind, text in said:
        print(f"browser {kind}: {text}", file=sys.stderr)
    raise SystemExit(1 if said else 0)
