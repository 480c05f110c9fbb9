"""One problem per cause (issue 43, item 8): a path written by replicas of several groups, or the same recorded
text in several groups, is one :class:`Problem` naming every group and replica it touches, printed once by
``deviate status``, ``deviate report`` (stderr, table, Markdown) and its HTML page, where the answers and the
variance decomposition come before the problems.

The runs are real run directories; the writes are recorded by the replicas' own watch
(:class:`~deviate_cb.capture.outside_writes.OutsideWrites`), into the study's real ledger.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from deviate_cb.capture.outside_writes import OutsideWrites
from deviate_cb.report.answers.findings import GroupReplicas, Problem
from deviate_cb.report.answers.problems import study_problems
from deviate_cb.store.run_directory import run_path
from tests.helpers.report_study import run_cli, write_run

SHARED = "wrote the same paths outside their run directories"


def _write(root: Path, experiment: str, variant: str, replica: int, *paths: str, acc: float = 0.8) -> None:
    """A completed replica that wrote ``paths`` outside its run directory (as its watch records them)."""
    write_run(root, experiment, variant, replica, [("val", "val_acc", acc), ("val", "loss", 0.5)])
    watch = OutsideWrites(run_path(root, experiment, variant, replica), experiment, variant, replica)
    for path in paths:
        watch.wrote(path)


def _shared(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.kind == "shared_outputs"]


def test_a_path_written_by_replicas_of_two_groups_is_one_problem_naming_both(tmp_path: Path) -> None:
    root, ckpt = tmp_path / "runs", str(tmp_path / "project" / "out" / "ckpt.pt")
    for k in (0, 1):
        _write(root, "mlp", "algo", k, ckpt, acc=0.8 + k / 100)
    _write(root, "cnn", "control", 0, ckpt)
    (problem,) = _shared(study_problems(root))
    assert problem.groups == (GroupReplicas("cnn", "control", (0,)), GroupReplicas("mlp", "algo", (0, 1)))
    assert (problem.experiment, problem.variant, problem.replicas) == ("cnn", "control", (0,))
    assert problem.concerns("mlp", "algo") and not problem.concerns("mlp", "control")
    assert problem.message.startswith(
        f"experiment=cnn variant=control (replica 0) and experiment=mlp variant=algo (replicas 0, 1) {SHARED} ({ckpt})"
    )
    # what a launch of one group reads (its variant directory) names the same cause in the same words
    (launched,) = _shared(study_problems(root / "experiment=mlp" / "variant=algo"))
    assert launched.line() == problem.line()


def test_status_report_and_html_print_a_cross_group_problem_once(capsys, tmp_path: Path) -> None:
    root, ckpt = tmp_path / "runs", str(tmp_path / "project" / "ckpt.pt")
    for variant in ("algo", "control", "impl", "algo+impl"):
        for k in (0, 1):
            _write(root, "mlp", variant, k, ckpt, acc=0.8 + (k / 100 if variant != "control" else 0))
    code, _, err = run_cli(capsys, "status", os.fspath(root))
    assert code == 0 and err.count(SHARED) == 1, err
    line = next(line for line in err.splitlines() if SHARED in line)
    for variant in ("algo", "control", "impl", "algo+impl"):
        assert f"experiment=mlp variant={variant} (replicas 0, 1)" in line, line
    for fmt in ("table", "md", "html"):
        code, out, err = run_cli(capsys, "report", os.fspath(root), "--format", fmt)
        assert code == 0, err
        assert err.count(SHARED) == 1 and out.count(SHARED) == 1, (fmt, out, err)


def test_the_same_recorded_text_in_two_groups_is_one_problem(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    text = "torch.backends.cudnn.benchmark is True"
    for variant in ("algo", "control"):
        for k in (0, 1):
            write_run(root, "mlp", variant, k, [("val", "val_acc", 0.8 + k / 100)], determinism={"problems": [text]})
    found = [p for p in study_problems(root) if p.kind == "determinism_not_in_effect"]
    assert len(found) == 1 and [g.variant for g in found[0].groups] == ["algo", "control"]
    assert found[0].message == (
        "experiment=mlp variant=algo (replicas 0, 1) and experiment=mlp variant=control (replicas 0, 1): "
        f"a determinism switch was not in effect: {text}"
    )


def test_replicas_of_two_groups_reading_one_checkpoint_are_one_problem(tmp_path: Path) -> None:
    root, ckpt = tmp_path / "runs", str(tmp_path / "ckpt.pt")
    _write(root, "mlp", "algo", 0, ckpt)
    for experiment, variant, k in (("mlp", "algo", 1), ("cnn", "algo", 0)):
        write_run(root, experiment, variant, k, [("val", "val_acc", 0.7 + k / 100)])
        OutsideWrites(run_path(root, experiment, variant, k), experiment, variant, k).read(ckpt)
    (problem,) = [p for p in study_problems(root) if p.kind == "read_other_replica"]
    assert problem.groups == (GroupReplicas("cnn", "algo", (0,)), GroupReplicas("mlp", "algo", (1,)))
    assert f"({ckpt} written by experiment=mlp variant=algo replica=0)" in problem.message


def test_a_problem_of_many_groups_keeps_them_all_and_cuts_its_line(tmp_path: Path) -> None:
    root, ckpt = tmp_path / "runs", str(tmp_path / "ckpt.pt")
    for e in range(7):
        _write(root, f"e{e}", "algo", 0, ckpt)
    (problem,) = _shared(study_problems(root))
    assert [g.experiment for g in problem.groups] == [f"e{e}" for e in range(7)]
    assert "experiment=e4 variant=algo (replica 0) and 2 more groups (2 replicas) wrote" in problem.message


def test_the_html_page_puts_the_answers_and_the_decomposition_before_the_problems(capsys, tmp_path: Path) -> None:
    root, ckpt = tmp_path / "runs", str(tmp_path / "ckpt.pt")
    for variant in ("algo", "control"):
        for k in range(3):
            _write(root, "mlp", variant, k, ckpt, acc=0.8 + (k / 100 if variant == "algo" else 0))
    code, page, err = run_cli(capsys, "report", os.fspath(root), "--format", "html")
    assert code == 0, err
    answers, why = page.index('id="answers"'), page.index("<h2>Variance decomposition</h2>")
    problems = page.index("<h3>Problems (1)</h3>")
    assert answers < why < problems
    assert page.count(SHARED) == 1
    assert re.search(r'<details class="problems" open><summary><h3>Problems \(1\)</h3>', page)  # short: open


def test_a_path_shared_under_isolate_does_not_advise_isolate(tmp_path: Path) -> None:
    """Replicas that ran with --isolate and still shared a path (an absolute one) are told that isolation cannot
    make it private, never to "rerun with --isolate" (which was on)."""
    root, ckpt = tmp_path / "runs", str(tmp_path / "elsewhere" / "ckpt.pt")
    for k in (0, 1):
        write_run(root, "mlp", "algo", k, [("val", "val_acc", 0.8 + k / 100)], isolate=True)
        OutsideWrites(run_path(root, "mlp", "algo", k), "mlp", "algo", k).wrote(ckpt)
    (problem,) = _shared(study_problems(root))
    assert "rerun with --isolate" not in problem.message
    assert "they ran with --isolate, which cannot make these paths private" in problem.message
    _write(root, "mlp", "control", 0, ckpt)  # a group without --isolate shares it too: isolation is advice again
    (problem,) = _shared(study_problems(root))
    assert "rerun with --isolate" in problem.message
