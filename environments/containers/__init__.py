"""Desktops in containers: engine access, a warm pool, and two environment backends.

* :mod:`.engine` — one container engine (Docker, or podman's Docker-compatible
  socket) reached through the ``docker`` SDK; a list of them spans machines.
* :mod:`.pool` — pre-booted containers handed to episodes, recycled after N
  episodes, dead ones replaced by a health check.
* :mod:`.container_desktop` — backend ``container-desktop``: our own image
  (``image/Containerfile``, built by ``python -m environments.containers.build``).
* :mod:`.osworld_docker` — backend ``osworld-docker``: OSWorld's VM image.

The ``docker`` SDK is imported only when an engine is opened.
"""
