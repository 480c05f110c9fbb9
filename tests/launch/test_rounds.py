"""``deviate-replicate --until-decided`` and ``--until-precision``: replicate in rounds until the answer is known.

Real ``deviate-replicate`` subprocesses run a ``--trainer`` whose final metric is drawn from its seed (normal
noise around a mean the test sets per group), so that each decision is known in advance: a difference of 100 noise
stds is decided at the first look, equal groups run to ``--max-runs`` undecided, a large ``--effect`` ends them as
"no difference of at least". The baseline group B is topped up in the same rounds, relaunched as its manifests
record it; the looks are recorded under ``<out>/.sequential/`` and a rerun continues from them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import REPO, child_env

pytestmark = pytest.mark.slow

TRAINER = """\
import os
import random
from pathlib import Path


def _value(seed, mean):
    return mean + 0.01 * random.Random(seed).gauss(0.0, 1.0)


def good(seed):
    return {"acc": _value(seed, 0.90)}


def base(seed):
    if Path(os.environ.get("FAIL_MARKER", "/nonexistent")).exists() and seed >= 3:
        raise RuntimeError("the cluster lost this node")
    return {"acc": _value(seed, 0.80)}


def shared(seed):
    Path("last_seed.txt").write_text(str(seed))  # a fixed path in the launch directory: every replica writes it
    return {"acc": _value(seed + 2049, 0.80)}


def flat(seed):
    return {"acc": 0.901}


def low(seed):
    return {"acc": 0.8}


def same(seed):
    if Path(os.environ.get("FAIL_A_MARKER", "/nonexistent")).exists() and seed >= 3:
        raise RuntimeError("out of memory")
    return {"acc": _value(seed + 1025, 0.80)}
"""


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "--out", str(tmp_path / "runs"), *args],
        cwd=tmp_path,
        env=child_env({"PYTHONPATH": str(REPO), **(env or {})}),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    folder = tmp_path / "runs" / ".sequential"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.fixture
def study(tmp_path: Path) -> Path:
    (tmp_path / "fns.py").write_text(TRAINER)
    done = _run(tmp_path, "--trainer", "fns.py:base", "-n", "3", "--variant", "algo", "--experiment", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path


def _replicas(tmp_path: Path, experiment: str) -> list[str]:
    folder = tmp_path / "runs" / f"experiment={experiment}" / "variant=algo"
    return sorted(p.name for p in folder.iterdir())


def test_a_clear_difference_is_decided_at_the_first_look(study: Path) -> None:
    args = ("--trainer", "fns.py:good", "-n", "3", "--variant", "algo", "--experiment", "b", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "9", "--parallel", "3")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 looks at 3, 6, 9 runs per group" in done.stdout
    assert "look 1 of 3" in done.stdout and ": A better" in done.stdout, done.stdout
    (record,) = _records(study)
    assert record["decision"] == "A better" and len(record["looks"]) == 1
    assert record["against"]["experiment"] == "a" and record["plan"]["alpha"] == 0.05
    from deviate_cb.stats.sequential import DEFAULT_BOUNDARY, DEFAULT_KAPPA

    assert (record["plan"]["boundary"], record["plan"]["kappa"]) == (DEFAULT_BOUNDARY, DEFAULT_KAPPA)  # the API's
    assert _replicas(study, "b") == ["replica=0", "replica=1", "replica=2"]  # stopped: no more runs made
    low, high = record["looks"][0]["low"], record["looks"][0]["high"]
    assert 0 < low < 0.1 < high  # the repeated interval around the true difference, 0.1
    report = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "report", str(study / "runs")],
        env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    shown = " ".join(report.stdout.split())
    assert "Replicated until decided" in shown
    assert "acc, A = experiment=b variant=algo vs B = experiment=a variant=algo: A better (look 1 of 3" in shown
    compare = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "compare", str(study / "runs"), "--a", "experiment=b",
         "--b", "experiment=a"],
        env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "replicated until a sequential test decided" in " ".join(compare.stderr.split()), compare.stderr
    again = _run(study, *args)  # decided: the rerun only says so
    assert again.returncode == 0 and "already decided at look 1" in again.stdout, again.stdout + again.stderr


def test_equal_groups_run_to_max_runs_and_b_is_topped_up_as_recorded(study: Path) -> None:
    args = ("--trainer", "fns.py:same", "-n", "3", "--variant", "algo", "--experiment", "c", "--until-decided",
            "--against", "experiment=a", "--against", "variant=algo", "--metric", "acc", "--max-runs", "5",
            "--parallel", "2")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert [look["n"] for look in record["looks"]] == [3, 5]
    assert record["decision"] == "undecided", record["looks"]
    assert len(_replicas(study, "a")) == 5 and len(_replicas(study, "c")) == 5  # B topped up in the same rounds
    manifest = json.loads((study / "runs/experiment=a/variant=algo/replica=4/run.json").read_text())
    assert manifest["configuration"]["trainer"] == "fns.py:base" and manifest["seed"] == 4  # its seed series goes on


def test_a_large_effect_ends_as_no_difference_that_large(study: Path) -> None:
    args = ("--trainer", "fns.py:same", "-n", "4", "--variant", "algo", "--experiment", "d", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "8", "--parallel", "4",
            "--effect", "0.5")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert record["decision"].startswith("no difference of at least"), record


def test_an_interrupted_sequence_resumes_from_its_recorded_looks(study: Path) -> None:
    marker = study / "fail"
    marker.write_text("")
    args = ("--trainer", "fns.py:same", "-n", "3", "--variant", "algo", "--experiment", "e", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "6", "--parallel", "3")  # fmt: skip
    first = _run(study, *args, env={"FAIL_MARKER": str(marker)})
    assert first.returncode == 1, first.stdout + first.stderr
    assert "look 2 needs 6 completed runs" in " ".join(first.stdout.split()), first.stdout
    (record,) = _records(study)
    assert len(record["looks"]) == 1 and record["decision"] is None
    marker.unlink()
    second = _run(study, *args, env={"FAIL_MARKER": str(marker)})
    assert second.returncode == 0, second.stdout + second.stderr
    (record,) = _records(study)
    assert [look["k"] for look in record["looks"]] == [1, 2]  # look 1 kept, not made again
    changed = _run(study, *args[:-2], "--parallel", "1")  # another plan over the same runs
    assert changed.returncode == 2, changed.stderr
    assert "records a sequence started with round size (--parallel) 3, not 1" in changed.stderr, changed.stderr


def test_a_sequence_resumes_after_b_was_topped_up(study: Path) -> None:
    """A's round failed, B's ran: B has more runs than when the sequence was planned; the plan is kept."""
    marker = study / "fail-a"
    marker.write_text("")
    args = ("--trainer", "fns.py:same", "-n", "3", "--variant", "algo", "--experiment", "f", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "6", "--parallel", "3")  # fmt: skip
    first = _run(study, *args, env={"FAIL_A_MARKER": str(marker)})
    assert first.returncode == 1, first.stdout + first.stderr
    assert len(_replicas(study, "a")) == 6  # B was topped up to the second look
    marker.unlink()
    second = _run(study, *args)
    assert second.returncode == 0, second.stdout + second.stderr
    (record,) = _records(study)
    assert [(look["n_a"], look["n_b"]) for look in record["looks"]] == [(3, 3), (6, 6)]


def test_a_sequence_recorded_before_boundaries_resumes_on_its_pocock_plan(study: Path) -> None:
    """A record of the old code (one "nominal", no "boundary", no --boundary option) continues as it was planned:
    the alpha it spent is not spent again under another boundary."""
    marker = study / "fail"
    marker.write_text("")
    args = ("--trainer", "fns.py:same", "-n", "3", "--variant", "algo", "--experiment", "g", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "6", "--parallel", "3")  # fmt: skip
    first = _run(study, *args, env={"FAIL_MARKER": str(marker)})
    assert first.returncode == 1, first.stdout + first.stderr
    (path,) = sorted((study / "runs" / ".sequential").glob("*.json"))
    record = json.loads(path.read_text())
    legacy = {key: record["plan"][key] for key in ("looks", "alpha", "on", "effect", "direction", "seed", "paths")}
    legacy.update(nominal=0.0304, method="Pocock-type group-sequential Welch t-test")
    record["plan"] = legacy
    del record["options"]["boundary"]
    path.write_text(json.dumps(record))
    marker.unlink()
    second = _run(study, *args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Pocock-type group-sequential Welch t-test at alpha 0.05 (nominal level per look 0.0304)" in second.stdout
    (record,) = _records(study)
    assert record["plan"] == legacy and [look["k"] for look in record["looks"]] == [1, 2]
    assert record["looks"][1]["nominal"] == 0.0304
    obf = _run(study, *args, "--boundary", "obf")  # asking for another boundary over the same runs: refused
    assert obf.returncode == 2 and "--boundary 'pocock', not 'obf'" in obf.stderr, obf.stderr


def test_constant_groups_end_undecided_in_words(study: Path) -> None:
    """Equal runs in both groups (0.901 against 0.8) give a zero-width interval: never a decision."""
    done = _run(study, "--trainer", "fns.py:flat", "-n", "3", "--variant", "algo", "--experiment", "k")
    assert done.returncode == 0, done.stdout + done.stderr
    args = ("--trainer", "fns.py:low", "-n", "3", "--variant", "algo", "--experiment", "m", "--until-decided",
            "--against", "experiment=k", "--metric", "acc", "--max-runs", "4", "--parallel", "1")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert [look["decision"] for look in record["looks"]] == ["continue", "undecided"]
    assert "both groups constant so far: no spread to test against: continue" in done.stdout
    assert "undecided at --max-runs: both groups' acc were constant at every run, so no difference" in done.stdout
    assert record["looks"][-1]["low"] is None and record["looks"][-1]["high"] is None


@pytest.mark.parametrize(
    ("direction", "decision", "statistic"),
    [("min", "A better", -0.08), ("min", "B better", 0.08), ("max", "A better", 0.08), ("max", "B better", -0.08)],
)
def test_the_answer_puts_the_margin_inside_its_interval(direction: str, decision: str, statistic: float) -> None:
    from deviate_cb.launch.sequence_lines import answer_line
    from deviate_cb.stats.sequential import plan_sequential

    plan = plan_sequential(((3, 3), (6, 6)), direction=direction)
    low, high = (0.015, 0.15) if statistic > 0 else (-0.15, -0.015)
    look = {"n_a": 6, "n_b": 6, "k": 2, "level": 0.95, "statistic": statistic, "low": low, "high": high,
            "decision": decision}  # fmt: skip
    text = answer_line(look, "loss", plan, ("new", "algo"), ("old", "algo"))
    winner = "new" if decision == "A better" else "old"
    assert text.startswith(f"decided: experiment={winner} variant=algo has the better loss"), text
    assert "by 0.08 [0.015, 0.15] (95% repeated CI)" in text, text


def test_until_precision_stops_when_the_std_is_known(study: Path) -> None:
    args = ("--trainer", "fns.py:good", "-n", "3", "--variant", "algo", "--experiment", "p", "--until-precision",
            "0.5", "--metric", "acc", "--max-runs", "30", "--parallel", "5")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert record["decision"] == "known"
    ns = [look["n"] for look in record["looks"]]
    assert ns[0] == 3 and ns[-1] < 30 and record["looks"][-1]["precision"] <= 0.5
    assert all(look["precision"] > 0.5 for look in record["looks"][:-1])
    assert "Bonett" in record["looks"][-1]["text"] and record["plan"]["interval"] == "bonett"


def test_until_precision_never_stops_on_equal_runs(study: Path) -> None:
    """Equal runs are std 0, but they do not show that the std is 0: no "known to ±0%" from 3 equal runs."""
    args = ("--trainer", "fns.py:flat", "-n", "3", "--variant", "impl", "--experiment", "q", "--until-precision",
            "0.5", "--metric", "acc", "--max-runs", "5", "--parallel", "2")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert [look["n"] for look in record["looks"]] == [3, 5]
    assert record["decision"] == "not known"
    assert record["looks"][0]["decision"] == "continue" and record["looks"][0]["precision"] is None
    assert record["decision_text"] == (
        "after 5 runs: cannot tell the std of acc from 5 runs with only 1 distinct value (target ±50%); "
        "stopped at --max-runs 5"
    )
    assert "cannot tell the std of acc from 3 runs with only 1 distinct value" in done.stdout


def test_until_precision_on_control_stops_on_bit_identical_runs(study: Path) -> None:
    """The control variant is bit-identical by design: its equal runs are std 0, known exactly."""
    args = ("--trainer", "fns.py:flat", "-n", "3", "--variant", "control", "--experiment", "c", "--until-precision",
            "0.5", "--metric", "acc", "--max-runs", "6")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = _records(study)
    assert record["decision"] == "known" and [look["n"] for look in record["looks"]] == [3]
    assert "the 3 runs are bit-identical, as this group is by design: known exactly" in record["decision_text"]


def test_until_precision_needs_max_runs_of_at_least_three(study: Path) -> None:
    done = _run(study, "--trainer", "fns.py:good", "-n", "2", "--variant", "algo", "--experiment", "bad",
                "--until-precision", "0.5", "--metric", "acc", "--max-runs", "2")  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "`--max-runs` must be at least 3 with --until-precision" in lines[0], lines
    assert not (study / "runs" / "experiment=bad").exists()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--until-decided", "--metric", "acc", "--max-runs", "6"), "`--until-decided` needs `--against KEY=VALUE`"),
        (("--until-decided", "--against", "experiment=zz", "--metric", "acc", "--max-runs", "6"), "`--against`"),
        (("--until-decided", "--against", "experiment=a", "--metric", "loss", "--max-runs", "6"),
         "`--metric` 'loss' is not a metric of experiment=a variant=algo"),
        (("--until-decided", "--against", "experiment=a", "--metric", "acc", "--max-runs", "2"),
         "`--max-runs` must be at least -n (3). Received: --max-runs=2."),
        (("--until-decided", "--against", "experiment=a", "--metric", "acc"), "`--max-runs` is required"),
        (("--until-decided", "--against", "experiment=a", "--metric", "acc", "--max-runs", "6", "--boundary", "x"),
         "`--boundary` must be obf or pocock. Received: --boundary=x."),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_nothing_is_launched(study: Path, extra: tuple[str, ...], expected: str) -> None:
    done = _run(study, "--trainer", "fns.py:good", "-n", "3", "--variant", "algo", "--experiment", "bad", *extra)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert not (study / "runs" / "experiment=bad").exists()


def test_the_report_line_of_constant_groups_claims_nothing() -> None:
    from deviate_cb.report.answers.sequential import sequence_lines

    look = {"k": 2, "n_a": 4, "n_b": 4, "statistic": 0.101, "low": None, "high": None, "level": 0.95}
    record = {"kind": "until-decided", "metric": "acc", "group": {"experiment": "m", "variant": "algo"},
              "against": {"experiment": "k", "variant": "algo"}, "decision": "undecided", "looks": [look],
              "plan": {"method": "O'Brien-Fleming-type group-sequential Welch t-test", "alpha": 0.05,
                       "looks": [[3, 3], [4, 4]]}}  # fmt: skip
    (line,) = sequence_lines([record])
    assert "A-B = 0.101, both groups constant: no difference can be claimed" in line and "?" not in line, line


def test_rounds_say_a_problem_once_not_once_per_round_and_group(tmp_path: Path) -> None:
    """A path both groups write is one problem: the rounds print its line once, not again for B's launch and
    for every look (a line changes, and is printed again, only when it names more replicas)."""
    (tmp_path / "fns.py").write_text(TRAINER)
    first = _run(tmp_path, "--trainer", "fns.py:shared", "-n", "3", "--variant", "algo", "--experiment", "b")
    assert first.returncode == 0, first.stdout + first.stderr
    args = ("--trainer", "fns.py:shared", "-n", "3", "--variant", "algo", "--experiment", "a", "--until-decided",
            "--against", "experiment=b", "--metric", "acc", "--max-runs", "5", "--parallel", "2")  # fmt: skip
    done = _run(tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if "wrote the same paths" in line]
    assert said and len(said) == len(set(said)), said
    assert "last_seed.txt" in said[-1] and "experiment=a" in said[-1] and "experiment=b" in said[-1], said
