"""The stability section of ``deviate report``.

- :mod:`~deviate_cb.report.stability.build`: :func:`build_stability` computes one :class:`StabilityGroup` per
  (experiment, variant) group from the runs' prediction and weight files.
- :mod:`~deviate_cb.report.stability.rows`: the groups as flat records (csv, json).
- :mod:`~deviate_cb.report.stability.render`: the section as Markdown or terminal tables.
"""
