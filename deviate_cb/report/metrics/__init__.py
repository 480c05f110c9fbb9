"""Reading the runs' ``metrics.parquet`` files into per-run values for the report.

- :mod:`~deviate_cb.report.metrics.per_run`: :class:`PerRun`, one value per run and metric, the report's input.
- :mod:`~deviate_cb.report.metrics.footers`: values from the manifests' and files' footer summaries (no scan).
- :mod:`~deviate_cb.report.metrics.scan`: :class:`SeriesScan`, the scan of files the summaries do not cover
  (DuckDB when installed, else pyarrow).
- :mod:`~deviate_cb.report.metrics.last_values`: the streamed last-value reader.
- :mod:`~deviate_cb.report.metrics.long_table`: every row of a study as one long pyarrow table.
- :mod:`~deviate_cb.report.metrics.file_checks`: the per-file checks the readers share.
- :mod:`~deviate_cb.report.metrics.names`: display names, ``--metric`` patterns and direction warnings.
"""
