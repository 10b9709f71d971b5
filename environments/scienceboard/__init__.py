"""ScienceBoard (Sun et al., 2025): scientific-software tasks on our desktops.

* :mod:`.convert`: ScienceBoard task JSON (``type, sort, steps, instruction,
  initialize, evaluate, ans``) -> :class:`core.types.Task`, whose evaluator
  uses registered getters and metrics (:mod:`.getters`, :mod:`.metrics`).
* :mod:`.initialize`: runs a task's ``initialize`` list through the probe.
* :mod:`.backend`: the ``scienceboard`` environment backend (wraps a desktop
  backend such as ``local-desktop``; adds ScienceBoard's agent primitives).
* :mod:`.checkers`: the probe's ``/tex/check`` and ``/lean/check`` endpoints.
* ``tasks/<App>/``: bundled offline tasks for the applications Debian packages
  (KAlgebra, TeXstudio, GRASS GIS), each with an oracle.

Nothing here imports heavy modules at package import time: the probe imports
:mod:`.checkers` inside containers with only the standard library at hand.
"""
