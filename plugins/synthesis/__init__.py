"""synthesis plugins for ScaleCUA."""
