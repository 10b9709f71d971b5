"""A download mirror: a directory on this host that serves the http(s) files tasks fetch, instead of the network.

The desktop backends take it as their ``download_mirror`` option and put it into every
:class:`~environments.setup.SetupContext` they build: ``download`` setup and postconfig steps then read
http(s) URLs from it (and upload the bytes to the desktop, so containers work too), and the ``cloud_file``
getter reads gold files from it. A URL the mirror lacks raises :class:`core.errors.FilesMissing` (never a
network fetch), which callers such as ``python -m core.envcheck`` report as "files missing", not as a failure.

Layout: the file for ``https://HOST/A/B%20C.xlsx?x=1`` is ``MIRROR/HOST/A/B C.xlsx`` (the URL's host, then its
path percent-decoded; scheme, port, query and fragment ignored; symlinks are followed, so e.g. a Hugging Face
snapshot can be linked in at ``MIRROR/huggingface.co/datasets/<repo>/resolve/main``). ``file://`` URLs and
plain paths are host files already, and the pages ``chrome_open_tabs`` / ``launch`` visit are not files: the
mirror leaves them alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlsplit

from core.errors import ConfigError, FilesMissing

#: the layout, for error messages and option descriptions
LAYOUT = "<mirror>/<host>/<url path, percent-decoded> (e.g. <mirror>/huggingface.co/datasets/.../file.xlsx)"


def check_mirror(path: str | Path, owner: str = "download_mirror") -> Path:
    """``path`` as an absolute mirror directory; a ConfigError naming the fix when it is not a directory."""
    mirror = Path(path).expanduser()
    if not mirror.is_dir():
        raise ConfigError([f"{owner}: download mirror {mirror} is not a directory: create it and put each file at "
                           f"{LAYOUT}, or leave the mirror out to download from the network"])
    return mirror.resolve()


def is_remote(url: str) -> bool:
    return urlsplit(url).scheme in ("http", "https")


def mirror_path(mirror: Path, url: str) -> Path:
    """Where the mirror keeps ``url``: ``mirror/<host>/<path, percent-decoded>`` (query and fragment ignored)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if not host or not segments or any(s in (".", "..") or "/" in s or "\x00" in s for s in segments):
        raise ValueError(f"URL {url!r} names no file a download mirror can hold (it needs a host and a file path "
                         "without '.' or '..' segments)")
    return Path(mirror, host, *segments)


def missing(mirror: Path, urls: Sequence[str]) -> FilesMissing:
    """The error for ``urls`` (each once) that ``mirror`` lacks; its message says where each was expected."""
    urls = list(dict.fromkeys(urls))
    shown = ", ".join(f"{url} (expected at {mirror_path(mirror, url)})" for url in urls[:5])
    more = f" and {len(urls) - 5} more" if len(urls) > 5 else ""
    return FilesMissing(urls, mirror, f"not in the download mirror {mirror}: {shown}{more}")


def mirror_files(mirror: Path, urls: Sequence[str]) -> list[Path]:
    """The mirror's file for each of ``urls`` (http(s)); one :class:`FilesMissing` naming every URL it lacks."""
    paths = [mirror_path(mirror, url) for url in urls]
    absent = [url for url, path in zip(urls, paths) if not path.is_file()]
    if absent:
        raise missing(mirror, absent)
    return paths
