"""Per-run aggregation: one number per run and metric (``last``, ``best``, ``mean``, ``at_step=S``, ``at_epoch=E``)."""
