"""A browser's DevTools HTTP endpoint, reached from *inside* the desktop (so it works the same on a local
desktop, in a container or in a VM): a small stdlib-only program the client runs there through ``/execute``.

The endpoint's port comes from ``DevToolsActivePort`` in the profile (``~/.config/google-chrome``, then
``~/.config/chromium``; Chrome writes it whenever it runs with ``--remote-debugging-port``, also for port
0), else OSWorld's fixed ports (1337, 9222). The program waits up to ``wait_s`` for an endpoint that
answers (Chrome may just have been launched) and prints one JSON answer:

* ``{"action": "tabs", "documents": false}`` -> ``[{"id", "title", "url"}, ...]``: the open pages, most recently
  active first (the order of Chrome's ``/json/list``), with the URL the tab shows and DevTools' title (the URL
  for an untitled page); with ``"documents": true`` as each page's document says (Playwright's ``page.url`` and
  ``page.title()``): the main frame's URL, ``chrome-error://chromewebdata/`` for a page that did not load, and
  ``document.title`` (DevTools' values for a page that does not answer within 2 s, e.g. behind a dialog);
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
  ``page.pdf()`` defaults (Letter paper, no margins, no backgrounds). The context is disposed afterwards;
* ``{"action": "browse", "steps": [...], "fresh": false, "viewport": null, "headers": null}`` ->
  ``{"values", "error", "url"}``: a new tab (in the user's browser context, or with ``"fresh": true`` in a fresh
  one, disposed afterwards; ``viewport`` ``[width, height]`` emulated, ``headers`` sent with its requests) drives
  Playwright-like steps in order, one value each (``null`` for steps without one), and is closed afterwards.
  Steps (``timeout_s`` 30 unless given): ``{"do": "goto", "url": url or [urls...], "until": "load",
  "unless_at": false}`` (the first URL that loads up to ``until`` — ``domcontentloaded``, ``load`` or
  ``networkidle``: loaded and no request in flight for 0.5 s; with ``unless_at`` skipped when the page is at the
  first URL already); ``{"do": "load", "until": ...}``; ``{"do": "sleep", "s": ...}``; ``{"do": "fill",
  "selector", "text"}`` (focus and select a visible element, then type the text as one insertion);
  ``{"do": "click", "selector": sel or [sels...], "state": "attached", "wait_s": ..., "popup": false}`` (the
  first selector whose element is in ``state`` within ``wait_s``, scrolled into view and clicked at its centre
  with real mouse events once visible, enabled and not covered; a navigation the click starts is followed until
  it commits; with ``popup`` the steps go on in the page the click opened); ``{"do": "read", "selector",
  "index": 0, "property": "innerText", "attribute": null, "state": null}`` (after waiting for the element in
  ``state`` when one is given: the ``index``-th match's property, or its attribute when ``attribute`` is set;
  ``null`` when there is no such match). A failing step ends the run with ``error`` naming it, unless it has
  ``"optional": true`` (its value is then ``null``).
"""

from __future__ import annotations

PROGRAM = r'''
import base64, json, os, select, socket, struct, sys, time, urllib.parse, urllib.request
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
            if "method" in answer:
                self.note(answer)
    def note(self, event):
        """An event that arrived while waiting for an answer (``browse`` follows some)."""
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
if request["action"] == "browse":
    SHOWN = "(r => r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden')"
    FIND = """((sel, visible) => { const el = document.querySelector(sel);
      return !!el && (!visible || %s(el.getBoundingClientRect())); })""" % SHOWN
    AIM = """(sel => { const el = document.querySelector(sel); if (!el || el.disabled) return null;
      if (el.scrollIntoViewIfNeeded) el.scrollIntoViewIfNeeded(true); else el.scrollIntoView({block: "center"});
      const r = el.getBoundingClientRect(); if (!%s(r)) return null;
      const x = r.left + r.width / 2, y = r.top + r.height / 2, hit = document.elementFromPoint(x, y);
      return hit && (hit === el || el.contains(hit)) ? [x, y] : null; })""" % SHOWN
    FOCUS = """(sel => { const el = document.querySelector(sel); if (!el || el.disabled || el.readOnly) return false;
      el.focus(); if (el.select) el.select(); else { const range = document.createRange();
      range.selectNodeContents(el); getSelection().removeAllRanges(); getSelection().addRange(range); }
      return document.activeElement === el; })"""
    READ = """((sel, index, attribute, property) => { const all = document.querySelectorAll(sel);
      const el = all[index < 0 ? all.length + index : index]; if (!el) return {found: false};
      return {found: true, value: attribute !== null ? el.getAttribute(attribute) : el[property]}; })"""
    def js(function, *args):
        return "(%s)(%s)" % (function, ", ".join(json.dumps(a) for a in args))

    class Tab(Page):
        """A page that follows its navigations and network requests (for load states and clicks)."""
        def __init__(self, target):
            self.inflight, self.busy, self.pending = set(), time.time(), False
            Page.__init__(self, "ws://127.0.0.1:%d/devtools/page/%s" % (port, target))
            self.target = target
            self.call("Page.enable", {})
            self.call("Network.enable", {})
            self.main = self.call("Page.getFrameTree", {})["frameTree"]["frame"]["id"]
            if request.get("viewport"):
                width, height = request["viewport"]
                self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                 "deviceScaleFactor": 1, "mobile": False})
        def note(self, event):
            method, params = event["method"], event.get("params", {})
            frame = params["frame"]["id"] if "frame" in params else params.get("frameId")
            if method.startswith("Network."):
                self.busy = time.time()
                if method == "Network.requestWillBeSent":
                    self.inflight.add(params["requestId"])
                elif method in ("Network.loadingFinished", "Network.loadingFailed"):
                    self.inflight.discard(params["requestId"])
            elif frame != getattr(self, "main", None):
                return
            elif method == "Page.frameRequestedNavigation" and params.get("disposition") == "currentTab":
                self.pending = True
            elif method in ("Page.frameNavigated", "Page.navigatedWithinDocument", "Page.frameStoppedLoading"):
                self.pending = False
                if method == "Page.frameNavigated":
                    self.inflight.clear()
        def evaluate(self, expression):
            # a navigation (one a click just started) destroys the context an evaluation was sent to, and
            # DevTools answers "Inspected target navigated or closed": run it again in the new document
            for attempt in range(100):
                try:
                    return Page.evaluate(self, expression)
                except OSError as exc:
                    gone = "navigated or closed" in str(exc) or "Cannot find context" in str(exc)
                    if not gone or attempt == 99:
                        raise
                    self.pump(0.1)
        def pump(self, seconds):
            end = time.time() + seconds
            while time.time() < end and select.select([self.sock], [], [], max(0.0, end - time.time()))[0]:
                event = self.message()
                if "method" in event:
                    self.note(event)
        def until(self, check, timeout):
            end = time.time() + timeout
            while True:
                value = check()
                if value or time.time() >= end:
                    return value
                self.pump(0.1)
        def ready(self, state):
            done = self.evaluate("document.readyState")
            if state == "domcontentloaded":
                return done != "loading"
            return done == "complete" and (state == "load" or (not self.inflight and time.time() - self.busy >= 0.5))

    def wait_for(tab, sel, state, timeout):
        if not tab.until(lambda: tab.evaluate(js(FIND, sel, state == "visible")), timeout):
            raise OSError("no element matches %r (%s) after %gs" % (sel, state, timeout))

    def click(tab, sel, step, timeout):
        wait_for(tab, sel, step.get("state", "attached"), float(step.get("wait_s", timeout)))
        point = tab.until(lambda: tab.evaluate(js(AIM, sel)), timeout)
        if not point:
            raise OSError("%r is not visible, enabled and uncovered after %gs" % (sel, timeout))
        before = {t["targetId"] for t in browser.call("Target.getTargets", {})["targetInfos"]}
        tab.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": point[0], "y": point[1]})
        for kind in ("mousePressed", "mouseReleased"):
            tab.call("Input.dispatchMouseEvent", {"type": kind, "x": point[0], "y": point[1], "button": "left",
                                                  "clickCount": 1})
        tab.evaluate("0")  # the events the click caused arrive before this answer
        if tab.pending:  # as Playwright: a navigation the click started is waited for until it commits
            tab.until(lambda: not tab.pending, timeout)
        if not step.get("popup"):
            return tab
        def popup():
            infos = browser.call("Target.getTargets", {})["targetInfos"]
            return next((t["targetId"] for t in infos if t["type"] == "page" and t["targetId"] not in before
                         and t.get("browserContextId") == contexts[tab.target]), None)
        target = tab.until(popup, timeout)
        if not target:
            raise OSError("clicking %r opened no new page within %gs" % (sel, timeout))
        return open_tab(target, contexts[tab.target])

    def run(step, tab):
        kind, timeout = step["do"], float(step.get("timeout_s", 30))
        if kind == "sleep":
            tab.pump(float(step["s"]))
        elif kind == "goto":
            urls = step["url"] if isinstance(step["url"], list) else [step["url"]]
            if step.get("unless_at") and tab.evaluate("location.href") == urls[0]:
                return None, tab
            problem = None
            for url in urls:
                tab.pending = True
                answer = tab.call("Page.navigate", {"url": url})
                tab.pending = tab.pending and bool(answer.get("loaderId"))
                problem = answer.get("errorText")
                if not problem and tab.until(lambda: not tab.pending and tab.ready(step.get("until", "load")), timeout):
                    return url, tab
                problem = problem or "not loaded after %gs" % timeout
            raise OSError("cannot load %s: %s" % (" or ".join(urls), problem))
        elif kind == "load":
            if not tab.until(lambda: tab.ready(step.get("until", "load")), timeout):
                raise OSError("the page did not reach %r within %gs" % (step.get("until", "load"), timeout))
        elif kind == "fill":
            wait_for(tab, step["selector"], "visible", timeout)
            if not tab.until(lambda: tab.evaluate(js(FOCUS, step["selector"])), timeout):
                raise OSError("%r cannot be edited" % step["selector"])
            if step["text"]:  # as Playwright's fill: the selected text replaced, or deleted for ""
                tab.call("Input.insertText", {"text": step["text"]})
            for press in () if step["text"] else ("keyDown", "keyUp"):
                tab.call("Input.dispatchKeyEvent", {"type": press, "key": "Delete", "code": "Delete",
                                                    "windowsVirtualKeyCode": 46})
        elif kind == "click":
            problems = []
            for sel in step["selector"] if isinstance(step["selector"], list) else [step["selector"]]:
                try:
                    return sel, click(tab, sel, step, timeout)
                except OSError as exc:
                    problems.append(str(exc))
            raise OSError("; ".join(problems))
        elif kind == "read":
            if step.get("state"):
                wait_for(tab, step["selector"], step["state"], timeout)
            found = tab.evaluate(js(READ, step["selector"], int(step.get("index", 0)), step.get("attribute"),
                                    step.get("property", "innerText")))
            return (found["value"] if found["found"] else None), tab
        else:
            raise ValueError("unknown browse step %r" % kind)
        return None, tab

    browser = Page(call(port, "/json/version")["webSocketDebuggerUrl"])
    contexts, tabs = {}, []
    def open_tab(target, context):
        contexts[target] = context
        tabs.append(Tab(target))
        return tabs[-1]
    fresh = browser.call("Target.createBrowserContext", {"disposeOnDetach": True})["browserContextId"] \
        if request.get("fresh") else None
    try:
        params = {"url": "about:blank", **({"browserContextId": fresh} if fresh else {})}
        target = browser.call("Target.createTarget", params)["targetId"]
        context = next(t.get("browserContextId") for t in browser.call("Target.getTargets", {})["targetInfos"]
                       if t["targetId"] == target)
        tab = open_tab(target, context)
        if request.get("headers"):
            tab.call("Network.setExtraHTTPHeaders", {"headers": request["headers"]})
        values, error, url = [], None, None
        for step in request["steps"]:
            try:
                value, tab = run(step, tab)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                if not step.get("optional"):
                    error = "%s step %d: %s" % (step.get("do"), len(values) + 1, exc)
                    break
                value = None
            values.append(value)
        try:
            url = tab.evaluate("location.href")
        except OSError:
            pass
    finally:
        if fresh:
            browser.call("Target.disposeBrowserContext", {"browserContextId": fresh})
        for target in [] if fresh else contexts:
            try:
                browser.call("Target.closeTarget", {"targetId": target})
            except OSError:
                pass
    print(json.dumps({"values": values, "error": error, "url": url}))
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
def as_documents(listed):
    """Each page as its document says: the main frame's URL (Chrome's error page where it did not load) and
    ``document.title``; DevTools' own values for a page that does not answer in 2 s (a modal dialog)."""
    out = []
    by_id = {t["id"]: t for t in call(port, "/json/list")}
    for tab in listed:
        shown = dict(tab)
        try:
            page = Page(by_id[tab["id"]]["webSocketDebuggerUrl"])
            page.sock.settimeout(2)
            frame = page.call("Page.getFrameTree", {})["frameTree"]["frame"]
            shown["url"] = frame["url"] + frame.get("urlFragment", "")
            shown["title"] = page.evaluate("document.title")
            page.sock.close()
        except (OSError, KeyError, ValueError):
            pass
        out.append(shown)
    return out
print(json.dumps(as_documents(pages(port)) if request.get("documents") else pages(port)))
'''
