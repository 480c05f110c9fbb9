"""The audit of a Keras 3 model during ``fit``: what each backend lets a callback see of a training step.

Example:
    >>> KerasAudit(steps=3, backend="jax").covered
    ('loss', 'parameter')
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from deviate_cb.audit.recording.digest import numpy_pack
from deviate_cb.audit.recording.log import DEFAULT_VALUES_MAX, KINDS, AuditLog

__all__ = ["NOT_COVERED_COMPILED", "KerasAudit", "keras_modules", "keras_parameters"]

NOT_COVERED_COMPILED = (
    "input batches, layer outputs and gradients: fit runs a compiled train step on this backend (tf.function, "
    "jax.jit) that a callback cannot look into"
)


def keras_modules(model: Any) -> list[tuple[str, Any]]:
    """Every layer of ``model`` (itself included) with its Keras path, for forward hooks (torch backend)."""
    return [(getattr(layer, "path", None) or layer.name, layer) for layer in model._flatten_layers(include_self=True)]


def keras_parameters(model: Any) -> list[tuple[str, Optional[str], Any]]:
    """``(path, owning layer's path, torch parameter)`` of every trainable variable (torch backend)."""
    return [(v.path, v.path.rpartition("/")[0] or None, v.value) for v in model.trainable_variables]


class KerasAudit:
    """The first ``steps`` training steps of a Keras model on ``backend`` (see docs/design/audit.md)."""

    def __init__(self, steps: int, backend: str, *, values_max: int = DEFAULT_VALUES_MAX, first: int = 0) -> None:
        self.backend = backend
        self.first = first  # global steps before it are not audited (a resumed fit that trains an epoch again)
        self.values_max = values_max
        self._torch: Any = None
        self._log = AuditLog(steps)
        self._model: Any = None
        self._wrapped: dict[str, Any] = {}
        self._step = 0  # the global step of the batch about to run (batch_begin)

    @property
    def covered(self) -> tuple[str, ...]:
        if self.backend == "torch":
            return KINDS
        return ("loss", "parameter")

    @property
    def not_covered(self) -> str:
        return "" if self.backend == "torch" else NOT_COVERED_COMPILED

    @property
    def log(self) -> AuditLog:
        return self._torch.log if self._torch is not None else self._log

    @property
    def done(self) -> bool:
        return self.log.done

    def start(self, model: Any) -> None:
        """Hook ``model`` (torch backend: hooks and wrappers; other backends need nothing here)."""
        self._model = model
        if self.backend != "torch":
            return
        from deviate_cb.audit.recording.hooks import TorchAudit

        self._torch = TorchAudit(self.log.steps, values_max=self.values_max)
        self._torch.attach(keras_modules(model), keras_parameters(model))
        self._wrap("train_step", self._train_step)
        if hasattr(model, "_compute_loss"):
            self._wrap("_compute_loss", self._compute_loss)

    def stop(self) -> None:
        """Restore what was wrapped and remove the hooks; what was recorded stays in :attr:`log`."""
        model, self._model = self._model, None
        for name in self._wrapped:
            if model is not None and name in vars(model):
                delattr(model, name)
        self._wrapped.clear()
        if self._torch is not None:
            self._torch.detach()

    def batch_begin(self, step: int) -> None:
        """Before a training step: its global step number (the rows' ``step``; a resumed fit starts past 0)."""
        self._step = step

    def batch_end(self, step: int, logs: Optional[Any]) -> None:
        """After a training step on TensorFlow or JAX: digest the reported loss and every trainable variable."""
        if self.backend == "torch" or self.done or self._model is None or step < self.first:
            return
        import keras

        sync = getattr(self._model, "jax_state_sync", None)
        if callable(sync):  # JAX keeps the training state apart from the variables; bring them up to date
            sync()
        self._log.begin_step(step)
        rows = []
        loss = (logs or {}).get("loss")
        if loss is not None:
            value = np.asarray(keras.ops.convert_to_numpy(loss), dtype=np.float64)
            rows.append(self._add("loss", "loss", None, value))
        for variable in self._model.trainable_variables:
            array = np.asarray(keras.ops.convert_to_numpy(variable))
            rows.append(self._add("parameter", variable.path, variable.path.rpartition("/")[0] or None, array))
        self._log.end_step(rows)

    def _add(self, kind: str, name: str, module: Optional[str], array: np.ndarray) -> np.ndarray:
        row = numpy_pack(array, self.values_max)
        self._log.add(kind, name, module, str(array.dtype), array.shape, int(array.size), int(row.size))
        return row

    def _wrap(self, name: str, replacement: Any) -> None:
        self._wrapped[name] = getattr(self._model, name)
        setattr(self._model, name, replacement)

    def _train_step(self, data: Any) -> Any:
        audit, original = self._torch, self._wrapped["train_step"]
        if audit is None or audit.done or self._step < self.first:
            return original(data)
        audit.begin_step(self._step, data)
        self._step += 1  # steps_per_execution > 1: the next call is the next step
        result = original(data)
        audit.end_step()
        return result

    def _compute_loss(self, *args: Any, **kwargs: Any) -> Any:
        loss = self._wrapped["_compute_loss"](*args, **kwargs)
        if self._torch is not None and kwargs.get("training", True):
            self._torch.record_loss(loss)
        return loss
