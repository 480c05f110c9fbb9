"""Reading the runs' ``metrics.parquet`` files into per-run values for the report."""
