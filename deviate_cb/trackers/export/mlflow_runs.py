"""``deviate export mlflow``: a study as MLflow runs, one parent run per experiment and one child run per replica.

The parent run (tag ``deviate.role`` = ``study``) holds the report's answers as metrics
(:func:`~deviate_cb.trackers.export.replicas.headline_numbers`: each variant's mean, std and the std's interval
on the metric of interest, the implementation share, the runs needed) and the HTML page of ``deviate report
--format html`` as the artifact ``deviate-report.html``. Each child run (tag ``mlflow.parentRunId``) holds one
replica: every recorded series with its steps and wall times (``log_batch``), its configuration as params, and
``deviate.*`` tags (experiment, variant, replica, seed, determinism asked and in effect, status, the fingerprint's
summary). A replica that did not complete ends ``FAILED`` or ``KILLED``, never ``FINISHED``.

Nothing is created before the server answered (:func:`connect`). Exporting again is idempotent: a child run
whose ``deviate.key`` and ``deviate.version`` tags match the replica is left alone (``unchanged``); one whose
version differs (the replica ran again, or was exported while running) is deleted and exported anew
(``replaced``); the parent run of the study is found by its key and updated in place. The version tag is
written last, so a child run an interrupted export left half-written is replaced by the next export.

Example:
    >>> connect("http://127.0.0.1:1")  # nothing listens there  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--tracking-uri` does not answer (...). Received: --tracking-uri=http://127.0.0.1:1...
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError, require
from deviate_cb.store.validation import one_line
from deviate_cb.trackers.export.replicas import (
    ExportSummary,
    ReplicaRun,
    StudyExport,
    answers_text,
    headline_numbers,
    tracker_status,
)
from deviate_cb.trackers.mlflow_server import check_server

__all__ = ["PAGE_NAME", "connect", "export_to_mlflow"]

PAGE_NAME = "deviate-report.html"
_BATCH = 1000  # MLflow's log_batch takes at most 1,000 metrics, 100 params and 100 tags per call
_PARAMS_PER_BATCH = 100
_MAX_NOTE_CHARS = 7500  # MLflow tag values hold at most 8,000 characters


def connect(tracking_uri: str) -> Any:
    """An ``MlflowClient`` for ``tracking_uri`` that has answered, or a one-line :class:`UsageError`.

    An ``http(s)`` server must answer ``/health`` within a few seconds
    (:func:`~deviate_cb.trackers.mlflow_server.check_server`: MLflow's own client would retry for minutes), then
    list an experiment; any other URI (``sqlite:///``, ``file:``) must open.
    """
    require("mlflow", "mlflow")
    from mlflow.tracking import MlflowClient

    if tracking_uri.startswith(("http://", "https://")):
        check_server(tracking_uri)
    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)
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
) -> ExportSummary:
    """Write ``export`` to MLflow through ``client`` (from :func:`connect`); see the module docstring.

    Args:
        export: The study (:func:`~deviate_cb.trackers.export.replicas.read_study`).
        client: A connected ``MlflowClient``.
        experiment_name: The MLflow experiment every run goes to; default: one per deviate-cb experiment, of
            the same name.
        page: The HTML page to attach to each parent run (``None``: none).
        progress: Called with one line per replica exported.
    """
    summary = ExportSummary()
    for experiment in export.experiments:
        experiment_id = _experiment_id(client, experiment_name or experiment)
        parent = _parent(client, export, experiment, experiment_id, page)
        summary.parents[experiment] = parent
        existing = _children(client, experiment_id, parent)
        for run in (r for r in export.runs if r.experiment == experiment):
            found = existing.get(run.key)
            if found is not None and found.data.tags.get("deviate.version") == run.version:
                action, run_id = "unchanged", found.info.run_id
            else:
                if found is not None:
                    client.delete_run(found.info.run_id)
                action, run_id = (
                    ("replaced" if found is not None else "exported"),
                    _child(client, run, experiment_id, parent),
                )
            summary.replicas.append((action, run.experiment, run.variant, run.replica, run_id))
            if progress is not None:
                progress(f"{action}: experiment={run.experiment} variant={run.variant} replica={run.replica} "
                         f"({tracker_status(run.status)}) -> run {run_id}")  # fmt: skip
    return summary


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


def _parent(client: Any, export: StudyExport, experiment: str, experiment_id: str, page: Optional[str]) -> str:
    """The study run of ``experiment``: found by its key and updated, or created."""
    from mlflow.entities import Metric, Param, RunTag

    key = export.study_key(experiment)
    found = client.search_runs([experiment_id], filter_string=f"tags.`deviate.key` = '{key}'", max_results=1)
    tags = {
        "deviate.role": "study",
        "deviate.key": key,
        "deviate.experiment": experiment,
        "deviate.study_dir": str(export.directory),
        "mlflow.note.content": answers_text(export, experiment)[:_MAX_NOTE_CHARS],
    }
    if found:
        run_id = str(found[0].info.run_id)
    else:
        run_id = str(client.create_run(experiment_id, tags=tags, run_name=f"{experiment} (deviate study)").info.run_id)
    now = _now_ms()
    numbers = headline_numbers(export.study, experiment)
    metrics = [Metric(k, v, now, 0) for k, v in sorted(numbers.items())]
    runs = [r for r in export.runs if r.experiment == experiment]
    params = [] if found else [Param("study_dir", str(export.directory)), Param("replicas", str(len(runs)))]
    for chunk in _chunks(metrics, _BATCH):
        client.log_batch(run_id, metrics=chunk)
    client.log_batch(run_id, params=params, tags=[RunTag(k, v) for k, v in tags.items()])
    if page is not None:
        with tempfile.TemporaryDirectory(prefix="deviate-export-") as folder:
            path = Path(folder) / PAGE_NAME
            path.write_text(page, encoding="utf-8")
            client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, status="FINISHED", end_time=now)
    return run_id


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


def _child(client: Any, run: ReplicaRun, experiment_id: str, parent: str) -> str:
    """Create the child run of one replica with its params, tags and histories; the version tag goes last."""
    from mlflow.entities import Metric, Param, RunTag

    tags = {k: v for k, v in run.tags.items() if k != "deviate.version"}
    tags.update({"mlflow.parentRunId": parent, "deviate.role": "replica"})
    created = client.create_run(experiment_id, start_time=run.started_ms, tags=tags, run_name=run.name)
    run_id = str(created.info.run_id)
    metrics = [
        Metric(key, point.value, round(point.wall_time * 1000), point.step)
        for key, points in sorted(run.histories().items())
        for point in points
    ]
    for chunk in _chunks(metrics, _BATCH):
        client.log_batch(run_id, metrics=chunk)
    for params in _chunks([Param(k, v) for k, v in run.params.items()], _PARAMS_PER_BATCH):
        client.log_batch(run_id, params=params)
    client.set_terminated(run_id, status=tracker_status(run.status), end_time=run.ended_ms)
    client.log_batch(run_id, tags=[RunTag("deviate.version", run.version)])
    return run_id


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
