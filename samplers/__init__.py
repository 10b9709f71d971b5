"""samplers plugins for ScaleCUA."""
