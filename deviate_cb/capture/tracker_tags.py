"""Live tagging: the user's own tracker runs say which replica they are, so the tracker groups them by variant.

At the start of a fit the adapters call :func:`tag_lightning_loggers` (Lightning: the Trainer's
``MLFlowLogger``, ``WandbLogger`` and ``TensorBoardLogger``) or :func:`tag_active_runs` (Keras: the MLflow run
active in the process, as ``mlflow.start_run()``, ``mlflow.keras.MlflowCallback`` or autologging leave it, and
``wandb.run``, as ``wandb.init`` and W&B's Keras callbacks use it) with :func:`live_tags`:

- in a replica of ``deviate-replicate``: ``deviate.experiment``, ``deviate.variant``, ``deviate.replica``,
  ``deviate.seed`` and ``deviate.determinism`` (the variant's request: ``true``, ``false`` or ``warn``);
- in a plain run (no ``deviate-replicate``): only ``deviate.seed`` and ``deviate.determinism``, and only those the
  callback was given (``seed=``, ``deterministic=``); nothing when it was given neither. A plain run is no
  replica of a variant, and a seed read back from the process would be a guess.

How each tracker takes them: MLflow as run tags (``set_tag``), W&B as config values
(``config.update(..., allow_val_change=True)``), TensorBoard as hyperparameters (``log_hyperparams``: the HParams
tab and Lightning's ``hparams.yaml``). Nothing imports ``mlflow``, ``wandb`` or ``tensorboard``: the loggers are
recognised by their class names and the active runs looked up only in modules the project already imported.
A tracker that refuses is the adapter's problem to record (:func:`deviate_cb.capture.guard.guarded`): training
goes on. Keras' own ``TensorBoard`` callback is out of reach (a Keras callback does not see the others).

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
