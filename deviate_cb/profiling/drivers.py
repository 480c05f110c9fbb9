"""A profiling window over a few training steps: per-op rows from ``torch.profiler`` or the TensorFlow profiler.

Example:
    >>> window = ProfileWindow(wait=2, warmup=1, active=2)
    >>> [window.phase(step) for step in range(6)]
    ['wait', 'wait', 'warmup', 'active', 'active', 'done']
    >>> ProfileWindow(wait=-1)
    Traceback (most recent call last):
    ...
    ValueError: `wait` must be a non-negative integer. Received: wait=-1.
"""

from __future__ import annotations

from typing import Union

from deviate_cb.profiling.tensorflow_profiler import TensorFlowProfileWindow
from deviate_cb.profiling.torch_profiler import TorchProfileWindow
from deviate_cb.profiling.window import ProfileWindow

__all__ = ["profile_window"]


def profile_window(window: ProfileWindow, framework: str) -> Union[TorchProfileWindow, TensorFlowProfileWindow]:
    """The driver of ``window`` for a framework: ``torch`` (Lightning, Keras on torch) or ``tensorflow``.

    Example:
        >>> type(profile_window(ProfileWindow(), "torch")).__name__
        'TorchProfileWindow'
        >>> profile_window(ProfileWindow(), "jax")
        Traceback (most recent call last):
        ...
        ValueError: `framework` must be 'torch' or 'tensorflow'. Received: framework='jax'.
    """
    if framework == "torch":
        return TorchProfileWindow(window)
    if framework == "tensorflow":
        return TensorFlowProfileWindow(window)
    raise ValueError(f"`framework` must be 'torch' or 'tensorflow'. Received: framework={framework!r}.")
