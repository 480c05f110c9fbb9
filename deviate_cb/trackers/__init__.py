"""Runs you already have, and runs you share: the bridges between the run store and experiment trackers.

- :mod:`deviate_cb.trackers.importing`: ``deviate import mlflow|tensorboard|csv-logs`` turns each run of MLflow,
  TensorBoard event files or Lightning's CSVLogger into a replica of the run store, so ``deviate report``,
  ``compare``, ``power`` and ``status`` read it like one of ours.
- :mod:`deviate_cb.trackers.export`: ``deviate export mlflow|wandb``, the other way.

Each tracker's package (``mlflow``, ``tensorboard``, ``wandb``) is imported only by the command that needs it;
a missing one is one line naming the extra (``pip install 'deviate-cb[mlflow]'``).

Example:
    >>> import deviate_cb.trackers
    >>> deviate_cb.trackers.__all__
    []
"""

__all__: list[str] = []
