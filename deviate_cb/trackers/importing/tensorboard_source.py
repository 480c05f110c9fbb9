"""Read TensorBoard event files with the ``tensorboard`` package's reader: one run per logging folder.

Example:
    >>> scalar_value(_proto_for_doc(0.25))
    0.25
"""

from __future__ import annotations

import struct
import sys
import types
from pathlib import Path
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import UsageError, require
from deviate_cb.trackers.importing.hparams import HPARAMS_FILE, read_hparams
from deviate_cb.trackers.importing.imported import TrackerRun
from deviate_cb.trackers.importing.log_files import LogFileError, check_log_file, walk_logs

__all__ = ["EVENT_PREFIX", "HP_METRIC", "STAGE_FOLDERS", "read_tensorboard", "scalar_value"]

EVENT_PREFIX = "events.out.tfevents."
#: Lightning's TensorBoardLogger metric of the HParams tab: -1 at step 0 until the user logs it.
HP_METRIC = "hp_metric"
#: Keras' subfolders of one run, and the stage of each.
STAGE_FOLDERS = {"train": "train", "validation": "val", "val": "val", "test": "test"}
# TensorFlow's DataType numbers of the scalar types, and how tensor_content holds one value.
_CONTENT = {1: "<f", 2: "<d", 3: "<i", 9: "<q", 19: "<e"}
_FIELDS = {1: "float_val", 2: "double_val", 3: "int_val", 9: "int64_val", 19: "half_val"}


def read_tensorboard(logdir: Path, notes: Optional[list[str]] = None) -> list[TrackerRun]:
    """Every run under ``logdir`` (see the module's description), in path order; a line in ``notes`` for each
    file refused and for the folders not walked (links, a folder seen twice).

    Raises:
        UsageError: No event file under ``logdir``.
        MissingDependencyError: tensorboard is not installed (``deviate-cb[tensorboard]``).
    """
    logdir = Path(logdir)
    notes = [] if notes is None else notes
    events = {folder: [f for f in files if f.startswith(EVENT_PREFIX)] for folder, files in walk_logs(logdir, notes)}
    with_events = sorted(folder for folder, files in events.items() if files)
    if not with_events:
        raise UsageError(
            f"`LOGDIR` holds no TensorBoard event file ({EVENT_PREFIX}*). Received: {logdir}. "
            "Expected: the folder of TensorBoardLogger (lightning_logs/) or of Keras' TensorBoard callback."
        )
    _without_tensorflow()
    require("tensorboard", extra="tensorboard")
    runs: dict[Path, list[tuple[Path, Optional[str]]]] = {}
    for folder in with_events:
        stage = STAGE_FOLDERS.get(folder.name) if folder != logdir else None
        if stage is not None and folder.parent not in with_events:
            runs.setdefault(folder.parent, []).append((folder, stage))
        else:
            runs.setdefault(folder, []).append((folder, None))
    read = []
    for run_dir, parts in sorted(runs.items()):
        name = run_dir.relative_to(logdir).as_posix() if run_dir != logdir else run_dir.name
        try:
            for folder, _ in parts:
                for file in sorted(events[folder]):
                    check_log_file(folder / file)
        except LogFileError as exc:
            notes.append(f"{exc}; run {name} skipped")
            continue
        except OSError:
            continue
        run = _read_run(logdir, run_dir, parts)
        try:
            run.keys = read_hparams(run_dir / HPARAMS_FILE)
        except LogFileError as exc:
            notes.append(f"{exc}; run {name} imported without its hyperparameters")
        read.append(run)
    return read


def scalar_value(proto: Any) -> Optional[float]:
    """The one number a scalar ``TensorProto`` holds, ``None`` when it is not a scalar of a number type."""
    dtype = int(proto.dtype)
    field = _FIELDS.get(dtype)
    if field is None:
        return None
    listed = getattr(proto, field)
    if len(listed) == 1:
        if dtype == 19:  # half_val holds the 16 bits in an int
            return float(np.array([listed[0]], dtype=np.uint16).view(np.float16)[0])
        return float(listed[0])
    content = proto.tensor_content
    size = struct.calcsize(_CONTENT[dtype])
    if len(content) == size:
        return float(struct.unpack(_CONTENT[dtype], content)[0])
    return None


def _read_run(logdir: Path, run_dir: Path, parts: list[tuple[Path, Optional[str]]]) -> TrackerRun:
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    names: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    walls: list[float] = []
    stages: dict[str, str] = {}
    scopes: dict[str, str] = {}
    for folder, stage in parts:
        accumulator = pea.EventAccumulator(str(folder), size_guidance={pea.TENSORS: 0})
        accumulator.Reload()
        for tag in accumulator.Tags().get("tensors", []):
            if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "scalars" or _repeated(tag, stage):
                continue
            name, scope = _keras_name(tag, stage) if stage is not None else (tag, None)
            if stage is not None:
                stages[name] = stage
            if scope is not None:
                scopes[name] = scope
            for event in accumulator.Tensors(tag):
                value = scalar_value(event.tensor_proto)
                if value is None or (tag == HP_METRIC and value == -1.0 and int(event.step) == 0):
                    continue  # Lightning's placeholder for TensorBoard's HParams tab, not a value the run had
                names.append(name)
                steps.append(int(event.step))
                values.append(value)
                walls.append(float(event.wall_time))
    return TrackerRun(
        tracker="tensorboard",
        uri=str(logdir.resolve()),
        run_id=str(run_dir.resolve()),
        experiment=logdir.resolve().name,
        run_name=run_dir.relative_to(logdir).as_posix() if run_dir != logdir else run_dir.name,
        started=min(walls) if walls else None,
        ended=max(walls) if walls else None,
        keys={},
        names=names,
        steps=np.asarray(steps, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        wall_times=np.asarray(walls, dtype=np.float64),
        stages=stages,
        scopes=scopes,
    )


def _repeated(tag: str, stage: Optional[str]) -> bool:
    """Keras' ``evaluation_<metric>_vs_iterations`` (``validation/``): the ``epoch_<metric>`` values again, against
    the training iteration; read once, as ``val_<metric>``."""
    return stage is not None and tag.startswith("evaluation_") and tag.endswith("_vs_iterations")


def _keras_name(tag: str, stage: str) -> tuple[str, Optional[str]]:
    """A Keras tag as the run store names it, and its scope, as Keras names them: ``epoch_loss`` is ``loss`` (its
    ``History`` name; ``val_loss`` in ``validation/``), ``batch_loss`` (``update_freq`` in batches: running means
    within an epoch) stays ``batch_loss``, of scope ``step``, a series apart from the epochs'."""
    for prefix, scope in (("epoch_", "epoch"), ("batch_", "step")):
        if tag.startswith(prefix):
            base = tag[len(prefix) :] if scope == "epoch" else tag
            return (base if stage == "train" else f"{stage}_{base}"), scope
    return (tag if stage == "train" else f"{stage}_{tag}"), None


def _without_tensorflow() -> None:
    """Have TensorBoard use its TensorFlow-free stub (``tensorboard.compat.notf``) unless TensorFlow is imported."""
    if "tensorflow" not in sys.modules and "tensorboard.compat.notf" not in sys.modules:
        sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")


def _proto_for_doc(value: float) -> Any:
    """A scalar ``TensorProto``-like object holding ``value`` as float32 (for the example)."""
    return types.SimpleNamespace(dtype=1, float_val=[value], tensor_content=b"")
