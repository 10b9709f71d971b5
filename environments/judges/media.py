"""Video, audio, slide-media and web-page-as-PDF judges (OSWorld's names and semantics).

Metrics:

* ``compare_videos(result, expected, max_frames_to_check=100, threshold=5)`` — the two videos are read frame by
  frame with OpenCV, side by side, for at most ``max_frames_to_check`` pairs; a pair *mismatches* when the
  Hamming distance of the frames' perceptual hashes (``imagehash.phash`` of the RGB frame) exceeds
  ``threshold``, and more than ``threshold`` mismatches score 0. When either video runs out first the score
  is 1 if both ran out at the same frame, else 0 (so two files without a readable frame score 1); having
  checked ``max_frames_to_check`` pairs scores 1. A missing path (None or no such file) scores 0.
* ``compare_audios(result, expected)`` — a similarity in [0, 1]: each file decoded by ``librosa.load``
  (mono, 22050 Hz), its MFCCs (librosa's defaults: 20 coefficients) normalized per coefficient
  (``librosa.util.normalize`` along time), the two sequences aligned by FastDTW (radius 1) with the cosine
  distance between frames; the score is ``exp(-distance / len(path))``. A file that cannot be decoded or
  holds no samples is *bad*: both bad scores 1, one bad scores 0; a missing path (None) scores 0.

Getters (the ``.pptx`` is fetched from the desktop into the cache under its own file name, as ``vm_file``
does; slide ``slide_index`` (from 0) is the package part ``ppt/slides/slide<index + 1>.xml``):

* ``background_image_in_slide`` — ``ppt_file_path``, ``slide_index``, ``dest``. The first ``p:bgPr`` of the
  slide whose first ``a:blip`` has an ``r:embed`` id names the image; the slide's relationship with that id
  and an image type locates it. An image inside the package is extracted into the cache at its part name
  (e.g. ``ppt/media/image1.png``); one linked as ``file://...`` is fetched from the desktop as ``dest`` (None
  when the desktop does not give it). A missing ``.pptx`` is a :class:`FileNotFoundError`.
  None when the slide, its background image or the relationship does not exist.
* ``audio_in_slide`` — ``ppt_file_path``, ``slide_index``, ``dest``: the slide's first relationship whose type
  names ``audio``, extracted or fetched as above; None when there is none.
* ``pdf_from_url`` — ``path`` (a URL), ``dest``: the page as the desktop's browser prints it to PDF
  (Playwright's ``page.pdf()`` defaults: Letter, no margins, no backgrounds), in a fresh browser context,
  after the document has loaded (``wait_s``, 60) and ``settle_s`` (3) more seconds; written to the cache as
  ``dest``. Without a browser answering on its DevTools endpoint, ``google-chrome --remote-debugging-port=1337``
  is launched first (as upstream does). A page that cannot be loaded is a :class:`FileNotFoundError`.
"""

from __future__ import annotations

import base64
import math
import os
import posixpath
import urllib.parse
import zipfile
from pathlib import Path
from typing import Any, Mapping
from xml.etree import ElementTree

import structlog

from core.errors import FilesMissing, ScaleCUAError
from environments.judges.getters import _cache_path, download_mirror, fetch_desktop_file, require_desktop_file

log = structlog.get_logger(__name__)

_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG = "{http://schemas.openxmlformats.org/package/2006/relationships}"
BROWSER = ["google-chrome", "--remote-debugging-port=1337"]


# -- metrics ----------------------------------------------------------------------------------------------

def _require(metric: str, *modules: str) -> None:
    """The decoders a metric needs, or an error naming the extra that installs them."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ScaleCUAError(f"{metric} needs {', '.join(missing)}: pip install 'scalecua[media]' (opencv-python-headless, "
                            "imagehash, librosa, fastdtw)")


def _is_file(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike)) and bool(str(path)) and os.path.isfile(path)


def _phash(frame: Any) -> Any:
    import cv2
    import imagehash
    from PIL import Image

    return imagehash.phash(Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)))


def compare_videos(result: str | None, expected: str | None = None, *, max_frames_to_check: int = 100,
                   threshold: int = 5, **_: Any) -> float:
    _require("compare_videos", "cv2", "imagehash")
    import cv2

    if not _is_file(result) or not _is_file(expected):
        return 0.0
    first, second = cv2.VideoCapture(str(result)), cv2.VideoCapture(str(expected))
    try:
        checked = mismatches = 0
        while checked < max_frames_to_check:
            ok_first, frame_first = first.read()
            ok_second, frame_second = second.read()
            if not ok_first or not ok_second:
                return float(ok_first == ok_second)
            checked += 1
            if _phash(frame_first) - _phash(frame_second) > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        first.release()
        second.release()


def _samples(path: str) -> tuple[Any, int] | None:
    import librosa

    try:
        signal, rate = librosa.load(path)
    except Exception as exc:  # noqa: BLE001 - soundfile, audioread and OS errors alike mean "cannot decode"
        log.info("audio cannot be decoded", path=path, error=f"{type(exc).__name__}: {exc}")
        return None
    return (signal, rate) if signal.shape[0] else None


def compare_audios(result: str | None, expected: str | None = None, **_: Any) -> float:
    _require("compare_audios", "librosa", "fastdtw")
    if not result or not expected:
        return 0.0
    import librosa
    import numpy as np
    from fastdtw import fastdtw
    from scipy.spatial.distance import cosine

    first, second = _samples(str(result)), _samples(str(expected))
    if first is None or second is None:
        return float(first is None and second is None)
    try:
        features = [librosa.feature.mfcc(y=signal, sr=rate) for signal, rate in (first, second)]
    except Exception as exc:  # noqa: BLE001 - as upstream: a failed extraction scores 0
        log.info("MFCCs cannot be extracted", error=f"{type(exc).__name__}: {exc}")
        return 0.0
    one, two = (librosa.util.normalize(feature, axis=1) for feature in features)
    distance, path = fastdtw(one.T, two.T, dist=cosine)
    score = float(np.exp(-distance / len(path))) if len(path) else 0.0
    return 0.0 if math.isnan(score) else score


# -- slide media ------------------------------------------------------------------------------------------

def _slide_config(config: Mapping[str, Any], getter: str) -> tuple[str, int, str]:
    path, index, dest = config.get("ppt_file_path"), config.get("slide_index"), config.get("dest")
    try:
        number = int(index)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = -1
    if not isinstance(path, str) or not path or number < 0 or not isinstance(dest, str) or not dest:
        raise ValueError(f"{getter} getter config {dict(config)!r} needs 'ppt_file_path' (the .pptx on the "
                         "desktop), 'slide_index' (from 0) and 'dest' (a file name in the cache)")
    return path, number, dest


async def _fetch_pptx(env: Any, path: str, getter: str) -> str:
    return await require_desktop_file(env, path, os.path.basename(path), getter)


def _relationships(archive: zipfile.ZipFile, number: int) -> list[ElementTree.Element]:
    name = f"ppt/slides/_rels/slide{number}.xml.rels"
    if name not in archive.namelist():
        return []
    return ElementTree.fromstring(archive.read(name)).findall(f"{_PKG}Relationship")


async def _media(env: Any, archive: zipfile.ZipFile, target: str, dest: str) -> str | None:
    """A relationship target: a part of the package (extracted into the cache at its part name) or a
    ``file://`` path on the desktop (fetched as ``dest``; None, as upstream, when the desktop does not give it)."""
    if target.startswith("file://"):
        return await fetch_desktop_file(env, urllib.parse.unquote(target[len("file://"):]), dest)
    if urllib.parse.urlparse(target).scheme:
        raise FileNotFoundError(f"the slide's media {target!r} is neither in the file nor a file on the desktop")
    part = posixpath.normpath(posixpath.join("ppt/slides", target)).lstrip("/")
    if part not in archive.namelist():
        raise FileNotFoundError(f"the slide's media {part} is missing from the presentation")
    local = _cache_path(env, part)
    local.write_bytes(archive.read(part))
    return str(local)


async def get_background_image_in_slide(env: Any, config: Mapping[str, Any]) -> str | None:
    path, index, dest = _slide_config(config, "background_image_in_slide")
    with zipfile.ZipFile(await _fetch_pptx(env, path, "background_image_in_slide")) as archive:
        slide = f"ppt/slides/slide{index + 1}.xml"
        if slide not in archive.namelist():
            return None
        image_id = None
        for background in ElementTree.fromstring(archive.read(slide)).iter(f"{_P}bgPr"):
            blip = next(background.iter(f"{_A}blip"), None)
            image_id = None if blip is None else blip.get(f"{_R}embed")
            if image_id is not None:
                break
        if image_id is None:
            return None
        for relation in _relationships(archive, index + 1):
            if "image" in relation.get("Type", "") and relation.get("Id") == image_id:
                return await _media(env, archive, relation.get("Target", ""), dest)
    return None


async def get_audio_in_slide(env: Any, config: Mapping[str, Any]) -> str | None:
    path, index, dest = _slide_config(config, "audio_in_slide")
    with zipfile.ZipFile(await _fetch_pptx(env, path, "audio_in_slide")) as archive:
        for relation in _relationships(archive, index + 1):
            if "audio" in relation.get("Type", ""):
                return await _media(env, archive, relation.get("Target", ""), dest)
    return None


# -- web page as PDF --------------------------------------------------------------------------------------

async def get_pdf_from_url(env: Any, config: Mapping[str, Any]) -> str:
    url, dest = config.get("path"), config.get("dest")
    if not isinstance(url, str) or not url or not isinstance(dest, str) or not dest:
        raise ValueError(f"pdf_from_url getter config {dict(config)!r} needs 'path' (the page's URL) and 'dest' "
                         "(the PDF's file name in the cache)")
    wait_s, settle_s = float(config.get("wait_s", 60)), float(config.get("settle_s", 3))
    try:
        await env.client.devtools({"action": "tabs", "wait_s": 3})
    except ScaleCUAError as exc:
        log.info("no browser answers: launching one", command=BROWSER, error=str(exc))
        await env.client.launch(BROWSER)
    answer = await env.client.devtools({"action": "render", "url": url, "pdf": True, "wait_s": wait_s,
                                        "settle_s": settle_s}, timeout=wait_s + settle_s + 120)
    if str(answer.get("url", "")).startswith("chrome-error://"):
        mirror = download_mirror(env)
        if mirror is not None:  # an offline run: the page is a file the network would give, as a gold file is
            raise FilesMissing([url], mirror, f"pdf_from_url renders the live page {url}, which the desktop's "
                                              f"browser could not load; the download mirror {mirror} serves files "
                                              "to setups and getters, not pages to the browser")
        raise FileNotFoundError(f"pdf_from_url: the browser could not load {url}")
    target = _cache_path(env, dest)
    target.write_bytes(base64.b64decode(answer["pdf"]))
    return str(target)
