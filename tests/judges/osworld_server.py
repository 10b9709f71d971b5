"""Real HTTP servers on loopback that speak endpoints of OSWorld's in-VM server (test doubles for a VM).

:class:`FileServer`: ``POST /file`` over a directory standing for the VM's disk (upstream's controller and our
:class:`environments.client.EnvironmentClient` both fetch files from it).

:class:`OSWorldRunPythonServer`: ``POST /run_python``.

The judge executor depends only on ``env.client.run_python``; this server
implements that endpoint with OSWorld's semantics (its in-VM Flask server,
``desktop_env/server/main.py``): the code is written to a temporary file and
run with Python under a time limit (30 s upstream), in the desktop user's
environment (here: HOME is a temporary "VM" home). The answer is
``{status, message, need_more, output, error, return_code}``; a timeout is
HTTP 500 with ``error: "TimeoutExpired"``; a missing ``code`` is HTTP 400.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FileServer:
    """OSWorld's ``POST /file`` (form field ``file_path``) over ``root``, standing for the VM's disk: the file's
    bytes; 404 when nothing is there; 500 when it cannot be sent (a directory), as its Flask server answers."""

    def __init__(self, root: Path):
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                asked = form.get("file_path", [""])[0]
                server.requests.append(asked)
                path = root / asked.lstrip("/")
                if self.path != "/file" or not path.exists():
                    status, data = 404, json.dumps({"error": "File not found"}).encode()
                elif not path.is_file():
                    status, data = 500, json.dumps({"error": f"Failed to serve file: {asked} is a directory"}).encode()
                else:
                    status, data = 200, path.read_bytes()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.port = self.httpd.server_address[1]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class OSWorldRunPythonServer:
    def __init__(self, home: Path, *, timeout_s: float = 30.0):
        self.home = home
        self.timeout_s = timeout_s
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                return

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                if self.path != "/run_python":
                    self._answer(404, {"status": "error", "message": f"no endpoint {self.path}"})
                    return
                server.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                code = (json.loads(self.rfile.read(length) or b"{}") or {}).get("code")
                if not code:
                    self._answer(400, {"status": "error", "message": "Code not supplied!"})
                    return
                self._answer(*server.run(code))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def run(self, code: str) -> tuple[int, dict]:
        script = Path(tempfile.gettempdir()) / f"python_exec_{uuid.uuid4().hex}.py"
        script.write_text(code)
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        try:
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                  timeout=self.timeout_s, env=env, cwd=tempfile.gettempdir())
        except subprocess.TimeoutExpired:
            return 500, {"status": "error", "message": "Execution timeout: Code took too long to execute",
                         "error": "TimeoutExpired", "need_more": False, "output": None}
        finally:
            script.unlink(missing_ok=True)
        error = done.stderr
        message = done.stdout + (("\n" if done.stdout else "") + error if error else "")
        if done.returncode != 0 and not error:
            error = f"Process exited with code {done.returncode}"
        return 200, {"status": "success" if done.returncode == 0 else "error", "message": message,
                     "need_more": False, "output": done.stdout, "error": error, "return_code": done.returncode}

    def __enter__(self) -> OSWorldRunPythonServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
