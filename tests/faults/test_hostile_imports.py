"""Log folders and ``--table`` files are untrusted input: bounded, never a hang or a traceback (issue 45, items 5, 9).

Real logs: three tiny Lightning runs (CPU, a second each) write ``TensorBoardLogger`` and ``CSVLogger`` folders
(``version_N`` with ``hparams.yaml``); each test copies them, plants something hostile, and runs the real
``deviate`` console script under a memory limit and a timeout, so that a bomb cannot take the machine down.

- a 341-byte ``hparams.yaml`` of nested aliases (9 levels of 9: a "billion laughs") and one nested 100,000 deep:
  one warning each naming the file, those runs imported without hyperparameters, the other one with them;
- a FIFO at ``metrics.csv`` (or named like an event file), a sparse 5-GB ``metrics.csv`` and one without a
  ``step`` column: one warning each, those runs skipped, the others imported, no hang;
- a directory link to an ancestor and one to a folder outside: not followed, said once, each run imported once;
- as root, a real ``mount --bind`` of LOGDIR below itself: each run imported once, the loop said once;
- a FIFO in an ``mlruns/`` folder (MLflow's client would block on it): one line naming it, exit 2, nothing written;
- W&B offline logs: one cut short, a FIFO named like one, one whose config nests 100,000 deep: one warning each for
  the first two, the third imported without that item, the real run whole;
- ``deviate report --table`` / ``compare --table`` with a duplicate column, non-UTF-8 text, a FIFO, an empty
  file, a header only or ragged rows: one line naming ``--table`` and the file, exit 2, no traceback.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

DEVIATE = str(Path(sys.executable).with_name("deviate"))
MEMORY = 4 * 1024**3  # the import of a few runs needs far less; the unbounded bomb needs gigabytes


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def deviate(*args: str, cwd: Path | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [DEVIATE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env={**os.environ},
            preexec_fn=_limited,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"deviate {' '.join(args)} did not finish in {timeout} s (a hang)")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.lightning_logs import train_runs

    root = tmp_path_factory.mktemp("lightning")
    train_runs(root, [0.1], [0, 1, 2], epochs=1)
    return root


def _logs(trained: Path, tmp_path: Path, folder: str) -> Path:
    logs = tmp_path / folder
    shutil.copytree(trained / folder, logs, symlinks=True)
    return logs


def _manifests(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("experiment=*/variant=*/replica=*/run.json"))]


def _warnings(stderr: str, about: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("deviate: warning:") and about in line]


def _bomb() -> str:
    letters = "abcdefghij"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in itertools.pairwise(letters)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("source, folder", [("csv-logs", "csv"), ("tensorboard", "tb")])
def test_a_yaml_bomb_costs_its_run_its_hyperparameters_only(
    trained: Path, tmp_path: Path, source: str, folder: str
) -> None:
    logs = _logs(trained, tmp_path, folder)
    (logs / "version_1" / "hparams.yaml").write_text(_bomb())
    (logs / "version_2" / "hparams.yaml").write_text("lr: " + "[" * 100_000 + "]" * 100_000 + "\n")
    out = tmp_path / "runs"
    result = deviate("import", source, str(logs), "--group-by", "hparams.lr", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    bomb = _warnings(result.stderr, str(logs / "version_1" / "hparams.yaml"))
    deep = _warnings(result.stderr, str(logs / "version_2" / "hparams.yaml"))
    assert len(bomb) == 1 and "alias" in bomb[0] and "without its hyperparameters" in bomb[0], result.stderr
    assert len(deep) == 1 and "nested more than" in deep[0], result.stderr
    params = {m["source"]["run_name"]: m["params"] for m in _manifests(out)}
    assert set(params) == {"version_0", "version_1", "version_2"}
    assert params["version_0"]["hparams.lr"] == "0.1"
    assert "hparams.lr" not in params["version_1"] and "hparams.lr" not in params["version_2"]


def test_a_fifo_or_an_absurd_file_in_the_logs_costs_its_run_only(trained: Path, tmp_path: Path) -> None:
    logs = _logs(trained, tmp_path, "csv")
    (logs / "version_1" / "metrics.csv").unlink()
    os.mkfifo(logs / "version_1" / "metrics.csv")
    with open(logs / "version_2" / "metrics.csv", "r+b") as handle:
        handle.truncate(5 * 1024**3)  # sparse: no disk used
    shutil.copytree(logs / "version_0", logs / "version_3")
    (logs / "version_3" / "metrics.csv").write_text("epoch,val_loss\n0,0.5\n")  # not CSVLogger's: no step
    out = tmp_path / "runs"
    result = deviate("import", "csv-logs", str(logs), "--out", str(out), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    fifo = _warnings(result.stderr, str(logs / "version_1" / "metrics.csv"))
    huge = _warnings(result.stderr, str(logs / "version_2" / "metrics.csv"))
    assert len(fifo) == 1 and "FIFO" in fifo[0] and "skipped" in fifo[0], result.stderr
    assert len(huge) == 1 and "5.0 GB" in huge[0] and "skipped" in huge[0], result.stderr
    other = _warnings(result.stderr, str(logs / "version_3" / "metrics.csv"))
    assert len(other) == 1 and "no `step` column" in other[0] and "skipped" in other[0], result.stderr
    assert [m["source"]["run_name"] for m in _manifests(out)] == ["version_0"]

    events = _logs(trained, tmp_path, "tb")
    planted = events / "version_1" / "events.out.tfevents.1.planted"
    os.mkfifo(planted)
    result = deviate("import", "tensorboard", str(events), "--out", str(tmp_path / "tb_runs"), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    said = _warnings(result.stderr, str(planted))
    assert len(said) == 1 and "FIFO" in said[0] and "run version_1 skipped" in said[0], result.stderr
    assert sorted(m["source"]["run_name"] for m in _manifests(tmp_path / "tb_runs")) == ["version_0", "version_2"]


@pytest.mark.parametrize("source, folder", [("csv-logs", "csv"), ("tensorboard", "tb")])
def test_directory_links_are_not_followed_and_said_once(
    trained: Path, tmp_path: Path, source: str, folder: str
) -> None:
    logs = _logs(trained, tmp_path, folder)
    (logs / "version_0" / "loop").symlink_to(logs)  # a loop: the link points to an ancestor
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(logs / "version_2", elsewhere / "version_9")
    (logs / "outside").symlink_to(elsewhere)
    out = tmp_path / "runs"
    result = deviate("import", source, str(logs), "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    said = _warnings(result.stderr, "not followed")
    assert len(said) == 1 and "2 directory links" in said[0], result.stderr
    assert str(logs / "outside") in said[0] and str(logs / "version_0" / "loop") in said[0]
    assert sorted(m["source"]["run_name"] for m in _manifests(out)) == ["version_0", "version_1", "version_2"]

    # the user may name a linked folder as LOGDIR: then it is read
    named = deviate("import", source, str(logs / "outside"), "--out", str(tmp_path / "named"))
    assert named.returncode == 0, named.stderr[-3000:]
    assert [m["source"]["run_name"] for m in _manifests(tmp_path / "named")] == ["version_9"]


def test_a_bind_mount_loop_imports_each_run_once(trained: Path, tmp_path: Path) -> None:
    logs = _logs(trained, tmp_path, "csv")
    target = logs / "version_2" / "again"
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(logs), str(target)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here ({mounted.stderr.strip()[:200]})")
    try:
        out = tmp_path / "runs"
        result = deviate("import", "csv-logs", str(logs), "--out", str(out))
    finally:
        subprocess.run(["umount", str(target)], check=True)
    assert result.returncode == 0, result.stderr[-3000:]
    said = _warnings(result.stderr, "already read under another path")
    assert len(said) == 1 and str(target) in said[0], result.stderr
    assert sorted(m["source"]["run_name"] for m in _manifests(out)) == ["version_0", "version_1", "version_2"]


TABLES: dict[str, bytes] = {
    "duplicate": b"setting,acc,acc\nimpl,0.8,0.9\nimpl,0.7,0.6\nother,0.5,0.4\nother,0.6,0.3\n",
    "latin1": b"setting,acc\nn\xe9e,0.8\nn\xe9e,0.7\nother,0.5\nother,0.6\n",
    "empty": b"",
    "header": b"setting,acc\n",
    "ragged": b"setting,acc\nimpl,0.8,3\nimpl\nother,0.5\n",
}
SAID = {
    "duplicate": "names column 'acc' twice",
    "latin1": "column 'setting' is not UTF-8 text",
    "empty": "Empty CSV file",
    "header": "is empty (no rows)",
    "ragged": "Expected 2 columns",
    "fifo": "not a regular file",
}


@pytest.mark.parametrize("case", [*TABLES, "fifo"])
@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_malformed_table_is_one_line_naming_it(tmp_path: Path, command: str, case: str) -> None:
    path = tmp_path / f"{case}.csv"
    if case == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(TABLES[case])
    args = ["--table", str(path), "--group-by", "setting"]
    if command == "compare":
        args += ["--a", "setting=impl", "--b", "setting=other"]
    result = deviate(command, *args, timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "`--table`" in lines[0] and str(path) in lines[0] and SAID[case] in lines[0], lines[0]


MLFLOW_RUNS = """\
import os, sys
os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("tiny")
for seed in range(3):
    with mlflow.start_run():
        mlflow.log_param("seed", seed)
        for step in range(3):
            mlflow.log_metric("acc", 0.5 + 0.01 * seed * step, step=step)
"""


def test_a_fifo_in_an_mlruns_folder_is_one_line_not_a_hang(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    store = tmp_path / "mlruns"
    made = subprocess.run([sys.executable, "-c", MLFLOW_RUNS, store.as_uri()], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    out = tmp_path / "runs"
    fine = deviate("import", "mlflow", "--tracking-uri", str(store), "--experiment", "tiny", "--out", str(out))
    assert fine.returncode == 0 and len(_manifests(out)) == 3, fine.stderr[-3000:]

    metric = sorted(store.glob("*/*/metrics/acc"))[0]
    metric.unlink()
    os.mkfifo(metric)
    again = tmp_path / "again"
    result = deviate(
        "import", "mlflow", "--tracking-uri", str(store), "--experiment", "tiny", "--out", str(again), timeout=60
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    assert "`--tracking-uri`" in lines[0] and str(metric) in lines[0] and "FIFO" in lines[0], lines[0]
    assert not again.exists()


WANDB_RUN = """
import wandb

run = wandb.init(project="p", id="real1", dir=".", config={"lr": 0.1},
                 settings=wandb.Settings(silent=True, console="off", x_disable_stats=True))
for step in range(3):
    run.log({"val_acc": 0.5 + step / 10}, step=step)
run.finish(exit_code=0)
"""


def _wandb_log(records: list[Any], head: bytes) -> bytes:
    """A ``.wandb`` log of ``records`` as W&B writes one: its 7-byte header, then 32 KiB blocks of records, each
    piece with a 7-byte header (a CRC this reader does not check, the length, the kind: 1 whole, 2-3-4 in pieces)."""
    import struct

    out = bytearray(head)
    for record in records:
        data = record.SerializeToString()
        first = True
        while True:
            room = 32768 - len(out) % 32768 - 7
            if room < 1:
                out += b"\0" * (room + 7)
                continue
            piece, data = data[:room], data[room:]
            kind = (1 if first else 4) if not data else (2 if first else 3)
            out += struct.pack("<IHB", 0, len(piece), kind) + piece
            first = False
            if not data:
                break
    return bytes(out)


def test_hostile_wandb_logs_cost_their_run_or_item_only(tmp_path: Path) -> None:
    """A W&B log cut short, a FIFO named like a log, and a log whose config value nests 100,000 deep (past
    Python's recursion limit): one warning each for the first two (skipped, no hang), the third imported without
    that item, and the real run imported whole."""
    from wandb.proto import wandb_internal_pb2

    (tmp_path / "train.py").write_text(WANDB_RUN)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (real,) = (tmp_path / "wandb").glob("offline-run-*/run-real1.wandb")
    data = real.read_bytes()
    cut = tmp_path / "wandb" / "offline-run-2-cut" / "run-cut.wandb"
    cut.parent.mkdir()
    cut.write_bytes(data[:7] + b"\xff\xff\xff\xff\xff\x7f\x01" + data[7:200])  # a record longer than its block
    fifo = tmp_path / "wandb" / "offline-run-3-fifo" / "run-fifo.wandb"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    nested = tmp_path / "wandb" / "offline-run-4-deep" / "run-deep.wandb"
    nested.parent.mkdir()
    record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
    record.run.run_id, record.run.project = "deep", "p"
    item = record.run.config.update.add()
    item.key, item.value_json = "bomb", "[" * 100_000 + "]" * 100_000
    lr = record.run.config.update.add()
    lr.key, lr.value_json = "lr", "0.2"
    history = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
    for key, value in (("_step", "1"), ("val_acc", "0.75")):
        entry = history.history.item.add()
        entry.key, entry.value_json = key, value
    ended = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
    ended.exit.exit_code = 0
    nested.write_bytes(_wandb_log([record, history, ended], data[:7]))

    out = tmp_path / "runs"
    result = deviate("import", "wandb", str(tmp_path / "wandb"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert len(_warnings(result.stderr, "run-cut.wandb")) == 1 and len(_warnings(result.stderr, "run-fifo.wandb")) == 1
    by_id = {m["source"]["run_id"]: m for m in _manifests(out)}
    assert set(by_id) == {"real1", "deep"}
    assert by_id["deep"]["params"] == {"params.lr": "0.2"} and by_id["deep"]["status"] == "completed"
    assert by_id["real1"]["params"]["params.lr"] == "0.1"
