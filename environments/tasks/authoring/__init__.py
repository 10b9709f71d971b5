"""Authoring code for the bundled task suite: ``python -m environments.tasks.authoring`` rewrites
``environments/tasks/osworld/<domain>/`` (task JSON, assets and gold files) from these modules.

Each domain module defines ``tasks(assets: Path) -> list[dict]``: it writes the
domain's asset files into ``assets`` and returns OSWorld task JSON objects
whose ``metadata.oracle`` is the action list that solves the task through the
GUI. Files are referenced as ``assets/<name>``, relative to the task file.
"""
