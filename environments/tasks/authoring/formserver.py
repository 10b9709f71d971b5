#!/usr/bin/env python3
"""A task's local web app: serves the task pages on a free loopback port, stores what the pages submit,
and opens Chromium on the start page.

``python3 formserver.py --root DIR --page PAGE --out FILE``. ``POST /submit``
(a form, or a JSON body) is written to ``FILE`` as JSON: form fields map to
their value (a list when repeated). Standard library only: it runs on the
desktop, outside the project's environment.
"""

import argparse
import json
import os
import subprocess
import sys
import urllib.parse
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

CHROMIUM_FLAGS = [
    "--no-sandbox", "--test-type", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
    "--password-store=basic", "--disable-features=Translate,MediaRouter,DownloadBubble,DownloadBubbleV2",
    "--start-maximized",
]
SAVED_PAGE = b"<!doctype html><title>Saved</title><h1>Saved</h1><p>Your answer was stored.</p>"


class Handler(SimpleHTTPRequestHandler):
    out_path = ""

    def log_message(self, *args):  # keep the desktop's logs quiet
        pass

    def do_POST(self):
        if self.path.split("?")[0] != "/submit":
            self.send_error(404, "only /submit accepts data")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        if self.headers.get("Content-Type", "").startswith("application/json"):
            try:
                data = json.loads(body)
            except ValueError:
                self.send_error(400, "the body is not JSON")
                return
        else:
            fields = urllib.parse.parse_qs(body, keep_blank_values=True)
            data = {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
        os.makedirs(os.path.dirname(self.out_path) or ".", exist_ok=True)
        tmp = self.out_path + ".part"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
        os.replace(tmp, self.out_path)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(SAVED_PAGE)))
        self.end_headers()
        self.wfile.write(SAVED_PAGE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="directory with the pages")
    parser.add_argument("--page", required=True, help="start page, relative to --root")
    parser.add_argument("--out", required=True, help="where submissions are stored (JSON)")
    parser.add_argument("--no-browser", action="store_true", help="serve only")
    args = parser.parse_args()
    Handler.out_path = os.path.expanduser(args.out)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=args.root))
    url = f"http://127.0.0.1:{server.server_address[1]}/{args.page}"
    print(url, flush=True)
    if not args.no_browser:
        profile = os.path.expanduser("~/.config/chromium")
        subprocess.Popen(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
