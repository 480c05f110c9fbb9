"""Per-run aggregation: one number per run and metric (``last``, ``best``, ``mean``, ``at_step=S``, ``at_epoch=E``).

- :mod:`~deviate_cb.stats.aggregation.spec`: the aggregate names and the parsing of ``at_step=S``/``at_epoch=E``.
- :mod:`~deviate_cb.stats.aggregation.series`: :func:`aggregate`, on one plain series.
- :mod:`~deviate_cb.stats.aggregation.arrow`: :func:`aggregate_table`, on a long pyarrow table of many runs.

All names are presented by :mod:`deviate_cb.stats`.
"""
