"""Problems are never silent: find_problems on real run directories, and the warnings of report, compare, power
and status (exit codes unchanged)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deviate_cb.report import find_runs
from deviate_cb.report.answers.findings import KINDS, Problem, format_problem
from deviate_cb.report.answers.problems import find_problems, study_problems
from deviate_cb.report.answers.summary import ReportRow
from deviate_cb.report.reading.configurations import replica_list
from deviate_cb.store.footer_summary import footer_summary
from deviate_cb.store.metrics import metrics_schema
from deviate_cb.store.run_directory import RunDirectory, run_path
from tests.helpers.report_study import Row, run_cli, write_run

IDENTICAL = "came out bit-identical on every metric: the seeds did not reach the training"


def _run(root: Path, variant: str, k: int, rows: list[Row], *, copy: bool = True, **manifest: Any) -> Path:
    """A completed run; with ``copy``, its manifest holds the summary copy the capture session writes."""
    path = write_run(root, "mlp", variant, k, rows, **manifest)
    if copy and rows:
        summary = footer_summary(pq.read_metadata(path / "metrics.parquet"))
        assert summary is not None
        stat = (path / "metrics.parquet").stat()
        copied = {**summary, "file_size": stat.st_size, "file_mtime_ns": stat.st_mtime_ns}
        RunDirectory(path).update_manifest(metrics_summary=copied)
    return path


def _rows(acc: float, loss: float = 0.5) -> list[Row]:
    return [("train", "loss", 1.0), ("val", "loss", loss), ("val", "val_acc", acc)]


def _kinds(problems: list[Problem]) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p.variant, p.kind, p.replicas) for p in problems]


def _problem_study(root: Path) -> Path:
    """algo: 3 identical replicas; control: replica 2 differs in val/loss; algo+impl: determinism problems,
    project seeds kept, a replica without injection; healthy replicas otherwise."""
    for k in range(3):
        _run(root, "algo", k, _rows(0.8))
        _run(root, "control", k, _rows(0.8, 0.5 if k < 2 else 0.6))
        _run(
            root,
            "algo+impl",
            k,
            _rows(0.8 + k / 100),
            determinism={"problems": ["torch.backends.cudnn.benchmark is True", f"torch.initial_seed() is 7, not {k}"]},
            seeding={
                "take_over": False,
                "replica_seed": k,
                "calls": [{"call": "lightning.seed_everything", "asked": 42, "applied": 42, "count": 1}],
                "more": 0,
            },
            **({"injection": "none", "injection_note": "bash ran no Python"} if k == 1 else {}),
        )
    return root


def _healthy_study(root: Path) -> Path:
    for k in range(3):
        _run(root, "algo", k, _rows(0.8 + k / 100))  # seeds reached the training: replicas differ
        _run(root, "control", k, _rows(0.8))  # control: bit-identical
        _run(root, "impl", k, _rows(0.8))  # impl may come out identical (deterministic CPU kernels)
    return root


# -- find_problems ---------------------------------------------------------------------------------------------


def test_identical_algo_replicas_from_the_manifest_copies_without_reading_parquet(tmp_path: Path, monkeypatch) -> None:
    for k in range(3):
        _run(tmp_path, "algo", k, _rows(0.8))
    runs = find_runs(tmp_path)

    def no_footer(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a footer was read although the manifests hold current summaries")

    monkeypatch.setattr(pq, "read_metadata", no_footer)
    (problem,) = find_problems(runs)
    assert (problem.experiment, problem.variant, problem.kind, problem.replicas) == (
        "mlp",
        "algo",
        "identical_replicas",
        (0, 1, 2),
    )
    assert (
        format_problem(problem)
        == problem.line()
        == (
            f"experiment=mlp variant=algo: replicas 0, 1, 2 {IDENTICAL} (the project may seed itself; "
            "see run.json 'seeding')"
        )
    )


def test_identical_sets_are_reported_each_and_the_footer_is_read_without_a_copy(tmp_path: Path) -> None:
    for k, acc in enumerate([0.8, 0.9, 0.8, 0.9, 0.7]):
        _run(tmp_path, "algo+impl", k, _rows(acc), copy=False)  # footers only
    problems = find_problems(find_runs(tmp_path))
    assert _kinds(problems) == [
        ("algo+impl", "identical_replicas", (0, 2)),
        ("algo+impl", "identical_replicas", (1, 3)),
    ]
    assert "replicas 0, 2 came out bit-identical" in problems[0].message


def test_a_stale_copy_is_not_trusted(tmp_path: Path) -> None:
    paths = [_run(tmp_path, "algo", k, _rows(0.8)) for k in range(2)]
    write_run(tmp_path, "mlp", "algo", 1, _rows(0.9))  # rewritten: the manifest's copy (0.8) is stale now
    copy = json.loads((paths[1] / "run.json").read_text())["metrics_summary"]
    assert copy["series"][-1][3] == 0.8
    assert find_problems(find_runs(tmp_path)) == []


def test_only_the_last_bit_differs_is_not_identical(tmp_path: Path) -> None:
    _run(tmp_path, "algo", 0, _rows(0.8))
    _run(tmp_path, "algo", 1, _rows(math.nextafter(0.8, 1.0)))  # 1 ulp apart
    assert find_problems(find_runs(tmp_path)) == []


def test_a_healthy_study_has_no_problem(tmp_path: Path) -> None:
    _healthy_study(tmp_path)
    assert find_problems(find_runs(tmp_path)) == []
    assert study_problems(tmp_path) == []


def test_control_replicas_that_differ_name_the_metrics(tmp_path: Path) -> None:
    for k in range(3):
        _run(tmp_path, "control", k, _rows(0.8 + (k == 2) / 10, 0.5 + (k == 1) / 10))
    (problem,) = find_problems(find_runs(tmp_path))
    assert (problem.kind, problem.replicas) == ("control_differs", (0, 1, 2))
    assert problem.message == (
        "experiment=mlp variant=control: replicas 0, 1, 2: control replicas differ (metrics val/loss, val_acc): "
        "something nondeterministic is not controlled; find where with `deviate audit`"
    )


def test_control_replicas_with_audit_records_say_where_they_first_differ(tmp_path: Path) -> None:
    from deviate_cb.store.audit import write_audit

    for k in range(2):
        path = _run(tmp_path, "control", k, _rows(0.8 + k / 10, 0.5), trainer="train.py:main")
        row = {"step": 0, "seq": 0, "kind": "forward", "name": "net.2", "module": "net.2", "occurrence": 0,
               "dtype": "float32", "shape": [1], "numel": 1, "digest": f"{k:032x}", "sum": k, "abs_max": k,
               "values": [float(k)]}  # fmt: skip
        write_audit(path, [row])
    (problem,) = find_problems(find_runs(tmp_path))
    assert problem.message.endswith(
        "something nondeterministic is not controlled; their audit records first differ at training step 0: "
        "forward `net.2` (replicas 0, 1)"
    )
    (path / "audit.parquet").unlink()
    (problem,) = find_problems(find_runs(tmp_path))
    assert problem.message.endswith("find where with `deviate audit --trainer train.py:main`")


def test_determinism_problems_are_grouped_across_replicas(tmp_path: Path) -> None:
    for k in range(3):
        problems = ["torch.backends.cudnn.deterministic is False"] if k != 1 else []
        problems.append(f"torch.initial_seed() is 42, not {k}")
        _run(tmp_path, "algo", k, _rows(0.8 + k / 100), determinism={"problems": problems, "verified": False})
    _run(tmp_path, "algo", 3, _rows(0.9), status="failed", determinism={"problems": ["XLA_FLAGS lacks it"]})
    found = find_problems(find_runs(tmp_path))
    assert _kinds(found) == [
        ("algo", "seeds_not_in_effect", (0, 1, 2)),
        ("algo", "determinism_not_in_effect", (0, 2)),
    ]  # the failed replica's problems are not the completed study's
    assert found[0].message == (
        "experiment=mlp variant=algo: replicas 0, 1, 2: the seed was not in effect: torch.initial_seed() is 42, not 0 "
        "(replica 0; the others alike with their own numbers)"
    )
    assert found[1].message == (
        "experiment=mlp variant=algo: replicas 0, 2: a determinism switch was not in effect: "
        "torch.backends.cudnn.deterministic is False"
    )


def test_project_seeds_kept(tmp_path: Path) -> None:
    call = {"call": "lightning.seed_everything", "asked": 42, "applied": 42, "count": 1}
    for k in range(2):
        kept = {"take_over": False, "replica_seed": k, "calls": [call], "more": 0}
        _run(tmp_path, "algo+impl", k, _rows(0.8 + k / 100), seeding=kept)
        _run(tmp_path, "algo", k, _rows(0.8 + k / 100), seeding={**kept, "take_over": True})  # deviate-cb's won
        _run(tmp_path, "control", k, _rows(0.8), seeding=kept)  # one seed anyway: nothing suppressed
    _run(tmp_path, "algo+impl", 2, _rows(0.7), seeding={"take_over": False, "replica_seed": 2, "calls": []})
    (problem,) = find_problems(find_runs(tmp_path))
    assert problem.message == (
        "experiment=mlp variant=algo+impl: replicas 0, 1: the project seeded itself (lightning.seed_everything(42)) "
        "and --keep-project-seeds kept its seeds: seed variance is suppressed"
    )
    assert problem.kind == "project_seeds_kept"


def test_seeding_calls_are_summarised(tmp_path: Path) -> None:
    calls = [
        {"call": "torch.manual_seed", "asked": 1, "applied": 1, "count": 3},
        {"call": "numpy.random.seed", "asked": 2, "applied": 5, "count": 1},
        {"call": "random.seed"},
        {"call": "tf.random.set_seed", "asked": 4},
        "not a call",
    ]
    for k in range(2):
        _run(tmp_path, "algo", k, [], seeding={"take_over": False, "calls": calls, "more": 2})
    (problem,) = find_problems(find_runs(tmp_path))
    assert "(torch.manual_seed(1) x3, numpy.random.seed(2 -> 5), random.seed(), 3 more calls)" in problem.message


def test_no_injection_is_grouped_by_note(tmp_path: Path) -> None:
    for k in range(4):
        note = {"injection_note": "the command ran `make`, not python"} if k < 3 else {}
        _run(tmp_path, "impl", k, _rows(0.8), injection="none", **note)
    _run(tmp_path, "impl", 4, _rows(0.8), injection="python")
    problems = find_problems(find_runs(tmp_path))
    assert _kinds(problems) == [("impl", "no_injection", (0, 1, 2)), ("impl", "no_injection", (3,))]
    assert problems[0].message == (
        "experiment=mlp variant=impl: replicas 0, 1, 2: nothing was injected: the command ran `make`, not python"
    )
    assert problems[1].message.startswith("experiment=mlp variant=impl: replica 3: nothing was injected: the command")


def test_malformed_manifests_and_files_never_raise(tmp_path: Path) -> None:
    odd: list[dict[str, Any]] = [
        {"determinism": "yes", "seeding": ["x"], "injection": None, "metrics_summary": {"version": 1}},
        {"determinism": {"problems": {"a": 1}}, "seeding": {"take_over": False, "calls": "x", "more": "many"}},
        {"determinism": {"problems": [None, 3, "  "]}, "metrics_summary": {"version": 1, "rows": 1, "series": [7]}},
        {"seeding": {"take_over": "no"}, "injection": "none", "injection_note": 12},
    ]
    for k, fields in enumerate(odd):
        _run(tmp_path, "algo", k, _rows(0.8) if k != 2 else [], copy=False, **fields)
    garbage = write_run(tmp_path, "mlp", "control", 0, _rows(0.8))
    (garbage / "metrics.parquet").write_bytes(b"not parquet")
    write_run(tmp_path, "mlp", "control", 1, _rows(0.8))
    (write_run(tmp_path, "mlp", "control", 2) / "run.json").write_text("{not json")
    newer = write_run(tmp_path, "mlp", "algo", 9, _rows(0.8))
    (newer / "run.json").write_text(json.dumps({"schema_version": 99, "status": "completed"}))
    RunDirectory(run_path(tmp_path, "mlp", "algo", 0).parent / "replica=x").update_manifest(status="completed")

    problems = study_problems(tmp_path)  # the newer manifest is left out, the rest is read
    assert _kinds(problems) == [("algo", "no_injection", (3,)), ("algo", "identical_replicas", (0, 1, 3))]
    assert study_problems(tmp_path / "missing") == []
    assert study_problems(garbage / "run.json") == []


def test_replica_lists() -> None:
    assert replica_list([5]) == "replica 5"
    assert replica_list([3, 1, 2]) == "replicas 1, 2, 3"
    assert replica_list([*range(10), 12, 14, 15]) == "replicas 0-9, 12, 14, 15"


def test_the_report_rows_and_values_decide_where_nothing_is_summarised(tmp_path: Path) -> None:
    """Runs without metrics files: the caller's values, else the report's rows (std exactly 0)."""
    for k in range(3):
        _run(tmp_path, "algo", k, [])
        _run(tmp_path, "control", k, [])
    runs = find_runs(tmp_path)
    assert find_problems(runs) == []
    rows = [
        ReportRow("mlp", "algo", "acc", "last", 3, 0.8, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.0),
        ReportRow("mlp", "algo", "loss", "last", 3, 0.5, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0),
        ReportRow("mlp", "control", "acc", "last", 3, 0.8, 0.01, 0.01, 0.79, 0.81, 0.02, 0.0, 0.1),
        ReportRow("mlp", "control", "loss", "last", 3, 0.5, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0),
    ]
    found = find_problems(runs, rows=rows)
    assert _kinds(found) == [("algo", "identical_replicas", (0, 1, 2)), ("control", "control_differs", (0, 1, 2))]
    assert "replicas 0, 1, 2 came out identical on every metric (std 0): the seeds did not reach" in found[0].message
    assert "control replicas differ (metric acc)" in found[1].message
    rows[1] = ReportRow("mlp", "algo", "loss", "last", 3, 0.5, 0.1, 0.2, 0.4, 0.6, 0.2, 0.0, 0.3)
    assert _kinds(find_problems(runs, rows=rows)) == [("control", "control_differs", (0, 1, 2))]

    values = {("mlp", "algo", str(k)): {"acc": 0.8, "loss": 0.5 + (k == 2)} for k in range(3)}
    assert _kinds(find_problems(runs, values=values)) == [("algo", "identical_replicas", (0, 1))]


def test_kinds_are_the_documented_ones() -> None:
    assert set(KINDS) == {
        "seeds_not_in_effect",
        "determinism_not_in_effect",
        "identical_replicas",
        "control_differs",
        "project_seeds_kept",
        "project_determinism_kept",
        "no_injection",
        "recording_failed",
        "shared_outputs",
        "read_other_replica",
    }


# -- the commands ----------------------------------------------------------------------------------------------

ALGO_LINE = f"experiment=mlp variant=algo: replicas 0, 1, 2 {IDENTICAL}"
CONTROL_LINE = "experiment=mlp variant=control: replicas 0, 1, 2: control replicas differ (metric val/loss)"
SEED_LINE = "experiment=mlp variant=algo+impl: replicas 0, 1, 2: the seed was not in effect: torch.initial_seed()"
SWITCH_LINE = (
    "experiment=mlp variant=algo+impl: replicas 0, 1, 2: a determinism switch was not in effect: "
    "torch.backends.cudnn.benchmark is True"
)
KEPT_LINE = (
    "experiment=mlp variant=algo+impl: replicas 0, 1, 2: the project seeded itself (lightning.seed_everything(42))"
)
INJECTION_LINE = "experiment=mlp variant=algo+impl: replica 1: nothing was injected: bash ran no Python"
ALL_LINES = (ALGO_LINE, CONTROL_LINE, SEED_LINE, SWITCH_LINE, KEPT_LINE, INJECTION_LINE)


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("deviate: warning: ")]


def _warned(err: str, *heads: str) -> bool:
    lines = _warnings(err)
    return all(any(line.startswith(f"deviate: warning: {head}") for line in lines) for head in heads)


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_report_warns_about_every_problem(capsys, tmp_path: Path, fmt: str) -> None:
    _problem_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", fmt)
    assert code == 0
    assert _warned(err, *ALL_LINES) and len(_warnings(err)) == len(ALL_LINES), err
    if fmt == "table":  # under its group, one line each
        lines = out.splitlines()
        problem = next(i for i, line in enumerate(lines) if line.startswith(f"problem: {ALGO_LINE}"))
        title = max(i for i, line in enumerate(lines[:problem]) if line.startswith("experiment="))
        assert lines[title].startswith("experiment=mlp  variant=algo  (3 completed runs")
        assert "the seeds did not reach the training" in lines[problem]
        assert sum(line.startswith("problem: ") for line in lines) == len(ALL_LINES)
    elif fmt == "md":
        section = out.split("## Problems\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert len(section) == len(ALL_LINES)
        assert any(line.startswith(f"- **identical_replicas**: {ALGO_LINE}") for line in section)
    elif fmt == "json":
        assert {row["variant"] for row in json.loads(out)} == {"algo", "algo+impl", "control"}
    else:
        assert out.startswith("experiment,variant,metric,") and "problem" not in out


def test_report_says_the_seeds_did_not_reach_the_training_from_a_zero_std(capsys, tmp_path: Path) -> None:
    """Metrics files another tool wrote (no summary in footer or manifest): the report's std decides."""
    for k in range(3):
        path = write_run(tmp_path, "mlp", "algo+impl", k)
        n = 2
        table = pa.table(
            {
                "seq": list(range(n)),
                "step": [0, 1],
                "epoch": [0, 0],
                "stage": ["val"] * n,
                "scope": ["epoch"] * n,
                "name": ["acc", "loss"],
                "value": [0.8, 0.5],
                "finite": [True] * n,
                "wall_time": [float(k)] * n,
            },
            schema=metrics_schema(),
        )
        pq.write_table(table, path / "metrics.parquet")
    assert footer_summary(pq.read_metadata(path / "metrics.parquet")) is None
    code, out, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 0
    line = (
        "experiment=mlp variant=algo+impl: replicas 0, 1, 2 came out identical on every metric (std 0): "
        "the seeds did not reach the training"
    )
    assert _warned(err, line) and f"problem: {line}" in out


def test_report_of_a_healthy_study_warns_nothing(capsys, tmp_path: Path) -> None:
    _healthy_study(tmp_path)
    for fmt in ("table", "md", "json"):
        code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", fmt)
        assert (code, err) == (0, ""), fmt
        assert "problem" not in out.lower()


def test_report_from_a_table_has_no_problems(capsys, tmp_path: Path) -> None:
    table = tmp_path / "runs.csv"
    table.write_text("variant,acc\nalgo,0.8\nalgo,0.8\nalgo,0.8\n")
    code, out, err = run_cli(capsys, "report", "--table", str(table), "--group-by", "variant")
    assert (code, err) == (0, "") and "problem" not in out


def test_compare_warns_about_the_groups_compared(capsys, tmp_path: Path) -> None:
    _problem_study(tmp_path)
    code, out, err = run_cli(capsys, "compare", str(tmp_path), "--a", "variant=algo", "--b", "variant=control")
    assert code == 0 and "val_acc" in out
    assert _warned(err, ALGO_LINE, CONTROL_LINE) and len(_warnings(err)) == 2, err  # not algo+impl's


def test_compare_of_two_dirs_warns_per_dir(capsys, tmp_path: Path) -> None:
    _problem_study(tmp_path / "a")
    _healthy_study(tmp_path / "b")
    args = ("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--a", "variant=algo", "--b", "variant=algo")
    code, _, err = run_cli(capsys, *args, "--format", "json")
    assert code == 0
    assert _warned(err, ALGO_LINE) and len(_warnings(err)) == 1, err
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "b"), "--a", "variant=algo", "--b", "variant=control")
    assert (code, err) == (0, "")


def test_compare_of_tables_has_no_problem_warning(capsys, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("acc\n0.8\n0.8\n0.8\n")
    b.write_text("acc\n0.7\n0.71\n0.72\n")
    code, _, err = run_cli(capsys, "compare", "--table", str(a), "--table", str(b))
    assert code == 0 and "warning" not in err


def test_power_warns_about_the_groups_measured(capsys, tmp_path: Path) -> None:
    _problem_study(tmp_path)
    code, out, err = run_cli(capsys, "power", str(tmp_path), "--effect", "0.01", "--group", "variant=control")
    assert code == 0 and "val_acc" in out
    assert _warned(err, CONTROL_LINE) and len(_warnings(err)) == 1, err
    code, _, err = run_cli(capsys, "power", str(tmp_path), "--effect", "0.01", "--format", "json")
    assert code == 0 and _warned(err, *ALL_LINES) and len(_warnings(err)) == len(ALL_LINES)
    _healthy_study(tmp_path / "healthy")
    assert run_cli(capsys, "power", str(tmp_path / "healthy"), "--effect", "0.01")[::2] == (0, "")


def test_status_warns_after_the_table(capsys, tmp_path: Path) -> None:
    _problem_study(tmp_path)
    write_run(tmp_path, "mlp", "algo", 3, _rows(0.8), status="running")  # not completed: not compared
    code, out, err = run_cli(capsys, "status", str(tmp_path), "--no-cluster")
    assert code == 0
    assert out.splitlines()[-1] == f"{tmp_path}: 10 replicas: 9 completed, 1 running"
    assert _warned(err, *ALL_LINES) and len(_warnings(err)) == len(ALL_LINES), err
    _healthy_study(tmp_path / "healthy")
    code, out, err = run_cli(capsys, "status", str(tmp_path / "healthy"), "--no-cluster")
    assert (code, err) == (0, "") and "9 completed" in out


def test_status_of_a_missing_dir_is_still_a_usage_error(capsys, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "status", os.fspath(tmp_path / "missing"))
    assert code == 2 and out == "" and err.startswith("deviate: error: `DIR` must be an existing run directory")


def test_a_problem_of_a_group_without_rows_is_still_printed() -> None:
    import io

    from deviate_cb.report.answers.summary import Report
    from deviate_cb.report.rendering.formats import print_table, render

    row = ReportRow("mlp", "algo", "acc", "last", 2, 0.8, 0.01, 0.01, 0.79, 0.81, 0.02, 0.0, 0.1)
    shown = Problem("mlp", "algo", "no_injection", (1,), "experiment=mlp variant=algo: replica 1: nothing was injected")
    other = Problem("cnn", "algo", "no_injection", (0,), "experiment=cnn variant=algo: replica 0: nothing was injected")
    report = Report((row,), (), groups=(("mlp", "algo", 2), ("mlp", "control", 2)))
    empty = Problem("mlp", "control", "control_differs", (0, 1), "experiment=mlp variant=control: replicas 0, 1: x")
    buffer = io.StringIO()
    print_table(report, buffer, problems=[shown, other, empty])
    lines = buffer.getvalue().splitlines()
    at = lines.index(f"problem: {shown.message}")
    assert lines[at - 1].lstrip().startswith("acc")  # right under the group's table
    assert lines[lines.index(f"problem: {empty.message}") - 1].endswith("no metrics from completed runs.")
    assert lines[lines.index(f"problem: {other.message}") - 1] == "Problems"
    assert "problem" not in render(report, "csv") + render(report, "json") + render(report, "md").lower()


def test_recording_errors_the_callback_swallowed_are_problems(tmp_path: Path) -> None:
    from deviate_cb.store.run_directory import RunDirectory, run_path

    for replica in (0, 1):
        run = RunDirectory(run_path(tmp_path, "e", "algo", replica))
        run.update_manifest(status="completed", experiment="e", variant="algo", replica=replica, seed=replica)
    RunDirectory(run_path(tmp_path, "e", "algo", 1)).update_manifest(
        problems=[
            {"where": "on_train_epoch_end: metrics flush", "error": "OSError: [Errno 28] No space left", "count": 3}
        ]
    )
    found = [p for p in study_problems(tmp_path) if p.kind == "recording_failed"]
    assert len(found) == 1 and found[0].replicas == (1,)
    assert "could not record everything" in found[0].message and "No space left" in found[0].message
