"""PyTorch Lightning adapter: ``DeviateCallback`` captures every logged metric of a run.

Example:
    >>> import lightning as L
    >>> from deviate_cb.lightning import DeviateCallback
    >>> trainer = L.Trainer(max_epochs=1, callbacks=[DeviateCallback()], logger=False)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from typing import Any, Optional, Union

import lightning.pytorch as pl
from typing_extensions import override

from deviate_cb._lightning_tap import LightningMetricTap, tensors_to_floats
from deviate_cb.context import Deterministic
from deviate_cb.session import RunSession

__all__ = ["DeviateCallback"]


class DeviateCallback(pl.Callback):
    """Capture every metric the module logs with ``self.log``, with seeds, determinism and a fingerprint.

    Records step- and epoch-level train metrics, validation and test metrics (the sanity check is skipped)
    with global step, epoch, stage and wall time into ``metrics.parquet``. Values stay on their device until
    a flush (no per-step ``.item()``), and are written at each epoch end, on exception and at teardown, so a
    crash loses at most the current epoch. NaN and Inf are kept and flagged. Only global rank zero writes.

    Under ``deviate-replicate`` the replica's run directory, seed and determinism are used (arguments that
    disagree are ignored with a warning). Standalone, the run goes to
    ``<out_dir>/experiment=<experiment>/variant=standalone/replica=<k>/``, ``k`` the next free index.

    Args:
        out_dir: Root of the run store when standalone. Default: ``deviate_runs``.
        experiment: Experiment name when standalone. Default: ``default``.
        seed: Seed for ``random``, NumPy, torch and DataLoader workers, applied when the callback is
            created: create it before the model so that weight initialisation is seeded. ``None``: not seeded.
        deterministic: ``True`` turns deterministic algorithms and cuDNN determinism on (again at
            ``setup``, after the Trainer applied its own flags), ``"warn"`` does so with warnings only, ``False``
            or ``None`` leaves the framework's settings alone. What is in effect is verified and recorded.
        metrics: Metric names or ``fnmatch`` patterns to keep, e.g. ``["val_*", "train_loss_epoch"]``.
            Default: every metric.

    Example:
        >>> cb = DeviateCallback("runs", experiment="mlp", seed=0, deterministic=True)  # doctest: +SKIP
        >>> trainer = L.Trainer(max_epochs=5, callbacks=[cb])  # doctest: +SKIP
    """

    def __init__(
        self,
        out_dir: Union[str, os.PathLike[str], None] = None,
        *,
        experiment: Optional[str] = None,
        seed: Optional[int] = None,
        deterministic: Optional[Deterministic] = None,
        metrics: Optional[Sequence[str]] = None,
    ) -> None:
        super().__init__()
        self._session = RunSession(
            out_dir,
            experiment=experiment,
            seed=seed,
            deterministic=deterministic,
            metrics=metrics,
            framework="lightning",
            to_floats=tensors_to_floats,
        )
        self._session.apply_requested()
        self._tap = LightningMetricTap()
        self._train_epoch: Optional[tuple[int, int]] = None  # (epoch, step) awaiting late epoch values
        self._train_epoch_keys: set[str] = set()

    @property
    def run_dir(self) -> Optional[os.PathLike[str]]:
        """The run directory once the run has started (``None`` before, and on non-zero ranks)."""
        return self._session.run.path if self._session.run is not None else None

    # -- lifecycle -----------------------------------------------------------------------------------------
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._session.enabled = trainer.is_global_zero
        # The Trainer applied its own `deterministic` flag in its constructor; a requested switch wins.
        self._session.apply_requested(seed=False)

    def _start(self, trainer: pl.Trainer) -> None:
        if trainer.is_global_zero:
            self._session.open()

    def _fingerprint(self, trainer: pl.Trainer, dataloaders: Any) -> None:
        if trainer.is_global_zero:  # the DataLoaders exist only once the stage starts
            self._session.write_fingerprint(
                dataloader_workers=_num_workers(dataloaders), extra={"lightning": _trainer_facts(trainer)}
            )

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start(trainer)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fingerprint(trainer, trainer.train_dataloader)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn != "fit":
            self._start(trainer)
            self._fingerprint(trainer, trainer.val_dataloaders)

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start(trainer)
        self._fingerprint(trainer, trainer.test_dataloaders)

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if trainer.is_global_zero:
            self._session.close(error=exception)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if trainer.is_global_zero:
            self._warn_if_nothing_kept()
            self._session.close()

    # -- capture -------------------------------------------------------------------------------------------
    def _record(self, trainer: pl.Trainer, stage: str, scope: str, items: list[tuple[str, Any]]) -> None:
        if items and self._session.enabled:
            self._session.recorder.update_many(
                step=trainer.global_step,
                epoch=trainer.current_epoch,
                stage=stage,
                scope=scope,
                items=items,
                wall_time=time.time(),
            )

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._session.enabled:  # the hot path: a few microseconds, no device sync
            epoch_loop = trainer.fit_loop.epoch_loop
            items = self._tap.step_values("train", epoch_loop._results)
            if items:
                self._session.recorder.update_many(
                    step=epoch_loop.global_step,
                    epoch=trainer.current_epoch,
                    stage="train",
                    scope="step",
                    items=items,
                    wall_time=time.time(),
                )

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._take_late_train_epoch_values(trainer)

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        keys: set[str] = set()
        items = self._tap.epoch_values("train", trainer._results, keys=keys)  # every rank: may all-reduce
        self._record(trainer, "train", "epoch", items)
        self._train_epoch, self._train_epoch_keys = (trainer.current_epoch, trainer.global_step), keys
        self._session.flush()

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._take_late_train_epoch_values(trainer)

    def _take_late_train_epoch_values(self, trainer: pl.Trainer) -> None:
        """Epoch values the module logged in its own ``on_train_epoch_end``, after this callback's hook."""
        if self._train_epoch is None:
            return
        epoch, step = self._train_epoch
        self._train_epoch = None
        items = self._tap.late_epoch_values(
            trainer.fit_loop.epoch_loop._results, self._train_epoch_keys, trainer.callback_metrics
        )
        if items and self._session.enabled:
            self._session.recorder.update_many(
                step=step, epoch=epoch, stage="train", scope="epoch", items=items, wall_time=time.time()
            )
            self._session.flush()

    @override
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._session.enabled and not trainer.sanity_checking:
            self._record(trainer, "val", "step", self._tap.step_values("val", trainer._results))

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._record(trainer, "val", "epoch", self._tap.epoch_values("val", trainer._results))
        if trainer.state.fn != "fit":
            self._session.flush()

    @override
    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._session.enabled:
            self._record(trainer, "test", "step", self._tap.step_values("test", trainer._results))

    @override
    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._record(trainer, "test", "epoch", self._tap.epoch_values("test", trainer._results))
        self._session.flush()

    # -- checkpointing -------------------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        return self._session.state_dict()

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._session.load_state_dict(state_dict)

    def _warn_if_nothing_kept(self) -> None:
        seen = self._session.recorder.seen_names
        if seen and not any(seen.values()):
            warnings.warn(
                f"DeviateCallback(metrics={self._session.recorder.patterns!r}) matched none of the logged metrics "
                f"{sorted(seen)}; nothing was recorded.",
                stacklevel=2,
            )


def _num_workers(dataloaders: Any) -> Optional[int]:
    loaders = dataloaders if isinstance(dataloaders, (list, tuple)) else [dataloaders]
    workers = [getattr(loader, "num_workers", None) for loader in loaders]
    known = [w for w in workers if isinstance(w, int)]
    return max(known) if known else None


def _trainer_facts(trainer: pl.Trainer) -> dict[str, Any]:
    return {
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "precision": str(trainer.precision),
        "num_devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes,
        "world_size": trainer.world_size,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
    }
