"""scalecua-tally: an example third-party ScaleCUA plugin package.

It brings two components through the ``scalecua`` entry-point group, exactly as a package on PyPI would:

* the ``tally`` environment backend: a one-window counter application drawn in process (a value and three
  buttons, ``-``, ``+`` and ``reset``), driven by clicks and the up/down keys, judged on the value it shows;
* the ``least-seen`` sampler: each iteration, the tasks drawn the fewest times so far (ties broken by a seeded
  shuffle), a coverage baseline to put beside Frontier Sampling in an ablation.

It imports only ScaleCUA's contract layer (``core``, ``core.interfaces``, ``core.types``, ``core.errors``).
"""
