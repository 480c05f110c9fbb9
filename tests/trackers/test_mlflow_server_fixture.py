"""The shared MLflow server fixture answers the real client and keeps what it is sent."""

from __future__ import annotations

import mlflow


def test_server_keeps_a_logged_run(mlflow_server: str) -> None:
    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    experiment_id = client.create_experiment("fixture-check")
    run = client.create_run(experiment_id)
    client.log_metric(run.info.run_id, "loss", 0.5, step=3)
    client.set_terminated(run.info.run_id)
    history = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(3, 0.5)]
    assert client.get_run(run.info.run_id).info.status == "FINISHED"
