"""Reading a study: its runs, their configurations and fingerprints, metric files, run tables."""
