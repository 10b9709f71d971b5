"""The commands a user runs, each ``python -m core.<name>`` (``core/<name>.py`` holds only the name and calls
``main`` here): ``run``, ``pipeline``, ``sft``, ``record``, ``synthesize``, ``eval``, ``ablate``, ``report``,
``envcheck``, ``plugins``, ``export``, ``judge``. They parse arguments, build a run from the contract and drive
the runtime; nothing below imports them.
"""
