"""trainers plugins for ScaleCUA."""
