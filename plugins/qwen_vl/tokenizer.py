"""Qwen-VL tokenizers: a tiny byte-level BPE trained in-process, or a real one from a local directory.

The tiny tokenizer follows the Qwen recipe (NFC, the Qwen split regex with
single digits, byte-level BPE, the Qwen special tokens and a Qwen-style chat
template) so every code path that handles a real Qwen tokenizer is exercised
with it, without any download. Training is deterministic: the corpus is fixed
and the BPE trainer breaks ties by pair order, so the vocabulary is the same in
every process.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import ScaleCUAError

#: Qwen2-VL/Qwen2.5-VL/Qwen3-VL special tokens, in the order Qwen assigns ids after the BPE vocabulary.
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
#: added tokens that Qwen marks non-special (they survive ``skip_special_tokens``)
QWEN_ADDED_TOKENS: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<think>", "</think>")

#: The Qwen2 pre-tokenizer split: contractions, letter runs, single digits, punctuation runs, whitespace.
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Qwen's chat format with structured content (text / image / video items); no default system prompt,
#: like Qwen3-VL. ``<|im_start|>{role}\n{content}<|im_end|>\n`` per message.
QWEN_VL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' or 'image' in item or 'image_url' in item -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item['type'] == 'video' or 'video' in item -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in item -%}"
    "{{- item['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

DEFAULT_TINY_VOCAB_SIZE = 800


class TokenizerLoadError(ScaleCUAError):
    pass


def tiny_corpus() -> list[str]:
    """Agent-like training text: action syntax, English, digits, JSON, reasoning. Fixed, so training is repeatable."""
    actions = [
        "left_click",
        "right_click",
        "double_click",
        "triple_click",
        "middle_click",
        "mouse_move",
        "left_click_drag",
        "scroll",
        "type",
        "key",
        "hold_key",
        "wait",
        "done",
        "fail",
        "answer",
        "screenshot",
        "write_file",
    ]
    english = [
        "Open the spreadsheet and compute the sum of column B in cell B12.",
        "The file menu is at the top left of the window; click it to see the options.",
        "I need to select the text before I can change its font size to 14 points.",
        "The dialog asks whether to keep the current format. I will press Enter to confirm.",
        "Save the document as report.odt in the home directory, then close the application.",
        "The terminal shows the command output. The directory contains three files.",
        "Scroll down to find the settings button, which should be near the bottom of the page.",
        "The task is complete: the chart now shows the monthly sales from January to December.",
        "Action executed successfully. The cursor is now at the requested position.",
        "Error: the element could not be found on the screen. Try another approach.",
        "Rename the sheet to Summary and sort the table by the second column in descending order.",
        "Type the formula into the cell, then press Return to evaluate it.",
        "You are a computer-use agent. Look at the screenshot and choose the next action.",
        "Task: change the browser homepage to the project website and restart the browser.",
        "The previous screenshot was removed from the history to keep the context short.",
    ]
    lines: list[str] = []
    for i, action in enumerate(actions):
        x, y = (137 * i + 41) % 1001, (311 * i + 97) % 1001
        lines.append(f"{action}(x={x}, y={y})")
        lines.append(json.dumps({"action": action, "x": x, "y": y, "text": english[i % len(english)][:24]}))
        lines.append(f"<think>\nThe button is at ({x}, {y}). I will use {action}.\n</think>\n{action}(x={x}, y={y})")
    lines.append('type(text="=SUM(B2:B11)")')
    lines.append("key(keys=['ctrl', 's'])")
    lines.append("key(keys=['ctrl', 'shift', 't'])")
    lines.append('scroll(direction="down", amount=5)')
    lines.append('answer(text="42")')
    lines.append('write_file(path="/home/user/out.txt", content="hello world")')
    lines.extend(english * 4)
    lines.append(" ".join(str(n) for n in range(0, 1001, 7)))
    lines.append("0123456789 " * 20)
    lines.append("".join(chr(c) for c in range(32, 127)))
    lines.append('{"id": "task-001", "instruction": "Open the file", "score": 1.0, "status": "ok"}')
    return lines


def build_tiny_tokenizer(vocab_size: int = DEFAULT_TINY_VOCAB_SIZE):
    """A Qwen-style byte-level BPE tokenizer trained on :func:`tiny_corpus`.

    Returns a ``transformers.PreTrainedTokenizerFast`` with the Qwen special
    tokens, ``<|im_end|>`` as EOS, ``<|endoftext|>`` as padding and the Qwen-VL
    chat template.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    floor = 256 + len(QWEN_SPECIAL_TOKENS) + len(QWEN_ADDED_TOKENS)
    if vocab_size < floor + 16:
        raise ValueError(f"tiny tokenizer vocab_size={vocab_size} is too small: use at least {floor + 16}")

    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(QWEN_SPECIAL_TOKENS) - len(QWEN_ADDED_TOKENS),
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tokenizer.train_from_iterator(tiny_corpus(), trainer=trainer)
    # Added after training so the ids follow the BPE vocabulary in Qwen's order.
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED_TOKENS])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(QWEN_SPECIAL_TOKENS),
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    wrapped.chat_template = QWEN_VL_CHAT_TEMPLATE
    return wrapped


def load_tokenizer(directory: str | Path):
    """A tokenizer from a local Hugging Face directory (a real Qwen-VL checkpoint or a saved tiny one)."""
    from transformers import AutoTokenizer

    path = Path(directory)
    if not path.is_dir():
        raise TokenizerLoadError(f"tokenizer directory {str(path)!r} does not exist: give a local model directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise TokenizerLoadError(
            f"could not load a tokenizer from {str(path)!r}: {exc}. The directory needs tokenizer.json "
            "(or vocab.json + merges.txt) and tokenizer_config.json."
        ) from exc
    if not tokenizer.chat_template:
        tokenizer.chat_template = _chat_template_file(path)
    missing = [t for t in ("<|im_start|>", "<|im_end|>", "<|image_pad|>") if t not in tokenizer.get_vocab()]
    if missing:
        raise TokenizerLoadError(f"tokenizer in {str(path)!r} lacks Qwen tokens {missing}: is it a Qwen-VL tokenizer?")
    return tokenizer


def _chat_template_file(path: Path) -> str:
    """Qwen2-VL checkpoints keep the template next to the processor config, not in the tokenizer config."""
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    as_json = path / "chat_template.json"
    if as_json.is_file():
        return json.loads(as_json.read_text())["chat_template"]
    raise TokenizerLoadError(
        f"tokenizer in {str(path)!r} has no chat template: add chat_template.jinja (or a 'chat_template' "
        "entry in tokenizer_config.json)"
    )
