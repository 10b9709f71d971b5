"""OSWorld-compatible judges: getters fetch state from a desktop, metrics score it.

* :mod:`environments.judges.getters` — ``async def getter(env, config)``
  (OSWorld's ``get_<type>``, registered under ``<type>``).
* :mod:`environments.judges.metrics`, :mod:`.tables`, :mod:`.documents` —
  pure ``metric(result, expected, **options) -> float`` functions.
* :mod:`environments.judges.evaluate` — OSWorld's ``DesktopEnv.evaluate``
  semantics over registered getters/metrics and generated judge code.
"""
