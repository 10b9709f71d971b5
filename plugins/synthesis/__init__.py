"""VeriGen: multi-agent synthesis of verifiable tasks against live desktops (the paper's section 3.2, appendix B).

Run it with ``python -m core.synthesize --config configs/synthesize.yaml``. Modules:

* :mod:`.roles` — the role contracts and records; :mod:`.pipeline` — the loop (N workers, M desktops, repairs);
* :mod:`.proposer`, :mod:`.review` (judger, fixer), :mod:`.checker`, :mod:`.validator` — the roles;
* :mod:`.trajectory`, :mod:`.rollouts`, :mod:`.compose` — trajectory-guided synthesis;
* :mod:`.llm` — the OpenAI-compatible client; :mod:`.prompts`, :mod:`.schema` — what roles ask and accept;
* :mod:`.store` — the SQLite task store and the OSWorld JSON export; :mod:`.summary` — the run summary;
* ``knowledge/`` — one document per bundled application, read by the proposer.
"""
