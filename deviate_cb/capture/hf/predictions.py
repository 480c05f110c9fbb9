"""Per-sample predictions of a Hugging Face ``Trainer`` run: the model run on its evaluation set, batch by batch.

The set is ``Predictions.data`` (a ``DataLoader``, or a ``datasets.Dataset`` batched here), else the Trainer's own
evaluation ``DataLoader`` (ordered: a ``SequentialSampler``). The model runs in eval mode under ``torch.no_grad`` and
draws nothing from the random generators, so recording predictions changes nothing in the training that follows.
"""

from __future__ import annotations

import inspect
from typing import Any

from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import CollectedPredictions, PredictionCollector, write_prediction_snapshot
from deviate_cb.capture.stability.settings import Predictions
from deviate_cb.errors import UsageError

__all__ = ["TrainerPredictions", "check_trainer_predictions"]

_LABELS = ("labels", "label", "label_ids")


def check_trainer_predictions(config: Predictions, args: Any) -> None:
    """Refuse, before training, predictions that would have no set to run on.

    Raises:
        UsageError: ``Predictions(data=None)`` and the Trainer never evaluates (``eval_strategy="no"``), or
            ``every_n_epochs`` without ``data``.

    Example:
        >>> class Args:
        ...     eval_strategy = "no"
        >>> check_trainer_predictions(Predictions(), Args())  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        deviate_cb.errors.UsageError: ...
    """
    strategy = getattr(getattr(args, "eval_strategy", None), "value", getattr(args, "eval_strategy", None))
    if config.data is None and strategy in (None, "no"):
        raise UsageError(
            "DeviateCallback(predictions=...) needs an evaluation set: pass Predictions(data=<DataLoader or "
            "datasets.Dataset>), or let the Trainer evaluate (eval_strategy='epoch'). "
            f"Received: eval_strategy={strategy!r}."
        )
    if config.data is None and config.every_n_epochs:
        raise UsageError(
            "`every_n_epochs` needs `data` with the transformers Trainer: Predictions(data=..., every_n_epochs="
            f"{config.every_n_epochs}). Received: data=None."
        )


class TrainerPredictions:
    """The snapshots of one callback's predictions (the world's process zero writes them).

    Args:
        config: What to record.
        session: The run's session.
    """

    def __init__(self, config: Predictions, session: RunSession) -> None:
        self.config, self.session = config, session
        self.snapshots: list[str] = []

    def snapshot(self, model: Any, loader: Any, snapshot: str, *, epoch: int, step: int, batch_size: int = 32) -> None:
        """Run ``model`` on ``Predictions.data`` (else ``loader``, the Trainer's evaluation set); write a snapshot."""
        run = self.session.run
        if run is None or model is None or not self.session.enabled:
            return
        data = self.config.data if self.config.data is not None else loader
        if data is None:
            raise UsageError("DeviateCallback(predictions=...): the Trainer has no evaluation DataLoader to predict on")
        accepted = set(inspect.signature(model.forward).parameters)  # the inputs the model takes, read once
        collected = predict(model, _batches(data, accepted, batch_size), self.config, accepted)
        write_prediction_snapshot(run.path, collected, self.config, snapshot=snapshot, epoch=epoch, step=step)
        if snapshot not in self.snapshots:
            self.snapshots.append(snapshot)


def predict(model: Any, batches: Any, config: Predictions, accepted: set[str]) -> CollectedPredictions:
    """The model's outputs (``logits``, or ``config.output_key``) and labels over ``batches`` of tensors, each given
    the fields in ``accepted`` (the parameters of the model's ``forward``)."""
    import torch

    collector = PredictionCollector(config, to_numpy=lambda t: t.detach().float().cpu().numpy(), source="the model")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in batches:
                inputs = {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items() if k in accepted}
                inputs.pop("labels", None)
                outputs = model(**inputs)
                chosen = outputs[config.output_key] if config.output_key is not None else outputs["logits"]
                labels = next((batch[key] for key in _LABELS if key in batch), None)
                collector.add(chosen, batch, labels=labels if config.labels is None else None)
    finally:
        model.train(training)
    collected = collector.collect()
    if collected is None:
        raise UsageError("DeviateCallback(predictions=...): the evaluation set holds no samples.")
    return collected


def _batches(data: Any, accepted: set[str], batch_size: int) -> Any:
    """``data`` as batches: a ``DataLoader`` (or any iterable of dict batches) as it is; a ``datasets.Dataset`` in
    order, in batches of ``batch_size``, its columns in ``accepted`` (the model's inputs) and the labels as tensors."""
    if not hasattr(data, "column_names") or not hasattr(data, "with_format"):
        return data
    columns = [name for name in data.column_names if name in accepted or name in _LABELS]
    tensors = data.with_format("torch", columns=columns)
    return (tensors[start : start + batch_size] for start in range(0, len(tensors), batch_size))
