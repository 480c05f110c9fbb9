"""``deviate export``: a study's replicas and answers as runs of an experiment tracker (MLflow, Weights & Biases).

:mod:`~deviate_cb.trackers.export.replicas` reads the study once, as ``deviate report`` does;
:mod:`~deviate_cb.trackers.export.mlflow_runs` and :mod:`~deviate_cb.trackers.export.wandb_runs` write it, with
names and values a tracker accepts (:mod:`~deviate_cb.trackers.export.renaming`) and requests bounded in time
(:mod:`~deviate_cb.trackers.export.waiting`).
"""
