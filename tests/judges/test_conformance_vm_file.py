"""The ``vm_file`` getter (:mod:`environments.judges.getters`) against OSWorld's own (``desktop_env/evaluators/
getters/file.py``) on the same configs, both fetching from a real HTTP server on loopback that speaks OSWorld's
``POST /file`` (:class:`tests.judges.osworld_server.FileServer`): upstream through its own ``PythonController``,
ours through :class:`environments.client.EnvironmentClient`.

The answer's shape (one path, a list, None), each file's place in the cache and bytes, and what lands in the
cache must agree, for one file present or missing or a directory, and for ``multi`` with and without ``gives``
with files missing (None in their place: the partial credit of task 185f29bd). Then whole evaluations: our
:func:`environments.judges.evaluate.evaluate` of a 185f29bd-shaped task scores what upstream's getters and
``compare_pdfs`` score. Hand-derived: an unreachable desktop is an environment failure here (upstream retries,
then answers None), a ``dest`` inside a folder is written there (upstream: None), and malformed configs are
errors.
"""

from __future__ import annotations

import asyncio
import types
from pathlib import Path
from typing import Any, Iterator

import pymupdf
import pytest

from core.errors import EnvironmentFailure
from core.interfaces import JudgeServices
from core.types import JudgementStatus, Task
from environments.client import EnvironmentClient
from environments.judges import getters
from environments.judges.evaluate import evaluate
from tests.judges import upstream as upstream_loader
from tests.judges.osworld_server import FileServer

DESKTOP = "/home/user/Desktop"
NAMES = ("Alex Lee", "David Wilson", "Emily Johnson")


def write_pdf(path: Path, lines: list[str]) -> None:
    document = pymupdf.open()
    page = document.new_page()
    for row, line in enumerate(lines):
        page.insert_text((72, 72 + 18 * row), line)
    document.save(str(path))
    document.close()


def letter(name: str, amount: int) -> list[str]:
    return [f"Dear {name},", f"Your reimbursement of {amount} dollars was approved.", "Regards, Finance"]


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FileServer]]:
    """The VM's disk: a few files on the Desktop, a folder, and two of the three letters (David's is missing)."""
    root = tmp_path_factory.mktemp("vm")
    desktop = root / DESKTOP.lstrip("/")
    (desktop / "folder").mkdir(parents=True)
    (desktop / "a.txt").write_text("alpha")
    (desktop / "b.csv").write_text("x,y\n1,2\n")
    (desktop / "c.bin").write_bytes(bytes(range(256)))
    for name, amount in (("Alex Lee", 120), ("Emily Johnson", 95)):
        write_pdf(desktop / f"{name}.pdf", letter(name, amount))
    server = FileServer(root)
    yield root, server
    server.close()


def upstream_file_getters() -> Any:
    return upstream_loader.getters_module("file", ("pandas",))


def theirs(server: FileServer, cache: Path, config: dict[str, Any]) -> Any:
    from desktop_env.controllers.python import PythonController

    controller = PythonController("127.0.0.1", server.port)
    controller.retry_interval = 0  # it asks three times for a file it does not get
    env = types.SimpleNamespace(controller=controller, cache_dir=str(cache))
    return upstream_file_getters().get_vm_file(env, config)


def ours(port: int, cache: Path, config: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with EnvironmentClient(f"http://127.0.0.1:{port}") as client:
            return await getters.get_vm_file(types.SimpleNamespace(client=client, cache_dir=str(cache)), config)

    return asyncio.run(main())


def shape(answer: Any, cache: Path) -> Any:
    """The answer with each path made relative to the cache (None and list-or-not kept), plus its bytes."""
    if isinstance(answer, list):
        return [shape(item, cache) for item in answer]
    if answer is None:
        return None
    return str(Path(answer).relative_to(cache)), Path(answer).read_bytes()


def cached(cache: Path) -> dict[str, bytes]:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def desk(*names: str) -> list[str]:
    return [f"{DESKTOP}/{name}" for name in names]


CASES: dict[str, dict[str, Any]] = {
    "one file": {"path": f"{DESKTOP}/a.txt", "dest": "a.txt"},
    "one file, another name": {"path": f"{DESKTOP}/c.bin", "dest": "copy.bin"},
    "one file missing": {"path": f"{DESKTOP}/gone.txt", "dest": "gone.txt"},
    "a directory": {"path": f"{DESKTOP}/folder", "dest": "folder"},
    "one file, gives another index": {"path": f"{DESKTOP}/a.txt", "dest": "a.txt", "gives": [1]},
    "time suffix": {"path": f"{DESKTOP}/a.txt", "dest": "a.txt", "time_suffix": True, "time_format": "fixed"},
    "multi without gives: the first": {"path": desk("a.txt", "b.csv", "c.bin"), "dest": ["1", "2", "3"],
                                       "multi": True},
    "multi without gives, the first missing": {"path": desk("gone.txt", "b.csv"), "dest": ["1", "2"],
                                               "multi": True},
    "multi as a string": {"path": desk("b.csv", "a.txt"), "dest": ["1", "2"], "multi": "true"},
    "multi, gives all, one missing": {"path": desk("a.txt", "gone.txt", "c.bin"), "dest": ["1", "2", "3"],
                                      "multi": True, "gives": [0, 1, 2]},
    "multi, gives one": {"path": desk("a.txt", "b.csv", "c.bin"), "dest": ["1", "2", "3"], "multi": True,
                         "gives": [1]},
    "multi, gives out of order": {"path": desk("a.txt", "b.csv", "c.bin"), "dest": ["1", "2", "3"],
                                  "multi": True, "gives": [2, 0]},
    "multi, gives none": {"path": desk("a.txt", "b.csv"), "dest": ["1", "2"], "multi": True, "gives": []},
    "multi, gives past the end": {"path": desk("a.txt", "b.csv"), "dest": ["1", "2"], "multi": True,
                                  "gives": [1, 5]},
    "multi, all missing": {"path": desk("x", "y"), "dest": ["1", "2"], "multi": True, "gives": [0, 1]},
    "multi, a directory": {"path": desk("folder", "a.txt"), "dest": ["1", "2"], "multi": True, "gives": [0, 1]},
    "185f29bd": {"path": desk(*(f"{n}.pdf" for n in NAMES)), "dest": [f"{n}.pdf" for n in NAMES], "multi": True,
                 "gives": [0, 1, 2]},
}


@pytest.mark.parametrize("config", CASES.values(), ids=CASES.keys())
def test_vm_file_answers_as_osworld(disk: tuple[Path, FileServer], tmp_path: Path, config: dict[str, Any]) -> None:
    _, server = disk
    mine_dir, their_dir = tmp_path / "ours", tmp_path / "theirs"
    mine_dir.mkdir(), their_dir.mkdir()
    mine, upstream = ours(server.port, mine_dir, config), theirs(server, their_dir, config)
    assert shape(mine, mine_dir) == shape(upstream, their_dir)
    assert cached(mine_dir) == cached(their_dir)  # files outside ``gives`` are fetched all the same


def test_cases_cover_every_shape(disk: tuple[Path, FileServer], tmp_path: Path) -> None:
    _, server = disk
    answers = [theirs(server, tmp_path, config) for config in CASES.values()]
    assert None in answers and [] in answers and any(isinstance(a, str) for a in answers)
    assert any(isinstance(a, list) and None in a and any(isinstance(x, str) for x in a) for a in answers)


# -- whole evaluations: getters, then compare_pdfs --------------------------------------------------------

AMOUNTS = {"Alex Lee": 120, "David Wilson": 80, "Emily Johnson": 95}


def evaluator_185f29bd(golds: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """185f29bd's evaluator for ``names``: the gold letters (cloud_file, served from this host) as the result, the
    desktop's letters (vm_file) as the expected, both ``multi`` with every index given."""
    golds.mkdir(exist_ok=True)
    for name in names:
        write_pdf(golds / f"{name}_Gold.pdf", letter(name, AMOUNTS[name]))
    every = list(range(len(names)))
    return {
        "func": "compare_pdfs",
        "result": {"type": "cloud_file", "path": [str(golds / f"{n}_Gold.pdf") for n in names],
                   "dest": [f"{n}_Gold.pdf" for n in names], "multi": True, "gives": every},
        "expected": {"type": "vm_file", "path": desk(*(f"{n}.pdf" for n in names)),
                     "dest": [f"{n}.pdf" for n in names], "multi": True, "gives": every},
    }


def upstream_score(server: FileServer, cache: Path, evaluator: dict[str, Any]) -> float:
    """Upstream's evaluate() for one metric: the result getter, the expected getter, the metric on both."""
    compare = upstream_loader.metrics_module("chrome", ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "imagehash",
                                                        "formulas")).compare_pdfs
    result = evaluator["result"]
    golds = [str(cache / d) for d in result["dest"]]
    for source, target in zip(result["path"], golds):  # get_cloud_file would download them; they are on disk
        Path(target).write_bytes(Path(source).read_bytes())
    return compare(golds[0] if len(golds) == 1 else golds, theirs(server, cache, evaluator["expected"]))


def our_judgement(plugins: Any, port: int, cache: Path, evaluator: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with EnvironmentClient(f"http://127.0.0.1:{port}") as client:
            env = types.SimpleNamespace(client=client, env_id="vm", screen_size=(1280, 800))
            services = JudgeServices(plugins.registry("getter"), plugins.registry("metric"), None)
            task = Task(id="185f29bd", instruction="-", evaluator=evaluator)
            return await evaluate(task, env, judge=services, last_action=None, cache_dir=cache)

    return asyncio.run(main())


@pytest.mark.parametrize("names", [NAMES, ("David Wilson",), ("Alex Lee",)],
                         ids=["one of three missing", "the one missing", "the one present"])
def test_evaluation_scores_as_osworld(plugins: Any, disk: tuple[Path, FileServer], tmp_path: Path,
                                      names: tuple[str, ...]) -> None:
    _, server = disk
    evaluator = evaluator_185f29bd(tmp_path / "golds", names)
    (tmp_path / "ours").mkdir(), (tmp_path / "theirs").mkdir()
    judgement = our_judgement(plugins, server.port, tmp_path / "ours", evaluator)
    assert judgement.status == JudgementStatus.OK, judgement.error
    assert judgement.score == pytest.approx(upstream_score(server, tmp_path / "theirs", evaluator), abs=1e-6)
    if names == NAMES:
        assert judgement.score == pytest.approx(2 / 3)  # two of three letters right: partial credit


# -- hand-derived ----------------------------------------------------------------------------------------

def test_an_unreachable_desktop_is_an_environment_failure(tmp_path: Path) -> None:
    """Upstream retries and answers None; here the episode is retried on a fresh desktop instead of scored."""
    server = FileServer(tmp_path)
    port = server.port
    server.close()
    with pytest.raises(EnvironmentFailure):
        ours(port, tmp_path, {"path": f"{DESKTOP}/a.txt", "dest": "a.txt"})


def test_a_dest_in_a_folder_is_made(disk: tuple[Path, FileServer], tmp_path: Path) -> None:
    """Upstream makes only the cache folder, so a ``dest`` inside a folder fails to write there (None); no task
    names one, and here the folder is made."""
    _, server = disk
    local = ours(server.port, tmp_path, {"path": f"{DESKTOP}/c.bin", "dest": "sub/copy.bin"})
    assert local == str(tmp_path / "sub" / "copy.bin") and Path(local).read_bytes() == bytes(range(256))


@pytest.mark.parametrize("config,message", [
    ({"path": desk("a.txt", "b.csv"), "dest": ["1", "2"]}, "'multi'"),
    ({"path": f"{DESKTOP}/a.txt", "dest": "a.txt", "multi": True}, "'multi'"),
    ({"path": desk("a.txt", "b.csv"), "dest": ["1"], "multi": True}, "2 path"),
    ({"dest": "a.txt"}, "'path'"),
    ({"path": f"{DESKTOP}/a.txt", "dest": "../a.txt"}, "escapes"),
])
def test_malformed_configs_are_errors(disk: tuple[Path, FileServer], tmp_path: Path, config: dict[str, Any],
                                      message: str) -> None:
    """Upstream pairs a path list's characters or a string's with the names, or asks the server for a list."""
    _, server = disk
    with pytest.raises(ValueError, match=message):
        ours(server.port, tmp_path, config)
