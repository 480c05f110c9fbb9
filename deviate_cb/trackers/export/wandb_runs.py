"""``deviate export wandb``: a study as Weights & Biases runs, grouped as W&B groups them.

Example:
    >>> run_id("0123456789abcdef0123", "fedcba9876543210fedc")
    'w-06f66324baf14e22'
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError, require
from deviate_cb.trackers.export.replicas import ExportSummary, ReplicaRun, StudyExport, answers_text, headline_numbers

__all__ = ["DEFAULT_FOLDER", "check_folder", "export_to_wandb", "run_id"]

DEFAULT_FOLDER = ".wandb-export"


def run_id(key: str, version: str) -> str:
    """The W&B run id of one export of a run: stable while the run is unchanged."""
    return "w-" + hashlib.sha1(f"{key}\0{version}".encode()).hexdigest()[:16]


def check_folder(folder: Optional[str], study_dir: Path, mode: str) -> Path:
    """Where W&B writes its run folders (default ``<study>/.wandb-export``): created and writable, else a one-line
    :class:`UsageError`; online, W&B must also have an API key (``wandb login``)."""
    wandb = require("wandb", "wandb")
    target = Path(folder) if folder else study_dir / DEFAULT_FOLDER
    if not folder and target.is_symlink():  # the study's own folder: a link there was planted, not chosen
        raise UsageError(
            f"`--wandb-dir` defaults to the study's own folder {str(target)!r}, but that is a symbolic link "
            f"deviate-cb did not make: nothing is written through it. Remove the link, or pass --wandb-dir "
            f"explicitly. Received: DIR={study_dir}."
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / f".deviate-write-check-{os.getpid()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"`--wandb-dir` must be a folder that can be written: {os.strerror(exc.errno or 0) or exc}. "
            f"Received: --wandb-dir={target}."
        ) from None
    if mode == "online":
        try:
            wandb.Api(timeout=20).viewer  # noqa: B018 (raises without an API key or a reachable server)
        except Exception as exc:
            text = " ".join(str(exc).split())[:300]
            raise UsageError(
                f"`--mode online` needs a W&B account this machine is logged in to (`wandb login`) and a reachable "
                f"server: {text}. Received: --mode online. Use --mode offline and `wandb sync` later."
            ) from None
    return target.resolve()


def export_to_wandb(
    export: StudyExport,
    *,
    folder: Path,
    project: str,
    entity: Optional[str] = None,
    mode: str = "offline",
    page: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
    timeout_s: Optional[float] = None,
) -> ExportSummary:
    """Write ``export`` to W&B (see the module docstring); ``folder`` comes from :func:`check_folder`.

    Offline (the default) makes no network call; online, ``timeout_s`` bounds each run's start (W&B's
    ``init_timeout``; its own default is 90 s).
    """
    wandb = require("wandb", "wandb")
    summary = ExportSummary()
    common: dict[str, Any] = {"project": project, "entity": entity, "mode": mode, "dir": str(folder)}
    if timeout_s is not None:
        common["settings_init_timeout"] = timeout_s
    for experiment in export.experiments:
        numbers = headline_numbers(export.study, experiment)
        runs = [r for r in export.runs if r.experiment == experiment]
        counted = sum(1 for r in runs if r.status == "completed")
        study_version = hashlib.sha1(repr((sorted(numbers.items()), counted)).encode()).hexdigest()[:20]
        parent = run_id(export.study_key(experiment), "study")  # one study run: each change a session of it
        marker = folder / f".deviate-study-{parent}-{study_version}"
        if not marker.exists():
            run = _init(wandb, common, id=parent, group=experiment, job_type="study",
                        name=f"{experiment} (deviate study)", notes=answers_text(export, experiment),
                        config={"deviate.role": "study", "deviate.study_dir": str(export.directory),
                                "deviate.experiment": experiment, "deviate.replicas": len(runs),
                                "deviate.replicas_completed": counted},
                        resume="allow")  # fmt: skip
            run.summary.update(numbers)
            if page is not None:
                run.log({"deviate_report": wandb.Html(page, inject=False)}, step=counted)
            run.finish(exit_code=0 if counted else 1)
            _touch(marker)
        summary.parents[experiment] = parent
        for replica in (r for r in export.runs if r.experiment == experiment):
            rid = run_id(replica.key, replica.version)
            action = "unchanged" if _written(folder, rid) else "exported"
            if action == "exported":
                _replica(wandb, common, replica, rid)
            summary.replicas.append((action, replica.experiment, replica.variant, replica.replica, rid))
            if progress is not None:
                progress(f"{action}: experiment={replica.experiment} variant={replica.variant} "
                         f"replica={replica.replica} ({replica.status}) -> run {rid}")  # fmt: skip
    return summary


def _replica(wandb: Any, common: Mapping[str, Any], replica: ReplicaRun, rid: str) -> None:
    try:
        histories = replica.histories()
    except (OSError, ValueError, UsageError) as exc:  # a damaged metrics file: the study's warning named it
        histories = {}
        replica = dataclasses.replace(replica, tags={**replica.tags, "deviate.metrics_unreadable": str(exc)[:300]})
    config = {**replica.params, **replica.tags, "deviate.role": "replica"}
    run = _init(wandb, common, id=rid, group=replica.experiment, job_type=replica.variant, name=replica.name,
                config=config, tags=["deviate", replica.status])  # fmt: skip
    steps: dict[int, dict[str, Any]] = {}
    for key, points in histories.items():
        for point in points:
            row = steps.setdefault(point.step, {})
            row[key] = point.value
            row["_timestamp"] = max(row.get("_timestamp", 0.0), point.wall_time)
    for step in sorted(steps):
        run.log(steps[step], step=step)
    run.summary.update({"deviate.status": replica.status})
    run.finish(exit_code=0 if replica.status == "completed" else 1)


def _touch(path: Path) -> None:
    """Create the empty file ``path`` (a study version written), never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    os.close(os.open(path, flags, 0o600))


def _init(wandb: Any, common: Mapping[str, Any], resume: str = "never", **fields: Any) -> Any:
    given = dict(common)
    timeout = given.pop("settings_init_timeout", None)
    bounded = {} if timeout is None else {"init_timeout": timeout}
    settings = wandb.Settings(
        silent=True, console="off", x_disable_stats=True, disable_git=True, disable_code=True,
        x_disable_machine_info=True, disable_job_creation=True, **bounded,
    )  # fmt: skip
    return wandb.init(**given, **fields, reinit="create_new", resume=resume, settings=settings)


def _written(folder: Path, rid: str) -> bool:
    """Whether a run folder of run ``rid`` is already there (``offline-run-<time>-<id>`` or ``run-<time>-<id>``)."""
    base = folder / "wandb"
    return base.is_dir() and any(base.glob(f"*run-*-{rid}"))
