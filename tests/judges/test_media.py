"""Media judges (:mod:`environments.judges.media`) against OSWorld's own functions.

* ``compare_videos`` / ``compare_audios``: upstream's ``desktop_env/evaluators/metrics/vlc.py`` (only its unused
  ``acoustid`` import stubbed) and ours on the same generated files — videos written with ``cv2.VideoWriter``
  (identical, flipped, cut short, a few or many frames changed, undecodable), WAV files written with the
  stdlib ``wave`` module and an MP3 written with soundfile (same and different tones, another sample rate,
  empty, undecodable); every case must score the same, and the cases span 1, 0 and scores in between.
* ``background_image_in_slide`` / ``audio_in_slide``: upstream's ``getters/impress.py`` (its sibling
  ``getters/file.py`` imports pandas, stubbed: never called) and ours read the same generated ``.pptx`` files
  (python-pptx, with a ``p:bg`` background picture and audio relationships added to the slides' XML) from a
  real HTTP server on loopback that speaks OSWorld's ``POST /file``; upstream through its own
  ``PythonController``, ours through :class:`environments.client.EnvironmentClient`. The extracted file's
  place in the cache and its bytes must agree.
* A missing linked file: None on both sides. Hand-derived: a missing ``.pptx`` (upstream crashes there), strict
  config errors.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import io
import sys
import types
import wave
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from environments.client import EnvironmentClient
from environments.judges import media
from tests.judges import upstream as upstream_loader
from tests.judges.osworld_server import FileServer
from tests.judges.upstream import metrics_module

REAL = ("cv2", "imagehash", "librosa", "fastdtw")


@pytest.fixture(scope="module")
def vlc_upstream() -> Any:
    """Upstream's vlc metrics with the real video/audio packages (tests.judges.upstream stubs only what is not
    installed; the real modules are imported first so a stub can never stand in for them)."""
    for name in REAL:
        importlib.import_module(name)
    return metrics_module("vlc", ("acoustid",))


# -- videos -----------------------------------------------------------------------------------------------

def frame(index: int, variant: int = 0) -> np.ndarray:
    """A 64x64 BGR frame: a gradient with a bright block that moves with ``index`` (``variant`` moves it
    elsewhere and inverts the gradient)."""
    ys, xs = np.mgrid[0:64, 0:64]
    image = np.stack([(xs * 4) % 256, (ys * 4) % 256, ((xs + ys) * 2) % 256], axis=-1).astype(np.uint8)
    if variant:
        image = 255 - image[::-1]
    top, left = (4 + 3 * index) % 40, (8 + 5 * index * (1 + variant)) % 40
    image[top:top + 20, left:left + 20] = (250, 250, 250) if not variant else (10, 10, 10)
    return image


def video(tmp: Path, name: str, frames: list[np.ndarray]) -> str:
    import cv2

    path = tmp / name
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 64))
    assert writer.isOpened()
    for image in frames:
        writer.write(image)
    writer.release()
    return str(path)


def changed(count: int, total: int = 16) -> list[np.ndarray]:
    return [frame(i, variant=1 if i < count else 0) for i in range(total)]


VIDEO_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("base", "base", {}),
    ("base", "copy", {}),
    ("base", "flipped", {}),
    ("base", "short", {}),
    ("short", "base", {}),
    ("base", "short", {"max_frames_to_check": 10}),  # stops before the shorter one ends
    ("base", "three_changed", {}),  # 3 mismatches <= threshold
    ("base", "eight_changed", {}),  # more than 5 mismatches
    ("base", "eight_changed", {"threshold": 8}),
    ("base", "eight_changed", {"max_frames_to_check": 5}),
    ("base", "flipped", {"threshold": 64}),  # no hash distance exceeds 64
    ("junk", "junk2", {}),  # neither decodes: both "end" at once
    ("base", "junk", {}),
]


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("videos")
    base = [frame(i) for i in range(16)]
    made = {
        "base": video(tmp, "base.mp4", base), "copy": video(tmp, "copy.mp4", base),
        "flipped": video(tmp, "flipped.mp4", [np.ascontiguousarray(f[::-1]) for f in base]),
        "short": video(tmp, "short.mp4", base[:12]),
        "three_changed": video(tmp, "three.mp4", changed(3)), "eight_changed": video(tmp, "eight.mp4", changed(8)),
    }
    for name in ("junk", "junk2"):
        (tmp / f"{name}.mp4").write_bytes(b"not a video at all")
        made[name] = str(tmp / f"{name}.mp4")
    return made


@pytest.mark.parametrize("first,second,options", VIDEO_CASES)
def test_compare_videos_matches_upstream(vlc_upstream: Any, videos: dict[str, str], first: str, second: str,
                                         options: dict[str, Any]) -> None:
    ours = media.compare_videos(videos[first], videos[second], **options)
    theirs = vlc_upstream.compare_videos(videos[first], videos[second], **options)
    assert ours == float(theirs)


def test_video_cases_score_both_ways(videos: dict[str, str]) -> None:
    scores = [media.compare_videos(videos[a], videos[b], **o) for a, b, o in VIDEO_CASES]
    assert scores[:4] == [1.0, 1.0, 0.0, 0.0] and set(scores) == {0.0, 1.0}


def test_missing_videos_score_zero(videos: dict[str, str], tmp_path: Path) -> None:
    """Hand-derived: upstream hands None to OpenCV (a TypeError) and scores two missing paths 1."""
    assert media.compare_videos(None, videos["base"]) == 0.0
    assert media.compare_videos(str(tmp_path / "gone.mp4"), str(tmp_path / "gone2.mp4")) == 0.0


# -- audio ------------------------------------------------------------------------------------------------

def tones(rate: int, notes: list[float], amplitude: float = 0.5, seconds: float = 0.4) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return np.concatenate([amplitude * np.sin(2 * np.pi * f * t) * np.hanning(t.size) for f in notes])


def wav(tmp: Path, name: str, samples: np.ndarray, rate: int) -> str:
    path = tmp / name
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return str(path)


MELODY, OTHER = [440.0, 660.0, 550.0], [300.0, 1200.0, 800.0, 2500.0]
AUDIO_CASES = [("melody", "melody"), ("melody", "quiet"), ("melody", "melody_44k"), ("melody", "mp3"),
               ("melody", "other"), ("melody", "noise"), ("empty", "empty2"), ("melody", "empty"),
               ("junk", "melody"), ("junk", "empty")]


@pytest.fixture(scope="module")
def audios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import soundfile

    tmp = tmp_path_factory.mktemp("audio")
    rng = np.random.default_rng(7)
    made = {
        "melody": wav(tmp, "melody.wav", tones(22050, MELODY), 22050),
        "quiet": wav(tmp, "quiet.wav", tones(22050, MELODY, amplitude=0.1), 22050),
        "melody_44k": wav(tmp, "melody44.wav", tones(44100, MELODY), 44100),
        "other": wav(tmp, "other.wav", tones(22050, OTHER), 22050),
        "noise": wav(tmp, "noise.wav", rng.uniform(-0.5, 0.5, 26460), 22050),
        "empty": wav(tmp, "empty.wav", np.zeros(0), 22050), "empty2": wav(tmp, "empty2.wav", np.zeros(0), 16000),
    }
    soundfile.write(tmp / "melody.mp3", tones(44100, MELODY), 44100, format="MP3")
    made["mp3"] = str(tmp / "melody.mp3")
    (tmp / "junk.wav").write_bytes(b"RIFF but nothing else")
    made["junk"] = str(tmp / "junk.wav")
    return made


@pytest.mark.parametrize("first,second", AUDIO_CASES)
def test_compare_audios_matches_upstream(vlc_upstream: Any, audios: dict[str, str], first: str,
                                         second: str) -> None:
    ours = media.compare_audios(audios[first], audios[second])
    theirs = vlc_upstream.compare_audios(audios[first], audios[second])
    assert isinstance(ours, float)
    assert ours == pytest.approx(float(theirs), abs=1e-9)


def test_audio_scores_rank_similarity(audios: dict[str, str]) -> None:
    score = {pair: media.compare_audios(audios[pair[0]], audios[pair[1]]) for pair in AUDIO_CASES}
    assert score[("melody", "melody")] == pytest.approx(1.0)
    assert score[("melody", "melody_44k")] > 0.95 and score[("melody", "mp3")] > 0.9
    assert score[("melody", "other")] < score[("melody", "quiet")]
    assert score[("melody", "noise")] < 0.9
    assert score[("empty", "empty2")] == 1.0 and score[("melody", "empty")] == 0.0
    assert media.compare_audios(None, audios["melody"]) == 0.0  # as upstream


# -- slide media ------------------------------------------------------------------------------------------

def png(colour: tuple[int, int, int]) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, "PNG")
    return buffer.getvalue()


DESKTOP = "/home/user/Desktop"


def background(slide: Any, rel_id: str, link: bool = False) -> None:
    """``<p:bg>`` with a picture fill referring to ``rel_id``, as LibreOffice writes it."""
    from pptx.oxml import parse_xml

    attribute = "r:link" if link else "r:embed"
    element = parse_xml(
        '<p:bg xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><p:bgPr>'
        f'<a:blipFill><a:blip {attribute}="{rel_id}"/><a:stretch><a:fillRect/></a:stretch></a:blipFill>'
        '<a:effectLst/></p:bgPr></p:bg>')
    slide._element.cSld.insert(0, element)


def solid_background(slide: Any) -> None:
    from pptx.dml.color import RGBColor

    slide.background.fill.solid()
    slide.background.fill.fore_color.rgb = RGBColor(0x20, 0x40, 0x60)


def presentation(disk: Path) -> None:
    """``slides.pptx`` on the fake desktop: slide 0 a solid background and an embedded WAV; slide 1 an embedded
    background picture; slide 2 a background linked as file:// and audio linked as file://; slide 3 a
    background whose blip only links (``r:link``), a picture that is no background, and linked audio that is
    missing on the desktop; slide 4 audio linked by a percent-escaped ``file://`` URL."""
    from pptx import Presentation
    from pptx.opc.constants import RELATIONSHIP_TYPE as RT
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI

    deck = Presentation()
    slides = [deck.slides.add_slide(deck.slide_layouts[6]) for _ in range(5)]
    solid_background(slides[0])
    sound = io.BytesIO()
    with wave.open(sound, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes(b"\x01\x02" * 800)
    part = Part(PackURI("/ppt/media/media1.wav"), "audio/x-wav", deck.part.package, sound.getvalue())
    slides[0].part.relate_to(part, RT.AUDIO)
    _, picture_id = slides[1].part.get_or_add_image_part(io.BytesIO(png((200, 30, 30))))
    background(slides[1], picture_id)
    linked = slides[2].part.relate_to(f"file://{DESKTOP}/background.png", RT.IMAGE, is_external=True)
    background(slides[2], linked)
    slides[2].part.relate_to(f"file://{DESKTOP}/song.wav", RT.AUDIO, is_external=True)
    _, other = slides[3].part.get_or_add_image_part(io.BytesIO(png((0, 0, 255))))
    background(slides[3], other, link=True)
    slides[3].shapes.add_picture(io.BytesIO(png((0, 255, 0))), 0, 0)
    slides[3].part.relate_to(f"file://{DESKTOP}/gone.wav", RT.AUDIO, is_external=True)
    slides[4].part.relate_to(f"file://{DESKTOP}/my%20song.wav", RT.AUDIO, is_external=True)
    (disk / DESKTOP.lstrip("/")).mkdir(parents=True, exist_ok=True)
    deck.save(disk / DESKTOP.lstrip("/") / "slides.pptx")
    (disk / DESKTOP.lstrip("/") / "background.png").write_bytes(png((1, 2, 3)))
    (disk / DESKTOP.lstrip("/") / "song.wav").write_bytes(sound.getvalue()[:-2] + b"\x07\x07")
    (disk / DESKTOP.lstrip("/") / "my song.wav").write_bytes(b"RIFF-ish: the linked file")


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FileServer]]:
    root = tmp_path_factory.mktemp("vm")
    presentation(root)
    server = FileServer(root)
    yield root, server
    server.close()


def impress_getters() -> Any:
    """Upstream's ``getters/impress.py`` (pandas, which it imports and never calls here, stubbed if absent)."""
    return upstream_loader.getters_module("impress", ("pandas",))


def theirs(server: FileServer, cache: Path, name: str, config: dict[str, Any]) -> str | None:
    from desktop_env.controllers.python import PythonController

    controller = PythonController("127.0.0.1", server.port)
    controller.retry_interval = 0
    env = types.SimpleNamespace(controller=controller, cache_dir=str(cache))
    return getattr(impress_getters(), f"get_{name}")(env, config)


def ours(server: FileServer, cache: Path, name: str, config: dict[str, Any]) -> str | None:
    async def main() -> str | None:
        async with EnvironmentClient(f"http://127.0.0.1:{server.port}") as client:
            env = types.SimpleNamespace(client=client, cache_dir=str(cache))
            return await getattr(media, f"get_{name}")(env, config)

    return asyncio.run(main())


SLIDE_CASES = [("background_image_in_slide", index) for index in range(6)] + [
    ("audio_in_slide", index) for index in range(3)] + [("audio_in_slide", 7)]


@pytest.mark.parametrize("name,index", SLIDE_CASES)
def test_slide_media_matches_upstream(disk: tuple[Path, FileServer], tmp_path: Path, name: str,
                                      index: int) -> None:
    _, server = disk
    config = {"ppt_file_path": f"{DESKTOP}/slides.pptx", "slide_index": index, "dest": "media.out"}
    (tmp_path / "ours").mkdir(), (tmp_path / "theirs").mkdir()
    mine, upstream = ours(server, tmp_path / "ours", name, config), theirs(server, tmp_path / "theirs", name, config)
    if upstream is None:
        assert mine is None
        return
    assert mine is not None
    assert Path(mine).relative_to(tmp_path / "ours") == Path(upstream).relative_to(tmp_path / "theirs")
    assert Path(mine).read_bytes() == Path(upstream).read_bytes()


def test_slide_media_found_where_expected(disk: tuple[Path, FileServer], tmp_path: Path) -> None:
    root, server = disk
    get = functools.partial(ours, server, tmp_path)
    config = {"ppt_file_path": f"{DESKTOP}/slides.pptx", "dest": "out.bin"}
    assert get("background_image_in_slide", {**config, "slide_index": 0}) is None  # a solid fill
    embedded = get("background_image_in_slide", {**config, "slide_index": 1})
    assert Path(embedded).relative_to(tmp_path).parts[:2] == ("ppt", "media") and Path(embedded).read_bytes() == png(
        (200, 30, 30))
    linked = get("background_image_in_slide", {**config, "slide_index": "2"})  # the desktop's background.png
    assert linked == str(tmp_path / "out.bin") and Path(linked).read_bytes() == png((1, 2, 3))
    assert get("background_image_in_slide", {**config, "slide_index": 3}) is None  # r:link only
    audio = get("audio_in_slide", {**config, "slide_index": 0})
    assert audio == str(tmp_path / "ppt/media/media1.wav") and Path(audio).read_bytes().startswith(b"RIFF")
    assert Path(get("audio_in_slide", {**config, "slide_index": 2})).read_bytes() == (
        root / DESKTOP.lstrip("/") / "song.wav").read_bytes()
    assert get("audio_in_slide", {**config, "slide_index": 1}) is None
    # file:///home/user/Desktop/my%20song.wav: upstream asks the desktop for ".../my%20song.wav" (None)
    spaced = get("audio_in_slide", {**config, "slide_index": 4, "dest": "spaced.wav"})
    assert Path(spaced).read_bytes() == b"RIFF-ish: the linked file"


def test_missing_files(disk: tuple[Path, FileServer], tmp_path: Path) -> None:
    """A missing .pptx: upstream opens ``None`` as a zip (a crash); here a missing file, which the evaluation
    scores 0. Missing linked audio: None on both sides (``vm_file``'s answer, handed to the metric)."""
    _, server = disk
    with pytest.raises(FileNotFoundError, match="gone.pptx"):
        ours(server, tmp_path, "audio_in_slide", {"ppt_file_path": "/nowhere/gone.pptx", "slide_index": 0,
                                                  "dest": "a.wav"})
    linked_gone = {"ppt_file_path": f"{DESKTOP}/slides.pptx", "slide_index": 3, "dest": "a.wav"}
    (tmp_path / "theirs").mkdir()
    assert ours(server, tmp_path, "audio_in_slide", linked_gone) is None
    assert theirs(server, tmp_path / "theirs", "audio_in_slide", linked_gone) is None


@pytest.mark.parametrize("config", [{"slide_index": 0, "dest": "a"}, {"ppt_file_path": "/x.pptx", "dest": "a"},
                                    {"ppt_file_path": "/x.pptx", "slide_index": "first", "dest": "a"},
                                    {"ppt_file_path": "/x.pptx", "slide_index": 0}])
def test_bad_slide_configs_name_the_keys(config: dict[str, Any]) -> None:
    env = types.SimpleNamespace(client=None, cache_dir=".")
    for getter in (media.get_audio_in_slide, media.get_background_image_in_slide):
        with pytest.raises(ValueError, match="'ppt_file_path'.*'slide_index'.*'dest'"):
            asyncio.run(getter(env, config))


def test_pdf_from_url_config_names_the_keys() -> None:
    with pytest.raises(ValueError, match="'path'.*'dest'"):
        asyncio.run(media.get_pdf_from_url(types.SimpleNamespace(client=None), {"path": "http://x/"}))
