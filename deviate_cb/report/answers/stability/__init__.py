"""The stability section of ``deviate report``."""
