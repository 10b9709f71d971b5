"""The interaction probe: an HTTP service beside a desktop (paper section 3.2).

It speaks OSWorld's in-VM server protocol (screenshot, accessibility, execute,
run_python, files, setup endpoints, ...) plus ``POST /action`` (one action of
the paper's action space, executed with real X input) and ScienceBoard's
``/read``, ``/write``, ``/append``. Run it with::

    python -m environments.probe --display :3 --port 5000 [--host 127.0.0.1] [--token T | --no-auth] [--home DIR]

Every request needs ``Authorization: Bearer <token>``: without ``--token`` the
probe generates one and prints it in its ready line. ``--no-auth`` (loopback
only) is for OSWorld-protocol compatibility. Request bodies and served files
are bounded (413) and paths are normalized before use.
:class:`environments.client.EnvironmentClient` is its client.
"""
