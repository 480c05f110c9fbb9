"""``deviate-replicate --until-decided --on improvement``: rounds until P(A>B) is decided against a threshold.

The fast trainer of ``test_rounds.py`` (a final ``acc`` drawn from the seed, 0.01 noise around each group's mean):
A at 0.90 against B at 0.80 separates completely, so P(A>B) = 1; with the default threshold 0.75 the repeated
interval clears it only at 10 runs a group (3 runs: [0.21, 1]; 8 runs: [0.66, 1]), so the sequence runs its three
looks (3, 8, 10 runs) and ends "A better" at the last. Bad ``--threshold`` input is one line, exit 2, nothing launched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_rounds import _records, _replicas, _run, study  # noqa: F401  (the fixture, the trainer, the runner)

pytestmark = pytest.mark.slow


def test_complete_separation_is_decided_once_the_interval_clears_the_threshold(study: Path) -> None:  # noqa: F811
    args = ("--trainer", "fns.py:good", "-n", "3", "--variant", "algo", "--experiment", "b", "--until-decided",
            "--against", "experiment=a", "--metric", "acc", "--max-runs", "10", "--parallel", "5",
            "--on", "improvement")  # fmt: skip
    done = _run(study, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "until P(A>B) against the threshold 0.75 of acc is decided" in done.stdout, done.stdout
    shown = " ".join(done.stdout.split())
    assert "look 1 of 3: P(A>B) = 1 [" in shown and "]: continue" not in shown.split("look 3 of 3")[1]
    assert "look 3 of 3: P(A>B) = 1" in shown and "A better" in shown, shown
    assert "the chance a run of A has the higher acc than a run of B" in shown, shown
    (record,) = _records(study)
    assert record["decision"] == "A better" and [look["n"] for look in record["looks"]] == [3, 8, 10]
    assert record["plan"]["on"] == "improvement" and record["plan"]["threshold"] == 0.75
    assert record["options"]["threshold"] == 0.75
    assert all(look["low"] <= look["statistic"] <= look["high"] for look in record["looks"])
    assert record["looks"][0]["low"] < 0.75 < record["looks"][-1]["low"]  # 3 runs cannot claim it, 10 can
    assert len(_replicas(study, "b")) == 10
    again = _run(study, *args, "--threshold", "0.8")  # another threshold would spend alpha again: refused
    assert again.returncode == 2 and "--threshold 0.75, not 0.8" in again.stderr, again.stderr
    assert json.loads(json.dumps(record))["plan"]["nominals"] == record["plan"]["nominals"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--threshold", "0.8"), "`--threshold` goes with `--on improvement`. Received: --threshold=0.8."),
        (("--on", "improvement", "--threshold", "0.4"), "`--threshold` must be in (0.5, 1), e.g. 0.75."),
        (("--on", "improvement", "--effect", "0.1"), "`--effect` does not go with `--on improvement`"),
        (("--on", "improvement", "--threshold", "x"), "`--threshold` must be a number. Received: --threshold=x."),
    ],
)  # fmt: skip
def test_bad_threshold_is_one_line_and_nothing_is_launched(
    study: Path,  # noqa: F811
    extra: tuple[str, ...],
    expected: str,
) -> None:
    head = ("--trainer", "fns.py:good", "-n", "3", "--variant", "algo", "--experiment", "bad", "--until-decided")
    done = _run(study, *head, "--against", "experiment=a", "--metric", "acc", "--max-runs", "6", *extra)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert not (study / "runs" / "experiment=bad").exists()


def test_the_report_line_names_p_a_greater_than_b() -> None:
    from deviate_cb.report.answers.sequential import sequence_lines

    look = {"k": 3, "n_a": 10, "n_b": 10, "statistic": 1.0, "low": 0.764, "high": 1.0, "level": 0.95}
    record = {"kind": "until-decided", "metric": "loss", "direction": "min", "decision": "A better",
              "group": {"experiment": "b", "variant": "algo"}, "against": {"experiment": "a", "variant": "algo"},
              "looks": [look], "plan": {"on": "improvement", "method": "P(A>B)", "alpha": 0.05,
                                        "looks": [[3, 3], [8, 8], [10, 10]]}}  # fmt: skip
    shown = " ".join(sequence_lines([record])[0].split())
    assert "A better (look 3 of 3, 10 runs per group): P(A<B) = 1 [0.764, 1]" in shown, shown
