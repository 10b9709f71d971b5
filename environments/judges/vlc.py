"""VLC's checks (OSWorld's names and semantics): its ``vlcrc`` settings, its window, what it plays.

Settings metrics are called ``metric(vlcrc_path, rule)`` with the ``vlc_config`` getter's local copy of
``~/.config/vlc/vlcrc``. A setting's value is read as upstream reads it: the *last* line that contains
``<key>=`` anywhere (commented-out defaults such as ``#qt-bgcone=1`` count too), its text after the last
``=``, stripped; without such a line, VLC's default. An expected value given as an integer (or boolean) is
compared as its text (``0`` -> ``"0"``); any other value as it is.

* ``check_qt_bgcone(path, rule)`` — ``qt-bgcone`` (default ``"1"``) equals ``rule['expected_qt_bgcone']``.
* ``check_qt_max_volume(path, rule)`` — ``qt-max-volume`` (default ``"125"``) equals
  ``rule['expected_qt_max_volume']``.
* ``check_qt_minimal_view(path, rule)`` — ``qt-minimal-view`` (default ``"0"``) equals
  ``rule['expected_qt_minimal_view']``.
* ``check_one_instance_when_started_from_file(path, rule)`` — ``one-instance-when-started-from-file``
  (default ``"1"``) equals ``rule['expected_one_instance_when_started_from_file']``.
* ``check_global_key_play_pause(path, rule)`` — ``global-key-play-pause`` reads ``"1"`` when the last line
  holding ``global-key-play-pause=`` has a non-empty value, else (or without one) ``"0"``; equals
  ``rule['expected_global_key_play_pause']``.
* ``check_qt_slider_colours(path, rule)`` — the last line holding ``qt-slider-colours`` (no ``=`` needed),
  default ``153;210;153;20;210;20;255;199;15;245;39;29``. ``rule['type']``: ``match`` — equals
  ``rule['expected_qt_slider_colours']``; ``blackish`` — the ``;``-separated integers, taken as RGB triples
  (an incomplete last triple dropped), all have every component below 100 (a value that is not an integer
  scores 0).
* ``is_vlc_recordings_folder(path, rule)`` — the first line that is neither blank nor starts with ``#`` and
  contains ``input-record-path`` decides: its value equals ``rule['recording_file_path']``; none scores 0.
* ``is_vlc_fullscreen(result, expected)`` — two ``{width, height}`` sizes (the ``vm_window_size`` and
  ``vm_screen_size`` getters', either way round) are equal; a missing one scores 0.
* ``is_vlc_playing(status_path, rule)`` — VLC's HTTP ``status.xml`` has ``<state>playing</state>`` and the
  item matches ``rule``. ``type: file_name``: the first non-empty of the ``meta`` infos ``filename``, ``title``,
  ``uri``, ``location``, ``name`` ends with ``rule['file_name']``. ``type: url``: the first non-empty of the
  ``meta`` infos ``url``, ``URI``, ``location``, ``title``, ``filename`` and ``Stream 0``'s ``Codec``, ``Type``,
  ``Language`` contains ``rule['url']``, or is the URL path's last segment, or is a URL of the same host
  whose path contains the expected URL's path.

Getters: ``vm_window_size`` (``{width, height}`` of the first window in the window manager's client list whose
WM_CLASS instance or class equals ``app_class_name``, ignoring case; None when there is none) and
``vlc_playing_info`` (VLC's ``/requests/status.xml`` from its HTTP interface on the desktop's loopback, port
``port`` (8080), password ``password``, into the cache as ``dest``; None when VLC does not answer 200).

A missing or unreadable file scores 0.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse
from xml.etree import ElementTree

import structlog

from environments.judges.getters import _cache_path

log = structlog.get_logger(__name__)

SLIDER_DEFAULT = "153;210;153;20;210;20;255;199;15;245;39;29"
BLACKISH_BELOW = 100
VLC_HTTP_PORT = 8080
VLC_HTTP_PASSWORD = "password"


def _lines(path: str | None) -> list[str] | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        return Path(path).read_bytes().decode("utf-8", errors="replace").split("\n")
    except OSError as exc:
        log.info("vlcrc cannot be read", path=path, error=str(exc))
        return None


def _setting(lines: list[str], needle: str, default: str) -> str:
    """The value on the last line containing ``needle`` (text after its last ``=``), else ``default``."""
    value = default
    for line in lines:
        if needle in line:
            value = line.split("=")[-1].strip()
    return value


def _rule_value(rule: Any, key: str, metric: str) -> Any:
    if not isinstance(rule, Mapping) or key not in rule:
        raise ValueError(f"{metric}: the expected rule {rule!r} needs {key!r} (e.g. {{{key!r}: 1}})")
    value = rule[key]
    return str(value) if isinstance(value, int) else value


def _check_setting(result: str | None, rule: Any, *, key: str, default: str, metric: str) -> float:
    expected = _rule_value(rule, f"expected_{key.replace('-', '_')}", metric)
    lines = _lines(result)
    return 0.0 if lines is None else float(_setting(lines, f"{key}=", default) == expected)


def check_qt_bgcone(result: str | None, rule: Any = None, **_: Any) -> float:
    return _check_setting(result, rule, key="qt-bgcone", default="1", metric="check_qt_bgcone")


def check_qt_max_volume(result: str | None, rule: Any = None, **_: Any) -> float:
    return _check_setting(result, rule, key="qt-max-volume", default="125", metric="check_qt_max_volume")


def check_qt_minimal_view(result: str | None, rule: Any = None, **_: Any) -> float:
    return _check_setting(result, rule, key="qt-minimal-view", default="0", metric="check_qt_minimal_view")


def check_one_instance_when_started_from_file(result: str | None, rule: Any = None, **_: Any) -> float:
    return _check_setting(result, rule, key="one-instance-when-started-from-file", default="1",
                          metric="check_one_instance_when_started_from_file")


def check_global_key_play_pause(result: str | None, rule: Any = None, **_: Any) -> float:
    expected = _rule_value(rule, "expected_global_key_play_pause", "check_global_key_play_pause")
    lines = _lines(result)
    if lines is None:
        return 0.0
    bound = "0"
    for line in lines:
        if "global-key-play-pause=" in line:
            bound = "1" if line.split("=")[-1].strip() else "0"
    return float(bound == expected)


def _blackish(colours: str) -> bool:
    values = [int(part) for part in colours.split(";")]  # ValueError on a non-integer: the caller scores 0
    triples = zip(values[0::3], values[1::3], values[2::3])
    return all(all(component < BLACKISH_BELOW for component in triple) for triple in triples)


def check_qt_slider_colours(result: str | None, rule: Any = None, **_: Any) -> float:
    kind = rule.get("type") if isinstance(rule, Mapping) else None
    if kind not in ("match", "blackish"):
        raise ValueError(f"check_qt_slider_colours: rule {rule!r} needs 'type': 'match' (with "
                         "'expected_qt_slider_colours') or 'blackish'")
    expected = _rule_value(rule, "expected_qt_slider_colours", "check_qt_slider_colours") if kind == "match" else None
    lines = _lines(result)
    if lines is None:
        return 0.0
    colours = _setting(lines, "qt-slider-colours", SLIDER_DEFAULT)
    if kind == "match":
        return float(colours == expected)
    try:
        return float(_blackish(colours))
    except ValueError:
        log.info("qt-slider-colours is not a list of integers", value=colours)
        return 0.0


def is_vlc_recordings_folder(result: str | None, rule: Any = None, **_: Any) -> float:
    expected = _rule_value(rule, "recording_file_path", "is_vlc_recordings_folder")
    lines = _lines(result)
    for line in lines or []:
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == expected)
    return 0.0


def _size(value: Any) -> tuple[Any, Any] | None:
    if not isinstance(value, Mapping) or "width" not in value or "height" not in value:
        return None
    return value["width"], value["height"]


def is_vlc_fullscreen(result: Any, expected: Any = None, **_: Any) -> float:
    first, second = _size(result), _size(expected)
    return float(first is not None and first == second)


_FILE_INFOS = tuple(f'information/category[@name="meta"]/info[@name="{name}"]'
                    for name in ("filename", "title", "uri", "location", "name"))
_URL_INFOS = tuple(f'information/category[@name="meta"]/info[@name="{name}"]'
                   for name in ("url", "URI", "location", "title", "filename")) + tuple(
    f'information/category[@name="Stream 0"]/info[@name="{name}"]' for name in ("Codec", "Type", "Language"))


def _first_info(tree: ElementTree.Element, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        element = tree.find(path)
        if element is not None and element.text:
            return element.text
    return None


def _url_matches(found: str, expected: str) -> bool:
    if expected in found:
        return True
    try:
        wanted = urlparse(expected)
        if found == os.path.basename(wanted.path):
            return True  # HLS streams: VLC shows the playlist's file name
        if "://" in found:
            seen = urlparse(found)
            return wanted.netloc == seen.netloc and wanted.path in seen.path
    except ValueError:
        return False
    return False


def is_vlc_playing(result: str | None, rule: Any = None, **_: Any) -> float:
    kind = rule.get("type") if isinstance(rule, Mapping) else None
    keys = {"file_name": "file_name", "url": "url"}
    if kind not in keys or keys[kind] not in rule:
        raise ValueError(f"is_vlc_playing: rule {rule!r} needs 'type': 'file_name' with 'file_name', or "
                         "'type': 'url' with 'url'")
    if not result or not os.path.isfile(result):
        return 0.0
    try:
        tree = ElementTree.fromstring(Path(result).read_bytes())
    except (OSError, ElementTree.ParseError) as exc:
        log.info("VLC status is not readable XML", path=result, error=str(exc))
        return 0.0
    state = tree.find("state")
    if state is None or state.text != "playing":
        return 0.0
    if kind == "file_name":
        found = _first_info(tree, _FILE_INFOS)
        return float(found is not None and found.endswith(str(rule["file_name"])))
    found = _first_info(tree, _URL_INFOS)
    return float(found is not None and _url_matches(found, str(rule["url"])))


# -- getters ----------------------------------------------------------------------------------------------

_CLIENTS = ("for w in $(xprop -root _NET_CLIENT_LIST 2>/dev/null | sed -n 's/.*# //p' | tr ',' ' '); do "
            "printf '%s\\t%s\\n' \"$w\" \"$(xprop -id \"$w\" WM_CLASS 2>/dev/null)\"; done")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


async def get_vm_window_size(env: Any, config: Mapping[str, Any]) -> dict[str, int] | None:
    """Size of the first managed window (``_NET_CLIENT_LIST`` order) whose WM_CLASS instance or class equals
    ``app_class_name`` ignoring case, as xdotool reports the client window; None when none matches."""
    name = config.get("app_class_name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"vm_window_size getter config {dict(config)!r} needs 'app_class_name' (e.g. 'vlc')")
    listing = await env.client.execute(_CLIENTS, shell=True, timeout=30)
    for row in str(listing.get("output") or "").splitlines():
        window, _, wm_class = row.partition("\t")
        if name.lower() not in (part.lower() for part in _QUOTED.findall(wm_class)):
            continue
        geometry = await env.client.execute(["xdotool", "getwindowgeometry", "--shell", window], timeout=30)
        fields = dict(line.split("=", 1) for line in str(geometry.get("output") or "").splitlines() if "=" in line)
        try:
            return {"width": int(fields["WIDTH"]), "height": int(fields["HEIGHT"])}
        except (KeyError, ValueError):  # the window went away meanwhile: as upstream, try the next one
            log.info("window size unavailable", window=window, answer=geometry)
    return None


_STATUS = """
import base64, sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Basic " + sys.argv[2]})
try:
    with urllib.request.urlopen(request, timeout=20) as response:
        print(response.status, base64.b64encode(response.read()).decode())
except urllib.error.HTTPError as exc:
    print(exc.code, "")
except OSError as exc:
    print(0, "")
    print(exc, file=sys.stderr)
"""


async def get_vlc_playing_info(env: Any, config: Mapping[str, Any]) -> str | None:
    """VLC's ``status.xml`` from its HTTP interface on the desktop into the cache as ``dest``; None unless it
    answers 200."""
    dest = config.get("dest")
    if not isinstance(dest, str) or not dest:
        raise ValueError(f"vlc_playing_info getter config {dict(config)!r} needs 'dest' (e.g. 'status.xml')")
    port = int(config.get("port", VLC_HTTP_PORT))
    url = f"http://localhost:{port}/requests/status.xml"
    auth = base64.b64encode(f":{VLC_HTTP_PASSWORD}".encode()).decode()
    answer = await env.client.execute(["python3", "-c", _STATUS, url, auth], timeout=60)
    status, _, body = str(answer.get("output") or "").strip().partition(" ")
    if status != "200":
        log.info("VLC's HTTP interface did not answer 200", url=url, status=status, error=answer.get("error"))
        return None
    target = _cache_path(env, dest)
    target.write_bytes(base64.b64decode(body))
    return str(target)

