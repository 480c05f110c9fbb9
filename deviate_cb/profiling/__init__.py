"""Profiling windows over a few training steps, and the op rows they produce for ``timings.parquet``.

- :mod:`~deviate_cb.profiling.window`: :class:`ProfileWindow` (which steps are profiled) and the drivers' base.
- :mod:`~deviate_cb.profiling.torch_profiler`: the ``torch.profiler`` driver (Lightning, Keras on torch).
- :mod:`~deviate_cb.profiling.tensorflow_profiler`: the TensorFlow profiler driver (Keras on TensorFlow).
- :mod:`~deviate_cb.profiling.drivers`: :func:`profile_window` picks the driver for a framework.
- :mod:`~deviate_cb.profiling.ops`: op rows summed and ranked (:func:`top_ops`) under portable op names
  (:func:`canonical_op`: TensorFlow's oneDNN and fused kernels under the op they implement).
"""
