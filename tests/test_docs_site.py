"""The README is a front door and the docs site's nav holds (issue 46): cheap checks; `make docs` builds strictly.

The README stays short (at most 300 lines) and names exactly the two set-up commands, ``make demo`` and ``make
test``; every page of mkdocs.yml's nav is a file under docs/ or one docs/gen_pages.py generates at build time.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NAV_PAGE = re.compile(r"^\s*-\s.*?(?P<page>[\w/.-]+\.md)\s*$")
MAKE_COMMAND = re.compile(r"^\s*(?P<command>make [\w-]+)", re.MULTILINE)


def _gen_pages() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names, in order."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:\n") :]
    return [m.group("page") for line in nav.split("\n") if (m := NAV_PAGE.match(line))]


def test_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move the detail to a page under docs/"


def test_readme_names_exactly_the_two_set_up_commands() -> None:
    set_up = _section(README.read_text(encoding="utf-8"), "Set up")
    assert MAKE_COMMAND.findall(set_up.split("```")[1]) == ["make demo", "make test"]


def test_every_nav_page_exists_or_is_generated() -> None:
    generated = set(_gen_pages().GENERATED)
    pages = nav_pages()
    assert len(pages) >= 15 and pages[0] == "index.md"
    missing = [p for p in pages if p not in generated and not (ROOT / "docs" / p).is_file()]
    assert missing == [], f"mkdocs.yml's nav names pages that are neither under docs/ nor generated: {missing}"
    sources = [s for s in _gen_pages().GENERATED.values() if s is not None]
    assert all((ROOT / s).is_file() for s in sources)


def test_every_page_under_docs_is_in_the_nav() -> None:
    design = [page for entry in _gen_pages().design_nav(ROOT / "docs") for page in entry.values()]
    pages = set(nav_pages()) | set(design)
    unlisted = [p.relative_to(ROOT / "docs").as_posix() for p in sorted((ROOT / "docs").rglob("*.md"))]
    assert [p for p in unlisted if p not in pages] == []


def test_the_readme_links_into_the_docs_become_site_links() -> None:
    text = _gen_pages().site_text(README.read_text(encoding="utf-8"))
    assert "](docs/" not in text and "](changelog.md)" in text


def test_the_hooks_examples_hold_and_the_cli_reference_names_every_command() -> None:
    module = _gen_pages()
    assert doctest.testmod(module).failed == 0
    page = module.cli_reference()
    for command in ("deviate-replicate", "deviate report", "deviate audit", "deviate import mlflow", "deviate export"):
        assert f"`{command}`" in page
    assert "--until-decided" in page and "usage: deviate-replicate" in page
