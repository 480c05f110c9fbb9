"""Live tagging: the user's own tracker runs say which replica they are, so the tracker groups them by variant.

Example:
    >>> class TensorBoardLogger:  # what Lightning's logger offers, by name
    ...     def log_hyperparams(self, params):
    ...         print(sorted(params.items()))
    >>> tag_lightning_loggers([TensorBoardLogger()], {"deviate.variant": "algo", "deviate.replica": "0"})
    [('deviate.replica', '0'), ('deviate.variant', 'algo')]
    ['TensorBoardLogger']
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["live_tags", "tag_active_runs", "tag_lightning_loggers"]


def live_tags(session: Any) -> dict[str, str]:
    """The tags of this run (see the module docstring), from a :class:`~deviate_cb.capture.session.RunSession`.

    Example:
        >>> from types import SimpleNamespace
        >>> live_tags(SimpleNamespace(context=None, seed=7, deterministic=None))
        {'deviate.seed': '7'}
    """
    ctx = session.context
    if ctx is not None:
        return {
            "deviate.experiment": ctx.experiment,
            "deviate.variant": ctx.variant,
            "deviate.replica": str(ctx.replica),
            "deviate.seed": str(ctx.seed),
            "deviate.determinism": str(ctx.deterministic).lower(),
        }
    tags = {}
    if session.seed is not None:
        tags["deviate.seed"] = str(session.seed)
    if session.deterministic is not None:
        tags["deviate.determinism"] = str(session.deterministic).lower()
    return tags


def tag_lightning_loggers(loggers: Iterable[Any], tags: Mapping[str, str]) -> list[str]:
    """Give each MLflow, W&B and TensorBoard logger of a Lightning Trainer ``tags``; return the loggers tagged."""
    tagged: list[str] = []
    if not tags:
        return tagged
    for logger in loggers:
        kinds = {cls.__name__ for cls in type(logger).__mro__}
        if "MLFlowLogger" in kinds:
            client, run_id = logger.experiment, logger.run_id  # the run is created on first use
            for key, value in tags.items():
                client.set_tag(run_id, key, value)
        elif "WandbLogger" in kinds:
            logger.experiment.config.update(dict(tags), allow_val_change=True)
        elif "TensorBoardLogger" in kinds:
            logger.log_hyperparams(dict(tags))
        else:
            continue
        tagged.append(type(logger).__name__)
    return tagged


def tag_active_runs(tags: Mapping[str, str]) -> list[str]:
    """Give the process's active MLflow run and ``wandb.run`` ``tags``, where the project already imported the
    tracker; return the trackers tagged (``mlflow``, ``wandb``).

    Example:
        >>> tag_active_runs({"deviate.seed": "1"}) if "mlflow" not in sys.modules and "wandb" not in sys.modules else []
        []
    """
    tagged: list[str] = []
    if not tags:
        return tagged
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None and getattr(mlflow, "active_run", None) is not None and mlflow.active_run() is not None:
        mlflow.set_tags(dict(tags))
        tagged.append("mlflow")
    wandb = sys.modules.get("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is not None:
        run.config.update(dict(tags), allow_val_change=True)
        tagged.append("wandb")
    return tagged
