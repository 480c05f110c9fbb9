"""What `deviate report`, `compare`, `power` and `status` print on a terminal: no escape sequence from a stored
message, tables that fit the width (split by columns, `compare`'s verdicts on their own lines), and the step-time
section's caveats when the machine, not the model, may explain the spread.

Every study here is a real run directory written with the project's writers; the caveat logic is also checked
on hand-made manifests (`deviate_cb.report.answers.contention`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.report.answers.contention import contention_caveats
from deviate_cb.report.answers.timings import build_timings, write_timings_section
from deviate_cb.report.reading.runs import find_runs
from deviate_cb.report.text.safe import printable_message, strip_styles
from deviate_cb.report.text.terminal import make_console, print_fitted
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.timings import write_timings
from tests.helpers.report_study import run_cli, write_run

RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"
LINK = "\x1b]8;;file:///train.py\x1b\\train.py\x1b]8;;\x1b\\"
# What a coloured Lightning/rich log or a Python 3.13 traceback leaves in stderr.log, hence in run.json `error`
COLOURED_TRACEBACK = (
    f"{RED}Traceback (most recent call last):{RESET}\n"
    f'  File "{LINK}", line 3, in main\n'
    f"{BOLD}{RED}RuntimeError{RESET}: {RED}CUDA out of memory{RESET}\x07\r\n"
)


def _coloured_study(root: Path) -> Path:
    """Two variants of three completed runs, plus failed runs whose manifest strings are coloured: `error` (a
    coloured traceback), `exception`, `reason`, `trainer_error`, and a completed run with a coloured host and an
    injection note."""
    for variant, shift in (("algo", 0.0), ("control", 0.05)):
        for k in range(3):
            rows = [("val", "acc", 0.80 + shift + k / 100), ("val", "loss", 0.30 - k / 100)]
            write_run(root, "mlp", variant, k, rows, host=f"{RED}node{RESET}-1", backend="local")
    write_run(root, "mlp", "algo", 0, [("val", "acc", 0.8), ("val", "loss", 0.3)], injection="none",
              injection_note=f"no hook {RED}here{RESET}", host=f"{RED}node{RESET}-1")  # fmt: skip
    write_run(root, "mlp", "algo", 3, status="failed", exit_code=1, error=COLOURED_TRACEBACK)
    write_run(root, "mlp", "algo", 4, status="failed", exit_code=1, exception=f"{RED}ValueError{RESET}: bad\tlr")
    write_run(root, "mlp", "algo", 5, status="killed", signal="SIGTERM", reason=f"{RED}killed{RESET} by SIGTERM")
    write_run(root, "mlp", "algo", 6, status="failed", exit_code=3, trainer_error=f"{RED}no module x{RESET}\x1b[2J")
    return root


def test_text_helpers_drop_styles_and_escape_the_rest() -> None:
    last = COLOURED_TRACEBACK.split("\n")[-2]
    assert strip_styles(last) == "RuntimeError: CUDA out of memory\x07\r"
    assert printable_message(last) == "RuntimeError: CUDA out of memory\\x07\\r"
    assert printable_message(f'File "{LINK}"') == 'File "train.py"'  # a hyperlink keeps its text
    assert printable_message("clear\x1b[2Jscreen\x1b[H") == "clear\\x1b[2Jscreen\\x1b[H"  # not a style: shown


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_report_prints_no_escape_from_a_stored_message(capsys, tmp_path: Path, fmt: str) -> None:
    root = _coloured_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(root), "--format", fmt)
    assert code == 0, err
    assert "\x1b" not in err  # every warning: the runs left out (csv, json), the problems
    assert "no hook here" in err  # the injection problem: its colours dropped
    if fmt in ("csv", "json"):
        assert (
            "replica=3 left out of the statistics: failed (exit code 1): RuntimeError: CUDA out of memory\\x07" in err
        )
        return
    assert "\x1b" not in out
    assert "RuntimeError: CUDA out of memory\\x07" in out  # the traceback's last line, its colours dropped
    assert "ValueError: bad\\tlr" in out and "no module x\\x1b[2J" in out  # other control characters shown
    assert "\\x1b[31m" not in out  # no colour code left as text either


def test_runs_left_out_show_the_coloured_tracebacks_last_line(tmp_path: Path) -> None:
    runs = {r.replica: r for r in find_runs(_coloured_study(tmp_path))}
    assert strip_styles(runs["3"].error or "") == "RuntimeError: CUDA out of memory\x07"  # not "Traceback (...)"


def test_status_compare_and_power_print_no_escape(capsys, tmp_path: Path) -> None:
    root = _coloured_study(tmp_path)
    code, out, err = run_cli(capsys, "status", str(root), "--no-cluster")
    assert code == 0 and "\x1b" not in out + err and "\\x1b[31mnode\\x1b[0m-1" in out  # a name: every char shown
    for fmt in ("table", "md"):
        code, out, err = run_cli(capsys, "compare", str(root), "--a", "variant=algo", "--b", "variant=control",
                                 "--format", fmt)  # fmt: skip
        assert code == 0 and "\x1b" not in out + err, err
        assert "RuntimeError: CUDA out of memory\\x07" in err  # a run left out, as a warning
        code, out, err = run_cli(capsys, "power", str(root), "--effect", "0.01", "--format", fmt)
        assert code == 0 and "\x1b" not in out + err
    code, out, err = run_cli(capsys, "compare", str(root), "--a", "variant=algo", "--b", "variant=nope")
    assert code == 2 and "\x1b" not in err and err.count("\n") == 1


def test_csv_and_json_keep_the_data(capsys, tmp_path: Path) -> None:
    name = f"acc{RED}!{RESET}"
    for k in range(2):
        write_run(tmp_path, "mlp", "algo", k, [("val", name, 0.8 + k / 100)])
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "csv")
    assert code == 0 and [r["metric"] for r in csv.DictReader(io.StringIO(out))] == [name]
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "json")
    assert code == 0 and [r["metric"] for r in json.loads(out)] == [name]
    code, out, _ = run_cli(capsys, "report", str(tmp_path))
    assert code == 0 and "acc\\x1b[31m!\\x1b[0m" in out  # a name is shown whole, every character escaped


# -- tables fit the width --------------------------------------------------------------------------------------


def _compared_study(root: Path) -> Path:
    for k in range(4):
        write_run(root, "mlp", "new", k, [("val", "acc", 0.90 + k / 1000), ("val", "loss", 0.20 + k / 1000)])
        write_run(root, "mlp", "old", k, [("val", "acc", 0.80 + k / 1000), ("val", "loss", 0.20 + (3 - k) / 1000)])
    write_run(root, "mlp", "new", 4, [("val", "f1", 0.5)])  # in group A only: not compared
    return root


@pytest.mark.parametrize("width", [80, 200])
def test_compare_fits_the_width_with_each_verdict_under_the_table(
    capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, width: int
) -> None:
    root = _compared_study(tmp_path)
    args = ("compare", str(root), "--a", "variant=new", "--b", "variant=old")
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    rows = {row["metric"]: row for row in json.loads(out)}
    assert rows["acc"]["verdict"].startswith("means: A > B (significant")
    assert rows["acc"]["location_verdict"].startswith("A is higher: diff +")
    assert rows["f1"]["verdict"] == "not compared: only in group A"
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= width, "\n".join(lines)  # verdict sentences wrap at the width too
    flat = " ".join(" ".join(lines).split())
    label = max(map(len, rows))
    for metric, row in rows.items():  # whole, after the metric's name, under the table
        for key in ("location_verdict", "spread_verdict"):
            if row[key] is not None:
                assert " ".join(f"{metric:<{label}}  {row[key]}".split()) in flat
    assert "\nmeans\n" in out and "\nspread\n" in out
    headers = [line for line in lines if line.startswith("metric ")]
    assert "verdict" not in "".join(headers)  # not a column of the table any more
    if width == 200:
        assert len(headers) == 1 and "ASO eps" in headers[0]  # the whole table in one piece
    else:
        assert len(headers) > 1  # split by columns, each part starting with the metric
        assert all(sum(line.startswith(m + " ") for line in lines) == len(headers) for m in ("acc", "loss"))
    code, md, _ = run_cli(capsys, *args, "--format", "md")
    assert code == 0 and "| means | spread |" in md  # Markdown keeps its one table


@pytest.mark.parametrize("width", [60, 80])
def test_report_tables_fit_the_width(capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, width: int) -> None:
    root = _coloured_study(tmp_path)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, "report", str(root))
    assert code == 0
    long = [line for line in out.splitlines() if len(line) > width]  # problems and answers wrap too
    assert long == []
    assert "problem: " in out
    assert out.count("metric ") >= 2 and "0.001468" in out  # numbers whole, never cut with an ellipsis
    assert "…" not in out


def test_a_column_too_wide_alone_is_folded_not_cut() -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column("op", no_wrap=True)
    table.add_column("recorded as", no_wrap=True)
    kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>" * 2
    table.add_row("add", kernel)
    out = io.StringIO()
    print_fitted(make_console(out, width=50), table)
    header, *rows = out.getvalue().splitlines()
    assert max(len(line) for line in (header, *rows)) <= 50 and len(rows) > 1  # folded over several lines
    assert "".join(line[5:] for line in rows).replace(" ", "") == kernel.replace(" ", "")  # every character kept


# -- the step-time caveats --------------------------------------------------------------------------------------


def _at(minute: float) -> str:
    return f"2026-01-01T10:{int(minute):02d}:{int(minute % 1 * 60):02d}+00:00"


def _caveats(experiment: str, variant: str, group: dict[str, Any], others: Any = ()) -> list[str]:
    typed = {replica: RunManifest.from_json(manifest) for replica, manifest in group.items()}
    return contention_caveats(experiment, variant, typed, [RunManifest.from_json(other) for other in others])


def _run(start: float, end: float, **fields: Any) -> dict[str, Any]:
    return {"host": "n1", "cpu_count": 2, "started_at": _at(start), "ended_at": _at(end), **fields}


def test_more_replicas_at_once_than_cores() -> None:
    together = {str(k): _run(0, 10) for k in range(4)}  # --parallel 4 on 2 cores
    (line,) = _caveats("mlp", "algo", together)
    assert line.startswith("experiment=mlp variant=algo: up to 4 replicas ran at once on host n1, which has 2 usable")
    in_turn = {str(k): _run(2 * k, 2 * k + 2) for k in range(4)}  # one after another (end = next start)
    assert _caveats("mlp", "algo", in_turn) == []
    two = {str(k): _run(0, 10) for k in range(2)}  # as many as cores
    assert _caveats("mlp", "algo", two) == []
    assert _caveats("mlp", "algo", two, [_run(5, 6), _run(5, 7)])[0].count("up to 4 replicas") == 1
    elsewhere = [{**_run(0, 10), "host": "n2"}] * 3  # other hosts do not crowd this one
    assert _caveats("mlp", "algo", two, elsewhere) == []
    pinned = {str(k): _run(0, 10, cpu_count=64, cpus_usable=1) for k in range(2)}  # taskset -c 0: one usable core
    assert "which has 1 usable CPU core:" in _caveats("mlp", "algo", pinned)[0]


def test_replicas_that_ran_beside_different_numbers_of_others() -> None:
    odd = {"0": _run(0, 5), "1": _run(0, 5), "2": _run(5, 6)}  # --parallel 2, 3 replicas on 2 cores: one ran alone
    (line,) = _caveats("mlp", "control", odd)
    assert line == (
        "experiment=mlp variant=control: on host n1 (2 usable CPU cores) replicas 0 and 1 ran with up to 2 replicas "
        "at once while replica 2 ran with fewer: they did not run under the same conditions, so the step-time spread "
        "may not be the model's."
    )
    roomy = {k: {**run, "cpu_count": 16} for k, run in odd.items()}  # two at once on 16 cores: no competition
    assert _caveats("mlp", "control", roomy) == []


def test_a_busy_machine() -> None:
    runs = {
        "0": _run(0, 1, load_avg_start=[5.25, 2.0, 1.0], load_avg_end=[1.0, 1.0, 1.0]),
        "1": _run(2, 3, load_avg_start=[2.0, 2.0, 2.0], load_avg_end=[2.0, 2.0, 2.0]),  # at the cores: not busy
        "2": _run(4, 5, load_avg_start=[0.5, 0.5, 0.5], load_avg_end=[3.0, 1.0, 1.0]),
    }
    (line,) = _caveats("mlp", "algo", runs)
    assert line == (
        "experiment=mlp variant=algo: the machine was busy when replicas 0 and 2 started or ended (1-minute load "
        "average above its CPU cores: 5.25 on 2 cores), so the step-time spread may not be the model's."
    )


@pytest.mark.parametrize(
    "manifest",
    [
        {},
        {"host": "n1", "started_at": "yesterday", "ended_at": None, "cpu_count": 2},
        {**_run(0, 1), "cpu_count": True, "load_avg_start": "high"},
        {**_run(0, 1), "cpu_count": 0, "load_avg_start": [math.nan, 1.0, 1.0]},
        {**_run(5, 1), "load_avg_end": []},  # ends before it starts
    ],
)
def test_manifests_without_usable_facts_give_no_caveat(manifest: dict[str, Any]) -> None:
    assert _caveats("mlp", "algo", {str(k): manifest for k in range(4)}) == []


def test_caveats_follow_the_step_time_table(capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in range(3):
        facts = _run(0, 10, load_avg_start=[0.2, 0.2, 0.2], load_avg_end=[0.4, 0.3, 0.2])
        path = write_run(tmp_path, "mlp", "algo", k, [("val", "acc", 0.8)], **facts)
        steps = [
            {"stage": "train", "epoch": 0, "step": s, "wall_s": 0.01 * (1 + k), "profiled": False} for s in range(3)
        ]
        write_timings(path, steps, [])
    for k in range(2):  # a group that ran alone: no caveat
        facts = _run(20 + k, 20.5 + k, load_avg_start=[0.1, 0.1, 0.1])
        path = write_run(tmp_path, "mlp", "control", k, [("val", "acc", 0.8)], **facts)
        write_timings(path, [{"stage": "train", "epoch": 0, "step": 0, "wall_s": 0.01, "profiled": False}], [])
    groups = build_timings(find_runs(tmp_path))
    assert [len(g.caveats) for g in groups] == [1, 0]
    for fmt in ("table", "md"):
        out = io.StringIO()
        write_timings_section(groups, fmt, out)
        text = out.getvalue()
        caveat = "experiment=mlp variant=algo: up to 3 replicas ran at once on host n1, which has 2 usable CPU cores"
        assert text.count(caveat) == 1 and "variant=control: up to" not in text
        assert text.index("slowest vs fastest") < text.index(caveat)  # under the table
        assert (f"- **caveat**: {caveat}" if fmt == "md" else f"caveat: {caveat}") in text
    code, out, _ = run_cli(capsys, "report", str(tmp_path))
    assert code == 0 and "caveat: experiment=mlp variant=algo: up to 3 replicas ran at once" in out
    monkeypatch.setenv("COLUMNS", "80")  # the caveat of 200 characters wraps, continued indented
    code, out, _ = run_cli(capsys, "report", str(tmp_path))
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= 80
    start = next(i for i, line in enumerate(lines) if line.startswith("caveat: experiment=mlp variant=algo"))
    assert lines[start + 1].startswith("  ") and "competed" in " ".join(lines[start : start + 4])
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--timings", "--format", "json")
    assert code == 0 and "caveat" not in out  # the rows of csv and json are unchanged
