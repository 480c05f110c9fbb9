"""Per-sample predictions and final weights of a run, captured for the stability measures.

- :mod:`~deviate_cb.capture.stability.settings`: :class:`Predictions` and :class:`Weights`, what the user asks for.
- :mod:`~deviate_cb.capture.stability.extract`: taking inputs, labels and groups out of batches and framework arrays.
- :mod:`~deviate_cb.capture.stability.collector`: the collector the adapters feed, and its writers (through
  :mod:`deviate_cb.store.predictions` and :mod:`deviate_cb.store.weights`).
"""
