"""MkDocs hook: the pages generated at build time (home from README.md, changelog, CLI reference from argparse).

The CLI reference imports ``deviate_cb.cli``'s parser builders and renders each command's ``--help``, so it cannot
drift from the code; the README and the changelog are copied with their ``docs/`` links made relative to the site.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "DESIGN_SECTION",
    "GENERATED",
    "cli_reference",
    "design_nav",
    "is_doctest_output",
    "on_config",
    "on_files",
    "site_text",
]

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"index.md": "README.md", "changelog.md": "CHANGELOG.md", "reference/cli.md": None}
HELP_WIDTH = "100"
DESIGN_SECTION = "Design notes"  # under Reference: every docs/design/*.md, by its first heading
AUTOREFS_LOGGER = "mkdocs.plugins.mkdocs_autorefs._internal.plugin"
UNRESOLVED = re.compile(r"Could not find cross-reference target '(?P<target>.*)'$")
DOTTED_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def is_doctest_output(message: str) -> bool:
    """Whether an unresolved cross-reference is a doctest's printed list (``[1, 3]``), not a name.

    >>> is_doctest_output("x: Could not find cross-reference target '1, 3'")
    True
    >>> is_doctest_output("x: Could not find cross-reference target 'deviate_cb.stats.describe'")
    False
    """
    m = UNRESOLVED.search(message)
    return m is not None and DOTTED_NAME.match(m.group("target")) is None


class _DoctestOutputFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not is_doctest_output(record.getMessage())


def design_nav(docs: Path) -> list[dict[str, str]]:
    """The nav entries of the design notes: each ``design/*.md`` under ``docs`` titled by its first heading.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / "design").mkdir(), (Path(tmp) / "design" / "stats.md").write_text("# Stats\\n")
    ...     design_nav(Path(tmp))
    [{'Stats': 'design/stats.md'}]
    """
    entries = []
    for page in sorted((docs / "design").glob("*.md")):
        first = page.read_text(encoding="utf-8").split("\n", 1)[0]
        title = first[2:].strip() if first.startswith("# ") else page.stem
        entries.append({title: f"design/{page.name}"})
    return entries


def _add_design_notes(nav: list[Any], entries: list[dict[str, str]]) -> None:
    for section in nav:
        if isinstance(section, dict) and "Reference" in section:
            section["Reference"].append({DESIGN_SECTION: entries})
            return
    nav.append({DESIGN_SECTION: entries})


def on_config(config: Any) -> Any:
    """MkDocs' ``on_config`` event: the design notes join the nav, and doctest output is no broken reference.

    Each folder's design notes (``docs/design/*.md``) are listed under Reference without editing mkdocs.yml.
    mkdocstrings renders a docstring's examples as Markdown, where a printed list reads as a reference link; a
    reference to a real name that does not resolve still fails the strict build.
    """
    entries = design_nav(Path(config["docs_dir"]))
    if entries and config["nav"] is not None:
        _add_design_notes(config["nav"], entries)
    logger = logging.getLogger(AUTOREFS_LOGGER)
    if not any(isinstance(f, _DoctestOutputFilter) for f in logger.filters):
        logger.addFilter(_DoctestOutputFilter())
    return config


def site_text(text: str) -> str:
    """A root Markdown file's text as a page of the site: links into ``docs/`` lose that prefix.

    >>> site_text("[a](docs/audit.md#x), [b](CHANGELOG.md), [c](https://x/docs/y.md)")
    '[a](audit.md#x), [b](changelog.md), [c](https://x/docs/y.md)'
    """
    text = re.sub(r"\]\(docs/", "](", text)
    return re.sub(r"\]\(CHANGELOG\.md", "](changelog.md", text)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def _sections(parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [f"{'#' * level} `{parser.prog}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for _name, sub in _subcommands(parser):
        out += _sections(sub, min(level + 1, 4))
    return out


def cli_reference() -> str:
    """The CLI reference page: ``deviate-replicate --help`` and ``deviate [COMMAND] --help``, each subcommand's own.

    >>> page = cli_reference()
    >>> "## `deviate-replicate`" in page and "### `deviate report`" in page
    True
    """
    from deviate_cb.cli import main, replicate

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        lines = [
            "# CLI reference",
            "",
            "Generated at build time from the commands' own argument parsers: what "
            "`--help` prints. The [Commands](../commands.md) guide explains each with examples.",
            "",
        ]
        lines += _sections(replicate.build_parser(), 2)
        lines += _sections(main.build_parser(), 2)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(lines) + "\n"


def _content(page: str, source: str | None) -> str:
    if source is None:
        return cli_reference()
    return site_text((ROOT / source).read_text(encoding="utf-8"))


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (MkDocs' ``on_files`` event)."""
    from mkdocs.structure.files import File

    for page, source in GENERATED.items():
        files.append(File.generated(config, page, content=_content(page, source)))
    return files
