"""Read the runs of one MLflow experiment: a tracking server, a ``sqlite:///`` store or a ``mlruns/`` folder.

Example:
    >>> tracking_kind("http://127.0.0.1:5000"), tracking_kind("sqlite:///m.db"), tracking_kind("mlruns")
    ('server', 'sqlite', 'folder')
    >>> read_mlflow("sqlite:////nonexistent/m.db", "resnet")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--tracking-uri` names a SQLite file that does not exist...
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import warnings
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import UsageError, require
from deviate_cb.trackers.importing.imported import TRACKER_STATUSES, TrackerRun
from deviate_cb.trackers.importing.log_files import LogFileError, check_log_file, walk_logs
from deviate_cb.trackers.mlflow_server import check_server

__all__ = ["HISTORY_THREADS", "listing_of", "read_mlflow", "sqlite_histories", "tracking_kind"]

#: ``get_metric_history`` calls in flight at once where there is no SQL path (a server, a folder).
HISTORY_THREADS = 8
_PAGE = 1000
_PARENT_TAG = "mlflow.parentRunId"
_SQL_COLUMNS = {"run_uuid", "key", "step", "timestamp", "value", "is_nan"}


def tracking_kind(uri: str) -> str:
    """``server`` (http/https), ``sqlite`` (``sqlite:///``) or ``folder`` (a path or ``file:`` URI)."""
    if uri.startswith(("http://", "https://")):
        return "server"
    if uri.startswith("sqlite:"):
        return "sqlite"
    return "folder"


def read_mlflow(
    uri: str,
    experiment: str,
    *,
    filter_string: Optional[str] = None,
    deleted_of: Collection[str] = (),
    listings: Optional[Mapping[str, str]] = None,
) -> list[TrackerRun]:
    """Every active run of ``experiment`` at ``uri`` (those ``filter_string`` keeps, as ``mlflow.search_runs``
    takes it), with its params, tags and full metric histories; the runs of ``deleted_of`` (ids imported before)
    that were deleted since, with status ``deleted``. A run other runs name as their parent (a sweep's; our own
    study run) is read with ``parent`` set. A run whose listing equals ``listings[run id]`` (recorded at the last
    import with the same options) is not read again from a server or folder: ``unchanged_since`` is set.

    Raises:
        UsageError: The server does not answer, the file or folder does not exist, the experiment does not, the
            filter is not one MLflow reads.
        MissingDependencyError: mlflow is not installed (``deviate-cb[mlflow]``).
    """
    kind = tracking_kind(uri)
    _check_reachable(uri, kind)
    require("mlflow", extra="mlflow")
    with _quiet_client():
        from mlflow.entities import ViewType
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        try:
            found = client.get_experiment_by_name(experiment)
            if found is None:
                names = sorted(e.name for e in client.search_experiments())
                raise UsageError(
                    f"`--experiment` names no experiment of {uri}. Received: --experiment {experiment}. "
                    f"Expected one of: {', '.join(names[:20]) or 'none (the store holds no experiment)'}."
                )
            listed = _search_runs(client, found.experiment_id, filter_string, filter_given=filter_string is not None)
            wanted = set(deleted_of)
            if wanted:
                gone = _search_runs(client, found.experiment_id, filter_string, view=ViewType.DELETED_ONLY)
                listed += [run for run in gone if run.info.run_id in wanted]
            parents = _parent_ids(client, found.experiment_id, listed, filter_string)
            runs = [_tracker_run(uri, experiment, run, parents) for run in listed]
            histories = sqlite_histories(uri, found.experiment_id) if kind == "sqlite" else None
            if histories is None:  # one request per run and metric: only for the runs that changed since
                same = {r.run_id for r in runs if r.listing == (listings or {}).get(r.run_id)}
                for run, listed_run in zip(runs, listed, strict=True):
                    if run.run_id in same:
                        _latest_only(run, listed_run)
                histories = _client_histories(client, [r for r in listed if r.info.run_id not in same])
        except MlflowException as exc:
            raise UsageError(
                f"MLflow at {uri} refused the read: {_first_line(exc)}. Received: --tracking-uri {uri}."
            ) from None
    for run in runs:
        if run.unchanged_since:
            continue
        names, steps, values, walls = histories.get(run.run_id, ([], [], [], []))
        run.names, run.steps, run.values, run.wall_times = names, steps, values, walls
    return runs


def sqlite_histories(uri: str, experiment_id: str) -> Optional[dict[str, tuple[Any, Any, Any, Any]]]:
    """``run id -> (names, steps, values, wall times)`` of every metric value of the experiment's runs, read from
    the SQLite file in one query (read-only); ``None`` when the file's schema is not MLflow's as expected."""
    path = uri.removeprefix("sqlite:///")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(metrics)")}
        if not columns >= _SQL_COLUMNS:
            return None
        rows = connection.execute(
            "SELECT m.run_uuid, m.key, m.step, m.timestamp, m.value, m.is_nan FROM metrics AS m "
            "JOIN runs AS r ON r.run_uuid = m.run_uuid WHERE r.experiment_id = ? ORDER BY m.run_uuid",
            (int(experiment_id),),
        ).fetchall()
    except (sqlite3.Error, ValueError):
        return None
    finally:
        connection.close()
    if not rows:
        return {}
    run_ids, keys, steps, stamps, values, nans = zip(*rows, strict=True)
    ids = np.asarray(run_ids, dtype=object)
    step_array = np.asarray(steps, dtype=np.int64)
    wall_array = np.asarray(stamps, dtype=np.float64) / 1000.0
    value_array = np.where(np.asarray(nans, dtype=bool), np.nan, np.asarray(values, dtype=np.float64))
    key_list = list(keys)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    return {
        str(ids[a]): (key_list[a:b], step_array[a:b], value_array[a:b], wall_array[a:b])
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
    }


def _client_histories(client: Any, listed: list[Any]) -> dict[str, tuple[Any, Any, Any, Any]]:
    pairs = [(run.info.run_id, key) for run in listed for key in sorted(run.data.metrics)]
    with ThreadPoolExecutor(HISTORY_THREADS) as pool:
        answers = list(pool.map(lambda pair: client.get_metric_history(*pair), pairs))
    out: dict[str, tuple[list[str], list[int], list[float], list[float]]] = {}
    for (run_id, key), history in zip(pairs, answers, strict=True):
        names, steps, values, walls = out.setdefault(run_id, ([], [], [], []))
        for metric in history:
            names.append(key)
            steps.append(int(metric.step))
            values.append(float(metric.value))
            walls.append(metric.timestamp / 1000.0)
    return {run_id: (n, np.asarray(s, np.int64), np.asarray(v), np.asarray(w)) for run_id, (n, s, v, w) in out.items()}


def _search_runs(
    client: Any, experiment_id: str, filter_string: Optional[str], *, view: Any = None, filter_given: bool = False
) -> list[Any]:
    from mlflow.exceptions import MlflowException

    listed: list[Any] = []
    token = None
    options = {} if view is None else {"run_view_type": view}
    while True:
        try:
            page = client.search_runs(
                [experiment_id], filter_string or "", max_results=_PAGE, page_token=token, **options
            )
        except MlflowException as exc:
            if not filter_given:
                raise
            raise UsageError(
                f"`--filter` is not a filter MLflow reads: {_first_line(exc)}. Received: --filter {filter_string}. "
                "Expected: an expression as mlflow.search_runs takes it, e.g. --filter \"params.lr = '0.1'\"."
            ) from None
        listed.extend(page)
        token = page.token
        if not token:
            return listed


def _parent_ids(client: Any, experiment_id: str, listed: list[Any], filter_string: Optional[str]) -> set[str]:
    """The ids other runs of the experiment name as their parent (``mlflow.parentRunId``), and our study runs'."""
    children = listed
    if filter_string:  # the filter may leave the children out: ask for every run that has a parent
        children = _search_runs(client, experiment_id, f"tags.`{_PARENT_TAG}` LIKE '%'")
    parents = {run.data.tags[_PARENT_TAG] for run in children if run.data.tags.get(_PARENT_TAG)}
    return parents | {run.info.run_id for run in listed if run.data.tags.get("deviate.role") == "study"}


def listing_of(run: Any) -> str:
    """A hash of what ``search_runs`` lists of ``run``: status, lifecycle, times, params, tags and every metric's
    latest value, step and time (what changes when the run does)."""
    info, data = run.info, run.data
    latest = sorted((m.key, m.step, m.timestamp, m.value) for m in getattr(data, "_metric_objs", []))
    head = [info.status, info.lifecycle_stage, info.start_time, info.end_time, info.run_name,
            sorted(data.params.items()), sorted(data.tags.items()), sorted(data.metrics.items()), latest]  # fmt: skip
    return hashlib.sha256(json.dumps(head, default=str).encode()).hexdigest()[:32]


def _latest_only(run: TrackerRun, listed: Any) -> None:
    """Mark ``run`` unchanged since its last import, with only the latest value of each metric (for the checks)."""
    latest = sorted(getattr(listed.data, "_metric_objs", []), key=lambda m: m.key)
    run.unchanged_since = True
    run.names = [m.key for m in latest]
    run.steps = np.asarray([int(m.step) for m in latest], dtype=np.int64)
    run.values = np.asarray([float(m.value) for m in latest], dtype=np.float64)
    run.wall_times = np.asarray([m.timestamp / 1000.0 for m in latest], dtype=np.float64)


def _tracker_run(uri: str, experiment: str, run: Any, parents: set[str]) -> TrackerRun:
    info = run.info
    keys = {f"params.{k}": str(v) for k, v in run.data.params.items()}
    keys.update({f"tags.{k}": str(v) for k, v in run.data.tags.items()})
    deleted = info.lifecycle_stage == "deleted"
    status = "DELETED" if deleted else info.status
    return TrackerRun(
        tracker="mlflow",
        uri=uri,
        run_id=info.run_id,
        experiment=experiment,
        status=TRACKER_STATUSES.get(status, "failed"),
        tracker_status=status,
        reason=f"deleted in MLflow (it was {info.status} then)" if deleted else None,
        parent=info.run_id in parents,
        listing=listing_of(run),
        run_name=info.run_name or None,
        started=None if info.start_time is None else info.start_time / 1000.0,
        ended=None if info.end_time is None else info.end_time / 1000.0,
        keys=keys,
    )


def _check_reachable(uri: str, kind: str) -> None:
    if kind == "server":
        check_server(uri)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        return
    if kind == "sqlite":
        path = uri.removeprefix("sqlite:///")
        if not uri.startswith("sqlite:///") or not Path(path).is_file():
            raise UsageError(
                f"`--tracking-uri` names a SQLite file that does not exist (MLflow would create an empty store). "
                f"Received: --tracking-uri {uri}. Expected: sqlite:///PATH of an existing MLflow database."
            )
        return
    folder = Path(uri.removeprefix("file://"))
    if not folder.is_dir():
        raise UsageError(
            f"`--tracking-uri` names a folder that does not exist (MLflow would create an empty store). "
            f"Received: --tracking-uri {uri}. Expected: an mlruns/ folder, sqlite:///PATH or http://HOST:PORT."
        )
    _check_folder_files(uri, folder)
    # MLflow 3 refuses its file store unless asked: reading the runs a folder already holds is what is asked here.
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


def _check_folder_files(uri: str, folder: Path) -> None:
    """Refuse a folder MLflow's file store would block on (a FIFO) or read whole (an absurd size), before it reads.

    The client reads every file of every run (``meta.yaml``, ``metrics/``, ``params/``, ``tags/``; never
    ``artifacts/``) with no way to leave one run out, so a hostile file is one usage error naming it, and nothing
    is written.
    """
    for where, files in walk_logs(folder, []):
        if "artifacts" in where.relative_to(folder).parts:
            continue
        for name in files:
            try:
                check_log_file(where / name)
            except LogFileError as exc:
                raise UsageError(
                    f"`--tracking-uri` folder holds a file MLflow's client would block on or read whole: {exc}. "
                    f"Received: --tracking-uri {uri}. Expected: an mlruns/ folder of regular files (import a copy "
                    "without that run)."
                ) from None
            except OSError:
                continue


@contextlib.contextmanager
def _quiet_client() -> Iterator[None]:
    """MLflow's client without its deprecation chatter (the file store warns on every use)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
