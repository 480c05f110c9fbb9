"""The backends: where replicas start (local slots, a warm-start template, a Slurm or Ray task)."""
