"""A profiling window over a few training steps: per-op rows from ``torch.profiler`` or the TensorFlow profiler.

:class:`ProfileWindow` says which steps are profiled: after ``wait`` plain steps, ``warmup`` steps let the
profiler start up (their records are thrown away), then ``active`` steps are recorded; the cycle runs ``repeat``
times. A driver (:class:`TorchProfileWindow`, :class:`TensorFlowProfileWindow`) runs the framework's profiler
over those steps only and turns what it recorded into op rows of ``timings.parquet`` (see
:mod:`deviate_cb.store.timings`). Outside its windows a driver holds no profiler at all, so unprofiled steps cost
nothing extra; steps for which :attr:`~TorchProfileWindow.profiling` is True are slower and the step timer
flags them so that statistics leave them out.

How an adapter uses it (``step()`` after the step's ``end_step``, so profiler start-up and trace processing fall
between timed steps)::

    window = profile_window(ProfileWindow(wait=5, warmup=1, active=3), framework="torch")
    window.start()
    for each step:
        timer.start_step(); <train one step>; timer.end_step(stage, epoch, step, profiled=window.profiling)
        window.step()
    window.stop()
    write_timings(run_dir, timer.rows(), window.rows())

The drivers live in :mod:`deviate_cb.profiling.torch_profiler` and :mod:`deviate_cb.profiling.tensorflow_profiler`,
the window and their shared step counting in :mod:`deviate_cb.profiling.window`; all are imported here.

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
