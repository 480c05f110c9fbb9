"""The ``slurm`` backend: replicas as a submitit job array, followed through squeue/sacct."""
