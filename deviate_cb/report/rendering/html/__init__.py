"""The HTML report: one self-contained page (plots inline, styles inline, no network) for ``--format html``."""
