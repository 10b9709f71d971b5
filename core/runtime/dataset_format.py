"""Trajectories as a Hugging Face ``datasets`` dataset: the schema :mod:`core.export` writes and
:mod:`core.runtime.demonstrations` reads back.

One row per trajectory. ``messages`` and ``images`` are the chat format TRL's SFT trainer reads for
vision-language models (``{"role", "content": [{"type": "text", "text"}, {"type": "image"}]}``, the
``k``-th image placeholder standing for ``images[k]``); the turn-level columns (``initial_screenshot``,
``turns``) say which image each observation is and hold the recorded actions and feedback, so a row
replays into exactly the training context the JSONL record it came from does.

The on-disk layout is the Hub's: ``DIR/data/train-00000-of-00001.parquet`` plus ``DIR/README.md``;
``datasets.load_dataset("parquet", data_dir=DIR)`` (or ``load_dataset(DIR)``) loads it, and so does a
directory written by ``Dataset.save_to_disk`` with these columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from core.errors import ScaleCUAError

#: column -> its type, as the error for a dataset that lacks some lists them
SCHEMA: dict[str, str] = {
    "trajectory_id": "string",
    "task_id": "string",
    "instruction": "string",
    "success": "bool",
    "reward": "float64",
    "source": "string (file:line of the record it came from)",
    "initial_screenshot": "bool (images[0] is the first observation)",
    "turns": "list of {response_text: string, actions: string (JSON list of actions), feedback: string, "
             "loop_feedback: string, screenshot: bool (the next image is the observation after this turn)}",
    "images": "list of Image",
    "messages": "list of {role: string, content: list of {type: 'text' | 'image', text: string}}",
}
#: what :mod:`core.runtime.demonstrations` needs to rebuild a demonstration (``messages`` and ``source`` are for others)
REQUIRED = ("trajectory_id", "task_id", "success", "reward", "initial_screenshot", "turns", "images")
SPLIT_FILE = "data/train-00000-of-00001.parquet"


class DatasetSchemaError(ScaleCUAError):
    exit_code = 2


def features() -> Any:
    """The ``datasets.Features`` of an export."""
    import datasets as hf

    listing = getattr(hf, "List", None) or hf.Sequence
    text = hf.Value("string")
    return hf.Features({
        "trajectory_id": text, "task_id": text, "instruction": text, "success": hf.Value("bool"),
        "reward": hf.Value("float64"), "source": text, "initial_screenshot": hf.Value("bool"),
        "turns": listing({"response_text": text, "actions": text, "feedback": text, "loop_feedback": text,
                          "screenshot": hf.Value("bool")}),
        "images": listing(hf.Image()),
        "messages": listing({"role": text, "content": listing({"type": text, "text": text})}),
    })


def is_dataset(path: Path) -> bool:
    """A Parquet file, or a directory holding Parquet files or a ``save_to_disk`` dataset."""
    if path.is_file():
        return path.suffix == ".parquet"
    return path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "state.json").is_file()
                              or any(path.glob("*.parquet")) or any(path.glob("data/*.parquet")))


def _check_columns(columns: list[str], where: Path) -> None:
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        expected = "\n".join(f"  {name}: {kind}" for name, kind in SCHEMA.items())
        raise DatasetSchemaError(
            f"{where}: the dataset lacks the columns {missing} (it has {sorted(columns)}). A ScaleCUA trajectory "
            f"dataset (python -m core.export writes one) has:\n{expected}")


def _image_bytes(cell: Any) -> bytes:
    if isinstance(cell, Mapping):
        if cell.get("bytes"):
            return bytes(cell["bytes"])
        if cell.get("path"):
            return Path(cell["path"]).read_bytes()
    if isinstance(cell, (bytes, bytearray)):
        return bytes(cell)
    if hasattr(cell, "save"):  # a decoded PIL image: PNG it again
        import io

        buffer = io.BytesIO()
        cell.save(buffer, "PNG")
        return buffer.getvalue()
    raise DatasetSchemaError(f"an images cell is neither image bytes nor a path: {type(cell).__name__}")


def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any], list[bytes]]]:
    """``(where, row, image PNG bytes)`` for every row of the dataset at ``path``, images undecoded."""
    if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "state.json").is_file()):
        import datasets as hf

        table = hf.load_from_disk(str(path))
        if isinstance(table, hf.DatasetDict):
            table = table["train"] if "train" in table else next(iter(table.values()))
        _check_columns(list(table.column_names), path)
        listing = getattr(hf, "List", None) or hf.Sequence
        table = table.cast_column("images", listing(hf.Image(decode=False)))
        for number, row in enumerate(table):
            yield f"{path}[{number}]", row, [_image_bytes(c) for c in row["images"]]
        return
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted([*path.glob("*.parquet"), *path.glob("data/*.parquet")])
    for file in files:
        parquet = pq.ParquetFile(file)
        _check_columns(list(parquet.schema_arrow.names), file)
        number = 0
        for batch in parquet.iter_batches(batch_size=64):
            for row in batch.to_pylist():
                yield f"{file}[{number}]", row, [_image_bytes(c) for c in row["images"] or []]
                number += 1


def row_record(row: Mapping[str, Any], count: int) -> dict[str, Any]:
    """A row as a trajectory record (:func:`core.runtime.metrics.trajectory_record`'s fields), its screenshots named
    ``image:<k>`` for the ``k``-th of ``count`` images."""
    import json

    nxt = 0

    def take(flag: Any) -> str | None:
        nonlocal nxt
        if not flag:
            return None
        nxt += 1
        return f"image:{nxt - 1}" if nxt <= count else f"image:{nxt - 1} (the row has {count} images)"

    initial = take(row.get("initial_screenshot"))
    turns = []
    for index, turn in enumerate(row.get("turns") or []):
        raw = turn.get("actions")
        turns.append({"index": index, "response_text": turn.get("response_text"),
                      "actions": json.loads(raw) if isinstance(raw, str) and raw else raw,
                      "feedback": turn.get("feedback"), "loop_feedback": turn.get("loop_feedback"),
                      "screenshot": take(turn.get("screenshot"))})
    return {"trajectory_id": row.get("trajectory_id"), "task_id": row.get("task_id"), "success": row.get("success"),
            "reward": row.get("reward"), "initial_screenshot": initial, "turns": turns}


def write_card(out: Path, *, rows: int, sources: list[str]) -> None:
    """The dataset card: the Hub reads its YAML header (config, split, features)."""
    listed = "\n".join(f"- `{s}`" for s in sources)
    schema = "\n".join(f"| `{name}` | {kind} |" for name, kind in SCHEMA.items())
    (out / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*.parquet\n"
        "tags:\n- computer-use\n- trajectories\n---\n\n# ScaleCUA trajectories\n\n"
        f"{rows} trajectories exported by `python -m core.export` from:\n\n{listed}\n\n"
        "Load: `datasets.load_dataset(\"parquet\", data_dir=DIR)`; `messages` + `images` are the chat format TRL's "
        "`SFTTrainer` reads for vision-language models; `core.sft` trains from this directory "
        "(`warm_start.demonstrations.paths: [DIR]`).\n\n| column | type |\n|---|---|\n" + schema + "\n",
        encoding="utf-8")
