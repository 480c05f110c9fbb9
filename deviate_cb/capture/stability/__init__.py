"""Per-sample predictions and final weights of a run, captured for the stability measures."""
