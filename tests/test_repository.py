"""Repository hygiene (issue 44, item 8): the licence file is the one pyproject names, and the argument tables of
the README and the Commands page state the defaults the code has.

The ``deviate-replicate`` option table is checked against the parser itself (:func:`build_parser`): for every row
that names a single option, the default the row states must be the parser's default, or, where the parser leaves
the default to the launcher (``None``), what ``--help`` says it is. The callback's table is checked against the
session's own defaults.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.capture.session import DEFAULT_EXPERIMENT
from deviate_cb.cli.replicate import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMANDS = ROOT / "docs" / "commands.md"  # the deviate-replicate option table


def test_license_file_is_the_apache_license_pyproject_names() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license = \{ text = "Apache-2.0" \}$', pyproject, re.MULTILINE), (
        "pyproject names another license"
    )
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    for clause in ("1. Definitions.", "2. Grant of Copyright License.", "3. Grant of Patent License.", "9. Accepting"):
        assert clause in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_changelog_keeps_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog")
    assert "## [Unreleased]" in text
    assert "keepachangelog.com" in text


def table_rows(text: str, header: str) -> list[tuple[str, str]]:
    """The (first cell, second cell) rows of the Markdown table whose header row starts with ``header``."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows.append((cells[0], cells[1]))
    return rows


def stated_default(text: str) -> str | None:
    """The default a help text or table cell states: ``X (default)``, ``(default X, ...)``, ``(default: X; ...)``.

    Example: ``stated_default("replicas at once (default: 1 locally, all on slurm/ray)")`` is ``"1 locally"``.
    """
    text = text.replace("`", "").replace("\\|", "|")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 10,000 -> 10000
    m = re.search(r"([\w.+\-/]+) \((?:default\)|the default\b)", text)
    if m:
        return m.group(1)
    m = re.search(r"\bdefault:? (.+)", text)
    if m is None:
        return None
    value = re.split(r"[,;:)]| \(", m.group(1))[0].strip()
    return value.removeprefix("the ").lower()


def test_stated_default_reads_the_usual_wordings() -> None:
    assert stated_default("`algo+impl` (default), `algo`, `impl`") == "algo+impl"
    assert stated_default("replicas at once (default: 1 locally, all on slurm/ray: the cluster queues)") == "1 locally"
    assert stated_default("the most replicas (default 10,000: above it ...)") == "10000"
    assert stated_default("obf (the default: O'Brien-Fleming-type)") == "obf"
    assert stated_default("in (0.5, 1), default 0.75 (Bouthillier et al. 2021)") == "0.75"
    assert stated_default("wall-clock limit per replica") is None


def _action(parser: argparse.ArgumentParser, cell: str) -> argparse.Action | None:
    """The one parser action a table row's first cell names, else None (no option, or several)."""
    flags = {word for word in re.findall(r"`(-{1,2}[\w-]+)", cell)}
    actions = {id(a): a for a in parser._actions for flag in flags if flag in a.option_strings}
    return next(iter(actions.values())) if len(actions) == 1 else None


def _real_default(action: argparse.Action) -> str | None:
    if isinstance(action.default, str) and action.default != argparse.SUPPRESS:
        return action.default
    if action.default is None:
        return stated_default(action.help or "")
    return None  # flags (False) and repeatable options ([]) have no default to state


def test_replicate_option_table_states_the_parsers_defaults() -> None:
    parser = build_parser()
    rows = table_rows(COMMANDS.read_text(encoding="utf-8"), "| option | meaning |")
    checked, wrong = [], []
    for cell, meaning in rows:
        action = _action(parser, cell)
        if action is None:
            continue
        real, said = _real_default(action), stated_default(meaning)
        if real is None:
            continue
        checked.append(cell)
        if said is None or said.lower() != real.lower():
            wrong.append(f"{cell}: docs/commands.md says {said!r}, the code {real!r} ({action.help})")
    assert len(checked) >= 8, f"only {checked} were checked: docs/commands.md's option table was not found whole"
    assert not wrong, "docs/commands.md's deviate-replicate table disagrees with the parser:\n" + "\n".join(wrong)


@pytest.mark.parametrize("script", [True, False])
def test_callback_table_states_the_sessions_defaults(tmp_path: Path, script: bool) -> None:
    rows = dict(table_rows(README.read_text(encoding="utf-8"), "| argument | meaning |"))
    assert stated_default(rows["`out_dir`"]) == "deviate_runs"
    experiment = rows["`experiment=`"]
    code = "from deviate_cb.capture.session import script_experiment; print(script_experiment())"
    if script:
        (tmp_path / "train.py").write_text(code + "\n")
        args = [sys.executable, "train.py"]
    else:
        args = [sys.executable, "-c", code]
    name = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    if script:
        # a script's run is its own experiment, and the table gives that example
        assert name == "train"
        assert stated_default(experiment) == "script's name"
        assert "`train` for `train.py`" in experiment
    else:
        assert name == DEFAULT_EXPERIMENT
        assert f"`{DEFAULT_EXPERIMENT}` where no script runs" in experiment
