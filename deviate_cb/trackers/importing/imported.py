"""A tracker's run as the importers read it, and what it becomes in the run store: group, stage, scope, rows.

Example:
    >>> run = TrackerRun("mlflow", "sqlite:///m.db", "ab12", "resnet", status="completed",
    ...                  keys={"params.lr": "0.1", "params.seed": "3"},
    ...                  names=["val_acc", "epoch", "val_acc"], steps=[10, 10, 20], values=[0.5, 0.0, 0.75],
    ...                  wall_times=[1.0, 1.0, 2.0])
    >>> group_name("resnet", ["params.lr"], run.keys)
    'resnet.lr-0.1'
    >>> columns = metric_columns(run)
    >>> [columns[k].tolist() for k in ("name", "stage", "epoch", "value")]
    [['val_acc', 'val_acc'], ['val', 'val'], [0.0, 0.0], [0.5, 0.75]]
    >>> seed_of(run, None)
    (3, 'params.seed')
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.store.run_directory import check_partition_value

__all__ = [
    "KEY_NAMESPACES",
    "SEED_KEYS",
    "TRACKER_STATUSES",
    "TrackerRun",
    "apply_min_step",
    "check_group_keys",
    "group_name",
    "metric_columns",
    "scope_of",
    "seed_of",
    "select_metrics",
    "stage_of",
]

#: Where ``--group-by`` and ``--seed-key`` look: MLflow's params and tags, Lightning's hparams.yaml.
KEY_NAMESPACES = ("params", "tags", "hparams")
#: The keys read as the run's seed, in this order, when ``--seed-key`` is not given: the seed our callback ran
#: with (its live tag, or our export's), then the project's own.
SEED_KEYS = (
    "tags.deviate.seed",
    *(f"{ns}.{name}" for name in ("seed", "random_seed", "global_seed") for ns in KEY_NAMESPACES),
)
#: A tracker's run status -> the run store's (``deviate_cb.store.run_directory.STATUSES``).
TRACKER_STATUSES = {
    "FINISHED": "completed",
    "FAILED": "failed",
    "KILLED": "killed",
    "RUNNING": "running",
    "SCHEDULED": "running",
    "DELETED": "deleted",
}
_VAL_WORDS = re.compile(r"^(val|valid|validation|eval|evaluation|dev)([/_.\-]|$)", re.IGNORECASE)
_TEST_WORDS = re.compile(r"^test([/_.\-]|$)", re.IGNORECASE)
_EPOCH_SERIES = "epoch"
_UNSAFE = re.compile(r"[/\\=]")
_MAX_SHOWN = 5


@dataclass
class TrackerRun:
    """One run of a tracker, as read: identity, status, keys and the metric history as columns.

    Attributes:
        tracker: ``mlflow``, ``tensorboard`` or ``csv-logs``.
        uri: The tracking URI, or the log folder given.
        run_id: The tracker's id of the run (MLflow's run id; a log folder's absolute path).
        experiment: The tracker's experiment (MLflow), or the log folder's name.
        status: The run store's status (``completed``, ``failed``, ``killed``, ``running``).
        tracker_status: What the tracker says (``FINISHED``, ``FAILED``, ...); ``None`` when it records none.
        run_name: The tracker's name of the run, when it has one.
        started, ended: Unix times in seconds, when known.
        keys: ``params.<k>``, ``tags.<k>``, ``hparams.<k>`` -> value as text.
        names, steps, values, wall_times: The metric history, one entry per recorded value (wall time ``None``
            where the source records none: CSVLogger).
        stages: Stage by metric name where the source says it (Keras' ``validation`` folder); else by name.
        scopes: Scope by metric name where the source says it (Keras' ``epoch_`` and ``batch_`` tags).
        reason: Why the run is not ``completed``, in words, when the importer knows more than the status.
        parent: A run other runs name as their parent (a sweep's, a study's own run): not a run of the study.
        listing: A hash of what the tracker lists of the run without its histories (status, times, params, tags,
            latest values): equal to the one recorded at the last import, the run has not changed since.
        unchanged_since: The run's histories were not read, as its listing is the one recorded at the last import
            with the same options: the replica is left as it is (``names``, ``steps`` and ``values`` hold only the
            latest value of each metric, for the checks).
    """

    tracker: str
    uri: str
    run_id: str
    experiment: str
    status: str = "completed"
    tracker_status: Optional[str] = None
    run_name: Optional[str] = None
    started: Optional[float] = None
    ended: Optional[float] = None
    keys: dict[str, str] = field(default_factory=dict)
    names: Sequence[str] = ()
    steps: Any = ()
    values: Any = ()
    wall_times: Any = ()
    stages: dict[str, str] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)
    reason: Optional[str] = None
    parent: bool = False
    listing: Optional[str] = None
    unchanged_since: bool = False

    @property
    def metric_names(self) -> set[str]:
        """The names of the metrics this run recorded (``epoch`` left out)."""
        return {name for name in set(self.names) if name != _EPOCH_SERIES}

    def label(self) -> str:
        """How messages name the run: its name and id (``'cheerful-ox' (ab12...)``)."""
        return f"{self.run_name!r} ({self.run_id})" if self.run_name else self.run_id


def stage_of(name: str) -> str:
    """The stage of a metric from its name: ``val``, ``test`` or ``train``.

    Example:
        >>> [stage_of(n) for n in ("val_acc", "val/loss", "validation_loss", "test_f1", "train_loss", "loss")]
        ['val', 'val', 'val', 'test', 'train', 'train']
    """
    if _VAL_WORDS.match(name):
        return "val"
    if _TEST_WORDS.match(name):
        return "test"
    return "train"


def scope_of(name: str, stage: str) -> str:
    """``epoch`` for a value reduced over an epoch (``*_epoch``, ``epoch_*``, or a val/test metric), else ``step``.

    Example:
        >>> scope_of("train_loss_step", "train"), scope_of("train_loss_epoch", "train"), scope_of("val_acc", "val")
        ('step', 'epoch', 'epoch')
    """
    lowered = name.lower()
    if lowered.endswith("_epoch") or lowered.startswith("epoch_") or stage in ("val", "test"):
        return "epoch"
    return "step"


def check_group_keys(option: str, keys: Sequence[str], runs: Sequence[TrackerRun]) -> list[str]:
    """Check ``--group-by`` (or ``--seed-key``) keys: ``<namespace>.<name>``, each held by some run; return them.

    Raises:
        UsageError: A key of another form, or one that no run holds (with the keys the runs do hold).
    """
    checked = []
    for key in keys:
        namespace, _, name = key.partition(".")
        if namespace not in KEY_NAMESPACES or not name:
            raise UsageError(
                f"`{option}` takes keys such as params.lr, tags.team or hparams.lr (one of "
                f"{', '.join(KEY_NAMESPACES)}, a dot, the name). Received: {option} {key}."
            )
        if not any(key in run.keys for run in runs):
            held = sorted({k for run in runs for k in run.keys})
            shown = ", ".join(held[:20]) + (f" and {len(held) - 20} more" if len(held) > 20 else "")
            raise UsageError(
                f"`{option}` names a key no run has. Received: {option} {key}. "
                f"Expected one of: {shown or 'none (the runs record no params, tags or hparams)'}."
            )
        checked.append(key)
    return checked


def group_name(base: str, keys: Sequence[str], values: Mapping[str, str]) -> str:
    """The experiment a run goes to: ``base``, then ``.<key>-<value>`` for each ``--group-by`` key.

    Raises:
        UsageError: The name is not a valid partition value (too long, ...): one line saying to use ``--name``.
    """
    parts = [base]
    for key in keys:
        value = values.get(key, "none")
        parts.append(f"{key.rpartition('.')[2]}-{_UNSAFE.sub('_', value)}")
    name = ".".join(parts)
    try:
        return check_partition_value("experiment", name)
    except UsageError as exc:
        raise UsageError(f"the group of a run cannot be a folder name ({exc}); choose a shorter `--name`.") from None


def select_metrics(runs: Sequence[TrackerRun], patterns: Sequence[str]) -> None:
    """Keep only the metrics matching ``--metric`` patterns (fnmatch) and check every completed run has each.

    Without patterns, every completed run must have at least one metric.

    Raises:
        UsageError: A completed run without a metric asked for (or without any): one line naming the runs.
    """
    for pattern in patterns:
        lacking = [run for run in runs if run.status == "completed" and not _matches(run.metric_names, pattern)]
        if lacking:
            raise UsageError(
                f"`--metric` names a metric that {len(lacking)} completed run(s) did not record: "
                f"{_shown(lacking)}. Received: --metric {pattern}. "
                f"Expected one of: {', '.join(sorted(set().union(*(r.metric_names for r in runs)))[:20])}."
            )
    if not patterns:
        empty = [run for run in runs if run.status == "completed" and not run.metric_names]
        if empty:
            raise UsageError(
                f"{len(empty)} completed run(s) recorded no metric: {_shown(empty)}; nothing to import for them. "
                "Leave them out of the source, or name the metrics to import with `--metric`."
            )
        return
    for run in runs:
        keep = np.array([n == _EPOCH_SERIES or any(fnmatch.fnmatchcase(n, p) for p in patterns) for n in run.names])
        if not keep.all():
            run.names = [n for n, k in zip(run.names, keep, strict=True) if k]
            run.steps = np.asarray(run.steps)[keep]
            run.values = np.asarray(run.values, dtype=np.float64)[keep]
            run.wall_times = _floats(run.wall_times)[keep]


def apply_min_step(runs: Sequence[TrackerRun], min_step: Optional[int]) -> None:
    """``--min-step N``: a completed run whose last recorded step is below ``N`` becomes ``incomplete`` (logs of
    TensorBoard and CSVLogger record no status: this is how a run that stopped early is told apart)."""
    if min_step is None:
        return
    for run in runs:
        if run.status != "completed":
            continue
        last = int(np.max(run.steps)) if len(run.steps) else None
        if last is None or last < min_step:
            run.status = "incomplete"
            run.reason = f"its logs end at step {last}, before --min-step {min_step}"


def seed_of(run: TrackerRun, key: Optional[str]) -> tuple[Optional[int], Optional[str]]:
    """The run's seed and the key it came from: ``key`` (``--seed-key``), else the first of :data:`SEED_KEYS` the
    run holds as a whole number; ``(None, None)`` when there is none."""
    for candidate in (key,) if key else SEED_KEYS:
        text = run.keys.get(candidate)
        if text is None:
            continue
        try:
            number = float(text)
        except ValueError:
            continue
        if number.is_integer():
            return int(number), candidate
    return None, None


def metric_columns(run: TrackerRun) -> dict[str, Any]:
    """The columns of the run's ``metrics.parquet`` (``seq`` and ``finite`` left to the writer), as NumPy arrays:
    rows ordered by step, wall time and name; the ``epoch`` series fills the ``epoch`` column. ``epoch`` and
    ``wall_time`` are float arrays whose NaN means unknown (written as null)."""
    names = np.asarray(list(run.names), dtype=object)
    steps = np.asarray(run.steps, dtype=np.int64)
    values = np.asarray(run.values, dtype=np.float64)
    walls = _floats(run.wall_times)
    if len(walls) != len(names):
        walls = np.full(len(names), np.nan)
    if not len(names):
        empty = np.array([], dtype=object)
        return {
            "step": steps,
            "epoch": values,
            "stage": empty,
            "scope": empty,
            "name": empty,
            "value": values,
            "wall_time": values,
        }
    unique, codes = np.unique(names, return_inverse=True)
    epochs = np.full(len(names), np.nan)
    if _EPOCH_SERIES in set(unique):
        is_epoch = codes == int(np.searchsorted(unique, _EPOCH_SERIES))
        order = np.lexsort((walls[is_epoch], steps[is_epoch]))
        epoch_steps, epoch_values = steps[is_epoch][order], values[is_epoch][order]
        keep = ~is_epoch
        names, steps, values, walls, codes = names[keep], steps[keep], values[keep], walls[keep], codes[keep]
        at = np.searchsorted(epoch_steps, steps, side="right") - 1
        epochs = np.where(at >= 0, epoch_values[np.maximum(at, 0)], np.nan)
    order = np.lexsort((codes, np.where(np.isnan(walls), -np.inf, walls), steps))
    stages = [run.stages.get(str(n)) or stage_of(str(n)) for n in unique]
    scopes = [run.scopes.get(str(n)) or scope_of(str(n), stage) for n, stage in zip(unique, stages, strict=True)]
    code_order = codes[order]
    return {
        "step": steps[order],
        "epoch": epochs[order],
        "stage": np.asarray(stages, dtype=object)[code_order],
        "scope": np.asarray(scopes, dtype=object)[code_order],
        "name": names[order],
        "value": values[order],
        "wall_time": walls[order],
    }


def _floats(values: Any) -> Any:
    """``values`` as a float64 array, ``None`` as NaN."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return values.astype(np.float64, copy=False)
    return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


def _matches(names: set[str], pattern: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def _shown(runs: Sequence[TrackerRun]) -> str:
    shown = ", ".join(run.label() for run in runs[:_MAX_SHOWN])
    return shown + (f" and {len(runs) - _MAX_SHOWN} more" if len(runs) > _MAX_SHOWN else "")
