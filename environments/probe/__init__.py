"""The interaction probe: an HTTP service beside a desktop (paper section 3.2).

It speaks OSWorld's in-VM server protocol (screenshot, accessibility, execute,
run_python, files, setup endpoints, ...) plus ``POST /action`` (one action of
the paper's action space, executed with real X input) and ScienceBoard's
``/read``, ``/write``, ``/append``. Run it with::

    python -m environments.probe --display :3 --port 5000 [--host 127.0.0.1] [--token T] [--home DIR]

It binds to loopback by default and refuses to bind elsewhere without a
token; with a token, every request needs ``Authorization: Bearer <token>``.
:class:`environments.client.EnvironmentClient` is its client.
"""
