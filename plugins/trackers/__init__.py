"""Experiment trackers (the config's ``trackers`` list): TensorBoard, Weights & Biases, MLflow."""
