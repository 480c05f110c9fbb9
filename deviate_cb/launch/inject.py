"""Add a :class:`~deviate_cb.lightning.DeviateCallback` to every Lightning ``Trainer`` a replica builds.

The replica bootstrap calls :func:`install_trainer_injection` before the user's module is imported; the patch
is applied the moment ``lightning.pytorch.trainer.trainer`` is imported (and costs nothing when it never is).
``Trainer.__init__`` is wrapped so that its keyword ``callbacks`` (``None``, one callback or a list) gets a
``DeviateCallback()`` appended unless it already holds one: never two. The callback class is imported only
when a ``Trainer`` is built, when Lightning is fully imported.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from typing import Any, Optional

from deviate_cb._import_hooks import when_imported

__all__ = ["TRAINER_MODULE", "install_trainer_injection", "patch_trainer_class", "with_callback"]

TRAINER_MODULE = "lightning.pytorch.trainer.trainer"
_MARKER = "__deviate_injects_callback__"


def install_trainer_injection(callback_class: Optional[type] = None) -> None:
    """Patch Lightning's ``Trainer`` as soon as it is imported (now, if it already is).

    Args:
        callback_class: The callback class to add; default ``deviate_cb.lightning.DeviateCallback``.

    Example:
        >>> install_trainer_injection()  # in a replica, before the user's module is imported
    """
    when_imported(TRAINER_MODULE, lambda module: patch_trainer_class(module.Trainer, callback_class))


def patch_trainer_class(trainer_cls: type, callback_class: Optional[type] = None) -> None:
    """Wrap ``trainer_cls.__init__`` so that every instance gets one callback of ``callback_class`` (idempotent).

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
        original(self, *args, **kwargs)

    setattr(__init__, _MARKER, True)
    setattr(trainer_cls, "__init__", __init__)  # noqa: B010


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


_warned = False


def _default_callback_class() -> Optional[type]:
    global _warned
    try:
        from deviate_cb.lightning import DeviateCallback
    except ImportError as exc:
        if not _warned:
            _warned = True
            sys.stderr.write(
                f"deviate-replicate: warning: cannot add DeviateCallback to the Trainer ({exc}); "
                "the metrics it logs are not recorded.\n"
            )
        return None
    return DeviateCallback
