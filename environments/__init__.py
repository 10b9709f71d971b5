"""environments plugins for ScaleCUA."""
