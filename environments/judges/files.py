"""File, archive and editor-configuration checks (OSWorld's names and semantics).

* ``compare_archive(result, expected, file_path='', file_type='text', **options)`` — both archives unpacked
  (into ``<archive>_pred`` / ``<archive>_gold`` beside them in the evaluation's cache; tar members through
  the ``data`` filter); the sorted file names under ``file_path`` must be equal, then the score is the mean of
  the ``file_type`` comparison over the pairs (``text``, ``pdf``, ``docx``, ``ppt``, ``image``, ``csv``,
  ``table``: the registered metric of that kind; other kinds are an error naming the supported ones).
* ``compare_zip_files`` — the same member names and bytes; PDF members compare by text
  (``difflib.SequenceMatcher`` ratio >= 0.95).
* ``file_contains(result, rules)`` — every string of ``rules['expected']`` occurs in the text file.
* ``check_line_number(result, rules)`` — the number of lines holding a ``HH:MM:SS`` time equals
  ``rules['expected']``.
* ``compare_terminal_and_txt(result, expected)`` — a text file's content equals the terminal output.
* ``compare_python_pure_text(result, expected)`` — equal after dropping a leading shebang / coding line
  (first three lines), blank lines, and trailing blanks (tabs as 4 spaces).
* ``check_json_keybindings(result, rules)`` — the keybindings file (JSON list; a first comment line may be
  skipped) holds ``rules['expected']``.
* ``compare_config(result, rules)`` / ``compare_answer(result, rules)`` — the file's text / the value equals
  ``rules['expected']``.
* ``check_mp3_meta(result, rules)`` — every ``{tag: value rule}`` of ``rules`` holds for the file's ID3 tags
  (mutagen's EasyID3 names, e.g. ``title``, ``artist``; several values joined with commas, a missing tag
  ``""``); rules as :func:`environments.judges.rules.match_value`. A file without ID3 tags scores 0.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping

import structlog

from environments.judges.rules import match_value

log = structlog.get_logger(__name__)

TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")


def _comparator(file_type: str) -> Callable[..., float]:
    from environments.judges import documents, images, metrics, pdfs, slides, tables

    comparators: dict[str, Callable[..., float]] = {
        "text": metrics.compare_text_file, "pdf": pdfs.compare_pdfs, "docx": documents.compare_docx_files,
        "ppt": slides.compare_pptx_files, "image": images.compare_images, "csv": metrics.compare_csv,
        "table": tables.compare_table,
    }
    if file_type not in comparators:
        raise ValueError(f"compare_archive: file_type {file_type!r} is not supported here; use one of "
                         f"{', '.join(comparators)}")
    return comparators[file_type]


def _unpack(archive: str, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        shutil.unpack_archive(archive, folder, filter="data")
    except TypeError:  # a format whose unpacker takes no filter (zip: its names are sanitized already)
        shutil.unpack_archive(archive, folder)


def compare_archive(result: str | None, expected: str | None = None, *, file_path: str = "",
                    file_type: str = "text", **options: Any) -> float:
    compare = _comparator(file_type)
    if not result or not expected or not os.path.isfile(result) or not os.path.isfile(expected):
        return 0.0
    mine, gold = Path(os.path.splitext(result)[0] + "_pred"), Path(os.path.splitext(expected)[0] + "_gold")
    try:
        _unpack(result, mine)
        _unpack(expected, gold)
    except (shutil.ReadError, tarfile.TarError, ValueError, OSError) as exc:  # incl. a member escaping the folder
        log.info("archive cannot be unpacked", error=str(exc))
        return 0.0
    try:
        names, gold_names = sorted(os.listdir(mine / file_path)), sorted(os.listdir(gold / file_path))
    except OSError:
        return 0.0
    if names != gold_names or not names:
        return 0.0
    return sum(compare(str(mine / file_path / a), str(gold / file_path / b), **options)
               for a, b in zip(names, gold_names)) / len(names)


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages)


def compare_zip_files(result: str | None, expected: str | None = None, **_: Any) -> float:
    if not result or not expected or not os.path.isfile(result) or not os.path.isfile(expected):
        return 0.0
    try:
        with zipfile.ZipFile(result) as first, zipfile.ZipFile(expected) as second:
            names = set(first.namelist())
            if names != set(second.namelist()):
                return 0.0
            for name in names:
                a, b = first.read(name), second.read(name)
                if name.lower().endswith(".pdf"):
                    if difflib.SequenceMatcher(None, _pdf_text(a), _pdf_text(b)).ratio() < 0.95:
                        return 0.0
                elif a != b:
                    return 0.0
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        log.info("zip cannot be compared", error=str(exc))
        return 0.0
    return 1.0


def _text(path: str | None) -> str | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def file_contains(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    text = _text(result)
    if text is None or not isinstance(rules, Mapping):
        return 0.0
    return float(all(str(item) in text for item in rules.get("expected", [])))


def check_line_number(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    text = _text(result)
    if text is None or not isinstance(rules, Mapping) or "expected" not in rules:
        return 0.0
    return float(sum(1 for line in text.splitlines() if TIME.search(line)) == int(rules["expected"]))


def compare_terminal_and_txt(result: str | None, expected: Any = None, **_: Any) -> float:
    text = _text(result)
    return float(text is not None and bool(expected) and text == expected)


def _pure_python(text: str) -> str:
    lines = text.splitlines()
    start = 0
    while start < min(3, len(lines)) and lines[start].strip().startswith(
            ("#!", "# -*- coding:", "# coding:", "# coding=")):
        start += 1
    return "\n".join(line.expandtabs(4).rstrip() for line in lines[start:] if line.strip())


def compare_python_pure_text(result: str | None, expected: str | None = None, **_: Any) -> float:
    mine, gold = _text(result), _text(expected)
    return float(mine is not None and gold is not None and _pure_python(mine) == _pure_python(gold))


def check_json_keybindings(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    text = _text(result)
    if text is None or not isinstance(rules, Mapping):
        return 0.0
    for candidate in (text, text.split("\n", 1)[1] if "\n" in text else ""):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, list):
            return float(rules.get("expected") in data)
    return 0.0


def compare_config(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    text = _text(result)
    return float(text is not None and isinstance(rules, Mapping) and text == rules.get("expected"))


def compare_answer(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    return float(bool(result) and isinstance(rules, Mapping) and result == rules.get("expected"))


def check_mp3_meta(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    from mutagen.easyid3 import EasyID3
    from mutagen.id3 import ID3NoHeaderError

    if not result or not os.path.isfile(result) or not isinstance(rules, Mapping):
        return 0.0
    try:
        tags = EasyID3(result)
    except ID3NoHeaderError:
        return 0.0
    for key, rule in rules.items():
        value = tags.get(key, "")
        if not match_value(",".join(value) if isinstance(value, list) else value, rule):
            return 0.0
    return 1.0
