"""The code that writes the bundled ScienceBoard-format tasks (``environments/scienceboard/tasks/<App>/``).

Run ``python -m environments.scienceboard.authoring`` after changing a task;
each domain module returns its tasks as ScienceBoard JSON dicts (with our
``id`` and ``oracle``), and :func:`write_all` writes one file per task.
"""
