"""Per-sample predictions of a Lightning run: the test/predict loops' outputs, or the module run on its data.

Framework-light: torch at module level, Lightning only inside the functions that compare a module's hooks with
``LightningModule``'s own.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import torch

from deviate_cb.capture.guard import guarded
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import (
    FINAL_SNAPSHOT,
    CollectedPredictions,
    PredictionCollector,
    write_prediction_snapshot,
)
from deviate_cb.capture.stability.settings import Predictions, Weights
from deviate_cb.errors import UsageError

__all__ = ["TorchPredictions", "check_data", "check_setup"]


class TorchPredictions:
    """The snapshots of one callback's predictions (rank zero writes them).

    Args:
        config: What to record (``Predictions``).
        session: The run's session (its run directory; ``enabled`` on rank zero).
    """

    def __init__(self, config: Predictions, session: RunSession) -> None:
        self.config, self.session = config, session
        self.snapshots: list[str] = []
        self._stage_collector: Optional[PredictionCollector] = None  # set while a test/predict loop is recorded
        self._last_data_snapshot: Optional[tuple[int, CollectedPredictions]] = None  # (global step, arrays)

    def _should_record_stage(self, trainer: Any, stage: str) -> bool:
        return self.config.records_stage(stage) and self.session.enabled and trainer.world_size == 1

    def start_stage(self, trainer: Any, stage: str, dataloaders: Any) -> None:
        """A test or predict loop starts: collect its outputs (one process only)."""
        self._stage_collector = None
        if not self._should_record_stage(trainer, stage):
            return
        loaders = dataloaders if isinstance(dataloaders, (list, tuple)) else [dataloaders]
        sampler = getattr(loaders[0], "sampler", None) if loaders else None
        if isinstance(sampler, torch.utils.data.RandomSampler) and self.config.sample_ids is None:
            warnings.warn(
                f"DeviateCallback(predictions=...): the {stage} DataLoader shuffles, so sample indices will not "
                "line up across runs; use shuffle=False or Predictions(sample_ids=...).",
                stacklevel=3,
            )
        self._stage_collector = PredictionCollector(self.config, source=f"{stage}_step")

    def add_stage_outputs(self, outputs: Any, batch: Any, dataloader_idx: int, hook: str) -> None:
        """One batch's outputs of the loop; an error drops the stage's snapshot (whole or absent)."""
        collector = self._stage_collector
        if collector is not None and dataloader_idx == 0:
            with guarded(self.session, f"{hook}: predictions"):
                try:
                    collector.add(outputs, batch)
                except Exception:
                    self._stage_collector = None
                    raise

    def finish_stage(self, trainer: Any) -> None:
        """The loop ended: its snapshot (``final``), or a warning when the step returned nothing."""
        collector, self._stage_collector = self._stage_collector, None
        if collector is None:
            return
        skipped = collector.skipped
        collected = collector.collect()
        if collected is None:
            if skipped:
                warnings.warn(
                    f"DeviateCallback(predictions=...): {collector.source} returned nothing, so no predictions "
                    f"were recorded. Return the batch's logits or probabilities (or a dict with 'preds'), or "
                    "predict on a given set with Predictions(data=...).",
                    stacklevel=3,
                )
            return
        self.write(trainer, collected, FINAL_SNAPSHOT)

    def predict_on_data(self, trainer: Any, pl_module: Any, snapshot: str) -> None:
        """Run the module on ``Predictions.data`` (rank zero, eval mode, no autograd) and write a snapshot."""
        config = self.config
        if not self.session.enabled or self.session.run is None:
            return
        last = self._last_data_snapshot
        if last is not None and last[0] == trainer.global_step:  # nothing trained since: same predictions
            self.write(trainer, last[1], snapshot)
            return
        collector = PredictionCollector(config, source=_forward_name(pl_module, config))
        modes = [(module, module.training) for module in pl_module.modules()]
        pl_module.eval()
        try:
            with torch.inference_mode(), trainer.precision_plugin.predict_step_context():
                for batch_idx, batch in enumerate(config.data):
                    batch = trainer.strategy.batch_to_device(batch)
                    collector.add(_forward(pl_module, config, batch, batch_idx), batch)
        finally:
            for module, training in modes:
                module.training = training
        collected = collector.collect()
        if collected is None:
            raise UsageError(
                f"DeviateCallback(predictions=...): {collector.source} returned no predictions on "
                "Predictions.data (empty data, or the step returned None)."
            )
        self._last_data_snapshot = (trainer.global_step, collected)
        self.write(trainer, collected, snapshot)

    def write(self, trainer: Any, collected: CollectedPredictions, snapshot: str) -> None:
        if self.session.run is None:
            return
        write_prediction_snapshot(
            self.session.run.path,
            collected,
            self.config,
            snapshot=snapshot,
            epoch=trainer.current_epoch,
            step=trainer.global_step,
        )
        if snapshot not in self.snapshots:
            self.snapshots.append(snapshot)


def check_setup(
    trainer: Any, pl_module: Any, stage: str, config: Optional[Predictions], weights: Optional[Weights]
) -> None:
    """What ``setup`` refuses before any training step: shuffled ``Predictions.data``, a module that cannot predict
    on it, weights under a strategy that shards parameters; and the warning for multi-process test/predict outputs."""
    if config is not None and stage == "fit" and config.data is not None:
        sampler = getattr(config.data, "sampler", None)
        if isinstance(sampler, torch.utils.data.RandomSampler) and config.sample_ids is None:
            raise UsageError(
                "`Predictions.data` shuffles (its sampler is a RandomSampler): the sample index is the "
                "position in the set, so it must come in the same order in every run. Build the DataLoader "
                "with shuffle=False, or give each sample an id with Predictions(sample_ids=...)."
            )
        if config.final_from_data or config.every_n_epochs is not None:
            _check_can_predict(pl_module, config)
    if weights is not None and stage == "fit" and _shards_parameters(trainer.strategy):
        raise UsageError(
            f"DeviateCallback(weights=...) is not supported with {type(trainer.strategy).__name__}: it shards "
            "the parameters, and rank zero alone cannot read them. Use a strategy that keeps whole parameters "
            "on every rank (DDP, DeepSpeed stages 1-2), or weights=None."
        )
    if config is not None and config.records_stage(stage) and trainer.world_size > 1:
        warnings.warn(
            f"DeviateCallback(predictions=...): the outputs of trainer.{stage}() are not recorded with "
            f"{trainer.world_size} processes (each sees part of the data); pass Predictions(data=...) to "
            "predict on the whole set on rank zero at the end of fit.",
            stacklevel=3,
        )


def check_data(config: Predictions) -> None:
    """``Predictions.data`` as Lightning reads it: an iterable of batches, not empty, in line with whole-set groups.

    Example:
        >>> check_data(Predictions(data=torch.zeros(4, 2)))
        Traceback (most recent call last):
        ...
        TypeError: `Predictions.data` must be a DataLoader (or an iterable of batches) for Lightning. Received: ...
    """
    data = config.data
    if not hasattr(data, "__iter__") or isinstance(data, torch.Tensor):
        raise TypeError(
            "`Predictions.data` must be a DataLoader (or an iterable of batches) for Lightning. "
            f"Received: data of type {type(data).__name__}."
        )
    try:
        batches = len(data)
    except (TypeError, NotImplementedError):  # an IterableDataset, an iterable without a length
        batches = None
    if batches == 0:
        raise UsageError(
            "DeviateCallback(predictions=Predictions(data=...)): `data` holds no batches; give it the evaluation set."
        )
    samples = _sample_count(data)
    if samples is not None:
        config.check_sample_count(samples)


def _sample_count(data: Any) -> Optional[int]:
    """How many samples a DataLoader yields, when that is known without iterating it (``None`` otherwise)."""
    if not isinstance(data, torch.utils.data.DataLoader) or data.drop_last:
        return None
    if type(data.batch_sampler) is not torch.utils.data.BatchSampler:
        return None
    if not isinstance(data.sampler, torch.utils.data.SequentialSampler):
        return None
    try:
        return len(data.dataset)  # type: ignore[arg-type]
    except (TypeError, NotImplementedError):
        return None


def _has_own_predict_step(pl_module: Any) -> bool:
    import lightning.pytorch as pl

    return type(pl_module).predict_step is not pl.LightningModule.predict_step


def _check_can_predict(pl_module: Any, config: Predictions) -> None:
    """Refuse, before training, ``Predictions(data=...)`` on a module that has no way to predict on it."""
    import lightning.pytorch as pl

    if config.predict_fn is not None or _has_own_predict_step(pl_module):
        return
    if type(pl_module).forward in (pl.LightningModule.forward, torch.nn.Module.forward):
        raise UsageError(
            f"DeviateCallback(predictions=Predictions(data=...)) predicts on `data` with the module's "
            f"`predict_step` or `forward`, but {type(pl_module).__name__} defines neither (LightningModule's "
            "`forward` raises NotImplementedError): define `forward(x)` or `predict_step(batch, batch_idx)`, or "
            "pass Predictions(data=..., predict_fn=lambda module, batch: outputs)."
        )


def _shards_parameters(strategy: Any) -> bool:
    """Whether ``strategy`` keeps only shards of the parameters on each rank (FSDP, model parallel, ZeRO-3)."""
    names = {cls.__name__ for cls in type(strategy).__mro__}
    return bool(names & {"FSDPStrategy", "ModelParallelStrategy"}) or bool(getattr(strategy, "zero_stage_3", False))


def _forward_name(pl_module: Any, config: Predictions) -> str:
    if config.predict_fn is not None:
        return "Predictions.predict_fn"
    return "predict_step" if _has_own_predict_step(pl_module) else "forward"


def _forward(pl_module: Any, config: Predictions, batch: Any, batch_idx: int) -> Any:
    """The module's outputs on one batch: ``predict_fn``, else its own ``predict_step``, else ``forward(x)``."""
    if config.predict_fn is not None:
        return config.predict_fn(pl_module, batch)
    if _has_own_predict_step(pl_module):
        return pl_module.predict_step(batch, batch_idx)
    return pl_module(batch[0] if isinstance(batch, (tuple, list)) else batch)
