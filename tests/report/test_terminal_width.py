"""The width the terminal report is written for, on a real pseudo-terminal: a size of 0x0 (``script``, some CI and
Docker terminals) or an absurd one falls back to 80 columns, ``COLUMNS`` wins when sane, and every prose line
(the "Replicated until decided" section included) wraps at the width while table cells stay whole.

``deviate report`` runs as a subprocess (the console script) with its output on the terminal side of a
``pty.openpty()`` pair whose size is set with ``TIOCSWINSZ``, on a real study replicated until decided
(:mod:`decided_study`).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from decided_study import child_env, decided_study, deviate, script

from deviate_cb.report.text.terminal import DEFAULT_WIDTH, FALLBACK_WIDTH, terminal_width

pytestmark = pytest.mark.slow

_STYLE = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return decided_study(tmp_path_factory)


def _set_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def on_terminal(args: list[str], *, rows: int = 0, columns: int = 0, env: dict[str, str] | None = None) -> str:
    """Run ``args`` with stdin, stdout and stderr on a pseudo-terminal of ``rows`` x ``columns``; what it printed,
    its lines ended by ``\\n`` and its styles dropped."""
    main, side = pty.openpty()
    _set_size(side, rows, columns)
    try:
        proc = subprocess.Popen(args, stdin=side, stdout=side, stderr=side, env=child_env(env), close_fds=True)
    finally:
        os.close(side)
    chunks, deadline = [], time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal side is gone
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return _STYLE.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))


def _section(text: str) -> list[str]:
    """The lines of the "Replicated until decided" section, title left out."""
    lines = text.splitlines()
    start = lines.index("Replicated until decided") + 1
    return lines[start : lines.index("", start)]


def _decision(study: Path) -> str:
    done = deviate("report", str(study), "--headline", "--format", "json")
    assert done.returncode == 0, done.stderr
    (sequential,) = [answer for answer in json.loads(done.stdout) if answer.get("kind") == "sequential"]
    return sequential["sentences"][0]


def test_a_terminal_of_size_0x0_gets_80_columns_and_every_line_wraps(study: Path) -> None:
    out = on_terminal([script("deviate"), "report", str(study)], rows=0, columns=0)
    lines = out.splitlines()
    assert max(map(len, lines)) <= FALLBACK_WIDTH, "\n".join(line for line in lines if len(line) > FALLBACK_WIDTH)
    assert max(map(len, lines)) > 60  # 80 columns used, not 20
    # the sequential decision: wrapped at the width, continued indented, every word kept
    section = _section(out)
    assert len(section) > 1 and section[0].startswith("  val_acc, A = experiment=poor")
    assert all(line.startswith("    ") for line in section[1:])
    assert " ".join(" ".join(section).split()) == " ".join(_decision(study).split())
    # names and numbers whole: each title on one line, each table's header on one line
    assert "Answers for val_acc (experiment good)" in lines
    assert any(line.startswith("experiment=poor  variant=algo+impl  (5 completed runs") for line in lines)
    headers = [line.split() for line in lines if line.startswith("metric ")]  # tables split by columns at 80
    assert sum(h[:4] == ["metric", "n", "mean", "std"] for h in headers) == 2  # one table per group
    assert sum(line.startswith("val_acc ") for line in lines) == len(headers)  # the metric whole in every part


@pytest.mark.parametrize(("columns", "expected"), [("100", 100), ("0", FALLBACK_WIDTH), ("7", FALLBACK_WIDTH)])
def test_columns_wins_when_sane(study: Path, columns: str, expected: int) -> None:
    out = on_terminal([script("deviate"), "report", str(study)], env={"COLUMNS": columns})
    widths = [len(line) for line in out.splitlines()]
    assert expected - 10 < max(widths) <= expected


def test_the_decision_wraps_in_a_file_too(study: Path) -> None:
    done = deviate("report", str(study))  # a pipe: the width of a file, the section wrapped at it
    assert done.returncode == 0, done.stderr
    section = _section(done.stdout)
    assert max(map(len, section)) <= DEFAULT_WIDTH
    assert " ".join(" ".join(section).split()) == " ".join(_decision(study).split())


def test_terminal_width_of_a_pseudo_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    main, side = pty.openpty()
    try:
        with os.fdopen(side, "w", closefd=False) as terminal:
            for (rows, columns), expected in (((0, 0), FALLBACK_WIDTH), ((5, 12), FALLBACK_WIDTH), ((40, 132), 132)):
                _set_size(side, rows, columns)
                assert terminal_width(terminal) == expected, (rows, columns)
            monkeypatch.setenv("COLUMNS", "90")
            assert terminal_width(terminal) == 90
    finally:
        os.close(side)
        os.close(main)
