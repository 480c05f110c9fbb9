"""Stability measures across runs: what identical runs disagree on, beyond a metric's spread."""
