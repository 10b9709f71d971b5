"""The accessibility tree over AT-SPI, when the desktop has it.

AT-SPI needs three things: a D-Bus session bus (``DBUS_SESSION_BUS_ADDRESS``),
the AT-SPI bus (Debian ``at-spi2-core``, started on demand through D-Bus),
and the ``pyatspi`` bindings (Debian ``python3-pyatspi``, for the system
Python). The tree is dumped by a short script run under a Python that has
``pyatspi``, in a subprocess with a timeout, so a hung application cannot
hang the probe. The XML uses OSWorld's Ubuntu namespaces so its
accessibility-tree getters and xpaths apply.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Any, Mapping

from environments.probe.processes import run_command

DUMP_TIMEOUT_S = 30.0

_DUMPER = r'''
import sys
import xml.etree.ElementTree as ET
import pyatspi

NS = {  # OSWorld's Ubuntu namespaces, all declared on the root as its server does
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
for prefix, uri in NS.items():
    ET.register_namespace(prefix, uri)
MAX_DEPTH, MAX_WIDTH, budget = 50, 1024, [20000]

def node(acc, depth):
    budget[0] -= 1
    role = (acc.getRoleName() or "unknown").strip().replace(" ", "-") or "unknown"
    attrib = {"name": acc.name or ""}
    states = acc.getState().getStates()
    for st in states:
        name = pyatspi.stateToString(st).replace(" ", "-")
        if name:
            attrib["{%s}%s" % (NS["st"], name)] = "true"
    try:
        for key, value in (acc.get_attributes() or {}).items():
            if key:
                attrib["{%s}%s" % (NS["attr"], key)] = str(value)
    except Exception:
        pass
    if pyatspi.STATE_SHOWING in states and pyatspi.STATE_VISIBLE in states:
        try:
            box = acc.queryComponent().getExtents(pyatspi.XY_SCREEN)
            attrib["{%s}screencoord" % NS["cp"]] = str((box.x, box.y))
            attrib["{%s}size" % NS["cp"]] = str((box.width, box.height))
        except Exception:
            pass
    element = ET.Element(role, attrib)
    try:
        text = acc.queryText()
        element.text = text.getText(0, text.characterCount).replace("\ufffc", "").replace("\ufffd", "")
    except Exception:
        pass
    try:
        value = acc.queryValue()
        element.set("{%s}value" % NS["val"], str(value.currentValue))
    except Exception:
        pass
    if depth < MAX_DEPTH:
        for i in range(min(acc.childCount, MAX_WIDTH)):
            if budget[0] <= 0:
                break
            try:
                child = acc.getChildAtIndex(i)
            except Exception:
                continue
            if child is not None:
                element.append(node(child, depth + 1))
    return element

# the root is OSWorld's: a bare desktop-frame holding one element per application
root = ET.Element("desktop-frame")
desktop = pyatspi.Registry.getDesktop(0)
for i in range(min(desktop.childCount, MAX_WIDTH)):
    try:
        app = desktop.getChildAtIndex(i)
    except Exception:
        continue
    if app is not None and budget[0] > 0:
        root.append(node(app, 1))
xml = ET.tostring(root, encoding="unicode")
# ElementTree declares only the prefixes it used, on the root's start tag (the root has no other attributes)
end = xml.index(">")
end -= xml[end - 1] == "/"
declared = "".join(' xmlns:%s="%s"' % item for item in NS.items())
sys.stdout.write("<desktop-frame" + declared + xml[end:])
'''


@functools.lru_cache(maxsize=1)
def pyatspi_python() -> str | None:
    """A Python interpreter that can import pyatspi (ours first, then the system's)."""
    candidates = [sys.executable, shutil.which("python3") or "", "/usr/bin/python3"]
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            # cwd "/": the probe's own cwd is the desktop home, which a reset replaces (python cannot start there)
            ok = subprocess.run([python, "-c", "import pyatspi"], capture_output=True, timeout=20,
                                cwd="/").returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return python
    return None


def unavailable_reason(env: Mapping[str, str]) -> str | None:
    if env.get("NO_AT_BRIDGE") == "1":
        return "accessibility is off for this desktop (NO_AT_BRIDGE=1): start it with accessibility on"
    if not env.get("DBUS_SESSION_BUS_ADDRESS"):
        return "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset): start the desktop with accessibility on"
    if shutil.which("at-spi-bus-launcher") is None and not os.path.exists("/usr/libexec/at-spi-bus-launcher"):
        return "AT-SPI is not installed (Debian package at-spi2-core)"
    if pyatspi_python() is None:
        return "pyatspi is not importable (Debian package python3-pyatspi)"
    return None


def dump_tree(env: Mapping[str, str], as_user: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
    """``(xml, None)`` or ``(None, reason)``; ``as_user``: as the desktop's user (whose bus the apps are on)."""
    reason = unavailable_reason(env)
    if reason is not None:
        return None, reason
    python = pyatspi_python()
    assert python is not None
    result = run_command([python, "-c", _DUMPER], timeout=DUMP_TIMEOUT_S, env=env, cwd="/", as_user=as_user)
    if result.timed_out:
        return None, f"dumping the accessibility tree took longer than {DUMP_TIMEOUT_S:g} s"
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]
        return None, f"the AT-SPI dump failed: {tail[0]}"
    return result.stdout, None
