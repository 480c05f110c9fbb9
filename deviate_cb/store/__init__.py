"""The run directory and its files: the contract between capture, launch and analysis, one module per file.

- :mod:`~deviate_cb.store.run_directory`: the Hive-style run path, ``run.json`` (the manifest) and the schema
  version.
- :mod:`~deviate_cb.store.metrics`: ``metrics.parquet``; :mod:`~deviate_cb.store.footer_summary`: the per-series
  summary kept in its footer.
- :mod:`~deviate_cb.store.timings`: ``timings.parquet`` (step times and op rows).
- :mod:`~deviate_cb.store.predictions`: ``predictions.parquet``; :mod:`~deviate_cb.store.weights`:
  ``weights_sketch.npz`` and ``weights.npz``; :mod:`~deviate_cb.store.validation`: the input checks both share.
- :mod:`~deviate_cb.store.atomic`: atomic writes (temporary file, fsync, rename) that every writer uses.

Every file and column is listed in ``docs/architecture.md``. pyarrow is imported only when a Parquet file is read
or written.
"""
