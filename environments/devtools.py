"""A browser's DevTools HTTP endpoint, reached from *inside* the desktop (so it works the same on a local
desktop, in a container or in a VM): a small stdlib-only program the client runs there through ``/execute``.

The endpoint's port comes from ``DevToolsActivePort`` in the profile (``~/.config/google-chrome``, then
``~/.config/chromium``; Chrome writes it whenever it runs with ``--remote-debugging-port``, also for port
0), else OSWorld's fixed ports (1337, 9222). The program waits up to ``wait_s`` for an endpoint that
answers (Chrome may just have been launched) and prints one JSON answer:

* ``{"action": "tabs"}`` -> ``[{"id", "title", "url"}, ...]``: the open pages, most recently active first
  (the order of Chrome's ``/json/list``);
* ``{"action": "open", "urls": [...]}`` -> the pages after opening each URL in a new tab and closing the
  page that was first before (as OSWorld's ``chrome_open_tabs`` replaces the start page);
* ``{"action": "fetch", "url": ...}`` -> ``{"content": ...}``: the document at ``url`` as the desktop's network
  serves it (HTTP GET; ``""`` when it cannot be fetched).
"""

from __future__ import annotations

PROGRAM = r'''
import json, os, sys, time, urllib.parse, urllib.request
request = json.loads(sys.argv[1])
home = os.path.expanduser("~")

def ports():
    for profile in (".config/google-chrome", ".config/chromium"):
        try:
            with open(os.path.join(home, profile, "DevToolsActivePort")) as handle:
                yield int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    yield from (1337, 9222)

def call(port, path, method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    with urllib.request.urlopen(req, timeout=60) as answer:
        body = answer.read()
    return json.loads(body) if body.strip().startswith((b"[", b"{")) else body.decode()

def pages(port):
    return [{"id": t["id"], "title": t.get("title", ""), "url": t.get("url", "")}
            for t in call(port, "/json/list") if t.get("type") == "page"]

if request["action"] == "fetch":
    try:
        with urllib.request.urlopen(request["url"], timeout=60) as answer:
            print(json.dumps({"content": answer.read().decode("utf-8", "replace")}))
    except (OSError, ValueError):
        print(json.dumps({"content": ""}))
    sys.exit(0)
deadline = time.time() + float(request.get("wait_s", 30))
port = None
while port is None:
    for candidate in ports():
        try:
            pages(candidate)
            port = candidate
            break
        except (OSError, ValueError):
            continue
    if port is None:
        if time.time() > deadline:
            sys.exit("no browser DevTools endpoint answers (launch it with --remote-debugging-port, e.g. "
                     "google-chrome --remote-debugging-port=1337)")
        time.sleep(0.5)
if request["action"] == "open":
    before = pages(port)
    for index, url in enumerate(request["urls"]):
        call(port, "/json/new?" + urllib.parse.quote(url, safe=":/"), method="PUT")  # Chrome unescapes it whole
        if index == 0 and before:
            call(port, "/json/close/" + before[0]["id"])
print(json.dumps(pages(port)))
'''
