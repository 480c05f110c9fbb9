"""The capture core: what the framework adapters drive while a run trains, with no framework of its own.

The adapters (:mod:`deviate_cb.lightning`, :mod:`deviate_cb.keras`) only translate their framework's hooks into
calls on these objects, which follow the ``update/compute/reset`` shape of Lightning's built-in callbacks:

- :mod:`~deviate_cb.capture.session`: one run's session (run directory, manifest, seeding, fingerprint, flushes).
- :mod:`~deviate_cb.capture.guard`: once a run is under way, a recording step's error becomes a ``problems`` entry
  of ``run.json`` and a warning, never an exception in the user's training.
- :mod:`~deviate_cb.capture.recorder`: the metric recorder that buffers logged values for ``metrics.parquet``.
- :mod:`~deviate_cb.capture.step_timer` and :mod:`~deviate_cb.capture.run_timings`: step wall times and the
  profiling window of a run, for ``timings.parquet``.
- :mod:`~deviate_cb.capture.determinism`: seeding and the determinism switches, and their verification.
- :mod:`~deviate_cb.capture.seed_takeover`: the project's own seeding calls, taken over inside a replica.
- :mod:`~deviate_cb.capture.import_hooks`: run a function when a framework gets imported (switches, injection).
- :mod:`~deviate_cb.capture.lightning_tap`: the tap on Lightning's logged metrics.
- :mod:`deviate_cb.capture.stability`: what to capture for the stability measures, and the collector.

Layer: above :mod:`deviate_cb.store`, :mod:`deviate_cb.fingerprint` and :mod:`deviate_cb.profiling`; below the
adapters, :mod:`deviate_cb.launch` and :mod:`deviate_cb.report` (``docs/architecture.md``).
"""
