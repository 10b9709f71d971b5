"""Stand-in for OSWorld's VM image (``happysixd/osworld-docker``), which cannot run here (no registry to pull
it from, no 20 GB Ubuntu.qcow2). It keeps the parts the ``osworld-docker`` backend relies on real:

* port 5000 speaks OSWorld's server protocol without authentication: a recording reverse proxy in front
  of our probe (a real desktop: Xvfb, the window manager, real X input), answering 502 until the desktop
  is up, as the VM's port does while it boots;
* actions arrive as upstream sends them, ``python -c "import pyautogui; ..."`` through ``/execute``, and
  run with the real pyautogui;
* ``GET /standin`` reports what the container was given (environment, the qcow2 mount and whether it is
  read-only, /dev/kvm, NET_ADMIN in the bounding set) and every request seen, in order.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROBE_PORT = 5001
REQUESTS: list[str] = []
LOCK = threading.Lock()
CAP_NET_ADMIN = 12


def qcow2_mount() -> dict[str, object]:
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if fields[4] == "/System.qcow2":
                return {"mounted": True, "read_only": "ro" in fields[5].split(",")}
    return {"mounted": False, "read_only": False}


def bounding_caps() -> int:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("CapBnd:"):
                return int(line.split()[1], 16)
    return 0


def report() -> dict[str, object]:
    with LOCK:
        requests = list(REQUESTS)
    return {
        "env": {k: os.environ.get(k) for k in ("RAM_SIZE", "CPU_CORES", "DISK_SIZE", "KVM")},
        "qcow2": qcow2_mount(),
        "kvm_device": os.path.exists("/dev/kvm"),
        "net_admin": bool(bounding_caps() >> CAP_NET_ADMIN & 1),
        "requests": requests,
    }


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.path == "/standin":
            self._answer(200, {"Content-Type": "application/json"}, json.dumps(report()).encode())
            return
        entry = f"{self.command} {self.path}"
        if self.path == "/execute" and body:
            entry += " " + json.dumps(json.loads(body).get("command"))
        with LOCK:
            REQUESTS.append(entry)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        try:
            upstream = http.client.HTTPConnection("127.0.0.1", PROBE_PORT, timeout=600)
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() in ("content-type",)}
            self._answer(response.status, kept, data)
            upstream.close()
        except OSError as exc:  # the desktop is not up yet (the VM still boots)
            self._answer(502, {"Content-Type": "application/json"}, json.dumps({"error": str(exc)}).encode())

    def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _handle


def main() -> int:
    # OSWorld's Ubuntu has one (its display manager writes it); python-xlib, under pyautogui, insists on it
    open(os.path.join(os.environ["HOME"], ".Xauthority"), "ab").close()
    session = subprocess.Popen(
        [sys.executable, "-m", "environments.display", "--env-id", "osworld-standin", "--home", os.environ["HOME"],
         "--runtime-dir", f"/tmp/runtime-{os.getuid()}", "--size", "1280x720x24",
         "--window-manager", os.environ.get("SCALECUA_WINDOW_MANAGER", "openbox"),
         "--probe-host", "127.0.0.1", "--probe-port", str(PROBE_PORT), "--no-auth"],  # upstream sends no token
        env={k: v for k, v in os.environ.items() if k != "SCALECUA_PROBE_TOKEN"},
    )
    server = ThreadingHTTPServer(("0.0.0.0", 5000), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return session.wait()


if __name__ == "__main__":
    sys.exit(main())
