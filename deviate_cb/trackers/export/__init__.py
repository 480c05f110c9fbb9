"""``deviate export``: a study's replicas and answers as runs of an experiment tracker (MLflow, Weights & Biases)."""
