"""A group is one configuration (issue 44, item 1): `compare`, `power`, `report --table` and the Python API refuse
a group that holds runs of several configurations, naming each with its run count, unless `--pool` (`pool=True`)
pools them on purpose, and then say so in the title, on stderr and in the `pooled` field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.report.answers.comparison import compare_groups, power_rows
from deviate_cb.report.answers.ranking import rank_metrics, split_by
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.store.configuration import configuration_fields
from tests.helpers.report_study import run_cli, write_run

MLP = "experiment=mlp variant=algo+impl (5 runs), experiment=mlp variant=control (3 runs)"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's shape: mlp (5 algo+impl runs, 3 bit-identical control runs) and mlp_low_lr (5 algo+impl runs)."""
    root = tmp_path_factory.mktemp("demo")
    g = np.random.default_rng(0)
    for experiment, variant, n, mean, std in (
        ("mlp", "algo+impl", 5, 0.90, 0.01),
        ("mlp", "control", 3, 0.88, 0.0),
        ("mlp_low_lr", "algo+impl", 5, 0.85, 0.01),
    ):
        for k in range(n):
            write_run(root, experiment, variant, k, [("val", "val_acc", mean + std * g.normal())])
    return root


def _one_line_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("deviate: error: "), err
    return err


def test_a_selector_of_two_variants_is_refused_naming_each(capsys, demo: Path) -> None:
    code, out, err = run_cli(capsys, "compare", str(demo), "--a", "experiment=mlp_low_lr", "--b", "experiment=mlp")
    assert (code, out) == (2, "")
    line = _one_line_error(err)
    assert f"`--b` matches runs of 2 configurations, and a group is one configuration: {MLP}." in line
    assert "Received: --b experiment=mlp." in line
    assert "Add variant=... to --b (one of: algo+impl, control), or pass --pool to pool them on purpose." in line


def test_a_selector_of_two_experiments_is_refused(capsys, demo: Path) -> None:
    code, _, err = run_cli(capsys, "compare", str(demo), "--a", "variant=algo+impl", "--b", "variant=control")
    assert code == 2
    line = _one_line_error(err)
    assert "experiment=mlp variant=algo+impl (5 runs), experiment=mlp_low_lr variant=algo+impl (5 runs)" in line
    assert "Add experiment=... to --a (one of: mlp, mlp_low_lr)" in line


def test_pool_keeps_the_pooled_group_and_says_so(capsys, demo: Path) -> None:
    args = ("compare", str(demo), "--a", "experiment=mlp_low_lr", "--b", "experiment=mlp", "--pool")
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["n_a"], row["n_b"]) == (5, 8)
    assert row["pooled"] == f"B pools 2 configurations: {MLP}"
    assert f"warning: group B pools 2 configurations: {MLP} (--pool)" in err
    code, out, _ = run_cli(capsys, *args, "--format", "md")
    assert code == 0 and f"B: experiment=mlp (8 runs; POOLED with --pool: 2 configurations: {MLP})" in out


def test_groups_of_one_configuration_work_as_before(capsys, demo: Path) -> None:
    code, out, err = run_cli(
        capsys, "compare", str(demo), "--a", "experiment=mlp", "--a", "variant=algo+impl",
        "--b", "experiment=mlp_low_lr", "--format", "json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    (row,) = json.loads(out)
    assert (row["n_a"], row["n_b"], row["pooled"]) == (5, 5, None)


def test_by_a_key_that_pools_is_refused_and_several_keys_rank_configurations(capsys, demo: Path) -> None:
    code, _, err = run_cli(capsys, "compare", str(demo), "--by", "experiment")
    assert code == 2
    line = _one_line_error(err)
    assert (
        f"`--by experiment` group mlp holds runs of 2 configurations, and a group is one configuration: {MLP}" in line
    )
    assert "--by experiment,variant" in line
    code, out, err = run_cli(capsys, "compare", str(demo), "--by", "experiment,variant", "--format", "json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert {r["a"] for r in rows} == {"mlp/algo+impl", "mlp/control", "mlp_low_lr/algo+impl"}
    assert all(r["pooled"] is None for r in rows)
    code, out, err = run_cli(capsys, "compare", str(demo), "--by", "experiment", "--pool", "--format", "json")
    assert code == 0 and "group mlp pools 2 configurations" in err
    assert {r["pooled"] for r in json.loads(out)} == {f"mlp pools 2 configurations: {MLP}"}


def test_two_sources_follow_the_rule_per_source(capsys, tmp_path: Path) -> None:
    for k in range(3):
        write_run(tmp_path / "a", "mlp", "algo", k, [("val", "val_acc", 0.8 + 0.01 * k)])
        for variant in ("algo", "control"):
            write_run(tmp_path / "b", "mlp", variant, k, [("val", "val_acc", 0.7 + 0.01 * k)])
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 2
    line = _one_line_error(err)
    assert f"group B ({tmp_path / 'b'}) holds runs of 2 configurations" in line
    assert "experiment=mlp variant=algo (3 runs), experiment=mlp variant=control (3 runs)" in line
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--b", "variant=algo")
    assert (code, err) == (0, "")


def _recorded(tmp_path: Path) -> Path:
    """Group t/algo: replicas 0, 1 trained with argument 0.1, replica 2 with 0.01 (one --force forgotten)."""
    for k, lr in enumerate(("0.1", "0.1", "0.01")):
        config = configuration_fields(mode="trainer", trainer="t.py:main", trainer_args=[lr], variant="algo")
        write_run(tmp_path, "t", "algo", k, [("val", "val_acc", 0.8 + 0.01 * k)], configuration=config)
    for k in range(3):
        config = configuration_fields(mode="trainer", trainer="t.py:main", variant="control")
        write_run(tmp_path, "t", "control", k, [("val", "val_acc", 0.7)], configuration=config)
    return tmp_path


def test_replicas_of_different_recorded_configurations_are_refused_by_name(capsys, tmp_path: Path) -> None:
    root = _recorded(tmp_path)
    args = ("compare", str(root), "--a", "variant=algo", "--b", "variant=control")
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    line = _one_line_error(err)
    assert (
        "experiment=t variant=algo with trainer arguments ['0.1'] (2 runs), experiment=t variant=algo with trainer "
        "arguments ['0.01'] (1 run)"
    ) in line
    assert "rerun the group with one (deviate-replicate --force)" in line and "--pool" in line
    code, out, _ = run_cli(capsys, *args, "--pool", "--format", "json")
    assert code == 0 and json.loads(out)[0]["n_a"] == 3
    code, _, err = run_cli(capsys, "power", str(root), "--effect", "0.01")  # its per-group table
    assert code == 2 and "group experiment=t variant=algo holds runs of 2 configurations" in _one_line_error(err)


TABLE = "setting,opt,run_name,acc\nA,adam,r1,0.80\nA,adam,r2,0.81\nA,sgd,r3,0.70\nA,sgd,r4,0.72\nB,adam,r5,0.60\n"


def test_table_rows_whose_other_text_columns_differ_are_other_configurations(capsys, tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(TABLE + "B,adam,r6,0.62\n")
    table = ("--table", str(path), "--group-by", "setting")
    code, _, err = run_cli(capsys, "compare", *table, "--a", "A", "--b", "B")
    assert code == 2
    assert "opt=adam setting=A (2 runs), opt=sgd setting=A (2 runs)" in err and "Add opt=... to --a" in err
    code, _, _ = run_cli(capsys, "compare", *table, "--a", "A", "--a", "opt=adam", "--b", "B")
    assert code == 0  # run_name (a value per row) names the run, not its configuration
    code, _, err = run_cli(capsys, "power", *table, "--effect", "0.1")
    assert code == 2 and "group setting=A holds runs of 2 configurations" in err
    code, out, err = run_cli(capsys, "power", *table, "--effect", "0.1", "--pool", "--format", "json")
    assert code == 0 and "group setting=A pools 2 configurations" in err
    pooled = {r["group"]: r["pooled"] for r in json.loads(out)}
    assert pooled == {"setting=A": "pools 2 configurations: opt=adam setting=A (2 runs), opt=sgd setting=A (2 runs)",
                      "setting=B": None}  # fmt: skip
    code, _, err = run_cli(capsys, "report", *table)
    assert code == 2 and "Group by the column that tells them apart (--group-by opt: adam, sgd)" in err
    code, out, err = run_cli(capsys, "report", *table, "--pool")
    assert code == 0 and "group A pools 2 configurations" in out + err


def test_a_replica_column_is_not_a_configuration(capsys, tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("setting,replica,acc\n" + "".join(f"{s},r{k},{0.8 + k / 100}\n" for s in "AB" for k in range(3)))
    code, _, err = run_cli(capsys, "compare", "--table", str(path), "--group-by", "setting", "--a", "A", "--b", "B")
    assert code == 0, err


def test_python_api_raises_the_same_refusal_and_pools_with_pool_true() -> None:
    runs = [
        RunValues({"experiment": "mlp", "variant": v, "replica": str(k)}, {"acc": 0.8 + k / 100})
        for v in ("algo", "control")
        for k in range(3)
    ]
    with pytest.raises(ValueError, match=r"`a` matches runs of 2 configurations.*pass pool=True"):
        compare_groups(runs, runs[:3])
    assert compare_groups(runs, runs[:3], pool=True, n_resamples=99)[0]["pooled"].startswith("A pools 2")
    assert compare_groups(runs[:3], runs[3:], n_resamples=99)[0]["pooled"] is None
    with pytest.raises(ValueError, match="group all holds runs of 2 configurations"):
        rank_metrics([("all", runs), ("control", runs[3:])])
    assert rank_metrics(split_by(runs, "variant"), n_resamples=99)[0].pooled == {}
    with pytest.raises(ValueError, match="`all` matches runs of 2 configurations"):
        power_rows([("all", runs)], effect=0.01)


TRAINER = '''"""A tiny real training: a linear regression fitted by SGD, its learning rate from the command line."""

import sys

import torch


def main(seed: int) -> dict[str, float]:
    torch.manual_seed(seed)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(64)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(sys.argv[1]))
    for _ in range(30):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        optimizer.step()
    return {"val_loss": float(loss)}
'''


@pytest.mark.slow
def test_a_real_study_whose_group_mixes_two_learning_rates_is_refused(tmp_path: Path) -> None:
    """deviate-replicate --force with another learning rate leaves replica 1 of the old one: compare names both."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    bin_dir = Path(sys.executable).parent
    (tmp_path / "train.py").write_text(TRAINER)

    def replicate(*args: str) -> None:
        done = subprocess.run(
            [str(bin_dir / "deviate-replicate"), "--trainer", "train.py:main", "--out", "runs", "--parallel", "2",
             *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    replicate("-n", "2", "--variant", "algo", "--", "0.1")
    replicate("-n", "1", "--variant", "algo", "--force", "--", "0.01")  # replica 1 keeps lr 0.1
    replicate("-n", "2", "--variant", "control", "--", "0.1")

    def deviate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bin_dir / "deviate"), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip

    refused = deviate("compare", "runs", "--a", "variant=algo", "--b", "variant=control")
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert (
        "`--a` matches runs of 2 configurations, and a group is one configuration: experiment=train variant=algo "
        "with trainer arguments ['0.01'] (1 run), experiment=train variant=algo with trainer arguments ['0.1'] "
        "(1 run)"
    ) in refused.stderr
    pooled = deviate("compare", "runs", "--a", "variant=algo", "--b", "variant=control", "--pool", "--format", "json")
    assert pooled.returncode == 0, pooled.stderr
    (row,) = json.loads(pooled.stdout)
    assert (row["n_a"], row["n_b"]) == (2, 2) and row["pooled"].startswith("A pools 2 configurations: ")
