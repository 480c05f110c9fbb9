"""A run as the callbacks see it: where it is written, what was requested, when it is flushed, how its fits end.

Framework-free: the Lightning and Keras adapters call it from their hooks. Once the run is under way its flush and
close never raise (a failed step becomes a ``problems`` entry of ``run.json``). Narrative: docs/design/capture.md.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.capture.determinism import apply_determinism, determinism_record, seed_everything, seed_set_before
from deviate_cb.capture.guard import ProblemLog, guarded
from deviate_cb.capture.recorder import MetricRecorder, ValuesToFloats, floats_of
from deviate_cb.capture.run_timings import RunTimings
from deviate_cb.context import Deterministic, RunContext, parse_deterministic
from deviate_cb.errors import UsageError
from deviate_cb.fingerprint.collect import collect_fingerprint
from deviate_cb.store.completion import FIT_ENDED, FIT_STARTED, INCOMPLETE
from deviate_cb.store.manifest import UNSET, CaptureRecord, RunManifest
from deviate_cb.store.metrics import MetricsFile
from deviate_cb.store.run_directory import RunDirectory, check_partition_value, claim_replica, iso_time

__all__ = [
    "DEFAULT_EXPERIMENT",
    "FLUSH_INTERVAL_ENV",
    "FLUSH_INTERVAL_S",
    "FLUSH_MAX_ROWS",
    "STANDALONE_VARIANT",
    "RunSession",
    "flush_interval",
    "script_experiment",
]

STANDALONE_VARIANT = "standalone"
DEFAULT_EXPERIMENT = "default"
FLUSH_INTERVAL_S = 10.0
"""An epoch-end flush (``flush(when_due=True)``) writes only when this many seconds passed since the run's last write
(or its start): epochs longer than that are each written at their end; shorter ones share a write. A process killed
outright (SIGKILL, the OOM killer, a node lost) loses at most the values since the last write: its current epoch, or
the last ``FLUSH_INTERVAL_S`` seconds of short epochs. An exception, the end of a fit or stage, a checkpoint and the
run's end always write. ``DEVIATE_FLUSH_INTERVAL_S`` (seconds, ``0``: every epoch end) overrides it."""
FLUSH_MAX_ROWS = 10_000
"""... or when this many step times or metric values wait in memory (on CUDA each holds two events or a tensor)."""
FLUSH_INTERVAL_ENV = "DEVIATE_FLUSH_INTERVAL_S"


class RunSession:
    """One run's capture state, shared by the framework adapters.

    Args:
        out_dir: Root of the run store when standalone (default ``deviate_runs``).
        experiment: Experiment name when standalone (default: the script's name, :func:`script_experiment`).
        seed: Seed to apply when standalone (``None``: do not seed; the seed the user set, where it can be read
            back, is recorded).
        deterministic: ``True``, ``False``, ``"warn"`` or ``None`` (leave the framework's settings alone).
        metrics: Names or ``fnmatch`` patterns of metrics to keep (``None``: all).
        framework: Name recorded in the manifest (``lightning``, ``keras``).
        to_floats: Converts buffered framework values to floats in bulk.

    Example:
        >>> import tempfile
        >>> session = RunSession(out_dir=tempfile.mkdtemp(), experiment="demo", seed=1)
        >>> run = session.open()
        >>> session.recorder.update(step=1, epoch=0, stage="train", scope="step", name="loss", value=0.5,
        ...                         wall_time=0.0)
        >>> session.flush(), session.close().status, run.path.name
        (1, 'completed', 'replica=0')
    """

    def __init__(
        self,
        out_dir: Union[str, os.PathLike[str], None] = None,
        *,
        experiment: Optional[str] = None,
        seed: Optional[int] = None,
        deterministic: Optional[Deterministic] = None,
        metrics: Optional[Sequence[str]] = None,
        framework: str = "python",
        to_floats: ValuesToFloats = floats_of,
    ) -> None:
        self._validate(out_dir, experiment, seed, metrics)
        deterministic = parse_deterministic(deterministic)
        self.context = RunContext.current()
        self.framework = framework
        if self.context is not None:
            self._warn_overridden(out_dir=out_dir, experiment=experiment, seed=seed, deterministic=deterministic)
            self.seed: Optional[int] = self.context.seed
            self.deterministic: Optional[Deterministic] = self.context.deterministic
        else:
            self.seed, self.deterministic = seed, deterministic
        self.out_dir = Path(out_dir if out_dir is not None else "deviate_runs")
        self.experiment = experiment or script_experiment()
        self.recorder = MetricRecorder(keep=metrics, to_floats=to_floats)
        self.enabled = True
        self.run: Optional[RunDirectory] = None
        self._metrics_file: Optional[MetricsFile] = None
        self._restored: Optional[Mapping[str, Any]] = None
        self._failed = False
        self._fingerprinted = False
        self.timings: Optional[RunTimings] = None  # set by the adapter once it knows the device
        self.flush_interval_s = flush_interval()
        self._last_write = time.monotonic()  # when an epoch end last wrote (or the run opened)
        self.problems = ProblemLog()
        self.recorded_seed: Optional[int] = self.seed  # run.json's `seed`: standalone, also one the user set before
        self.fit: Optional[str] = None  # the last fit: "started", "ended" (None: no fit yet)
        self.fit_planned: Optional[int] = None  # the steps it plans, once the adapter knows (None: unknown)
        self._fit_done: Optional[int] = None  # the step it reached, when it ended or the run closed
        self._fit_written: Optional[str] = None  # the state run.json holds

    @staticmethod
    def _validate(out_dir: object, experiment: object, seed: object, metrics: object) -> None:
        if out_dir is not None and not isinstance(out_dir, (str, os.PathLike)):
            raise TypeError(f"`out_dir` must be a path or None. Received: out_dir={out_dir!r}.")
        if experiment is not None:
            check_partition_value("experiment", experiment)  # type: ignore[arg-type]
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
            raise ValueError(f"`seed` must be an integer in [0, 2**32) or None. Received: seed={seed!r}.")
        if metrics is not None and (
            isinstance(metrics, str) or not all(isinstance(m, str) and m for m in metrics)  # type: ignore[attr-defined]
        ):
            raise ValueError(
                f"`metrics` must be a list of metric names or patterns, or None. Received: metrics={metrics!r}."
            )

    def _warn_overridden(self, **given: Any) -> None:
        ctx = self.context
        assert ctx is not None
        ignored = {"out_dir": None, "experiment": ctx.experiment, "seed": ctx.seed, "deterministic": ctx.deterministic}
        for name, value in given.items():
            if value is not None and value != ignored[name]:
                warnings.warn(
                    f"DeviateCallback({name}={value!r}) is ignored: deviate-replicate controls it for this replica "
                    f"(replica {ctx.replica} of variant {ctx.variant!r}, seed {ctx.seed}, run dir {ctx.run_dir}).",
                    stacklevel=4,
                )

    @property
    def under_way(self) -> bool:
        """Whether the run is under way: its directory is open, or this process records nothing (a rank other
        than zero, once the adapter knows). From then on :func:`~deviate_cb.capture.guard.guarded` steps turn
        their errors into problems instead of raising."""
        return self.run is not None or not self.enabled

    def record_problem(self, where: str, error: Exception) -> None:
        """A recording step failed after the run started: add it to ``problems`` in ``run.json`` (rank zero)
        and warn once per kind of step and error; never raises."""
        self.problems.record(self.run if self.enabled else None, where, error)

    def apply_requested(self, *, seed: bool = True) -> None:
        """Apply the requested seed (standalone only: a replica is seeded before user code runs) and switches."""
        if seed and self.context is None and self.seed is not None:
            seed_everything(self.seed)
        apply_determinism(self.deterministic)

    def open(self) -> RunDirectory:
        """Resolve (and create) the run directory and record the run's start; idempotent."""
        if self.run is not None:
            again = self._pending_fit()
            if self.context is None and not self._failed:
                again = again.with_changes(status="running")
            if again:
                self._write_manifest(again)
            return self.run
        restored = self._restored or {}
        if self.context is not None:
            run = RunDirectory(self.context.run_dir)
        elif restored.get("run_dir") and Path(restored["run_dir"]).is_dir():
            run = RunDirectory(Path(restored["run_dir"]))
        else:
            _, path = claim_replica(self.out_dir, self.experiment, STANDALONE_VARIANT)
            run = RunDirectory(path)
        run.path.mkdir(parents=True, exist_ok=True)
        self.run, self._metrics_file = run, run.metrics()
        self._last_write = time.monotonic()
        same_run = restored.get("run_dir") and Path(restored["run_dir"]).resolve() == run.path.resolve()
        if same_run and self._metrics_file.truncate(int(restored.get("next_seq", self._metrics_file.next_seq))):
            self._copy_summary()
        start = CaptureRecord(framework=self.framework, callback={"metrics": self.recorder.patterns})
        if self.context is None:
            start = start.with_changes(
                status="running",
                experiment=self.experiment,
                variant=STANDALONE_VARIANT,
                replica=int(run.path.name.partition("=")[2]),
                **self._seed_fields(),
                deterministic=self.deterministic,
                argv=list(sys.argv),
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=restored.get("started_at") or iso_time(),
            )
        record = None
        if self.seed is not None or self.deterministic is not None or not run.manifest().recorded("determinism"):
            record = determinism_record(self.seed, self.deterministic)  # one write for both
            start = start.with_changes(determinism=record)
        self._write_manifest(start, self._pending_fit())  # with a fit begun before open: one write
        if record is not None:
            self._warn_determinism(record["problems"])
        return run

    def _seed_fields(self) -> dict[str, Any]:
        """Standalone ``seed``, ``seed_source`` and ``seed_note``: the callback's seed, else the one the user set
        before the run started, where it can be read back (``seed_note`` says how, or why none is recorded)."""
        if self.seed is not None:
            self.recorded_seed = self.seed
            return {"seed": self.seed, "seed_source": "callback", "seed_note": None}
        found = seed_set_before(prefer="keras" if self.framework == "keras" else "torch")
        self.recorded_seed = found["seed"]
        return {"seed": found["seed"], "seed_source": found["source"], "seed_note": found["note"]}

    def record_determinism(self) -> list[str]:
        """Record what was requested and what is verifiably in effect; warn about each mismatch."""
        record = determinism_record(self.seed, self.deterministic)
        problems = record["problems"]
        if self.run is not None:
            self.run.record(CaptureRecord(determinism=record))
        self._warn_determinism(problems, stacklevel=3)
        return problems

    def _warn_determinism(self, problems: list[str], stacklevel: int = 2) -> None:
        if problems and self.deterministic:
            warnings.warn("deviate-cb: determinism not fully in effect: " + "; ".join(problems), stacklevel=stacklevel)

    # -- fits: the evidence that training ended as its framework ends it (deviate_cb.store.completion) ----------
    def begin_fit(self, *, planned_steps: Optional[int] = None) -> None:
        """A fit starts (every fit, a second one too): record ``fit="started"`` and ``fit_steps`` with the steps it
        plans when the adapter knows them (``done`` unknown while it runs). One manifest write; called before
        :meth:`open` (the run's first fit), it writes nothing and :meth:`open` records it with the run's start, in
        its one write, before any training step. The adapters call it :func:`~deviate_cb.capture.guard.guarded`."""
        self.fit, self._fit_done = FIT_STARTED, None
        self.fit_planned = _count(planned_steps)
        self._write_fit()

    def end_fit(self, *, steps_done: Optional[int] = None, write: bool = True) -> None:
        """The fit reached its end (Lightning ``on_fit_end``, Keras ``on_train_end``): record ``fit="ended"`` and
        how many steps it did. One manifest write; ``write=False`` when :meth:`close` follows at once (it writes
        the record with the end of the run, one write for both). The adapters call it guarded."""
        self.fit, self._fit_done = FIT_ENDED, _count(steps_done)
        if write:
            self._write_fit()

    def _fit_fields(self) -> CaptureRecord:
        return CaptureRecord(fit=self.fit, fit_steps={"done": self._fit_done, "planned": self.fit_planned})

    def _pending_fit(self) -> CaptureRecord:
        """The fit record when run.json does not hold it yet (a fit begun before :meth:`open`), else nothing."""
        return self._fit_fields() if self.fit is not None and self._fit_written != self.fit else CaptureRecord()

    def _write_manifest(self, *sections: CaptureRecord) -> RunManifest:
        assert self.run is not None
        manifest = self.run.record(*sections)
        for section in sections:
            if section.fit is not UNSET:
                self._fit_written = section.fit
        return manifest

    def _write_fit(self) -> None:
        if self.run is None or not self.enabled:  # nothing open, or a rank that records nothing
            return
        self._write_manifest(self._fit_fields())

    def write_fingerprint(self, **facts: Any) -> None:
        """Record the fingerprint (adapters call this once the stage's DataLoaders exist)."""
        if self.run is not None and self.enabled:
            self.run.write_fingerprint(collect_fingerprint(seed=self.recorded_seed, **facts))
            self._fingerprinted = True

    @property
    def next_seq(self) -> int:
        """Sequence number the next recorded value will get (flushed rows plus the buffer)."""
        flushed = self._metrics_file.next_seq if self._metrics_file is not None else 0
        return flushed + len(self.recorder)

    def flush(self, *, hook: str = "flush", when_due: bool = False, compact: bool = False) -> int:
        """Append buffered values and new step times as one part each of ``metrics.parquet`` and
        ``timings.parquet`` (:mod:`deviate_cb.store.parts`; :meth:`close` compacts them); return the number of
        metric rows written.

        ``when_due`` (the adapters' epoch ends): write only if :attr:`flush_interval_s` (:data:`FLUSH_INTERVAL_S`)
        passed since the last such write or :data:`FLUSH_MAX_ROWS` step times or metric values wait (short epochs
        then share one part instead of paying one each: a part costs about 2 ms, as much as a thousand steps'
        hooks); otherwise return 0 and keep everything buffered. The ends of fits and stages, exceptions,
        checkpoints and the run's end always write.

        ``compact`` (:meth:`close`): the step times and metric values go straight into ``timings.parquet`` and
        ``metrics.parquet``, merged with the parts written before (:meth:`RunTimings.flush
        <deviate_cb.capture.run_timings.RunTimings.flush>`, :meth:`MetricsFile.append
        <deviate_cb.store.metrics.MetricsFile.append>`), instead of into one more part each.

        Each step is :func:`~deviate_cb.capture.guard.guarded` as ``"<hook>: timings flush"`` and ``"<hook>:
        metrics flush"``: a failing one is recorded as a problem (values that could not
        be written stay buffered for the next flush) and the others still run.
        """
        if not self.enabled:  # non-zero ranks record nothing
            self.recorder.reset()
            return 0
        if self._metrics_file is None or self.run is None:
            return 0
        timings = self.timings
        if when_due and not (
            time.monotonic() - self._last_write >= self.flush_interval_s
            or len(self.recorder) >= FLUSH_MAX_ROWS
            or (timings is not None and timings.unwritten >= FLUSH_MAX_ROWS)
        ):
            return 0
        if when_due:
            self._last_write = time.monotonic()
        if timings is not None:
            with guarded(self, f"{hook}: timings flush"):
                timings.flush(self.run.path, attempt=self._metrics_file.attempt, compact=compact)
        written = 0
        with guarded(self, f"{hook}: metrics flush"):
            written = self.recorder.flush(self._metrics_file, compact=compact)
        self.problems.write(self.run)  # counts of repeated problems
        return written

    def compact(self, *, hook: str = "compact", copy_summary: bool = True) -> bool:
        """Merge the parts that the flushes appended into ``metrics.parquet`` and ``timings.parquet`` (once per
        run end: a flush costs only what it adds), and copy the metrics summary into ``run.json``. Each file's
        compaction is :func:`~deviate_cb.capture.guard.guarded` as ``"<hook>: ... compaction"``; parts left by a
        failed one stay readable and are compacted by whoever settles the replica. With ``copy_summary=False``
        the copy is left to the caller (:meth:`close` writes it with the end of the run, one manifest write);
        returns whether ``metrics.parquet`` was rewritten."""
        if not self.enabled or self.run is None or self._metrics_file is None:
            return False
        if self.timings is not None:
            with guarded(self, f"{hook}: timings compaction"):
                self.timings.compact(self.run.path, attempt=self._metrics_file.attempt)
        compacted = False
        with guarded(self, f"{hook}: metrics compaction"):
            compacted = bool(self._metrics_file.compact())
            if compacted and copy_summary:
                self._copy_summary()
        return compacted

    def _copy_summary(self) -> None:
        """Copy the metrics file's series summary into ``run.json`` (key ``metrics_summary``) with the file's
        size and modification time, so that a report reads it with the manifest instead of opening the
        Parquet footer; a report trusts the copy only while the file's size and time still match."""
        copy = self._summary_copy()
        if copy is not None and self.run is not None:
            self.run.record(CaptureRecord(metrics_summary=copy))

    def _summary_copy(self) -> Optional[dict[str, Any]]:
        metrics = self._metrics_file
        if self.run is None or metrics is None or metrics.summary is None:
            return None
        stat = os.stat(metrics.path)
        return {**json.loads(metrics.summary), "file_size": stat.st_size, "file_mtime_ns": stat.st_mtime_ns}

    def close(
        self,
        *,
        error: Optional[BaseException] = None,
        hook: str = "close",
        steps_done: Optional[int] = None,
        exiting: bool = False,
    ) -> RunManifest:
        """Flush, compact (:meth:`compact`), and record the end of the run (status only when standalone); return
        the manifest (empty when it cannot be read). Once under way, each step is guarded as ``"<hook>: <step>"``
        (see :meth:`flush`).

        ``steps_done``: the step a fit that did not end reached, recorded in ``fit_steps``. ``exiting``: the
        process is exiting with no exception known (Keras at exit; ``error`` then only describes it). Standalone,
        the status is ``killed`` on ``KeyboardInterrupt``; ``incomplete`` when a fit started and did not end and
        the run ends without an exception, on ``SystemExit(0)``/``SystemExit(None)`` or while exiting (the process
        exits 0 before its training ended); ``failed`` on any other exception; else ``completed``.
        """
        if self.timings is not None and self.enabled:
            with guarded(self, f"{hook}: timings"):
                self.timings.close(None)  # the open step ends and an open profiling window is kept; flush writes them
        # the step times and values straight into timings.parquet and metrics.parquet: no part to read back
        merged = self.flush(hook=hook, compact=True)
        if self.run is None:
            return RunManifest.from_json({})
        compacted = self.compact(hook=hook, copy_summary=False) or merged > 0  # either rewrote metrics.parquet
        if not self._fingerprinted:  # the run ended before its adapter recorded one
            with guarded(self, f"{hook}: fingerprint"):
                self.write_fingerprint()
        end = CaptureRecord()
        if compacted:
            with guarded(self, f"{hook}: metrics summary"):
                summary = self._summary_copy()
                if summary is not None:  # written with the end of the run: one manifest write
                    end = end.with_changes(metrics_summary=summary)
        unended = self.fit == FIT_STARTED
        if unended:
            self._fit_done = _count(steps_done) if steps_done is not None else self._fit_done
        if unended or self._fit_written != self.fit:  # how far the fit got; or a fit record that failed to write
            end = end.merged(self._fit_fields())
        if error is not None:
            self._failed = True
            end = end.with_changes(exception=f"{type(error).__name__}: {error}")
        if self.context is None:
            end = end.with_changes(status=self._standalone_status(error, unended, exiting), ended_at=iso_time())
        with guarded(self, f"{hook}: end of run"):
            if not end:
                return self.run.manifest()
            return self._write_manifest(end)
        return RunManifest.from_json({})

    def _standalone_status(self, error: Optional[BaseException], unended: bool, exiting: bool) -> Any:
        """How a standalone run ended (``UNSET``: as recorded, a run that failed in an earlier session)."""
        clean = error is None or exiting or (isinstance(error, SystemExit) and error.code in (0, None))
        if isinstance(error, KeyboardInterrupt):
            return "killed"
        if unended and clean:
            return INCOMPLETE
        if error is not None:
            return "failed"
        return "completed" if not self._failed else UNSET

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs so that the resumed run continues this one."""
        started = self.run.manifest().started_at if self.run is not None else None
        return {"run_dir": str(self.run.path) if self.run is not None else None, "next_seq": self.next_seq,
                "started_at": started}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.run is None:  # a run already open keeps going where it is
            self._restored = dict(state)


def flush_interval() -> float:
    """Seconds between epoch-end writes: ``DEVIATE_FLUSH_INTERVAL_S`` when set (``0``: every epoch end), else
    :data:`FLUSH_INTERVAL_S`. Read when a callback is created, before any training.

    Example:
        >>> os.environ[FLUSH_INTERVAL_ENV] = "0"; flush_interval()
        0.0
        >>> del os.environ[FLUSH_INTERVAL_ENV]; flush_interval()
        10.0
    """
    raw = os.environ.get(FLUSH_INTERVAL_ENV, "").strip()
    if not raw:
        return FLUSH_INTERVAL_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise UsageError(
            f"`{FLUSH_INTERVAL_ENV}` must be a number of seconds >= 0 (0: write at every epoch end). "
            f"Received: {FLUSH_INTERVAL_ENV}={raw!r}."
        )
    return seconds


def script_experiment() -> str:
    """The experiment of a standalone run given none: the running script's name (``train`` for ``train.py``; the
    module for ``python -m pkg.train``), made a valid partition value (``/``, ``\\``, ``=`` and unprintable
    characters become ``_``); ``default`` where no script runs (interactive, ``python -c``, notebooks).

    Example:
        >>> name = script_experiment()
        >>> check_partition_value("experiment", name) == name
        True
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path:
        return DEFAULT_EXPERIMENT
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None) or ""
    name = name[: -len(".__main__")] if name.endswith(".__main__") else name
    if not name or name == "__main__":
        stem = Path(path).stem
        name = Path(path).resolve().parent.name if stem == "__main__" else stem  # `python dir/` runs dir/__main__.py
    name = "".join(c if c.isprintable() and c not in "/\\=" else "_" for c in name).strip()
    while len(name.encode("utf-8", "surrogatepass")) > 200 or len(name) > 100:
        name = name[:-1].rstrip()
    if not name or name in {".", ".."}:
        return DEFAULT_EXPERIMENT
    try:
        return check_partition_value("experiment", name)
    except Exception:
        return DEFAULT_EXPERIMENT


def _count(value: Any) -> Optional[int]:
    """A step count as the manifest records it: a non-negative int, else ``None`` (unknown, infinite).

    Example:
        >>> _count(47), _count(float("inf")), _count(-1), _count(None)
        (47, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    if isinstance(value, float) and (value == float("inf") or not value.is_integer()):
        return None
    return int(value)
