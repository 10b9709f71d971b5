"""A pretrained base for the tiny Qwen-VL: generic terminal pretraining, built once per machine and cached.

No checkpoint can be downloaded here, and a randomly initialised 0.4 M-parameter policy learns to copy a name
from the instruction into its command only from thousands of distinct examples, more than a laptop-scale warm
start can record on desktops. ``tiny: {pretrain: {...}}`` gives the tiny model what a released checkpoint
would: it is first trained (cross-entropy on the response) on :mod:`plugins.qwen_vl.shell_corpus`, generic
shell requests in the agent's prompt format that share no command and no test value with the task families.

The weights are built on first use and kept in ``$SCALECUA_CACHE`` (default ``~/.cache/scalecua``) under a key
of everything that decides them (architecture, corpus version, steps, rate, batch, seed, system prompt), so
every stage and every later run loads the same base; a second process waits for the first one's build
(a file lock) instead of building it twice. ``python -m plugins.qwen_vl.make_tiny OUT --pretrain`` builds one
ahead of time and writes it to a directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

log = structlog.get_logger(__name__)

#: the system prompt the corpus is rendered with when none is given (the bundled configs' compact one)
DEFAULT_SYSTEM_PROMPT = (
    "You are a computer-use agent on a Linux desktop. After each action you see a new screenshot.\n"
    "Act with one tool call per step:\n<tool_call>\n"
    '{"name": "computer_use", "arguments": {"action": "type", "text": "ls"}}\n</tool_call>\n'
    "Actions: left_click (coordinate), type (text), key (keys), scroll, wait (duration), done, fail."
)
RESULT_FILE = "pretrain.json"


class PretrainSettings(BaseModel):
    """Generic terminal pretraining of a tiny model (see :mod:`plugins.qwen_vl.pretrain`)."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(1000, ge=1, description="optimizer steps")
    batch_size: int = Field(32, ge=1, description="examples per step")
    lr: float = Field(2.0e-3, gt=0, description="AdamW learning rate (constant, gradient norm clipped at 1)")
    examples: int = Field(12000, ge=1, description="distinct corpus examples drawn from")
    seed: int = Field(0, description="seed of the initial weights, the corpus and the batches: the base is the "
                                     "same for every run seed, as a released checkpoint would be")
    system_prompt: str = Field(DEFAULT_SYSTEM_PROMPT, description="the system prompt the corpus is rendered with")
    held_out: int = Field(128, ge=0, description="unseen corpus examples scored after training (exact response)")


def cache_root() -> Path:
    return Path(os.environ.get("SCALECUA_CACHE") or Path.home() / ".cache" / "scalecua").expanduser()


def cache_key(architecture: dict[str, Any], settings: PretrainSettings, pixels: dict[str, Any]) -> str:
    """The cache entry of a base: everything its weights depend on (the model family first, for people)."""
    from plugins.qwen_vl.shell_corpus import CORPUS_VERSION

    blob = json.dumps({"tiny": architecture, "pretrain": settings.model_dump(), "pixels": pixels,
                       "corpus": CORPUS_VERSION}, sort_keys=True)
    return f"{architecture.get('family', 'tiny')}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def pretrained_dir(key: str, settings: PretrainSettings, make_model: Callable[[], Any]) -> Path:
    """The cached base ``key``, built first (from the random model ``make_model`` returns) if no process has."""
    root = cache_root() / "tiny-pretrained"
    target = root / key
    if (target / RESULT_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building the same base: wait for it
        if not (target / RESULT_FILE).is_file():
            build(make_model(), settings, target)
    return target


def build(model: Any, settings: PretrainSettings, out: Path) -> dict[str, Any]:
    """Train ``model`` (a tiny :class:`~plugins.qwen_vl.model.QwenVLModel` with random weights) on the corpus
    and write it as a model directory at ``out``, atomically: a killed build leaves no half-written base."""
    import torch

    from plugins.qwen_vl.shell_corpus import examples, word_pieces

    started = time.perf_counter()
    log.info("building the tiny model's pretrained base (once per machine, then cached)", steps=settings.steps,
             where=str(out))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        module = model.load()
        module.train()
        pieces = word_pieces(model.tokenizer)
        corpus = examples(settings.examples, settings.seed, pieces)
        rows = _encode(model, corpus, settings.system_prompt)
        rng = random.Random(settings.seed)
        optimizer = torch.optim.AdamW(module.parameters(), lr=settings.lr, weight_decay=0.0)
        losses: list[float] = []
        for step in range(settings.steps):
            batch = [rows[rng.randrange(len(rows))] for _ in range(settings.batch_size)]
            loss, _ = _forward(model, module, batch)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            if step % 100 == 0 or step == settings.steps - 1:
                log.info("pretraining", step=step, loss=round(losses[-1], 4),
                         seconds=round(time.perf_counter() - started, 1))
        module.eval()
        trained = {e.request for e in corpus}
        unseen = _encode(model, [e for e in examples(settings.held_out, settings.seed + 1_000_003, pieces)
                                 if e.request not in trained], settings.system_prompt)
        accuracy = exact_match(model, module, unseen) if unseen else None
    tail = losses[-20:]
    result = {"settings": settings.model_dump(), "key": out.name, "seconds": round(time.perf_counter() - started, 1),
              "final_loss": round(sum(tail) / len(tail), 4), "held_out_exact_match": accuracy,
              "held_out": len(unseen)}
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    module.save_pretrained(str(tmp))
    model.tokenizer.save_pretrained(str(tmp))
    model.image_processor.save_pretrained(tmp)
    (tmp / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    log.info("pretrained base written", where=str(out), seconds=result["seconds"], held_out_exact_match=accuracy)
    return result


Row = tuple[list[int], list[Any], int]  # (ids, images, where the response starts)


def _encode(model: Any, items: Sequence[Any], system_prompt: str) -> list[Row]:
    from core.prompt import initial_messages
    from core.types import Observation

    from plugins.qwen_vl.shell_corpus import terminal_screenshot

    renderer = model.renderer()
    observation = Observation(screenshot=terminal_screenshot())
    rows = []
    for item in items:
        prompt = renderer.render(initial_messages(system_prompt, item.request, observation),
                                 add_generation_prompt=True)
        ids = prompt.ids + renderer.encode_text(item.response) + [renderer.stop_ids[0]]
        rows.append((ids, prompt.images, len(prompt.ids)))
    return rows


def _forward(model: Any, module: Any, rows: Sequence[Row]) -> tuple[Any, Any]:
    """Mean cross-entropy over the response tokens, and per row whether every response token is the argmax."""
    import torch

    length = max(len(ids) for ids, _, _ in rows)
    inputs = torch.full((len(rows), length), model.renderer().pad_token_id)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    targets = torch.full((len(rows), length), -100)
    for i, (ids, _, start) in enumerate(rows):
        inputs[i, :len(ids)] = torch.tensor(ids)
        mask[i, :len(ids)] = 1
        targets[i, start:len(ids)] = torch.tensor(ids[start:])
    batch = model.model_inputs(inputs, [images for _, images, _ in rows])
    batch["attention_mask"] = mask
    logits = module(**batch).logits[:, :-1]
    shifted = targets[:, 1:]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), shifted.reshape(-1),
                                             ignore_index=-100)
    exact = ((logits.argmax(-1) == shifted) | (shifted == -100)).all(-1)
    return loss, exact


def exact_match(model: Any, module: Any, rows: Sequence[Row], batch_size: int = 32) -> float:
    """Share of rows whose greedy response (argmax at every response token, teacher-forced) is exactly right."""
    import torch

    hits = 0
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            hits += int(_forward(model, module, rows[i:i + batch_size])[1].sum())
    return round(hits / len(rows), 4)
