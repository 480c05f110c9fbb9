"""The ``slurm`` backend: replicas as a submitit job array, followed through squeue/sacct.

- :mod:`~deviate_cb.launch.slurm.backend`: :class:`SlurmBackend`, which submits a study and watches its jobs.
- :mod:`~deviate_cb.launch.slurm.submit`: the cluster check and the submitit set-up.
- :mod:`~deviate_cb.launch.slurm.jobs`: squeue/sacct queries and the jobs file of a variant directory.
- :mod:`~deviate_cb.launch.slurm.outcome`: the outcome of an ended job, from its manifest.
"""
