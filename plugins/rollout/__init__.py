"""rollout plugins for ScaleCUA."""
