"""The hardware/software fingerprint of a run: what decides implementation-level results.

- :mod:`~deviate_cb.fingerprint.collect`: :func:`collect_fingerprint` assembles ``fingerprint.json``.
- :mod:`~deviate_cb.fingerprint.gpu`: GPU, NVML and CUDA facts.
- :mod:`~deviate_cb.fingerprint.frameworks`: package versions, framework build facts, threads, BLAS.
- :mod:`~deviate_cb.fingerprint.switches`: the determinism switches and environment in effect.

Collected in-process in milliseconds; no framework is imported that the run has not imported.
"""
