"""Live tagging: the user's own tracker runs say which replica they are, so the tracker groups them by variant.

TensorBoard keeps the first hyperparameters a run logs, so ours go in with the user's, after them, never before.

Example:
    >>> class TensorBoardLogger:  # what Lightning's logger offers, by name
    ...     def log_hyperparams(self, params, metrics=None):
    ...         print(list(params.items()))
    ...     def save(self):
    ...         pass
    >>> logger = TensorBoardLogger()
    >>> tag_lightning_loggers([logger], {"deviate.variant": "algo", "deviate.replica": "0"})
    ['TensorBoardLogger']
    >>> logger.log_hyperparams({"lr": 0.1})  # what Lightning logs of the model's, just after on_fit_start
    [('lr', 0.1), ('deviate.variant', 'algo'), ('deviate.replica', '0')]
    >>> flush_pending_tags([logger])  # nothing was waiting any more
    []
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Optional

__all__ = ["flush_pending_tags", "live_tags", "record_tracker_runs", "tag_active_runs", "tag_lightning_loggers"]

#: The instance attribute of a TensorBoard logger that holds our tags until the user's hyperparameters are logged.
_PENDING = "_deviate_pending_tags"


def live_tags(session: Any, lightning_seed: Optional[str] = None) -> dict[str, str]:
    """The tags of this run (see the module docstring), from a :class:`~deviate_cb.capture.session.RunSession`;
    ``lightning_seed`` (``PL_GLOBAL_SEED``: what Lightning printed as "Seed set to N"), where it is not the
    replica's seed, is ``deviate.seed_everything``: the project's own ``seed_everything`` call, whose seed a replica
    maps from its own (the seed the replica's generators ran from).

    Example:
        >>> from types import SimpleNamespace
        >>> live_tags(SimpleNamespace(context=None, seed=7, deterministic=None))
        {'deviate.seed': '7'}
        >>> live_tags(SimpleNamespace(context=None, seed=7, deterministic=None), lightning_seed="2235285516")
        {'deviate.seed': '7', 'deviate.seed_everything': '2235285516'}
    """
    ctx = session.context
    if ctx is not None:
        tags = {
            "deviate.experiment": ctx.experiment,
            "deviate.variant": ctx.variant,
            "deviate.replica": str(ctx.replica),
            "deviate.seed": str(ctx.seed),
            "deviate.determinism": str(ctx.deterministic).lower(),
        }
    else:
        tags = {}
        if session.seed is not None:
            tags["deviate.seed"] = str(session.seed)
        if session.deterministic is not None:
            tags["deviate.determinism"] = str(session.deterministic).lower()
    if lightning_seed is not None and lightning_seed != tags.get("deviate.seed"):
        tags["deviate.seed_everything"] = lightning_seed
    return tags


def tag_lightning_loggers(loggers: Iterable[Any], tags: Mapping[str, str], session: Any = None) -> list[str]:
    """Give each MLflow, W&B and TensorBoard logger of a Lightning Trainer ``tags``; return the loggers tagged.
    With ``session``, the MLflow and W&B runs are recorded as the replica's ``tracker_runs``.

    A TensorBoard logger gets them with the next hyperparameters logged (Lightning logs the model's just after
    ``on_fit_start``); :func:`flush_pending_tags` logs them alone where none were.
    """
    tagged: list[str] = []
    links: list[dict[str, Any]] = []
    for logger in loggers:
        kinds = {cls.__name__ for cls in type(logger).__mro__}
        if "MLFlowLogger" in kinds:
            client, run_id = logger.experiment, logger.run_id  # the run is created on first use
            for key, value in tags.items():
                client.set_tag(run_id, key, value)
            links.append(_mlflow_link(client.tracking_uri, run_id, logger.experiment_id))
        elif "WandbLogger" in kinds:
            if tags:
                logger.experiment.config.update(dict(tags), allow_val_change=True)
            links.append(_wandb_link(logger.experiment))
        elif "TensorBoardLogger" in kinds:
            if tags:
                _after_user_hyperparams(logger, dict(tags))
        else:
            continue
        tagged.append(type(logger).__name__)
    record_tracker_runs(session, links)
    return tagged if tags else []


def record_tracker_runs(session: Any, links: list[dict[str, Any]]) -> None:
    """Record ``links`` (the user's MLflow and W&B runs this replica logged to) as ``tracker_runs`` in ``run.json``,
    where ``session`` records (rank zero, its run open): ``deviate export`` attaches the study to them."""
    if session is None or not links or not getattr(session, "enabled", False) or session.run is None:
        return
    from deviate_cb.store.manifest import CaptureRecord

    session.run.record(CaptureRecord(tracker_runs=links))


def _mlflow_link(uri: Any, run_id: Any, experiment_id: Any) -> dict[str, Any]:
    return {"tracker": "mlflow", "uri": str(uri), "run_id": str(run_id), "experiment_id": str(experiment_id)}


def _wandb_link(run: Any) -> dict[str, Any]:
    fields = {"run_id": getattr(run, "id", None), "project": getattr(run, "project", None),
              "entity": getattr(run, "entity", None) or None, "group": getattr(run, "group", None) or None}  # fmt: skip
    return {"tracker": "wandb", **{k: str(v) for k, v in fields.items() if v is not None}}


def flush_pending_tags(loggers: Iterable[Any]) -> list[str]:
    """Log the tags still waiting on a TensorBoard logger (``Trainer(enable_autolog_hparams=False)``: Lightning
    neither logged hyperparameters nor saved the logger); return the loggers."""
    flushed: list[str] = []
    for logger in loggers:
        if _PENDING in getattr(logger, "__dict__", {}):
            logger.log_hyperparams({})  # the waiting tags alone
            flushed.append(type(logger).__name__)
    return flushed


def _after_user_hyperparams(logger: Any, tags: dict[str, str]) -> None:
    """Have the logger's next ``log_hyperparams`` log ``tags`` after the user's params, once; a ``save`` before
    any (the model logs none: ``save_hyperparameters(logger=False)``) logs them alone first, into hparams.yaml."""
    state = vars(logger)
    if _PENDING in state:
        state[_PENDING].update(tags)
        return
    state[_PENDING] = tags
    own_log, own_save = logger.log_hyperparams, logger.save

    def log_hyperparams(params: Any, *args: Any, **kwargs: Any) -> Any:
        pending = _unwrap(state)
        given = vars(params) if isinstance(params, argparse.Namespace) else dict(params or {})
        return own_log({**given, **{k: v for k, v in pending.items() if k not in given}}, *args, **kwargs)

    def save(*args: Any, **kwargs: Any) -> Any:
        own_log(_unwrap(state))
        return own_save(*args, **kwargs)

    logger.log_hyperparams, logger.save = log_hyperparams, save


def _unwrap(state: dict[str, Any]) -> dict[str, str]:
    """The class's own ``log_hyperparams`` and ``save`` again; the tags that were waiting."""
    state.pop("log_hyperparams", None)
    state.pop("save", None)
    pending: dict[str, str] = state.pop(_PENDING, {})
    return pending


def tag_active_runs(tags: Mapping[str, str], session: Any = None) -> list[str]:
    """Give the process's active MLflow run and ``wandb.run`` ``tags``, where the project already imported the
    tracker; return the trackers tagged (``mlflow``, ``wandb``). With ``session``, those runs are recorded as the
    replica's ``tracker_runs``.

    Example:
        >>> tag_active_runs({"deviate.seed": "1"}) if "mlflow" not in sys.modules and "wandb" not in sys.modules else []
        []
    """
    tagged: list[str] = []
    links: list[dict[str, Any]] = []
    mlflow: Any = sys.modules.get("mlflow")
    active = mlflow.active_run() if mlflow is not None and getattr(mlflow, "active_run", None) is not None else None
    if active is not None:
        if tags:
            mlflow.set_tags(dict(tags))
            tagged.append("mlflow")
        links.append(_mlflow_link(mlflow.get_tracking_uri(), active.info.run_id, active.info.experiment_id))
    wandb = sys.modules.get("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is not None:
        if tags:
            run.config.update(dict(tags), allow_val_change=True)
            tagged.append("wandb")
        links.append(_wandb_link(run))
    record_tracker_runs(session, links)
    return tagged
