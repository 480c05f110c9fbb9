"""`deviate report` ends on its answers: the closing summary repeats the opening, never contradicts it.

The study is real run directories written with the project's writers (manifest + metrics.parquet) and a sequence
record written by the launcher's own writer (deviate_cb.store.sequential_record), as `make demo` leaves them: a
seed-varying group and bit-identical control runs in one experiment, a second experiment compared with it until
decided. The report's tables, step times and caveats push the opening's answers up the screen; its last lines
must carry them again.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from deviate_cb.store.sequential_record import record_path, write_record
from tests.helpers.report_study import run_cli, write_run

MLP = [0.885, 0.91, 0.89, 0.9, 0.905]
LOW_LR = [0.78, 0.8, 0.77, 0.79, 0.81]


def _study(root: Path) -> Path:
    for k in range(3):
        write_run(root, "mlp", "control", k, [("train", "train_loss", 0.5), ("val", "val_acc", 0.91)])
    for k, acc in enumerate(MLP):
        write_run(root, "mlp", "algo+impl", k, [("train", "train_loss", 0.5 + k / 10), ("val", "val_acc", acc)])
    for k, acc in enumerate(LOW_LR):
        write_run(root, "mlp_low_lr", "algo+impl", k, [("train", "train_loss", 0.7), ("val", "val_acc", acc)])
    look = {"k": 2, "n_a": 5, "n_b": 5, "statistic": -0.11, "low": -0.19, "high": -0.03, "level": 0.95}
    plan = {"method": "O'Brien-Fleming-type group-sequential Welch t-test", "alpha": 0.05, "looks": [[3, 4], [5, 5]]}
    record = {"kind": "until-decided", "metric": "val_acc", "decision": "B better", "looks": [look], "plan": plan,
              "group": {"experiment": "mlp_low_lr", "variant": "algo+impl"},
              "against": {"experiment": "mlp", "variant": "algo+impl"}}  # fmt: skip
    write_record(record_path(root, ("mlp_low_lr", "algo+impl"), ("mlp", "algo+impl")), record)
    return root


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run_cli(capsys, "report", *args)
    assert code == 0, err
    return out


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """No wrapping: each answer on one line, so the closing lines can be compared with the opening's."""
    monkeypatch.setenv("COLUMNS", "1000")


def test_report_ends_on_the_answers_the_opening_gave(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, wide: None
) -> None:
    root = _study(tmp_path / "runs")
    lines = _report(capsys, str(root)).rstrip("\n").splitlines()
    start = lines.index("In short")
    opening, closing = [s.strip() for s in lines[:start]], [s.strip() for s in lines[start + 1 :]]
    assert start > 20 and len(closing) <= 12  # after the tables, and a few lines
    # where the HTML page comes from, last: a command that runs as printed
    assert closing[-1] == f"The HTML page (plots of every run): deviate report {root} --format html -o report.html"
    # every answer is one of the opening's lines, or the verbatim start of one: nothing worded twice
    for line in closing[:-1]:
        assert any(o == line or o.startswith(line.removesuffix(".")) for o in opening), line
    # the decision, and each question the study answers: control identical, seed noise, runs needed
    assert closing[0].startswith("val_acc, A = experiment=mlp_low_lr variant=algo+impl vs B = experiment=mlp")
    assert ": B better (look 2 of 2, 5 runs per group): A-B = -0.11 [-0.19, -0.03] (95% repeated CI)." in closing[0]
    assert closing[1:4] == [
        "Answers for val_acc (experiment mlp)",
        "control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs.",
        next(o for o in opening if o.startswith("seed + implementation noise (algo+impl): std ")),
    ]
    # the numbers are the answer objects' (--headline --format json), the same in both places
    answers = json.loads(_report(capsys, str(root), "--headline", "--format", "json"))
    mlp = next(h for h in answers if h["experiment"] == "mlp")
    runs = mlp["runs"]
    assert closing[4] == (
        f"runs needed: {runs['runs_per_group']} per group to detect a difference of {runs['effect']:.4g} "
        f"(1% of the mean) with 80% power."
    )
    assert f"std {mlp['noise'][0]['std']:.4g} " in closing[3]
    # questions this study cannot answer are left out (no control runs in mlp_low_lr, no impl runs anywhere)
    low = closing[closing.index("Answers for val_acc (experiment mlp_low_lr)") + 1 :]
    assert low[0].startswith("seed + implementation noise (algo+impl)") and low[1].startswith("runs needed: ")
    assert not any("no control runs" in c or "not measurable" in c for c in closing)


def test_the_printed_html_command_makes_the_page(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, wide: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    root = _study(tmp_path / "my runs")  # a space: the command is quoted for the shell
    last = _report(capsys, str(root)).rstrip("\n").splitlines()[-1]
    command = shlex.split(last.split(": ", 1)[1])
    assert command[:3] == ["deviate", "report", str(root)]
    monkeypatch.chdir(tmp_path)
    _report(capsys, *command[2:])
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "B better" in page and "bit-identical" in page


def test_only_the_terminal_table_gets_it(capsys: pytest.CaptureFixture[str], tmp_path: Path, wide: None) -> None:
    root = _study(tmp_path / "runs")
    for fmt in ("csv", "json", "md"):
        assert "In short" not in _report(capsys, str(root), "--format", fmt)
    table = tmp_path / "results.csv"
    table.write_text(
        "group,val_acc\n" + "".join(f"a,{v}\nb,{w}\n" for v, w in zip(MLP, LOW_LR, strict=True)), encoding="utf-8"
    )
    last = _report(capsys, "--table", str(table), "--group-by", "group").rstrip("\n").splitlines()[-1]
    assert last.strip().endswith(f"deviate report --table {table} --group-by group --format html -o report.html")
