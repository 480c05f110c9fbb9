"""Profiling windows over a few training steps, and the op rows they produce for ``timings.parquet``."""
