"""The project a replication runs, read by the launcher before anything runs: command, trainer, sources."""
