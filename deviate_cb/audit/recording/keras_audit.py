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
from deviate_cb.audit.recording.settings import write_audit_record
from deviate_cb.audit.recording.stopping import record_stop, stops_after_audit
from deviate_cb.capture.guard import guarded
from deviate_cb.capture.session import RunSession

__all__ = ["NOT_COVERED_COMPILED", "KerasAudit", "KerasFitAudit", "keras_modules", "keras_parameters"]

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


class KerasFitAudit:
    """One Keras callback's audit, as the callback drives it: started with the first fit, a step at a time, the
    record at the end (the Keras side of :class:`~deviate_cb.audit.recording.fit_audit.FitAudit`).

    Args:
        steps: The training steps to audit (``None``: no audit).
        session: The run's session (problems, the run directory).

    Example:
        >>> import tempfile
        >>> audit = KerasFitAudit(None, RunSession(tempfile.mkdtemp()))
        >>> audit.start(model=None, backend="jax", first=0); audit.recording  # audit=None: nothing started
        False
    """

    def __init__(self, steps: Optional[int], session: RunSession) -> None:
        self.steps, self.session = steps, session
        self.audit: Optional[KerasAudit] = None  # started while the audited fit runs
        self._audited = False

    @property
    def recording(self) -> bool:
        """Whether the audit runs now (the per-step hooks have work to do)."""
        return self.audit is not None

    def _should_start(self, model: Any) -> bool:
        return bool(self.steps) and not self._audited and self.session.enabled and model is not None

    def start(self, model: Any, backend: str, first: int) -> None:
        """``on_train_begin``: hook ``model`` for the first fit; ``first``: the first global step to audit."""
        if not self._should_start(model):
            return
        self._audited = True
        with guarded(self.session, "on_train_begin: audit"):
            self.audit = KerasAudit(self.steps or 0, backend, first=first)
            self.audit.start(model)

    def begin_step(self, step: int) -> None:
        if self.audit is not None:
            self.audit.batch_begin(step)

    def end_step(self, step: int, logs: Optional[Any], model: Any) -> None:
        """The step's digests; after the last audited step the record, and the fit stops unless told to go on."""
        audit, session = self.audit, self.session
        if audit is None:
            return
        with guarded(session, "on_train_batch_end: audit"):  # on the training thread: async_safe is off
            audit.batch_end(step, logs)
        if not audit.done:
            return
        self.end("on_train_batch_end")
        if stops_after_audit() and model is not None:  # deviate audit without --finish
            with guarded(session, "on_train_batch_end: audit stop"):
                if session.run is not None:
                    record_stop(session.run, self.steps or 0, "keras")
                model.stop_training = True

    def end(self, hook: str) -> None:
        """Restore the model, remove the audit's hooks and write what it recorded (also after fewer steps)."""
        audit, self.audit = self.audit, None
        if audit is None:
            return
        with guarded(self.session, f"{hook}: audit"):
            audit.stop()
        if self.session.enabled and self.session.run is not None:
            with guarded(self.session, f"{hook}: audit record"):
                write_audit_record(
                    self.session.run, audit.log, framework="keras", covered=audit.covered, not_covered=audit.not_covered
                )
