"""judges plugins for ScaleCUA."""
