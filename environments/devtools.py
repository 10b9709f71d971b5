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
  serves it (HTTP GET; ``""`` when it cannot be fetched);
* ``{"action": "close", "ids": [...]}`` -> the pages after closing the pages with those ids;
* ``{"action": "evaluate", "expression": ...}`` -> ``{"url", "value"}``: the JavaScript expression's JSON value
  in the active page, once its document has loaded (``Runtime.evaluate`` over the page's DevTools WebSocket,
  spoken here with the stdlib: a masked text frame out, frames in until the answer with our id), or
  ``null`` when no page is open;
* ``{"action": "render", "url": ..., "pdf": false, "settle_s": 0}`` -> ``{"title", "url", "content"}``: the page
  at ``url`` opened in a fresh browser context (no cookies or tabs of the user's), after its document has
  loaded (up to ``wait_s``) and ``settle_s`` more seconds: its title, location and serialized DOM; with
  ``"pdf": true`` also ``"pdf"``, the page printed by ``Page.printToPDF`` (base64) with Playwright's
  ``page.pdf()`` defaults (Letter paper, no margins, no backgrounds). The context is disposed afterwards.
"""

from __future__ import annotations

PROGRAM = r'''
import base64, json, os, socket, struct, sys, time, urllib.parse, urllib.request
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
def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("the page's DevTools socket closed")
        data += chunk
    return data

class Page:
    """One page's DevTools WebSocket (RFC 6455, client side: masked frames out)."""
    def __init__(self, ws_url):
        parts = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
                           % (parts.path, parts.hostname, parts.port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += recv_exact(self.sock, 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("DevTools refused the WebSocket: %r" % head[:200])
        self.ids = 0
    def send(self, payload):
        mask = os.urandom(4)
        n = len(payload)
        header = b"\x81" + (bytes([0x80 | n]) if n < 126 else
                              bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                              bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    def message(self):
        data = b""
        while True:
            first, second = recv_exact(self.sock, 2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", recv_exact(self.sock, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", recv_exact(self.sock, 8))[0]
            payload = recv_exact(self.sock, n)
            opcode = first & 0x0F
            if opcode == 8:
                raise OSError("the page's DevTools socket closed")
            if opcode in (0, 1, 2):
                data += payload
                if first & 0x80:
                    return json.loads(data)
    def call(self, method, params):
        self.ids += 1
        self.send(json.dumps({"id": self.ids, "method": method, "params": params}).encode())
        while True:
            answer = self.message()
            if answer.get("id") == self.ids:
                if "error" in answer:
                    raise OSError("%s: %s" % (method, answer["error"]))
                return answer["result"]
    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise OSError("the expression threw: %s" % json.dumps(result["exceptionDetails"])[:500])
        return result["result"].get("value")

if request["action"] == "evaluate":
    targets = [t for t in call(port, "/json/list") if t.get("type") == "page"]
    if not targets:
        print("null")
        sys.exit(0)
    page = Page(targets[0]["webSocketDebuggerUrl"])
    while page.evaluate("document.readyState") != "complete" and time.time() < deadline:
        time.sleep(0.25)
    print(json.dumps({"url": page.evaluate("location.href"), "value": page.evaluate(request["expression"])}))
    sys.exit(0)
if request["action"] == "render":
    browser = Page(call(port, "/json/version")["webSocketDebuggerUrl"])
    context = browser.call("Target.createBrowserContext", {"disposeOnDetach": True})["browserContextId"]
    target = browser.call("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
    try:
        page = Page("ws://127.0.0.1:%d/devtools/page/%s" % (port, target))
        page.call("Page.navigate", {"url": request["url"]})
        while page.evaluate("document.readyState") != "complete" and time.time() < deadline:
            time.sleep(0.25)
        time.sleep(float(request.get("settle_s", 0)))
        answer = {"title": page.evaluate("document.title"), "url": page.evaluate("location.href"),
                  "content": page.evaluate("(document.doctype ? new XMLSerializer().serializeToString("
                                           "document.doctype) : '') + document.documentElement.outerHTML")}
        if request.get("pdf"):  # Playwright's page.pdf() defaults: Letter, no margins, no backgrounds
            answer["pdf"] = page.call("Page.printToPDF", {"paperWidth": 8.5, "paperHeight": 11, "marginTop": 0,
                                                          "marginBottom": 0, "marginLeft": 0, "marginRight": 0})["data"]
    finally:
        browser.call("Target.disposeBrowserContext", {"browserContextId": context})
    print(json.dumps(answer))
    sys.exit(0)
if request["action"] == "close":
    for target in request["ids"]:
        call(port, "/json/close/" + target)
if request["action"] == "open":
    before = pages(port)
    for index, url in enumerate(request["urls"]):
        call(port, "/json/new?" + urllib.parse.quote(url, safe=":/"), method="PUT")  # Chrome unescapes it whole
        if index == 0 and before:
            call(port, "/json/close/" + before[0]["id"])
print(json.dumps(pages(port)))
'''
