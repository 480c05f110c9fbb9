"""The control answer says what identical runs show and no more (issue 42, item 2).

Identical control runs show no nondeterminism in the runs made; they do not prove determinism. Values parsed
from a project's printed output (``--metric-regex``) are identical only to the decimals printed, never
"bit-identical".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import REPO, child_env, manifest, start_cli
from tests.helpers.report_study import run_cli, write_run

ROOT = Path(__file__).resolve().parents[2]


def _control(root: Path, values: list[float], **fields: object) -> Path:
    for k, acc in enumerate(values):
        write_run(root, "mlp", "control", k, [("val", "val_acc", acc)], **fields)
    return root


def _answer(capsys: pytest.CaptureFixture[str], root: Path) -> dict:
    code, out, err = run_cli(capsys, "report", str(root), "--headline", "--format", "json")
    assert code == 0, err
    return json.loads(out)[0]


def test_identical_runs_show_no_nondeterminism_and_claim_no_more(capsys, tmp_path: Path) -> None:
    h = _answer(capsys, _control(tmp_path, [0.91] * 4))
    assert h["control"] == "identical"
    assert h["sentences"][0] == "control: the 4 runs are bit-identical on val_acc: no nondeterminism seen in 4 runs."
    assert "determinism holds" not in json.dumps(h)


def test_values_parsed_from_printouts_are_identical_to_the_printed_decimals(capsys, tmp_path: Path) -> None:
    root = _control(tmp_path, [0.8123] * 3, output_metrics=["val_acc"], output_metrics_decimals={"val_acc": 4})
    h = _answer(capsys, root)
    assert h["control"] == "identical as printed"
    sentence = h["sentences"][0]
    assert sentence.startswith("control: the 3 runs are identical to the printed 4 decimals on val_acc")
    assert "bit-identical" not in sentence and "no nondeterminism seen in 3 runs at that precision" in sentence
    code, page, _ = run_cli(capsys, "report", str(root), "--format", "html")
    assert code == 0 and '<span class="badge">✓ identical as printed</span>' in page


def test_parsed_values_without_a_recorded_precision(capsys, tmp_path: Path) -> None:
    """A manifest from before the decimals were recorded: the precision is not guessed."""
    h = _answer(capsys, _control(tmp_path, [0.8] * 2, output_metrics=["val_acc"]))
    assert "identical to the printed precision on val_acc" in h["sentences"][0] and h["control"] != "identical"


def test_no_page_says_determinism_holds() -> None:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "deviate_cb").rglob("*.py"))]
    found = [str(p.relative_to(ROOT)) for p in texts if "determinism holds" in p.read_text(encoding="utf-8")]
    assert found == []


PRINTS = "import sys; print('epoch 0 acc=0.5'); print(f'final: acc={0.8123:.4f} loss={0.5:.2e}')"


def test_a_command_study_records_and_reports_the_printed_precision(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = start_cli(
        ["-n", "2", "--variant", "control", "--experiment", "e", "--out", str(out),
         "--metric-regex", r"acc=(?P<acc>[0-9.]+)", "--metric-regex", r"loss=(?P<loss>\S+)",
         "--", sys.executable, "-c", PRINTS],
        cwd=tmp_path,
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stdout + stderr
    run = manifest(out / "experiment=e" / "variant=control" / "replica=0")
    assert run["output_metrics"] == ["acc", "loss"] and run["output_metrics_decimals"] == {
        "acc": 4,
        "loss": 3,
    }  # 5.00e-01
    cli = "import sys; from deviate_cb.cli.main import main; sys.exit(main())"
    report = subprocess.run(
        [sys.executable, "-c", cli, "report", str(out), "--headline", "--format", "json", "--metric", "acc"],
        env=child_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert report.returncode == 0, report.stderr
    (h,) = json.loads(report.stdout)
    assert h["sentences"][0].startswith("control: the 2 runs are identical to the printed 4 decimals on acc")
