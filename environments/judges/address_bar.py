"""A URL as Chrome's address bar shows it (its accessibility text), which is what OSWorld's address-bar getters
read: ``active_url_from_accessTree`` answers ``goto_prefix`` + this text.

Chrome formats the URL for display (``url_formatter::FormatUrl`` with the omnibox's elisions); the rules here
are the ones a real Chromium's accessibility tree shows (``tests/judges/test_conformance_address_bar.py``):

* ``http://`` and ``https://`` are hidden, and so are a leading ``www.`` (no other subdomain: ``m.``, ``www2.``
  stay), a user name and password, and the ``/`` of a bare host; the port stays;
* ``file://`` is hidden (the path shows); other schemes (``chrome://``, ``data:``) stay, and a ``chrome://``
  page's bare-host ``/`` is hidden;
* an internationalized host shows in Unicode (``xn--bcher-kva.example`` as ``bücher.example``; Chrome falls back
  to punycode for a label its spoof checks reject, which this does not model);
* in the path, query and fragment, percent escapes of RFC 3986's unreserved characters (letters, digits,
  ``-._~``) and of UTF-8 characters are shown decoded (``%C3%BC`` as ``ü``); every other escape stays (``%20``,
  ``%21``, ``%2F``), and so do escapes of characters that could spoof the address bar: bidirectional controls,
  default-ignorable characters (``%E2%80%8B``), Unicode spaces, C1 controls, the lock emoji. A component with
  an escaped byte that starts no valid UTF-8 character (``%C3`` alone) is shown as written, all of it.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
#: code points Chrome leaves escaped (base/strings/escape.cc: bidi controls, spaces, lookalikes of its UI)
_SPOOFING = frozenset({
    0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
    0x1F50F, 0x1F510, 0x1F512, 0x1F513,
    0x0085, 0x00A0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x2800,
})
#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt), also left escaped
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def _shown(code_point: int) -> bool:
    if code_point < 0x80:
        return chr(code_point) in _UNRESERVED
    if code_point <= 0x9F or code_point in _SPOOFING:
        return False
    return not any(low <= code_point <= high for low, high in _IGNORABLE)


class _Undecodable(ValueError):
    """A run holds a byte that starts no valid UTF-8 character."""


def _unescape_run(run: str) -> str:
    """One run of consecutive ``%XX`` escapes: each character shown decoded where Chrome decodes it."""
    data = bytes(int(run[i + 1:i + 3], 16) for i in range(0, len(run), 3))
    out, i = [], 0
    while i < len(data):
        first = data[i]
        size = 1 if first < 0x80 else 2 if 0xC2 <= first <= 0xDF else 3 if 0xE0 <= first <= 0xEF else \
            4 if 0xF0 <= first <= 0xF4 else 0
        try:
            char = data[i:i + size].decode("utf-8") if size and i + size <= len(data) else None
        except UnicodeDecodeError:
            char = None
        if char is None:
            raise _Undecodable(run)
        out.append(char if _shown(ord(char)) else run[3 * i:3 * (i + size)])
        i += size
    return "".join(out)


def _component(text: str) -> str:
    """One of path, query, fragment as shown: Chrome unescapes an undecodable byte raw, finds the result is not
    UTF-8, and shows the whole component as written."""
    try:
        return _ESCAPES.sub(lambda m: _unescape_run(m.group(0)), text)
    except _Undecodable:
        return text


def unescape_for_display(text: str) -> str:
    """What follows a URL's host, as shown: its path, query and fragment each unescaped for display."""
    text, hash_, fragment = text.partition("#")
    path, mark, query = text.partition("?")
    return _component(path) + mark + _component(query) + hash_ + _component(fragment)


def _host(host: str) -> str:
    labels = []
    for label in host.split("."):
        if label.startswith("xn--"):
            try:
                label = label.encode("ascii").decode("idna")
            except UnicodeError:
                pass  # Chrome too shows what it cannot decode as it is
        labels.append(label)
    return ".".join(labels)


def _rest(url: str, parts: SplitResult) -> str:
    """What follows the host (and port) in ``url``, as written (a bare ``?`` or ``#`` included)."""
    prefix = f"{parts.scheme}://{parts.netloc}"
    if url[:len(prefix)].lower() == prefix.lower():
        return url[len(prefix):]
    return parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def address_bar_text(url: str) -> str:
    """``url`` (as DevTools lists a tab's) the way Chrome's address bar shows it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        host = _host(parts.hostname or "")
        host = host.removeprefix("www.")
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        rest = unescape_for_display(_rest(url, parts))
        return host if rest == "/" else host + rest
    if scheme == "file":
        return unescape_for_display(url[len("file://"):]) if url[:7].lower() == "file://" else url
    if scheme == "chrome" and parts.netloc and _rest(url, parts) == "/":
        return f"chrome://{parts.netloc}"
    return url
