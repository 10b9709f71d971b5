"""Distributed orchestration on Ray: rollout, trainer and environment-pool workers as actors.

``python -m plugins.ray.run --config FILE`` runs the same training loop as
``python -m core.run`` with the trainer, the rollout engine and the environment
pool living in Ray actors placed by the config's ``extra.ray`` section (see
:class:`plugins.ray.options.RayOptions`). Ray is an optional extra
(``pip install 'scalecua[ray]'``); nothing else in the framework imports it.
"""
