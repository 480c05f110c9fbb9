"""One damaged file of one run costs that file only: `deviate report` warns once, naming it, and reports the rest.

Each test builds a real small study with the project's writers (manifest and metrics, predictions, weight sketch
and full weights, step timings, fingerprint), damages one file of one run, and runs `deviate report` (and
`deviate status` for manifests) in-process. Then: stored text is printed with its control characters escaped,
`check_partition_value` refuses names that would carry them, and `--decomposition`/`--stability`/`--timings` are
usage errors with the table and Markdown formats, which end with those sections anyway.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.errors import UsageError
from deviate_cb.fingerprint.collect import collect_fingerprint
from deviate_cb.store.footer_summary import SERIES_KEY, footer_summary
from deviate_cb.store.predictions import write_predictions
from deviate_cb.store.run_directory import RunDirectory, check_partition_value
from deviate_cb.store.timings import write_timings
from deviate_cb.store.weights import write_weights
from tests.helpers.report_study import run_cli, write_run

LABELS = [0, 1, 1, 0, 1, 0]
# algo replicas disagree on some samples; control replicas agree
PREDICTED = {"algo": [[0, 1, 1, 0, 1, 0], [0, 1, 0, 0, 1, 0], [1, 1, 1, 0, 1, 1]], "control": [[0, 1, 1, 0, 0, 0]] * 2}


def _study(root: Path) -> dict[tuple[str, int], Path]:
    """Three `algo` replicas (weight sketches only) and two `control` replicas (sketches and full weights)."""
    fingerprint = json.loads(json.dumps(collect_fingerprint(), default=str))  # this machine's, as a callback writes
    paths = {}
    for variant, predicted in PREDICTED.items():
        for k, preds in enumerate(predicted):
            acc = 0.80 + k / 100 if variant == "algo" else 0.85
            path = write_run(root, "mlp", variant, k, [("val", "val_acc", acc), ("val", "val_loss", 1.0 - acc)])
            write_predictions(path, outputs=np.array(preds), labels=LABELS)
            seed = k if variant == "algo" else 0
            weights = [("layer.weight", np.arange(12.0).reshape(3, 4) + seed), ("layer.bias", np.ones(3) * seed)]
            write_weights(path, weights, full=variant == "control")
            steps = [
                {"stage": "train", "epoch": 0, "step": s, "wall_s": 0.010 + k / 1000, "profiled": False}
                for s in range(4)
            ]
            write_timings(path, steps, [])
            RunDirectory(path).write_fingerprint({**fingerprint, "seed": seed})
            paths[(variant, k)] = path
    return paths


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: os.path.getsize(path) // 2])


def _warnings(err: str) -> list[str]:
    lines = err.splitlines()
    assert all(line.startswith("deviate: warning: ") for line in lines), err  # one line each, nothing else
    return lines


def _naming(err: str, path: Path) -> str:
    """The one warning that names ``path`` (and no other line does)."""
    (line,) = [line for line in _warnings(err) if str(path) in line]
    return line


def _groups(out: str) -> dict[tuple[str, str], dict]:
    return {(r["variant"], r["metric"]): r for r in json.loads(out)}


def _stability(out: str) -> dict[tuple[str, str, str], dict]:
    return {(r["variant"], r["measure"], r["item"]): r for r in json.loads(out)}


def _report_json(capsys, root: Path, *extra: str) -> tuple[str, str]:
    code, out, err = run_cli(capsys, "report", str(root), *extra, "--format", "json")
    assert code == 0, err
    return out, err


@pytest.mark.parametrize("damage", ["truncated", "malformed footer summary"])
def test_damaged_metrics_file(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    path = paths[("algo", 1)] / "metrics.parquet"
    if damage == "truncated":
        _truncate(path)
        why = "not a readable Parquet file (Parquet magic bytes not found"
    else:  # a footer summary the report cannot use: the file itself is read
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        metadata = dict(table.schema.metadata)
        metadata[SERIES_KEY] = metadata[SERIES_KEY].replace(b'"series":[[', b'"series":[["x"],[')
        pq.write_table(table.replace_schema_metadata(metadata), path)
        why = "the series summary in its footer is malformed (series entry 0 is not [stage, name"
    out, err = _report_json(capsys, tmp_path)
    assert why in _naming(err, path)
    rows = _groups(out)
    assert rows[("algo", "val_acc")]["n"] == (2 if damage == "truncated" else 3)
    assert rows[("control", "val_acc")]["n"] == 2


def test_damaged_timings_files(capsys, tmp_path: Path) -> None:
    paths = _study(tmp_path)
    truncated = paths[("algo", 1)] / "timings.parquet"
    _truncate(truncated)
    other_kind = paths[("control", 1)] / "timings.parquet"
    other_kind.write_bytes((paths[("control", 1)] / "metrics.parquet").read_bytes())  # Parquet, but not timings
    out, err = _report_json(capsys, tmp_path, "--timings")
    assert "unreadable (Parquet magic bytes not found in footer" in _naming(err, truncated)
    assert "not a timings file (no column kind, wall_s, profiled); skipped." in _naming(err, other_kind)
    rows = {r["variant"]: r for r in json.loads(out)}
    assert (rows["algo"]["n_runs"], rows["control"]["n_runs"]) == (2, 1)
    code, table, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 0 and "Step time across replicas" in table and len(_warnings(err)) == 2


@pytest.mark.parametrize("damage", ["garbage", "another Parquet file"])
def test_damaged_predictions_file(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    path = paths[("algo", 1)] / "predictions.parquet"
    if damage == "garbage":
        path.write_bytes(b"not parquet at all")
        why = "not a readable Parquet file"
    else:
        path.write_bytes((paths[("algo", 1)] / "metrics.parquet").read_bytes())
        why = "not a predictions file: missing column(s) snapshot"
    out, err = _report_json(capsys, tmp_path, "--stability")
    line = _naming(err, path)
    assert why in line and line.endswith("left out of the stability measures.")
    rows = _stability(out)
    assert rows[("algo", "churn", "")]["n_runs"] == 2  # replicas 0 and 2
    assert rows[("algo", "churn", "")]["mean"] == pytest.approx(2 / 6)
    assert rows[("algo", "weight_distance", "sketch")]["n_runs"] == 3  # its weights still count
    assert rows[("control", "churn", "")]["mean"] == 0.0
    code, table, err = run_cli(capsys, "report", str(tmp_path))  # the whole report, every section
    assert code == 0 and "Stability: experiment=mlp variant=algo" in table and "val_acc" in table
    assert why in _naming(err, path)


@pytest.mark.parametrize("damage", ["truncated", "not a sketch"])
def test_damaged_weight_sketch(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    path = paths[("algo", 1)] / "weights_sketch.npz"
    if damage == "truncated":
        _truncate(path)
        why = "not a readable .npz file"
    else:
        np.savez(path, something=np.ones(3))
        why = "not a weight sketch ('sketch')"
    out, err = _report_json(capsys, tmp_path, "--stability")
    line = _naming(err, path)
    assert why in line and line.endswith("left out of the weight distance.")
    rows = _stability(out)
    assert rows[("algo", "weight_distance", "sketch")]["n_runs"] == 2
    assert rows[("algo", "churn", "")]["n_runs"] == 3
    assert rows[("control", "weight_distance", "exact")]["mean"] == 0.0
    code, md, err = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "weight distance over the 2 of 3 runs that saved weights" in md
    assert why in _naming(err, path)


@pytest.mark.parametrize("damage", ["truncated", "damaged entry", "no index"])
def test_damaged_full_weights(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    path = paths[("control", 1)] / "weights.npz"
    if damage == "truncated":
        _truncate(path)
        why = "not a readable full weights file (File is not a zip file)"
    elif damage == "damaged entry":  # the archive opens; one parameter's bytes fail their CRC when read
        data = bytearray(path.read_bytes())
        start = data.index(b"layer.bias.npy") + len("layer.bias.npy") + 40
        data[start : start + 16] = bytes(b ^ 0xFF for b in data[start : start + 16])
        path.write_bytes(bytes(data))
        why = "weight 'layer.bias' unreadable (Bad CRC-32"
    else:
        np.savez(path, w=np.ones(3))
        why = "not a readable full weights file"
    out, err = _report_json(capsys, tmp_path, "--stability")
    line = _naming(err, path)
    assert why in line and line.endswith("left out of the exact weight distance.")
    rows = _stability(out)
    # control falls back to its two sketches; algo is untouched
    assert rows[("control", "weight_distance", "sketch")]["n_runs"] == 2
    assert rows[("algo", "weight_distance", "sketch")]["n_runs"] == 3


@pytest.mark.parametrize("damage", ["garbage", "a JSON list"])
def test_damaged_fingerprint(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    path = paths[("algo", 1)] / "fingerprint.json"
    path.write_text("{not json" if damage == "garbage" else "[1, 2]")
    out, err = _report_json(capsys, tmp_path)
    line = _naming(err, path)
    assert ("Expecting property name" if damage == "garbage" else "a JSON list, not an object") in line
    assert line.endswith("the run is left out of the fingerprint comparison.")
    assert _groups(out)[("algo", "val_acc")]["n"] == 3  # its metrics still count


@pytest.mark.parametrize("damage", ["truncated", "malformed metrics_summary"])
def test_damaged_manifest(capsys, tmp_path: Path, damage: str) -> None:
    paths = _study(tmp_path)
    run = paths[("algo", 1)]
    path = run / "run.json"
    if damage == "truncated":
        _truncate(path)
        why, n = "unreadable manifest (not a valid run manifest", 2
    else:  # the summary copy a capture session keeps, current (size and time match) but malformed
        import pyarrow.parquet as pq

        metrics = run / "metrics.parquet"
        copy = footer_summary(pq.read_metadata(metrics))
        stat = metrics.stat()
        copy = {**copy, "series": [["val", "val_acc"]], "file_size": stat.st_size, "file_mtime_ns": stat.st_mtime_ns}
        RunDirectory(run).update_manifest(metrics_summary=copy)
        why, n = "`metrics_summary` is malformed (series entry 0 is not", 3
    out, err = _report_json(capsys, tmp_path)
    assert why in _naming(err, path)
    assert _groups(out)[("algo", "val_acc")]["n"] == n and _groups(out)[("control", "val_acc")]["n"] == 2
    code, status, err = run_cli(capsys, "status", str(tmp_path), "--no-cluster")
    assert code == 0 and "5 replicas" in status
    if damage == "truncated":
        assert "unreadable manifest" in _naming(err, path) and "1 unreadable" in status
    else:
        assert _warnings(err) == []


# -- what is printed is sanitised ------------------------------------------------------------------------------

ESCAPE = "\x1b[2J"


def _hostile_study(root: Path) -> Path:
    """A study whose experiment folder, metric name and manifest strings hold escapes, newlines and rich markup."""
    experiment = f"mlp{ESCAPE}"
    variant_dir = root / f"experiment={experiment}" / "variant=algo"
    for k in range(3):
        run = RunDirectory(variant_dir / f"replica={k}")  # not through run_path, which refuses such names now
        run.update_manifest(status="completed", seed=k, host=f"node{ESCAPE}\nevil", backend="local")
        rows = {"step": [0, 0], "epoch": [0, 0], "stage": ["val", "val"], "scope": ["epoch"] * 2}
        names = [f"acc{ESCAPE}\nx", "loss[/bold]"]  # a newline and an escape; text rich would read as markup
        run.metrics().append({**rows, "name": names, "value": [0.8 + k / 100, 0.2 - k / 100], "wall_time": [0.0] * 2})
    RunDirectory(variant_dir / "replica=0").update_manifest(injection="none", injection_note=f"no hook{ESCAPE}\nhere")
    failed = RunDirectory(variant_dir / "replica=3")
    failed.update_manifest(status="failed", exit_code=1, exception=f"RuntimeError: boom{ESCAPE}\nsecond line")
    other = RunDirectory(variant_dir / "replica=4")
    other.update_manifest(status="killed", reason=f"SIGTERM{ESCAPE}", trainer_error=f"bad{ESCAPE}\nspec")
    return root


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_report_escapes_stored_text(capsys, tmp_path: Path, fmt: str) -> None:
    root = _hostile_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(root), "--format", fmt)
    assert code == 0, err
    assert "\x1b" not in err and len(_warnings(err)) >= 1
    assert "no hook\\x1b[2J here" in err  # the problem's warning: escaped, on one line
    if fmt in ("table", "md"):
        assert "\x1b" not in out
        assert "mlp\\x1b[2J" in out and "acc\\x1b[2J\\nx" in out and "loss[/bold]" in out
        assert "RuntimeError: boom\\x1b[2J" in out
    if fmt == "md":  # every table row stays on its line
        assert all(line.endswith("|") for line in out.splitlines() if line.startswith("|"))
        assert sum(line.startswith("| mlp") for line in out.splitlines()) == 2 + 2  # 2 metrics, 2 runs left out
    if fmt == "csv":  # data formats keep the data
        rows = list(csv.DictReader(io.StringIO(out)))
        assert {r["metric"] for r in rows} == {f"acc{ESCAPE}\nx", "loss[/bold]"}
    if fmt == "json":
        assert {r["experiment"] for r in json.loads(out)} == {f"mlp{ESCAPE}"}
        assert "RuntimeError: boom\\x1b[2J" in err  # the run left out, as a warning


def test_status_and_compare_escape_stored_text(capsys, tmp_path: Path) -> None:
    root = _hostile_study(tmp_path)
    code, out, err = run_cli(capsys, "status", str(root), "--no-cluster")
    assert code == 0 and "\x1b" not in out + err
    lines = out.splitlines()
    assert len(lines) == 1 + 5 + 1  # header, one line per replica, the summary
    assert "node\\x1b[2J\\nevil" in out and "mlp\\x1b[2J" in out
    assert [line for line in _warnings(err) if "no hook\\x1b[2J here" in line]
    code, out, err = run_cli(capsys, "compare", str(root), "--a", "replica=0", "--b", "replica=1")
    assert code == 0 and "\x1b" not in out + err and "loss[/bold]" in out


def test_errors_escape_stored_text(capsys, tmp_path: Path) -> None:
    root = _hostile_study(tmp_path)
    code, _, err = run_cli(capsys, "compare", str(root), "--a", "experiment=x", "--b", "variant=algo")
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err and "mlp\\x1b[2J" in err


# -- names that would carry control characters are refused -------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a\nb", f"a{ESCAPE}b", "tab\there", "x" * 101, "é" * 101, "\U0001f600" * 51, "bidi\u202eoverride", "\udcff"],
    ids=["newline", "escape", "tab", "101-chars", "101-accented", "204-bytes", "bidi", "surrogate"],
)
def test_partition_values_must_be_short_and_printable(value: str) -> None:
    with pytest.raises(UsageError) as info:
        check_partition_value("experiment", value)
    message = str(info.value)
    assert message.startswith("`experiment` must be a name of 1 to 100 printable characters")
    assert message.isprintable() and len(message) < 300  # one line, whatever was given


@pytest.mark.parametrize("value", ["x" * 100, "résumé run 2", "é" * 100, "\U0001f600" * 50])
def test_partition_values_that_stay_allowed(value: str) -> None:
    assert check_partition_value("experiment", value) == value


# -- the options that pick csv/json rows are refused with table and md ------------------------------------------


@pytest.mark.parametrize("option", ["--decomposition", "--stability", "--timings"])
@pytest.mark.parametrize("fmt", ["table", "md", "html"])
def test_row_options_are_usage_errors_with_table_and_md(capsys, tmp_path: Path, option: str, fmt: str) -> None:
    write_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.8)])
    code, out, err = run_cli(capsys, "report", str(tmp_path), option, "--format", fmt)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"deviate: error: `{option}` applies to --format csv or json; the table, Markdown and HTML")
    assert err.rstrip().endswith(f"Received: {option} with --format {fmt}.")
    code, out, _ = run_cli(capsys, "report", str(tmp_path), option, "--format", "csv")
    assert code == 0 and out
