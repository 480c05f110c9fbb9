"""Add a ``DeviateCallback`` to every Lightning ``Trainer``, every Keras ``fit``/``evaluate`` and every Hugging Face
``Trainer`` (its subclasses too: TRL's, a project's own) of a replica."""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import sys
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.capture.resume_state import RESUME_FROM_ENV

__all__ = [
    "HF_TRAINER_MODULE",
    "KERAS_MODEL_MODULE",
    "TRAINER_MODULE",
    "install_hf_injection",
    "install_keras_injection",
    "install_trainer_injection",
    "keras_callbacks_with",
    "patch_hf_trainer",
    "patch_keras_model",
    "patch_trainer_class",
    "with_callback",
]

TRAINER_MODULE = "lightning.pytorch.trainer.trainer"
KERAS_MODEL_MODULE = "keras.src.models.model"
HF_TRAINER_MODULE = "transformers.trainer"
_MARKER = "__deviate_injects_callback__"


def install_trainer_injection(callback_class: Optional[type] = None, default_root_dir: Optional[str] = None) -> None:
    """Patch Lightning's ``Trainer`` as soon as it is imported (now, if it already is).

    Args:
        callback_class: The callback class to add; default ``deviate_cb.lightning.DeviateCallback``.
        default_root_dir: The ``default_root_dir`` of every Trainer whose project sets none (the replica's run
            directory, so ``lightning_logs/`` and default checkpoints of replicas never collide).

    Example:
        >>> install_trainer_injection()  # in a replica, before the user's module is imported  # doctest: +SKIP
    """
    when_imported(TRAINER_MODULE, lambda module: patch_trainer_class(module.Trainer, callback_class, default_root_dir))


def patch_trainer_class(
    trainer_cls: type, callback_class: Optional[type] = None, default_root_dir: Optional[str] = None
) -> None:
    """Wrap ``trainer_cls.__init__`` so that every instance gets one callback of ``callback_class`` (idempotent).

    With ``default_root_dir``, a Trainer created without one (or with ``None``, as LightningCLI passes it when
    its config has none) gets that directory.

    Example:
        >>> class Trainer:
        ...     def __init__(self, *, callbacks=None):
        ...         self.callbacks = callbacks
        >>> class Marker:
        ...     pass
        >>> patch_trainer_class(Trainer, Marker)
        >>> [type(c).__name__ for c in Trainer().callbacks]
        ['Marker']
        >>> mine = Marker()
        >>> Trainer(callbacks=[mine]).callbacks == [mine]
        True
    """
    original = getattr(trainer_cls, "__init__")  # noqa: B009 (the class attribute, not an instance's)
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        cls = callback_class or _default_callback_class()
        if cls is not None:
            kwargs["callbacks"] = with_callback(kwargs.get("callbacks"), cls)
        if default_root_dir is not None and kwargs.get("default_root_dir") is None:
            kwargs["default_root_dir"] = default_root_dir
        original(self, *args, **kwargs)

    setattr(__init__, _MARKER, True)
    setattr(trainer_cls, "__init__", __init__)  # noqa: B010
    fit = getattr(trainer_cls, "fit", None)
    if callable(fit) and not getattr(fit, _MARKER, False):
        setattr(trainer_cls, "fit", _resuming_fit(fit))  # noqa: B010


_resumed: list[str] = []  # the checkpoint this process's first fit resumed from (one fit resumes)


def _resuming_fit(original: Callable[..., Any], parameter: str = "ckpt_path") -> Callable[..., Any]:
    """``Trainer.fit`` (or a Hugging Face ``Trainer.train``, ``parameter="resume_from_checkpoint"``) that resumes from
    ``DEVIATE_RESUME_FROM`` (the checkpoint given as ``parameter``, keyword or positional) once."""
    try:
        position: Optional[int] = list(inspect.signature(original).parameters).index(parameter) - 1
    except (TypeError, ValueError):
        position = None

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.environ.get(RESUME_FROM_ENV, "")
        if path and not _resumed:
            _resumed.append(path)
            if position is not None and len(args) > position:
                args = (*args[:position], path, *args[position + 1 :])
            else:
                kwargs[parameter] = path
        return original(self, *args, **kwargs)

    setattr(fit, _MARKER, True)
    return fit


def with_callback(callbacks: Any, callback_class: type) -> Any:
    """Return ``callbacks`` with a new ``callback_class()`` appended, unless it already holds an instance.

    ``callbacks`` may be ``None``, a single callback or an iterable of callbacks (Lightning accepts all three);
    it is returned unchanged when it already holds one.

    Example:
        >>> class CB:
        ...     pass
        >>> [type(c).__name__ for c in with_callback(None, CB)]
        ['CB']
        >>> first = CB()
        >>> with_callback(first, CB) is first
        True
    """
    if callbacks is None:
        return [callback_class()]
    one = not isinstance(callbacks, Iterable) or _is_callback_like(callbacks)
    existing = [callbacks] if one else list(callbacks)
    if any(isinstance(item, callback_class) for item in existing):
        return callbacks
    return [*existing, callback_class()]


def _is_callback_like(obj: Any) -> bool:
    # A Lightning Callback is not iterable, but a user's subclass might be: anything with hooks is one callback.
    return hasattr(obj, "on_train_start") or hasattr(obj, "state_key")


# -- Keras ----------------------------------------------------------------------------------------------------
def install_keras_injection(callback_class: Optional[type] = None) -> None:
    """Patch ``keras.Model.fit``/``evaluate`` as soon as Keras is imported (now, if it already is).

    Args:
        callback_class: The callback class to add; default ``deviate_cb.keras.DeviateCallback``.

    Example:
        >>> install_keras_injection()  # in a replica, before the user's module is imported  # doctest: +SKIP
    """
    when_imported(KERAS_MODEL_MODULE, lambda module: patch_keras_model(module.Model, callback_class))


def patch_keras_model(model_cls: type, callback_class: Optional[type] = None) -> None:
    """Wrap ``model_cls.fit`` and ``model_cls.evaluate`` so that each call has one ``callback_class`` (idempotent).

    Example:
        >>> class Model:
        ...     def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None):
        ...         return callbacks
        ...     def evaluate(self, x=None, y=None, callbacks=None, **kwargs):
        ...         return callbacks
        >>> class Marker:
        ...     pass
        >>> patch_keras_model(Model, Marker)
        >>> model = Model()
        >>> fitted = model.fit([1], [2], 4, 1, 0, [])  # positional callbacks
        >>> [type(c).__name__ for c in fitted], model.evaluate()[0] is fitted[0]  # evaluate reuses it
        (['Marker'], True)
    """
    for name in ("fit", "evaluate"):
        original = getattr(model_cls, name)
        if not getattr(original, _MARKER, False):
            setattr(model_cls, name, _keras_wrapper(original, name, callback_class))


def _keras_wrapper(original: Callable[..., Any], name: str, callback_class: Optional[type]) -> Callable[..., Any]:
    try:
        parameters = list(inspect.signature(original).parameters)
        position: Optional[int] = parameters.index("callbacks") - 1  # without `self`
    except (TypeError, ValueError):
        position = None

    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not (name == "evaluate" and kwargs.get("_use_cached_eval_dataset")):  # fit's validation pass
            cls = callback_class or _default_callback_class("deviate_cb.keras", f"Model.{name}()")
            if cls is not None:
                if position is not None and len(args) > position:
                    given = keras_callbacks_with(self, args[position], cls)
                    args = (*args[:position], given, *args[position + 1 :])
                else:
                    given = kwargs["callbacks"] = keras_callbacks_with(self, kwargs.get("callbacks"), cls)
                if name == "fit":  # --resume-at: the callback finds the fit's BackupAndRestore before it restores
                    every = list(given.callbacks if _is_callback_list(given) else given if isinstance(
                        given, (list, tuple)) else [given])  # fmt: skip
                    for item in every:
                        prepare = getattr(item, "prepare_fit", None) if isinstance(item, cls) else None
                        if callable(prepare):
                            prepare(every)
        return original(self, *args, **kwargs)

    setattr(method, _MARKER, True)
    return method


_model_callbacks: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def keras_callbacks_with(model: Any, callbacks: Any, callback_class: type) -> Any:
    """``callbacks`` for a Keras ``fit``/``evaluate`` of ``model``, holding exactly one ``callback_class``.

    A callback of that class already there is kept (and remembered as the model's); otherwise the model's
    remembered one (from an earlier call) or a new one is appended. ``callbacks`` may be ``None``, one
    callback, a list or tuple, or a ``CallbackList``; a list is returned (Keras inspects list items for
    ``async_safe``), or the ``CallbackList`` itself.

    Example:
        >>> class CB:
        ...     pass
        >>> class Model:
        ...     pass
        >>> model, other = Model(), object()
        >>> first = keras_callbacks_with(model, [other], CB)
        >>> first[0] is other and type(first[1]) is CB, keras_callbacks_with(model, None, CB) == [first[1]]
        (True, True)
    """
    is_list_object = callbacks is not None and not isinstance(callbacks, (list, tuple)) and _is_callback_list(callbacks)
    if callbacks is None:
        existing: list[Any] = []
    elif is_list_object:
        existing = list(callbacks.callbacks)
    elif isinstance(callbacks, (list, tuple)):
        existing = list(callbacks)
    else:
        existing = [callbacks]
    for item in existing:
        if isinstance(item, callback_class):
            _remember(model, item)
            return callbacks
    callback = _remembered(model)
    if not isinstance(callback, callback_class):
        callback = callback_class()
        _remember(model, callback)
    if is_list_object:
        callbacks.callbacks.append(callback)
        if getattr(callbacks, "model", None) is not None and hasattr(callback, "set_model"):
            callback.set_model(callbacks.model)
        return callbacks
    return [*existing, callback]


def _is_callback_list(obj: Any) -> bool:
    return isinstance(getattr(obj, "callbacks", None), list) and type(obj).__name__ == "CallbackList"


def _remember(model: Any, callback: Any) -> None:
    with contextlib.suppress(TypeError):  # neither hashable nor weakly referenceable: no reuse across calls
        _model_callbacks[model] = callback


def _remembered(model: Any) -> Any:
    try:
        return _model_callbacks.get(model)
    except TypeError:
        return None


# -- Hugging Face ---------------------------------------------------------------------------------------------
def install_hf_injection(callback_class: Optional[type] = None) -> None:
    """Patch ``transformers.Trainer`` as soon as transformers defines it (now, if it already has).

    Args:
        callback_class: The callback class to add; default ``deviate_cb.transformers.DeviateCallback``.

    Example:
        >>> install_hf_injection()  # in a replica, before the user's module is imported  # doctest: +SKIP
    """
    when_imported(HF_TRAINER_MODULE, lambda module: patch_hf_trainer(module.Trainer, callback_class))


def patch_hf_trainer(trainer_cls: type, callback_class: Optional[type] = None) -> None:
    """Wrap ``trainer_cls.__init__`` so that every instance ends its construction with one ``callback_class``
    (idempotent). Subclasses (TRL's ``SFTTrainer``, ``Seq2SeqTrainer``, a project's own) call it through ``super()``;
    the callback is added once construction is done, whatever the subclass passed its ``callbacks`` as.

    Example:
        >>> class Handler:
        ...     def __init__(self):
        ...         self.callbacks = []
        >>> class Trainer:
        ...     def __init__(self, callbacks=None):
        ...         self.callback_handler = Handler()
        ...         self.callback_handler.callbacks.extend(callbacks or [])
        ...     def add_callback(self, callback):
        ...         self.callback_handler.callbacks.append(callback)
        >>> class Sub(Trainer):
        ...     def __init__(self, **kwargs):
        ...         super().__init__(**kwargs)
        >>> class Marker:
        ...     pass
        >>> patch_hf_trainer(Trainer, Marker)
        >>> [type(c).__name__ for c in Sub().callback_handler.callbacks]
        ['Marker']
        >>> mine = Marker()
        >>> Sub(callbacks=[mine]).callback_handler.callbacks == [mine]
        True
    """
    original = getattr(trainer_cls, "__init__")  # noqa: B009 (the class attribute, not an instance's)
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        cls = callback_class or _default_callback_class("deviate_cb.transformers", "the transformers Trainer")
        handler = getattr(self, "callback_handler", None)
        present = getattr(handler, "callbacks", None) or []
        if cls is not None and not any(isinstance(item, cls) for item in present):
            self.add_callback(cls())

    setattr(__init__, _MARKER, True)
    setattr(trainer_cls, "__init__", __init__)  # noqa: B010
    train = getattr(trainer_cls, "train", None)  # deviate audit --resume-at: the resumed run's train() resumes
    if callable(train) and not getattr(train, _MARKER, False):
        setattr(trainer_cls, "train", _resuming_fit(train, "resume_from_checkpoint"))  # noqa: B010


_warned: set[str] = set()


def _default_callback_class(module: str = "deviate_cb.lightning", where: str = "the Trainer") -> Optional[type]:
    try:
        return importlib.import_module(module).DeviateCallback
    except ImportError as exc:
        if module not in _warned:
            _warned.add(module)
            sys.stderr.write(
                f"deviate-replicate: warning: cannot add DeviateCallback to {where} ({exc}); "
                "the metrics it logs are not recorded.\n"
            )
        return None
