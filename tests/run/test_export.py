"""``python -m core.export``: trajectories -> a Hugging Face dataset (Parquet, the ``Image`` feature, TRL's chat
format) -> ``core.sft``, with real parts: the bundled tasks and their backend (its parser and system prompt), the
tiny Qwen3-VL with its real BPE tokenizer and chat template, ``datasets`` and TRL reading the export without any
code of ours, and the warm start trained once from the JSONL and once from the dataset."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from core.config import load_config
from core.runtime.metrics import MetricsLog
from core.types import Action, ActionType

from .hold import only_run_dir, run_cli
from .test_warm_start import small_config

COLOURS = [(200, 30, 30), (30, 160, 60), (30, 60, 200), (220, 200, 40), (120, 40, 160), (20, 20, 20)]


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 200), colour).save(buffer, "PNG")
    return buffer.getvalue()


def demonstrations(tmp_path: Path, config: Path) -> Path:
    """Four trajectory records of two bundled tasks in the run-record format, responses in the backend's own
    format (typed command, Enter, done), a distinct screenshot after every non-final turn."""
    resolved, plugins = load_config(config)
    backend = resolved.create("environment", plugins, run_dir=tmp_path / "scratch")
    out = tmp_path / "demos"
    (out / "shots").mkdir(parents=True)
    for number, colour in enumerate(COLOURS):
        (out / "shots" / f"{number}.png").write_bytes(png(colour))
    lines = []
    for r, (task, command) in enumerate([("os-count-lines", "wc -l < ~/log.txt"), ("os-make-executable", "chmod +x x"),
                                         ("os-count-lines", "cat ~/log.txt | wc -l"), ("os-make-executable", "ls")]):
        steps = [[Action(type=ActionType.TYPE, text=command)], [Action(type=ActionType.KEY, keys=["Return"])],
                 [Action(type=ActionType.DONE)]]
        turns = [{"index": i, "response_text": backend.format_response(actions),
                  "actions": [a.model_dump(mode="json", exclude_none=True) for a in actions],
                  "feedback": "typed" if i == 0 else None, "loop_feedback": f"cursor at ({i}, {i})",
                  "screenshot": f"shots/{(r + i + 1) % len(COLOURS)}.png" if i < 2 else None}
                 for i, actions in enumerate(steps)]
        lines.append({"trajectory_id": f"demo-{r}", "task_id": task, "success": r != 3, "reward": 1.0 - (r == 3),
                      "initial_screenshot": f"shots/{r}.png", "turns": turns})
    (out / "demos.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return out / "demos.jsonl"


def configured(tmp_path: Path, name: str, source: Path, **warm: object) -> Path:
    config = small_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["run"]["name"] = name
    raw["warm_start"].update(epochs=2, batch_size=1, held_out=0.34, **warm)
    raw["warm_start"]["demonstrations"] = {"paths": [str(source)], "success_only": False}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.slow
def test_an_export_loads_with_datasets_and_trl_and_trains_to_the_same_loss_as_its_jsonl(tmp_path) -> None:
    import datasets
    from trl.data_utils import apply_chat_template, is_conversational

    config = small_config(tmp_path)
    source = demonstrations(tmp_path, config)
    out = tmp_path / "dataset"
    proc = run_cli("core.export", str(source), "--out", str(out), "--config", str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["rows"] == 4 and summary["images"] == 12 and summary["successes"] == 3
    assert (out / "README.md").read_text().startswith("---\nconfigs:")

    # datasets alone: Parquet under data/, screenshots decoded as images, the chat format TRL reads
    ds = datasets.load_dataset("parquet", data_dir=str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert len(ds) == 4 and isinstance(ds.features["images"].feature, datasets.Image)
    row = ds[0]
    assert row["images"][0].size == (320, 200) and row["images"][0].getpixel((5, 5)) == COLOURS[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant", "user",
                                                     "assistant"]
    placeholders = sum(part["type"] == "image" for m in row["messages"] for part in m["content"])
    assert placeholders == len(row["images"]) == 3
    assert is_conversational(row)
    resolved, plugins = load_config(config)
    tokenizer = resolved.create("model", plugins, run_dir=tmp_path / "scratch").tokenizer
    text = apply_chat_template(row, tokenizer)["text"]
    assert text.count("<|vision_start|><|image_pad|><|vision_end|>") == 3
    assert "Task: " in text and "wc -l &lt; ~/log.txt" not in text and "wc -l < ~/log.txt" in text
    assert "cursor at (0, 0)\ntyped" in text  # the loop's feedback, then the environment's, as the agent saw them

    # the warm start from the JSONL and from the dataset: the same demonstrations, segments and losses
    from_jsonl = configured(tmp_path, "jsonl", source)
    with_tracker = ["trackers=[{name: tensorboard}]"]
    assert run_cli("core.sft", "--config", str(from_jsonl), *with_tracker).returncode == 0
    assert run_cli("core.sft", "--config", str(configured(tmp_path, "parquet", out))).returncode == 0
    runs = {p.name.split("-")[0]: p for p in (tmp_path / "runs").iterdir()}
    a, b = MetricsLog(runs["jsonl"]).read(), MetricsLog(runs["parquet"]).read()
    assert len(a) == len(b) == 6  # 3 train demonstrations x 2 epochs, one held out
    assert [r["train/loss/nll"] for r in a] == [r["train/loss/nll"] for r in b]
    assert [r.get("heldout/loss") for r in a] == [r.get("heldout/loss") for r in b]
    sa, sb = (json.loads((runs[k] / "summary.json").read_text()) for k in ("jsonl", "parquet"))
    assert sa["demonstrations"] == sb["demonstrations"] and sa["segments"] == sb["segments"]

    # the warm start's steps reached the tracker: loss, learning rate, held-out loss
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(runs["jsonl"] / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss/nll")] == list(range(6))
    assert [round(e.value, 5) for e in events.Scalars("train/loss/nll")] == [round(r["train/loss/nll"], 5) for r in a]
    assert len(events.Scalars("train/actor/lr")) == 6
    assert [e.step for e in events.Scalars("heldout/loss")] == [2, 5]  # each epoch's last step


def test_a_dataset_without_the_columns_is_one_error_naming_them_and_the_schema(tmp_path) -> None:
    import datasets

    bad = tmp_path / "bad"
    datasets.Dataset.from_list([{"task_id": "os-count-lines", "trajectory_id": "x", "success": True, "reward": 1.0,
                                 "messages": [{"role": "user", "content": "hi"}]}]).to_parquet(
        str(bad / "data" / "train-00000-of-00001.parquet"))
    proc = run_cli("core.sft", "--config", str(configured(tmp_path, "bad", bad)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    assert "Traceback" not in err and "demonstrations have 1 problem" in err
    assert "lacks the columns ['initial_screenshot', 'turns', 'images']" in err
    assert "turns: list of {response_text: string" in err and "python -m core.export writes one" in err
    assert not (only_run_dir(tmp_path / "runs") / "checkpoints").exists()


def test_export_refuses_to_overwrite_and_names_a_missing_config(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    source = tmp_path / "loose.jsonl"
    source.write_text("{}\n")
    proc = run_cli("core.export", str(source), "--out", str(out))
    assert proc.returncode == 2 and "no config.yaml at or above it; pass --config" in proc.stderr
    proc = run_cli("core.export", str(source), "--out", str(out), "--config", str(small_config(tmp_path)))
    assert proc.returncode == 2 and "exists and is not empty" in proc.stderr and (out / "keep.txt").exists()
