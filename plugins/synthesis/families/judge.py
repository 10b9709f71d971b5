"""The Python judge every state-changing family variant carries in ``evaluator.code``.

One getter reads what the variant's ``probes`` name under the desktop user's home; one metric scores 1 only when
that reading equals the variant's expected end state exactly (``options.state``, derived from the same
parameters as the setup and the oracle). A probe reads one path in one way:

* ``listing`` — the sorted names in a folder (None when it is not a folder);
* ``text`` — a file's content without its trailing newlines (None when it is not a file);
* ``mode`` — a file's permission bits as octal digits (``"750"``);
* ``link`` — where a symbolic link resolves to, relative to the home (None when the path is not a link);
* ``tar`` — the sorted member names of a gzip-compressed tar archive (``"unreadable"`` when it is not one).

The code passes the rule validator (:mod:`plugins.judges.validator`): it only reads (``gzip``, read-only ``os``
queries), so the sandboxed judge executor runs it like any generated judge.
"""

from __future__ import annotations

from typing import Any, Sequence

GETTER = "get_home_state__families"
METRIC = "check_home_state__families"
READS = ("listing", "text", "mode", "link", "tar")

CODE = '''import gzip
import os


def _tar_members(path):
    with gzip.open(path, "rb") as handle:
        data = handle.read()
    names, offset = [], 0
    while offset + 512 <= len(data):
        header = data[offset:offset + 512]
        if not header.strip(b"\\0"):
            break
        name = header[0:100].split(b"\\0")[0].decode("utf-8")
        prefix = header[345:500].split(b"\\0")[0].decode("utf-8")
        size = int(header[124:136].split(b"\\0")[0].strip() or b"0", 8)
        full = (prefix + "/" + name) if prefix else name
        names.append(full.rstrip("/"))
        offset += 512 + ((size + 511) // 512) * 512
    return sorted(names)


def _read(home, probe):
    path = os.path.join(home, probe["path"])
    how = probe["read"]
    if how == "listing":
        return sorted(os.listdir(path)) if os.path.isdir(path) and not os.path.islink(path) else None
    if how == "text":
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().rstrip("\\n")
    if how == "mode":
        return format(os.stat(path).st_mode & 0o777, "o") if os.path.exists(path) else None
    if how == "link":
        if not os.path.islink(path):
            return None
        return os.path.relpath(os.path.realpath(path), os.path.realpath(home))
    if how == "tar":
        if not os.path.isfile(path):
            return None
        try:
            return _tar_members(path)
        except (OSError, ValueError, EOFError, UnicodeDecodeError):
            return "unreadable"
    raise ValueError("unknown probe read: " + str(how))


def get_home_state__families(config):
    home = os.path.expanduser("~")
    return [[probe["path"], probe["read"], _read(home, probe)] for probe in config["probes"]]


def check_home_state__families(result, expected=None, **options):
    if result is None:
        return 0.0
    want = [[path, how, value] for path, how, value in options["state"]]
    return 1.0 if result == want else 0.0
'''


def evaluator(probes: Sequence[tuple[str, str, Any]]) -> dict[str, Any]:
    """The ``evaluator`` of a variant whose end state is ``probes``: (path under ~, read, expected value)."""
    for path, how, _ in probes:
        if how not in READS:
            raise ValueError(f"probe of {path!r}: unknown read {how!r}; one of {', '.join(READS)}")
    return {
        "func": METRIC,
        "result": {"type": GETTER, "probes": [{"path": path, "read": how} for path, how, _ in probes]},
        "options": {"state": [[path, how, value] for path, how, value in probes]},
        "code": CODE,
    }


def infeasible_evaluator() -> dict[str, Any]:
    """An infeasible request is judged by the agent's last action alone (OSWorld's ``infeasible``)."""
    return {"func": "infeasible"}

