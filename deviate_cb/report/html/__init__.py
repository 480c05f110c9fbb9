"""The HTML report: one self-contained page (plots inline, styles inline, no network) for ``--format html``.

- :mod:`~deviate_cb.report.html.figures`: the plots, made with matplotlib (the ``report`` extra), inline as SVG
  (or PNG where a plot has too many marks for SVG), in a colour-blind-safe palette; an SVG takes the page's
  colours (light or dark), a PNG keeps a white card with its caption dark on it in both schemes.
- :mod:`~deviate_cb.report.html.curves`: each group's training curves: every replica's series (a bounded number
  drawn), the mean and the spread band per step.
- :mod:`~deviate_cb.report.html.page`: the page of ``deviate report`` (summary, per metric curves and
  distributions, decomposition, stability, step times); :mod:`~deviate_cb.report.html.compare_page`: the page of
  ``deviate compare``. Every user-provided string is escaped.
"""
