"""segmenters plugins for ScaleCUA."""
