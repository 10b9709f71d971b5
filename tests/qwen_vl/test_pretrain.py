"""The tiny model's pretrained base: a generic terminal corpus that shares nothing with the task families' commands
or test values, trained for real (the response loss falls), built once and then loaded from the cache."""

from __future__ import annotations

import json
import re

import pytest
import torch

from plugins.qwen_vl import pretrain
from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings
from plugins.qwen_vl.pretrain import PretrainSettings, cache_key
from plugins.qwen_vl.shell_corpus import TEMPLATES, examples, word_pieces
from plugins.synthesis.families import CATALOG
from plugins.synthesis.families.values import is_held_out, pool

SMALL = PretrainSettings(steps=40, batch_size=8, examples=200, held_out=16)


def _family_commands() -> set[str]:
    """The programs the task families' oracles and near misses run (their first word, and after && or ;)."""
    programs = set()
    for name in CATALOG.names():
        variant = CATALOG.get(name).variant("train", 0, 0)
        for actions in [variant.oracle, *variant.near_misses.values()]:
            for action in actions:
                for part in re.split(r"&&|;|\|", action.get("text", "")):
                    if part.strip():
                        programs.add(part.split()[0])
    return programs - {"cd", "for", "do", "done"}


def test_the_corpus_uses_no_family_command_and_no_test_value() -> None:
    family = _family_commands()
    assert {"mv", "cp", "rm", "wc", "grep", "sort", "chmod", "ln", "tar", "mkdir", "touch"} <= family
    from plugins.qwen_vl.tokenizer import build_tiny_tokenizer

    pieces = word_pieces(build_tiny_tokenizer())
    assert {"SU", "min", "ts", "7"} <= set(pieces) and not any(" " in p or "_" in p for p in pieces)
    corpus = examples(3000, seed=0, pieces=pieces)
    assert corpus == examples(3000, seed=0, pieces=pieces) and corpus != examples(3000, seed=1, pieces=pieces)
    words, exts = set(pool("word")), set(pool("ext"))
    for example in corpus:
        command = json.loads(example.response.split("\n")[1])["arguments"]["text"]
        assert command.split()[0] not in family and ">" not in command
        for token in re.findall(r"[a-z]+", command):
            if token in words:
                assert not is_held_out("word", token), token
            if token in exts and token not in ("cat", "ls", "echo", "file"):
                assert not is_held_out("ext", token), token
    assert len({c for _, c in TEMPLATES}) >= 15


def test_every_token_a_test_variant_answers_with_is_one_the_base_was_trained_to_produce() -> None:
    """A test oracle (held-out names, extensions, modes) needs no token absent from every training target (the
    corpus and the train variants' oracles): copying an unseen name must be possible, not merely likely."""
    from core.types import Action
    from environments.actions import format_response
    from plugins.qwen_vl.tokenizer import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()

    def tokens(actions: list[dict]) -> set[int]:
        return {i for a in actions for i in tokenizer.encode(format_response([Action.model_validate(a)]))}

    corpus = examples(PretrainSettings().examples, seed=0, pieces=word_pieces(tokenizer))
    trained = {i for e in corpus for i in tokenizer.encode(e.response)}
    for name in CATALOG.names():
        for index in range(10):
            trained |= tokens(CATALOG.get(name).variant("train", index, 0).oracle)
    missing = {}
    for name in CATALOG.names():
        for index in range(10):
            variant = CATALOG.get(name).variant("test", index, 0)
            unseen = tokens(variant.oracle) - trained
            if unseen:
                missing[f"{name}/{index}"] = tokenizer.convert_ids_to_tokens(sorted(unseen))
    assert not missing, missing


def test_the_cache_key_follows_everything_the_weights_depend_on() -> None:
    tiny = TinyModelSettings().model_dump(exclude={"pretrain"})
    pixels = {"min_pixels": None, "max_pixels": 65536}
    key = cache_key(tiny, SMALL, pixels)
    assert key == cache_key(tiny, SMALL.model_copy(), dict(pixels)) and key.startswith("qwen3_vl-")
    assert key != cache_key(tiny, SMALL.model_copy(update={"steps": 41}), pixels)
    assert key != cache_key(tiny, SMALL.model_copy(update={"system_prompt": "other"}), pixels)
    assert key != cache_key({**tiny, "num_layers": 3}, SMALL, pixels)
    assert key != cache_key(tiny, SMALL, {**pixels, "max_pixels": 16384})


def test_a_pretrained_tiny_model_is_trained_once_and_then_loaded_from_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SCALECUA_CACHE", str(tmp_path))
    options = QwenVLOptions(tiny=TinyModelSettings(pretrain=SMALL), min_pixels=4096, max_pixels=16384)
    model = QwenVLModel(options)
    base = model.load()
    [entry] = [p for p in (tmp_path / "tiny-pretrained").glob("qwen3_vl-*") if p.is_dir()]
    result = json.loads((entry / "pretrain.json").read_text())
    assert result["settings"]["steps"] == 40 and 0 < result["held_out"] <= 16
    assert not list((tmp_path / "tiny-pretrained").glob(".*tmp*"))  # written atomically

    # training happened: the corpus responses' loss is far below the random model's
    random_init = QwenVLModel(QwenVLOptions(tiny=TinyModelSettings(), seed=SMALL.seed, min_pixels=4096, max_pixels=16384))
    rows = pretrain._encode(model, examples(16, seed=5), SMALL.system_prompt)
    with torch.no_grad():
        trained_loss = float(pretrain._forward(model, base, rows)[0])
        random_loss = float(pretrain._forward(random_init, random_init.load(), rows)[0])
    assert trained_loss < random_loss - 2.0, (trained_loss, random_loss)
    assert result["final_loss"] < random_loss - 2.0

    # a second model (another stage, a later run) loads the same weights without building again
    def refuse(*args, **kwargs):
        raise AssertionError("the base was built twice")

    monkeypatch.setattr(pretrain, "build", refuse)
    again = QwenVLModel(options).load()
    for (name, a), (_, b) in zip(base.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    # the run seed does not change a pretrained base (it is the base's own, like a released checkpoint's)
    other_seed = QwenVLModel(options.model_copy(update={"seed": 7})).load()
    assert all(torch.equal(a, b) for a, b in zip(base.state_dict().values(), other_seed.state_dict().values()))


def test_make_tiny_writes_the_pretrained_base_as_a_model_directory(tmp_path, monkeypatch) -> None:
    from plugins.qwen_vl.make_tiny import main

    monkeypatch.setenv("SCALECUA_CACHE", str(tmp_path / "cache"))
    assert main([str(tmp_path / "model"), "--pretrain", "--pretrain-steps", "2", "--min-pixels", "4096", "--max-pixels", "16384"]) == 0
    loaded = QwenVLModel(QwenVLOptions(path=str(tmp_path / "model"))).load()
    [entry] = [p for p in (tmp_path / "cache" / "tiny-pretrained").glob("qwen3_vl-*") if p.is_dir()]
    cached = QwenVLModel(QwenVLOptions(path=str(entry))).load()
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), cached.state_dict().values()))


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0}, {"unknown": 1}])
def test_bad_pretrain_settings_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        TinyModelSettings(pretrain=bad)
