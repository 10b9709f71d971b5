"""The runtime: what drives the plugins once a config has chosen them.

The RL loop (:mod:`.loop`: sampler -> rollouts -> advantages -> trainer -> weight sync -> checkpoint), the
episode between a rollout engine and an environment (:mod:`.episode`, :mod:`.rollouts`,
:mod:`.async_rollouts`), run directories, checkpoints, metrics, trackers, task pools and their checks, and the
records a run leaves (rollout records, screenshots, the trajectory viewer, demonstrations). It imports the
contract (``core`` top level) and nothing from :mod:`core.commands`; plugins never need it.
"""
