"""The in-process policy behind vLLM's HTTP API: ``python -m plugins.serving --model DIR | --config FILE``.

* :mod:`plugins.serving.server` — the HTTP server and its command line;
* :mod:`plugins.serving.routes` — OpenAI/vLLM generation endpoints and vLLM's weight-update protocol;
* :mod:`plugins.serving.protocol` — request parsing and response bodies (shared with the
  ``openai-compatible`` and ``vllm`` rollout engines);
* :mod:`plugins.serving.weight_transfer` — the data side of vLLM's weight-transfer protocol (shared with the
  trainer-side client in :mod:`plugins.rollout.remote_weights`).

It depends on :mod:`core` only; the rollout plugins depend on it, never the other way round.
"""
