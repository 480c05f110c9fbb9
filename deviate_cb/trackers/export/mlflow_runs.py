"""``deviate export mlflow``: a study as MLflow runs, one parent run per experiment and one child run per replica.

Example:
    >>> connect("http://127.0.0.1:1")  # nothing listens there  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--tracking-uri` does not answer (...). Received: --tracking-uri=http://127.0.0.1:1...
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Optional

from deviate_cb.errors import UsageError, require
from deviate_cb.store.run_directory import METRICS_FILE
from deviate_cb.store.validation import one_line
from deviate_cb.trackers.export.renaming import name_tags, tracker_names
from deviate_cb.trackers.export.replicas import (
    ExportSummary,
    ReplicaRun,
    StudyExport,
    answers_text,
    headline_numbers,
    tracker_status,
)
from deviate_cb.trackers.export.waiting import TrackerUnreachable, Watched, bound_mlflow, is_network_error
from deviate_cb.trackers.mlflow_server import HEALTH_TIMEOUT_S, check_server

__all__ = ["FIGURES_FOLDER", "PAGE_NAME", "ExportStopped", "connect", "export_to_mlflow"]

PAGE_NAME = "deviate-report.html"
#: The study run's artifact folder of the page's figures, one SVG each.
FIGURES_FOLDER = "deviate-figures"
_BATCH = 1000  # MLflow's log_batch takes at most 1,000 metrics, 100 params and 100 tags per call
_PARAMS_PER_BATCH = 100
_MAX_NOTE_CHARS = 7500  # MLflow tag values hold at most 8,000 characters
_END_TIMEOUT_S = 5  # ending a half-written run when the export stops: the server may be what failed


def connect(tracking_uri: str, *, timeout_s: Optional[float] = None, err: Optional[IO[str]] = None) -> Any:
    """An ``MlflowClient`` for ``tracking_uri`` that has answered, or a one-line :class:`UsageError`.

    An ``http(s)`` server must answer ``/health`` within a few seconds
    (:func:`~deviate_cb.trackers.mlflow_server.check_server`: MLflow's own client would retry for minutes), then
    list an experiment; any other URI (``sqlite:///``, ``file:``) must open. Every request of the client is
    bounded by ``timeout_s`` (:func:`~deviate_cb.trackers.export.waiting.bound_mlflow`: default 30 s, no
    retries); with ``err``, the client is :class:`~deviate_cb.trackers.export.waiting.Watched`: a slow call says
    what it waits for, a stalled one is a :class:`~deviate_cb.trackers.export.waiting.TrackerUnreachable`.
    """
    require("mlflow", "mlflow")
    from mlflow.tracking import MlflowClient

    timeout = bound_mlflow(timeout_s)
    if tracking_uri.startswith(("http://", "https://")):
        check_server(tracking_uri, timeout_s=min(timeout, HEALTH_TIMEOUT_S))
    try:
        client: Any = MlflowClient(tracking_uri=tracking_uri)
        if err is not None:
            client = Watched(client, "MLflow", tracking_uri, err, timeout_s=timeout)
        client.search_experiments(max_results=1)
    except TrackerUnreachable:
        raise
    except Exception as exc:  # MlflowException, a bad scheme, an unreadable database
        raise UsageError(
            f"`--tracking-uri` must be an MLflow tracking URI that can be opened: {one_line(exc, limit=300)}. "
            f"Received: --tracking-uri={tracking_uri}."
        ) from None
    return client


def export_to_mlflow(
    export: StudyExport,
    client: Any,
    *,
    experiment_name: Optional[str] = None,
    page: Optional[str] = None,
    progress: Optional[Any] = None,
    warn: Optional[Callable[[str], None]] = None,
    figures: Optional[Mapping[str, str]] = None,
) -> ExportSummary:
    """Write ``export`` to MLflow through ``client`` (from :func:`connect`); see the module docstring.

    Args:
        export: The study (:func:`~deviate_cb.trackers.export.replicas.read_study`).
        client: A connected ``MlflowClient``.
        experiment_name: The MLflow experiment every run goes to; default: one per deviate-cb experiment, of
            the same name.
        page: The HTML page to attach to each parent run (``None``: none).
        figures: The page's figures (``Study.figures()``: what each shows -> SVG); each study run gets those of its
            experiment (training curves with their band and every run, distributions, runs needed) as SVG files
            under ``deviate-figures/``, which MLflow's artifact view shows.
        progress: Called with one line per replica exported.
        warn: Called with one line per damaged metrics file (its replica is exported without metrics).

    Raises:
        ExportStopped: The server refused a request, or did not answer (``rerun_helps``); the run being written
            was ended ``FAILED`` first, and the message says so.
        KeyboardInterrupt: The run being written was ended ``KILLED`` first.
    """
    summary = ExportSummary()
    writing = _Writing(client)
    try:
        for experiment in export.experiments:
            runs = [r for r in export.runs if r.experiment == experiment]
            linked = {run.key: _linked_run(client, run) for run in runs}
            home = _home_experiment(list(linked.values())) if experiment_name is None else None
            experiment_id = home or _experiment_id(client, experiment_name or experiment)
            parent = _parent(writing, export, experiment, experiment_id, page, summary, figures or {})
            summary.parents[experiment] = parent
            existing = _children(client, experiment_id, parent)
            for run in runs:
                found = existing.get(run.key) or (existing.get(run.legacy_key) if run.legacy_key else None)
                own = linked[run.key]
                if own is not None:  # the user's own run: the study attached to it, nothing copied
                    if found is not None:  # a copy an earlier export made: the run itself says it now
                        client.delete_run(found.info.run_id)
                    action, run_id = _attach(client, run, own, parent), own.info.run_id
                elif found is not None and found.data.tags.get("deviate.version") == run.version:
                    action, run_id = "unchanged", found.info.run_id
                else:
                    if found is not None:
                        client.delete_run(found.info.run_id)
                    action, run_id = (
                        ("replaced" if found is not None else "exported"),
                        _child(writing, run, experiment_id, parent, summary, _unsaid(export, warn)),
                    )
                summary.replicas.append((action, run.experiment, run.variant, run.replica, run_id))
                if progress is not None:
                    progress(f"{action}: experiment={run.experiment} variant={run.variant} replica={run.replica} "
                             f"({tracker_status(run.status)}) -> run {run_id}")  # fmt: skip
    except KeyboardInterrupt:
        writing.end("KILLED")
        raise
    except Exception as exc:
        left = writing.end("FAILED")
        helps = is_network_error(exc) or isinstance(exc, TrackerUnreachable)
        text = str(exc) if isinstance(exc, TrackerUnreachable) else f"{type(exc).__name__}: {one_line(exc, limit=400)}"
        advice = (
            "run the same command again to finish (what is there already is left alone)"
            if helps
            else "running the same command again would stop the same way (the server refuses this request)"
        )
        raise ExportStopped(
            f"the export to MLflow stopped: {text}. {summary.count('exported') + summary.count('replaced')} "
            f"replica run(s) were written before it{left}; {advice}.",
            rerun_helps=helps,
        ) from None
    return summary


class ExportStopped(UsageError):
    """An export that stopped in the middle; ``rerun_helps`` says whether the same command can finish it."""

    def __init__(self, message: str, *, rerun_helps: bool) -> None:
        super().__init__(message)
        self.rerun_helps = rerun_helps


class _Writing:
    """The run being written (created, not ended yet): :meth:`end` ends it when the export stops."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.run_id: Optional[str] = None

    def end(self, status: str) -> str:
        """End the open run as ``status``; return the words for the message (empty when none was open)."""
        run_id, self.run_id = self.run_id, None
        if run_id is None:
            return ""
        previous = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT")
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(_END_TIMEOUT_S)  # the server may be the one that stalled
        try:
            _set_terminated(self.client, run_id, status=status, end_time=_now_ms())
        except Exception:
            return f"; run {run_id} could not be ended and may show RUNNING (the next export replaces it)"
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_HTTP_REQUEST_TIMEOUT", None)
            else:
                os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = previous
        return f"; the half-written run {run_id} was ended {status} (the next export replaces it)"


def _experiment_id(client: Any, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is None:
        return str(client.create_experiment(name))
    if getattr(found, "lifecycle_stage", "active") != "active":
        raise UsageError(
            f"`--mlflow-experiment` names an MLflow experiment that was deleted. Received: {name!r}. Restore it "
            "(mlflow experiments restore) or export to another name with --mlflow-experiment."
        )
    return str(found.experiment_id)


def _parent(
    writing: _Writing, export: StudyExport, experiment: str, experiment_id: str, page: Optional[str],
    summary: ExportSummary, figures: Mapping[str, str],
) -> str:  # fmt: skip
    """The study run of ``experiment``: found by its key and updated in place, or created.

    Its answers are metrics at step = the replicas counted (completed), logged again only when they changed; the
    replica counts are tags (MLflow params cannot change); it ends ``FAILED`` while no replica completed.
    """
    from mlflow.entities import Metric, RunTag

    client = writing.client
    key = export.study_key(experiment)
    found = client.search_runs([experiment_id], filter_string=f"tags.`deviate.key` = '{key}'", max_results=1)
    if not found:  # an export made before keys left the study's path out
        legacy = export.legacy_study_key(experiment)
        found = client.search_runs([experiment_id], filter_string=f"tags.`deviate.key` = '{legacy}'", max_results=1)
    runs = [r for r in export.runs if r.experiment == experiment]
    counted = sum(1 for r in runs if r.status == "completed")
    numbers = headline_numbers(export.study, experiment)
    answers = _digest_of(sorted(numbers.items()), counted)
    tags = {
        "deviate.role": "study",
        "deviate.key": key,
        "deviate.experiment": experiment,
        "deviate.study_dir": str(export.directory),
        "deviate.replicas": str(len(runs)),
        "deviate.replicas_completed": str(counted),
        "deviate.answers": answers,
        "mlflow.note.content": answers_text(export, experiment)[:_MAX_NOTE_CHARS],
    }
    if found:
        run_id = str(found[0].info.run_id)
    else:
        run_id = str(client.create_run(experiment_id, tags=tags, run_name=f"{experiment} (deviate study)").info.run_id)
    writing.run_id = run_id
    now = _now_ms()
    names = tracker_names(numbers)
    summary.renamed.update((old, new) for old, new in names.items() if old != new)
    tags.update(name_tags("metric", names))
    if not found or found[0].data.tags.get("deviate.answers") != answers:  # a point only where the answers moved
        metrics = [Metric(names[k], v, now, counted) for k, v in sorted(numbers.items())]
        for chunk in _chunks(metrics, _BATCH):
            client.log_batch(run_id, metrics=chunk)
    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
    if page is not None:
        with tempfile.TemporaryDirectory(prefix="deviate-export-") as folder:
            path = Path(folder) / PAGE_NAME
            path.write_text(page, encoding="utf-8")
            client.log_artifact(run_id, str(path))
    shown = {k: v for k, v in figures.items() if k.endswith(f"(experiment {experiment})") or k.endswith(
        f"in experiment {experiment}")}  # fmt: skip
    if shown:
        with tempfile.TemporaryDirectory(prefix="deviate-export-") as folder:
            for key, svg in shown.items():
                (Path(folder) / f"{_file_name(key)}.svg").write_text(svg, encoding="utf-8")
            client.log_artifacts(run_id, folder, FIGURES_FOLDER)
    _set_terminated(client, run_id, status="FINISHED" if counted else "FAILED", end_time=now)
    writing.run_id = None
    return run_id


def _file_name(key: str) -> str:
    """A figure's file name from what it shows: ``training curves of val/acc (experiment mlp)`` ->
    ``training-curves-of-val-acc``."""
    text = key.rpartition(" (experiment ")[0] or key.rpartition(" in experiment ")[0] or key
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.")[:120] or "figure"


def _digest_of(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def _linked_run(client: Any, run: ReplicaRun) -> Any:
    """The user's own MLflow run that ``run`` is (imported from it, or logged to it live) at the client's tracking
    URI, when it is still there; ``None`` otherwise (the replica is then exported as a run of its own)."""
    from mlflow.exceptions import MlflowException

    here = str(client.tracking_uri).rstrip("/")
    for uri, run_id in run.linked:
        if uri.rstrip("/") != here:
            continue
        try:
            found = client.get_run(run_id)
        except MlflowException:
            continue
        if found.info.lifecycle_stage != "deleted":
            return found
    return None


def _home_experiment(linked: list[Any]) -> Optional[str]:
    """The MLflow experiment of the users' runs, where every replica of the experiment is one and all share it:
    the study run goes beside them."""
    homes = {run.info.experiment_id for run in linked if run is not None}
    return str(homes.pop()) if linked and None not in linked and len(homes) == 1 else None


def _attach(client: Any, run: ReplicaRun, own: Any, parent: str) -> str:
    """Tag the user's run ``own`` as replica ``run`` of the study run ``parent`` (its params and history are its
    own, untouched; its parent, if a sweep's, kept); ``linked``, or ``unchanged`` when it already says so."""
    from mlflow.entities import RunTag

    exported = "deviate.key" in own.data.tags  # a replica run an export made: its identity stays that study's
    kept = ("deviate.run_dir", "deviate.key", "deviate.version") if exported else ("deviate.run_dir",)
    # only our own namespace: the run's own tags are its own (and a store, untrusted, names the run to tag)
    tags = {k: v for k, v in run.tags.items() if k.startswith("deviate.") and k not in kept}
    tags.update({"deviate.role": "replica", "deviate.study_run": parent})
    if all(own.data.tags.get(k) == v for k, v in tags.items()):
        return "unchanged"
    items = [RunTag(k, v) for k, v in tags.items()]
    for start in range(0, len(items), 100):
        client.log_batch(own.info.run_id, tags=items[start : start + 100])
    return "linked"


def _children(client: Any, experiment_id: str, parent: str) -> dict[str, Any]:
    """The child runs of ``parent`` by their ``deviate.key`` tag (newest first wins)."""
    out: dict[str, Any] = {}
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'", max_results=1000,
            page_token=token,
        )  # fmt: skip
        for run in page:
            out.setdefault(run.data.tags.get("deviate.key", ""), run)
        token = getattr(page, "token", None)
        if not token:
            return out


def _child(
    writing: _Writing, run: ReplicaRun, experiment_id: str, parent: str, summary: ExportSummary,
    warn: Optional[Callable[[str], None]],
) -> str:  # fmt: skip
    """Create the child run of one replica with its params, tags and histories; the version tag goes last.

    A damaged metrics file (corrupt, not Parquet, a FIFO) is one warning: the run is exported without metrics,
    tagged ``deviate.metrics_unreadable``.
    """
    from mlflow.entities import Metric, Param, RunTag

    client = writing.client
    try:
        histories, unreadable = run.histories(), ""
    except (OSError, ValueError, UsageError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        histories, unreadable = {}, one_line(exc, limit=300)
        summary.skipped.append(str(run.path / METRICS_FILE))
        if warn is not None:
            warn(f"{run.path / METRICS_FILE}: cannot be read ({unreadable}); replica exported without its metrics")
    metric_names = tracker_names(histories)
    param_names = tracker_names(run.params)
    summary.renamed.update((old, new) for names in (metric_names, param_names) for old, new in names.items()
                           if old != new)  # fmt: skip
    summary.truncated.update(run.truncated)
    tags = {k: v for k, v in run.tags.items() if k != "deviate.version"}
    tags.update({"mlflow.parentRunId": parent, "deviate.role": "replica"})
    tags.update({**name_tags("metric", metric_names), **name_tags("param", param_names)})
    if unreadable:
        tags["deviate.metrics_unreadable"] = unreadable
    created = client.create_run(experiment_id, start_time=run.started_ms, tags=tags, run_name=run.name)
    run_id = str(created.info.run_id)
    writing.run_id = run_id
    metrics = [
        Metric(metric_names[key], point.value, round(point.wall_time * 1000), point.step)
        for key, points in sorted(histories.items())
        for point in points
    ]
    for chunk in _chunks(metrics, _BATCH):
        client.log_batch(run_id, metrics=chunk)
    for params in _chunks([Param(param_names[k], v) for k, v in run.params.items()], _PARAMS_PER_BATCH):
        client.log_batch(run_id, params=params)
    _set_terminated(client, run_id, status=tracker_status(run.status), end_time=run.ended_ms)
    writing.run_id = None
    client.log_batch(run_id, tags=[RunTag("deviate.version", run.version)])
    return run_id


def _set_terminated(client: Any, run_id: str, **how: Any) -> None:
    """``client.set_terminated`` without the two lines MLflow writes to stdout for each run ended ("View run ...",
    "View experiment ..."): the export's own lines say what was sent, where."""
    with contextlib.redirect_stdout(io.StringIO()):
        client.set_terminated(run_id, **how)


def _unsaid(export: StudyExport, warn: Optional[Callable[[str], None]]) -> Optional[Callable[[str], None]]:
    """``warn``, silent on a file the study's own warnings (printed already) name: one line per damaged file."""
    if warn is None:
        return None
    said = tuple(export.study.warnings)

    def once(line: str) -> None:
        if not any(line.split(": ", 1)[0] in known for known in said):
            warn(line)

    return once


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
