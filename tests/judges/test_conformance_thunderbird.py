"""``check_thunderbird_folder`` (:mod:`environments.judges.apps`; 2 tasks) against OSWorld's own
(``desktop_env/evaluators/metrics/thunderbird.py``, run unchanged) on the same files.

Real: the folder files, written here as bytes: Thunderbird mbox folders (messages starting ``From - `` as
Thunderbird writes them, or ``FROM - `` as upstream's docstring says), with ``X-Mozilla-Status`` (0000, 0001,
0008, 0009), ``X-Mozilla-Status2`` and ``X-Mozilla-Keys`` lines, duplicated and empty messages, ``.eml`` files
(the Google Drive task's), blank and empty files, CRLF and Unicode blanks. Hypothesis draws them, the gold file and
a result derived from it (the same, messages dropped, added, re-flagged, duplicated, emptied), and the options
(the suite's two forms: none, and ``remove_deleted`` + ``remove_duplicate``; and every other combination of the
four), for one file and for the lists the tasks use (``vm_file``/``cloud_file`` with ``multi`` and ``gives``,
None where the desktop had no file). Scores must be equal.

Upstream's quirk, reproduced (``if mail.strip(): continue`` keeps only *blank* pieces): a file reads as the
number of blank pieces of its stripped text split at ``FROM - ``, so with the defaults two folders score 1 when
both or neither are blank or start with ``FROM - ``, whatever their messages (hand-derived examples below).
Where upstream raises (a gold file None or missing, a result file missing, a list against one path, bytes that
are not UTF-8), ours is checked by hand: 0, or for non-UTF-8 bytes the score of the file's other text.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.pluginmanager import load_plugins
from environments.judges.apps import check_thunderbird_folder
from environments.suite_coverage import Coverage
from tests.judges.upstream import metrics_module

#: the evaluators of the suite's two check_thunderbird_folder tasks (OSWorld's evaluation_examples/examples/
#: multi_apps/<id>.json, as THUDM/ComputerRL publishes them)
SUITE_EVALUATORS: dict[str, dict[str, Any]] = {'78aed49a-a710-4321-a793-b611a7c5b56b': {'func': ['check_thunderbird_folder', 'compare_pdfs'],
                                          'result': [{'type': 'vm_file',
                                                      'multi': True,
                                                      'path': ['/home/user/.thunderbird/t5q2a5hp.default-release/Mail/Local '
                                                               'Folders/have_seen',
                                                               '/home/user/.thunderbird/t5q2a5hp.default-release/Mail/Local '
                                                               'Folders/Bills'],
                                                      'dest': ['have_seen', 'Bills'],
                                                      'gives': [0, 1]},
                                                     {'type': 'googledrive_file',
                                                      'settings_file': 'evaluation_examples/settings/googledrive/settings.yml',
                                                      'path_list': [['attachment', 'Invoice-01234567-89ab.pdf'],
                                                                    ['attachment', 'Receipt-0123-4567.pdf']],
                                                      'dest': ['Invoice-01234567-89ab.pdf',
                                                               'Receipt-0123-4567.pdf']}],
                                          'expected': [{'type': 'cloud_file',
                                                        'multi': True,
                                                        'path': ['https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/78aed49a-a710-4321-a793-b611a7c5b56b/have_seen.bin',
                                                                 'https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/78aed49a-a710-4321-a793-b611a7c5b56b/Bills.bin'],
                                                        'dest': ['have_seen_gold', 'Bills_gold'],
                                                        'gives': [0, 1]},
                                                       {'type': 'cloud_file',
                                                        'multi': True,
                                                        'path': ['https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/78aed49a-a710-4321-a793-b611a7c5b56b/Invoice-01234567-89ab.pdf',
                                                                 'https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/78aed49a-a710-4321-a793-b611a7c5b56b/Receipt-0123-4567.pdf'],
                                                        'dest': ['Invoice-01234567-89ab_gold.pdf',
                                                                 'Receipt-0123-4567_gold.pdf'],
                                                        'gives': [0, 1]}],
                                          'options': [{'remove_deleted': True, 'remove_duplicate': True}, {}]},
 'a0b9dc9c-fc07-4a88-8c5d-5e3ecad91bcb': {'func': 'check_thunderbird_folder',
                                          'result': {'type': 'googledrive_file',
                                                     'settings_file': 'evaluation_examples/settings/googledrive/settings.yml',
                                                     'path_list': [['emails',
                                                                    'Amazon Web Services Invoice Available '
                                                                    '[Account: 0123456789ab] [Invoice ID: '
                                                                    '0123456789].eml'],
                                                                   ['emails',
                                                                    'Your receipt from X (formerly Twitter) '
                                                                    '#0123-4567.eml']],
                                                     'dest': ['pred1.eml', 'pred2.eml']},
                                          'expected': {'type': 'cloud_file',
                                                       'multi': 'true',
                                                       'path': ['https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/a0b9dc9c-fc07-4a88-8c5d-5e3ecad91bcb/Amazon%20Web%20Services%20Invoice%20Available%20%5BAccount%3A%200123456789ab%5D.eml',
                                                                'https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/a0b9dc9c-fc07-4a88-8c5d-5e3ecad91bcb/Your%20receipt%20from%20X%20(formerly%20Twitter)%20%230123-4567.eml'],
                                                       'dest': ['gold1.eml', 'gold2.eml'],
                                                       'gives': [0, 1]}}}
#: the suite's options of this metric (78aed49a; a0b9dc9c gives none)
SUITE_OPTIONS = [{}, {"remove_deleted": True, "remove_duplicate": True}]
KEYS = ("ignore_status", "ignore_keys", "remove_deleted", "remove_duplicate")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def upstream() -> Any:
    return metrics_module("thunderbird").check_thunderbird_folder


# -- folder files -------------------------------------------------------------------------------------------

STATUS = st.sampled_from(["0000", "0001", "0008", "0009", "0003", "0801"]).map("X-Mozilla-Status: {}\n".format)
STATUS2 = st.sampled_from(["00000000", "10000000"]).map("X-Mozilla-Status2: {}\n".format)
KEYS_LINE = st.sampled_from(["", "$label1", "$label1 $label4", "Important"]).map(
    lambda k: f"X-Mozilla-Keys: {k:<80}\n")
HEADERS = st.lists(st.sampled_from(["From: AWS <no-reply@aws.example>\n", "Subject: Invoice Available\n",
                                    "Subject: Your receipt from X\n", "To: user@example.com\n",
                                    "Date: Mon, 4 Mar 2024 10:00:00 +0000\n"]), max_size=3).map("".join)
BODY = st.sampled_from(["", "Hello,\n\nyour invoice is attached.\n", "Z\u00fcrich \u2014 caf\u00e9\n",
                        "PGh0bWw+PC9odG1sPg==\n", "FROM - inside a body\n", "\n\n"])
SEPARATOR = st.sampled_from(["From - ", "FROM - ", "From - Mon Mar  4 10:00:00 2024\n",
                             "FROM - Mon Mar  4 10:00:00 2024\n"])
MESSAGE = st.builds(lambda sep, status, status2, keys, headers, body, mime: (
    sep + status + status2 + keys + ("MIME-Version: 1.0\n" if mime else "") + headers + "\n" + body),
    SEPARATOR, STATUS | st.just(""), STATUS2 | st.just(""), KEYS_LINE | st.just(""), HEADERS, BODY, st.booleans())
#: pieces that leave blanks between separators, the only pieces upstream's reading keeps
BLANK = st.sampled_from(["FROM - ", "FROM - \n", "FROM - \n\n", "FROM -  \u00a0\n", "\n", " ", "\u2028", "\x1c"])
EML = st.builds(lambda headers, body: "MIME-Version: 1.0\n" + headers + "Content-Type: text/plain\n\n" + body,
                HEADERS, BODY)
FOLDER = st.one_of(
    st.lists(MESSAGE | BLANK, max_size=6).map("".join),
    st.lists(st.sampled_from(["FROM - \n", "From - \n"]) | MESSAGE, max_size=4).map(lambda m: "".join(m * 2)),  # twice
    EML, st.sampled_from(["", " \n", "\n\n\t", "FROM - ", "From - "]))
PAD = st.sampled_from(["", "\n", "  \n", "\r\n"])


@st.composite
def variant(draw: st.DrawFn, gold: str) -> str:
    """A result folder made from the gold one: the same, re-padded, CRLF, messages dropped, duplicated,
    re-flagged (deleted 0008), added, or another folder."""
    pieces = gold.split("FROM - ")
    how = draw(st.sampled_from(["same", "pad", "crlf", "drop", "duplicate", "deleted", "add", "other", "empty"]))
    if how == "same":
        return gold
    if how == "pad":
        return draw(PAD) + gold + draw(PAD)
    if how == "crlf":
        return gold.replace("\n", "\r\n")
    if how == "drop" and len(pieces) > 1:
        del pieces[draw(st.integers(0, len(pieces) - 1))]
        return "FROM - ".join(pieces)
    if how == "duplicate":
        return gold + gold
    if how == "deleted":
        return gold.replace("X-Mozilla-Status: 0001", "X-Mozilla-Status: 0009").replace("Status: 0000", "Status: 0008")
    if how == "add":
        return gold + draw(MESSAGE | BLANK)
    if how == "empty":
        return ""
    return draw(FOLDER)


def write(path: Path, text: str | bytes) -> str:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def same(result: Any, expected: Any, options: dict[str, Any]) -> float:
    theirs = upstream()(result, expected, **options)
    mine = check_thunderbird_folder(result, expected, **options)
    assert float(mine) == float(theirs), (result, expected, options, mine, theirs)
    return float(theirs)


OPTIONS = st.sampled_from(SUITE_OPTIONS) | st.dictionaries(st.sampled_from(KEYS), st.booleans())


@SETTINGS
@given(data=st.data(), options=OPTIONS)
def test_one_folder_scores_as_osworld(tmp_path: Path, data: st.DataObject, options: dict[str, Any]) -> None:
    gold = data.draw(FOLDER, "gold")
    result = data.draw(variant(gold), "result")
    same(write(tmp_path / "have_seen", result), write(tmp_path / "have_seen_gold", gold), options)


@SETTINGS
@given(data=st.data(), options=OPTIONS, missing=st.sampled_from([None, 0, 1]))
def test_the_suites_file_lists_score_as_osworld(tmp_path: Path, data: st.DataObject, options: dict[str, Any],
                                                missing: int | None) -> None:
    """78aed49a: ``vm_file`` multi (have_seen, Bills; None for a file the desktop lacks) against ``cloud_file``
    multi; a0b9dc9c's two ``.eml`` files have the same shape."""
    results, golds = [], []
    for name in ("have_seen", "Bills"):
        gold = data.draw(FOLDER | EML, f"{name} gold")
        golds.append(write(tmp_path / f"{name}_gold", gold))
        results.append(write(tmp_path / name, data.draw(variant(gold), f"{name} result")))
    if missing is not None:
        results[missing] = None
    same(results, golds, options)


def test_the_generated_files_give_both_scores(tmp_path: Path) -> None:
    """The strategies reach both scores for the suite's options (hypothesis' examples are not inspected)."""
    files = {"thunderbird": "From - Mon\nX-Mozilla-Status: 0001\n\nhi\n", "other": "From - Tue\n\nbye\n",
             "starts": "FROM - \nX-Mozilla-Status: 0000\n\nhi\n", "empty": "", "eml": "Subject: x\n\nbody\n"}
    paths = {name: write(tmp_path / name, text) for name, text in files.items()}
    scores = {(a, b, i): same(paths[a], paths[b], o) for a, b in itertools.product(paths, repeat=2)
              for i, o in enumerate(SUITE_OPTIONS)}
    assert set(scores.values()) == {0.0, 1.0}


# -- upstream's reading, by hand ---------------------------------------------------------------------------

def test_messages_do_not_count_only_blank_pieces_do(tmp_path: Path) -> None:
    """Hand-derived: ``if mail.strip(): continue`` drops every message, so different folders score 1 and a
    folder against its empty copy 0."""
    bills = write(tmp_path / "Bills", "From - Mon\nX-Mozilla-Status: 0001\nSubject: AWS\n\ninvoice\n")
    other = write(tmp_path / "other", "From - Tue\nX-Mozilla-Status: 0009\nSubject: X receipt\n\nreceipt\n" * 3)
    empty = write(tmp_path / "empty", "")
    blank = write(tmp_path / "blank", "\n \n")
    assert check_thunderbird_folder(bills, other) == upstream()(bills, other) == 1.0
    assert check_thunderbird_folder(bills, empty) == upstream()(bills, empty) == 0.0
    assert check_thunderbird_folder(blank, empty) == upstream()(blank, empty) == 1.0
    # "FROM - " at the start leaves a blank first piece; twice in a row another one
    once, twice = write(tmp_path / "once", "FROM - a\n"), write(tmp_path / "twice", "FROM - FROM - a\n")
    assert check_thunderbird_folder(once, empty) == upstream()(once, empty) == 1.0
    assert check_thunderbird_folder(twice, once) == upstream()(twice, once) == 1.0  # deduplicated
    options = {"remove_duplicate": False}
    assert check_thunderbird_folder(twice, once, **options) == upstream()(twice, once, **options) == 0.0


def test_lists_pair_in_order_and_stop_at_the_shorter(tmp_path: Path) -> None:
    empty, full = write(tmp_path / "empty", ""), write(tmp_path / "full", "From - x\n\nhi\n")
    for result, expected in (([full, empty], [full, empty]), ([empty, full], [full, empty]), ([], [full]),
                             ([full], [full, empty]), ([None, full], [full, full]), ([full, None], [empty, full])):
        same(result, expected, {})


def test_where_upstream_raises_ours_scores_zero(tmp_path: Path) -> None:
    full = write(tmp_path / "full", "From - x\n\nhi\n")
    cases = {"gold None": (full, None, TypeError), "gold list None": ([full], [None], TypeError),
             "result missing": (str(tmp_path / "gone"), full, FileNotFoundError),
             "gold missing": (full, str(tmp_path / "gone"), FileNotFoundError),
             "result a folder": (str(tmp_path), full, IsADirectoryError),
             "lists against one gold": ([full], full, TypeError)}
    for name, (result, expected, error) in cases.items():
        with pytest.raises(error):
            upstream()(result, expected)
        assert check_thunderbird_folder(result, expected) == 0.0, name
    assert check_thunderbird_folder(full, [full]) == 0.0  # upstream opens the path's characters ("/" a folder)


def test_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """Upstream's ``open`` (UTF-8 here, as in OSWorld's harness) raises; ours reads the other bytes as they are:
    a Latin-1 body is not blank, a file starting ``FROM - `` keeps its blank first piece."""
    latin = write(tmp_path / "latin", b"From - x\n\nZ\xfcrich\n")
    starts = write(tmp_path / "starts", b"FROM - \nSubject: caf\xe9\n")
    full = write(tmp_path / "full", "From - x\n\nhi\n")
    empty = write(tmp_path / "empty", "")
    with pytest.raises(UnicodeDecodeError):
        upstream()(latin, full)
    assert check_thunderbird_folder(latin, full) == 1.0
    assert check_thunderbird_folder(starts, empty) == 1.0 and check_thunderbird_folder(starts, full) == 0.0


# -- the suite's tasks ------------------------------------------------------------------------------------

@pytest.mark.parametrize("task_id", sorted(SUITE_EVALUATORS))
def test_the_suites_tasks_find_the_metric_and_its_options(task_id: str, tmp_path: Path) -> None:
    """Registered as a metric plugin, the suite's options are parameters (none ignored), and the registry's
    metric scores as upstream's on the task's file shapes."""
    task = {"id": task_id, "evaluator": SUITE_EVALUATORS[task_id]}
    plugins = load_plugins()
    coverage = Coverage(plugins)
    missing = coverage.missing(task)
    assert not [m for m in missing if "check_thunderbird_folder" in m] and coverage.ignored == []
    evaluator = task["evaluator"]
    funcs = evaluator["func"] if isinstance(evaluator["func"], list) else [evaluator["func"]]
    options = evaluator.get("options") or {}
    options = (options if isinstance(options, list) else [options])[funcs.index("check_thunderbird_folder")] or {}
    entry = plugins.registry("metric").get("check_thunderbird_folder")
    metric = getattr(entry, "factory", entry)
    assert metric is check_thunderbird_folder
    golds = [write(tmp_path / f"gold{i}", "From - x\nX-Mozilla-Status: 0001\n\nhi\n") for i in range(2)]
    for results in ([write(tmp_path / "a", "From - y\n\nbye\n"), golds[1]], [write(tmp_path / "b", ""), golds[1]],
                    [None, golds[1]]):
        assert float(metric(results, golds, **options)) == float(upstream()(results, golds, **options))
