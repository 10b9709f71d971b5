"""File endpoints of the probe: OSWorld's ``/file``, ``/setup/upload``, ``/setup/download_file``,
``/list_directory``; ScienceBoard's ``/read``, ``/write``, ``/append``; and which program opens what."""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from environments.probe.server import HTTPError, Request, Response, json_response, text_response

DOWNLOAD_TIMEOUT_S = 300
MAX_LISTED_ENTRIES = 10000

# extension -> the argv prefix of the application that opens it
_OPENERS: list[tuple[frozenset[str], list[str]]] = [
    (frozenset({".xlsx", ".xls", ".ods", ".csv"}), ["libreoffice", "--calc"]),
    (frozenset({".docx", ".doc", ".odt", ".rtf"}), ["libreoffice", "--writer"]),
    (frozenset({".pptx", ".ppt", ".odp"}), ["libreoffice", "--impress"]),
    (frozenset({".gnumeric"}), ["gnumeric"]),
    (
        frozenset({".txt", ".md", ".py", ".json", ".log", ".sh", ".yaml", ".yml", ".xml", ".ini", ".cfg", ".tex"}),
        ["mousepad"],
    ),
    (
        frozenset({".html", ".htm", ".pdf", ".svg"}),
        # root needs --no-sandbox; --test-type hides the warning bar it would show
        ["chromium", "--no-sandbox", "--test-type", "--no-first-run", "--disable-gpu", "--password-store=basic"],
    ),
]


def opener_for(path: str) -> list[str]:
    """The command that opens ``path``: the right app when installed, else xdg-open."""
    suffix = Path(path).suffix.lower()
    for suffixes, argv in _OPENERS:
        if suffix in suffixes and shutil.which(argv[0]):
            return [*argv, path]
    return ["xdg-open", path]


def get_file(state: Any, req: Request) -> Response:
    """Form field ``file_path`` -> the bytes; 404 JSON when missing (as OSWorld)."""
    raw = req.form().get("file_path")
    path = state.path(raw, "file_path")
    if not os.path.exists(path):
        return json_response({"status": "error", "error": "File not found", "message": f"no such file: {path}"}, 404)
    if os.path.isdir(path):
        raise HTTPError(400, f"{path} is a directory; use /list_directory")
    try:
        data = _read_bounded(path, state.max_served_bytes)
    except OSError as exc:
        raise HTTPError(403, f"cannot read {path}: {exc.strerror}") from None
    name = os.path.basename(path)
    return Response(data, content_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _read_bounded(path: str, limit: int) -> bytes:
    """The file's bytes; 413 when it holds more than ``limit`` (checked while reading: files grow)."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise HTTPError(413, f"{path} is larger than {limit} bytes, more than the probe serves (--max-served-bytes)")
    return data


def _write_bytes(state: Any, path: str, data: bytes) -> None:
    """Write as the desktop's user: what setup puts into the home belongs to it (its apps save over it)."""
    try:
        with state.writing_as_user():
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            tmp = f"{path}.part"
            with open(tmp, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
    except OSError as exc:
        raise HTTPError(400, f"cannot write {path}: {exc.strerror}") from None


def upload(state: Any, req: Request) -> Response:
    """Multipart ``file_path`` + ``file_data``."""
    parts = req.multipart()
    if "file_path" not in parts or "file_data" not in parts:
        raise HTTPError(400, "file_path and file_data are required (multipart/form-data)")
    path = state.path(parts["file_path"].decode("utf-8", "replace"), "file_path")
    _write_bytes(state, path, parts["file_data"])
    return text_response(f"File Uploaded: {len(parts['file_data'])} bytes")


def download_file(state: Any, req: Request) -> Response:
    """``{url, path}``: http(s) or file:// URL into ``path``."""
    data = req.json()
    url = req.field(data, "url", str)
    path = state.path(req.field(data, "path", str))
    limit = state.max_served_bytes
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        source = unquote(urlsplit(url).path)
        if not os.path.isfile(source):
            raise HTTPError(404, f"no such file: {source} (from {url})")
        if os.path.getsize(source) > limit:
            raise HTTPError(413, f"{source} is larger than {limit} bytes, more than the probe copies")
        try:
            with state.writing_as_user(), open(source, "rb") as handle:  # only what the desktop's user may read
                body = handle.read(limit + 1)
        except OSError as exc:
            raise HTTPError(400, f"cannot read {source}: {exc.strerror}") from None
        _write_bytes(state, path, body)
        return text_response(f"File downloaded successfully: {len(body)} bytes")
    if scheme not in ("http", "https"):
        raise HTTPError(400, f"unsupported URL scheme {scheme!r} in {url!r}: use http, https or file")
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as answer:  # noqa: S310 (scheme checked)
            body = answer.read(limit + 1)
    except urllib.error.HTTPError as exc:
        raise HTTPError(502, f"downloading {url} failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise HTTPError(502, f"downloading {url} failed: {exc}") from None
    if len(body) > limit:
        raise HTTPError(413, f"{url} sent more than {limit} bytes, more than the probe downloads")
    _write_bytes(state, path, body)
    return text_response(f"File downloaded successfully: {len(body)} bytes")


def _tree(directory: str, budget: list[int]) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "directory", "name": os.path.basename(directory.rstrip("/")), "children": []}
    try:
        entries = sorted(os.listdir(directory))
    except OSError as exc:
        return {"error": str(exc)}
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            node["truncated"] = True
            break
        full = os.path.join(directory, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            node["children"].append(_tree(full, budget))
        else:
            node["children"].append({"type": "file", "name": entry})
    return node


def list_directory(state: Any, req: Request) -> Response:
    data = req.json()
    path = state.path(req.field(data, "path", str))
    if not os.path.isdir(path):
        raise HTTPError(400, f"not a directory: {path}")
    return json_response({"directory_tree": _tree(path, [MAX_LISTED_ENTRIES])})


def read_text(state: Any, req: Request) -> Response:
    raw = (req.query.get("path") or [None])[0]
    path = state.path(raw)
    try:
        return text_response(_read_bounded(path, state.max_served_bytes).decode("utf-8"))
    except FileNotFoundError:
        raise HTTPError(404, f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HTTPError(400, f"cannot read {path} as UTF-8 text: {exc}") from None


def _write_text(state: Any, req: Request, mode: str) -> Response:
    data = req.json()
    path = state.path(req.field(data, "path", str))
    content = req.field(data, "content", str, "")
    try:
        with state.writing_as_user():
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, mode, encoding="utf-8") as handle:
                handle.write(content)
    except OSError as exc:
        raise HTTPError(400, f"cannot write {path}: {exc.strerror}") from None
    return text_response("OK")


def write_text(state: Any, req: Request) -> Response:
    return _write_text(state, req, "w")


def append_text(state: Any, req: Request) -> Response:
    return _write_text(state, req, "a")


ROUTES = {
    ("POST", "/file"): get_file,
    ("POST", "/setup/upload"): upload,
    ("POST", "/setup/download_file"): download_file,
    ("POST", "/list_directory"): list_directory,
    ("GET", "/read"): read_text,
    ("POST", "/write"): write_text,
    ("POST", "/append"): append_text,
}
