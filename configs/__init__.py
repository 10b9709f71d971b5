"""The bundled run configurations (YAML), shipped as package data so an installed ScaleCUA finds them by name:
``python -m core.pipeline --config quickstart``. ``python -m configs`` lists them with their paths."""
