"""The built site as a reader sees it: served on 127.0.0.1 and opened in headless Chromium.

tests/test_docs.py reads the built HTML; this test runs it. Each page below is opened in Debian's
``chromium`` (``make chromium`` installs it), driven over the DevTools protocol (websocket-client,
requirements/dev.txt), with every host but 127.0.0.1 unresolvable, so an asset fetched from the
network fails here as it would for an offline reader. A page fails on:

- a console error, an uncaught exception or a browser log entry at level error;
- a request that failed (a host that does not resolve, a refused connection) or answered >= 400;
- an ``<img>`` that did not load (``naturalWidth`` 0), which is how a chart goes missing;
- a Mermaid block that did not become a diagram (Material draws it in a closed shadow root,
  found through the DOM domain, which pierces it);
- an internal link (same origin) that does not answer 200, or whose ``#fragment`` is no id or
  anchor name on the page it points to;
- at a phone's width (390 px): a page wider than the viewport, a chart (an image of figures/)
  without a caption or with text smaller than ``MIN_TEXT_PX`` as shown, a Mermaid diagram whose
  text is shown smaller than that, or a copy button that lies over the code it copies.

Every page of the sitemap is opened, from a server that serves the site under site_url's path and
answers an unknown path with 404.html, as a static host (GitHub Pages) does; the 404 page, the
palette (light or dark as the system says, and its toggle) are checked on their own.

``test_the_checker_finds_what_is_planted`` serves a copy of the site with each of these broken on
purpose and requires the checker to name every one.

Without chromium the tests skip, saying so, unless ELASTIC_IDL_DOCS=run (set by ``make test``,
which installs it first), where they fail; under CI a skip fails anyway (tests/skip_policy.py).
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import websocket

from docs_site import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
#: The pages the planted-breakage test opens: the quickstarts, the page of charts and the page of
#: diagrams. test_a_reader_finds_nothing_broken opens every page the sitemap lists.
PAGES = [f"quickstart/{p.stem}/" for p in sorted((ROOT / "docs" / "quickstart").glob("*.md"))] + [
    "benchmarks/",
    "concepts/",
]
#: A phone's viewport (CSS px), where the width checks run.
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
#: The smallest text a reader should have to read, as shown (CSS px).
MIN_TEXT_PX = 9.0


def _site_path() -> str:
    url = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert url, "mkdocs.yml has no site_url"
    return urllib.parse.urlparse(url.group(1)).path


#: The path the site is served under (site_url's), as a host serves it.
SITE_PATH = _site_path()


def sitemap_pages(site: Path) -> list[str]:
    """Every page the sitemap lists, relative to the site (``""`` is the home page)."""
    locs = re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text())
    return [urllib.parse.urlparse(u).path.removeprefix(SITE_PATH) for u in locs]


#: Seconds for one page to load and settle (Mermaid draws after the load event).
PAGE_TIMEOUT = 30.0
#: Seconds Chromium may take to start and write DevToolsActivePort.
START_TIMEOUT = 30.0


# ---------------------------------------------------------------- serving the site


class _Host(SimpleHTTPRequestHandler):
    """A static host: the site under SITE_PATH; a path it does not hold answers 404 with 404.html."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_head(self) -> Any:
        path = urllib.parse.urlsplit(self.path).path
        if not path.startswith(SITE_PATH) and path + "/" != SITE_PATH:
            return self._not_found()
        self.path = "/" + self.path.removeprefix(SITE_PATH)
        local = Path(self.translate_path(self.path))
        if not (local.is_file() or (local / "index.html").is_file()):
            return self._not_found()
        return super().send_head()

    def _not_found(self) -> Any:
        body = (Path(self.directory) / "404.html").read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 at an ephemeral port, under SITE_PATH; yields the site's root URL without
    its final slash, ``http://127.0.0.1:PORT/elastic-idl``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Host, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{SITE_PATH.rstrip('/')}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


# ---------------------------------------------------------------- Chromium over the DevTools protocol


class Cdp:
    """One websocket to the browser; pages are flat sessions on it (Target.attachToTarget, flatten)."""

    def __init__(self, url: str) -> None:
        # Chromium refuses a DevTools websocket that sends an Origin it was not told to allow.
        self.ws = websocket.create_connection(url, timeout=PAGE_TIMEOUT, suppress_origin=True)
        self.next_id = 0
        self.events: list[tuple[str | None, str, dict[str, Any]]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        self.ws.settimeout(max(0.05, deadline - time.monotonic()))
        message: dict[str, Any] = json.loads(self.ws.recv())
        if "method" in message:
            self.events.append((message.get("sessionId"), message["method"], message.get("params", {})))
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        request: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            request["sessionId"] = session
        self.ws.send(json.dumps(request))
        deadline = time.monotonic() + PAGE_TIMEOUT
        while True:
            message = self._read(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def wait_event(self, session: str, method: str, timeout: float, since: int) -> bool:
        """Whether ``method`` came for ``session`` among the events from index ``since`` on, within ``timeout``."""
        deadline = time.monotonic() + timeout
        seen = since
        while True:
            for sid, name, _ in self.events[seen:]:
                if sid == session and name == method:
                    return True
            seen = len(self.events)
            if time.monotonic() >= deadline:
                return False
            try:
                self._read(deadline)
            except websocket.WebSocketTimeoutException:
                return False

    def close(self) -> None:
        self.ws.close()


@dataclass
class Browser:
    proc: subprocess.Popen[bytes]
    cdp: Cdp
    link_cache: dict[str, tuple[int, set[str] | None]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def find_chromium() -> str:
    found = shutil.which("chromium")
    if found is not None:
        return found
    skip_or_fail("chromium is not installed: `make chromium` (apt-get install chromium) installs it")


@contextmanager
def launch(profile: Path) -> Iterator[Browser]:
    exe = find_chromium()
    profile.mkdir(parents=True, exist_ok=True)
    log = (profile.parent / "chromium.log").open("wb")
    args = [
        exe,
        "--headless=new",
        "--no-sandbox",  # as root (CI) Chromium will not start sandboxed
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        # Every name but 127.0.0.1 fails to resolve: a remote asset fails loudly, as offline.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-gpu",
        "--window-size=1280,2000",
        "about:blank",
    ]
    # A session of its own: if Chromium does not close, its process group is killed, helpers too.
    proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (profile.parent / "chromium.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"chromium did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        cdp = Cdp(f"ws://127.0.0.1:{port}{path}")
        try:
            yield Browser(proc, cdp)
        finally:
            try:
                cdp.send("Browser.close")
            except (RuntimeError, OSError, websocket.WebSocketException):
                pass
            cdp.close()
    finally:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


# ---------------------------------------------------------------- checking one page


class _Anchors(HTMLParser):
    """The ids (and <a name>s) a page has: what a #fragment may point to."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is not None and (key == "id" or (key == "name" and tag == "a")):
                self.names.add(value)


def _source(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT) as resp:
            return str(resp.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:  # the 404 page, as a host answers an unknown path
        return str(exc.read().decode("utf-8", errors="replace"))


def _fetch(url: str) -> tuple[int, set[str] | None]:
    """HTTP status of ``url`` and, for HTML, the anchors on it."""
    try:
        with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT) as resp:
            body = resp.read()
            if "html" not in resp.headers.get("Content-Type", ""):
                return resp.status, None
            parser = _Anchors()
            parser.feed(body.decode("utf-8", errors="replace"))
            return resp.status, parser.names
    except urllib.error.HTTPError as exc:
        return exc.code, None


def _drawn_mermaid(node: dict[str, Any]) -> int:
    """How many Mermaid blocks in the DOM tree under ``node`` hold an <svg> (shadow roots included)."""
    attrs = node.get("attributes", [])
    if "mermaid" in dict(zip(attrs[::2], attrs[1::2], strict=True)).get("class", "").split():
        return int(_has_svg(node))
    children = [*node.get("children", []), *node.get("shadowRoots", [])]
    if "contentDocument" in node:
        children.append(node["contentDocument"])
    return sum(_drawn_mermaid(c) for c in children)


def _has_svg(node: dict[str, Any]) -> bool:
    if node.get("nodeName", "").lower() == "svg":
        return True
    return any(_has_svg(c) for c in [*node.get("children", []), *node.get("shadowRoots", [])])


def _evaluate(cdp: Cdp, session: str, expression: str) -> Any:
    result = cdp.send(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session
    )
    if "exceptionDetails" in result:
        raise RuntimeError(f"evaluating {expression!r}: {result['exceptionDetails']}")
    return result["result"].get("value")


def _args_text(args: list[dict[str, Any]]) -> str:
    return " ".join(str(a.get("value", a.get("description", a.get("type", "")))) for a in args)


@dataclass
class PageReport:
    url: str
    problems: list[str]
    images: int
    #: (Mermaid blocks in the served HTML, diagrams drawn)
    mermaid: tuple[int, int]
    links: int


def check_page(browser: Browser, origin: str, page: str, *, phone: bool = True, status: int = 200) -> PageReport:
    """Open ``origin/page`` in a fresh tab and list what a reader would find broken on it, at the window's
    width and (``phone``) at a phone's. ``status`` is the answer the page itself should get."""
    cdp = browser.cdp
    url = f"{origin}/{page}"
    short: Callable[[str], str] = lambda u: u.removeprefix(origin)  # noqa: E731
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    problems: list[str] = []
    try:
        for domain in ("Page", "Runtime", "Log", "Network", "DOM"):
            cdp.send(f"{domain}.enable", session=session)
        first = len(cdp.events)
        nav = cdp.send("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            problems.append(f"navigation failed: {nav['errorText']}")
        if not cdp.wait_event(session, "Page.loadEventFired", PAGE_TIMEOUT, first):
            problems.append(f"no load event within {PAGE_TIMEOUT:.0f} s")
        # Mermaid draws after load: wait until every block the served HTML holds is an svg, the
        # time is up, or there is no Mermaid to draw with (its script did not load).
        if url not in browser.sources:
            browser.sources[url] = _source(url)
        blocks = browser.sources[url].count('class="mermaid"')
        deadline = time.monotonic() + PAGE_TIMEOUT
        while True:
            loaded = _evaluate(
                cdp,
                session,
                "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(typeof mermaid !== 'undefined'), 100)))",
            )
            tree = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True}, session)["root"]
            drawn = _drawn_mermaid(tree)
            if drawn >= blocks or not loaded or time.monotonic() > deadline:
                break
        if drawn < blocks:
            problems.append(f"Mermaid: {blocks - drawn} of {blocks} diagrams not drawn")
        # Whatever is still in flight (late requests, errors) arrives before the tab closes.
        _evaluate(cdp, session, "new Promise(r => setTimeout(r, 200))")

        requests: dict[str, str] = {}
        for sid, method, params in cdp.events[first:]:
            if sid != session:
                continue
            if method == "Network.requestWillBeSent":
                requests[params["requestId"]] = params["request"]["url"]
            elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
                if (params["response"]["url"], params["response"]["status"]) != (url, status):
                    problems.append(f"HTTP {params['response']['status']}: {short(params['response']['url'])}")
            elif method == "Network.responseReceived" and params["response"]["url"] == url and status != 200:
                problems.append(f"HTTP {params['response']['status']}, not {status}: {short(url)}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                where = short(requests.get(params["requestId"], params["requestId"]))
                problems.append(f"request failed ({params['errorText']}): {where}")
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                problems.append(f"console.{params['type']}: {_args_text(params.get('args', []))}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text", "")
                problems.append(f"uncaught exception: {text.splitlines()[0] if text else details}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                if status != 200 and entry.get("url") == url:
                    continue  # the page's own expected status, logged as a failed load
                problems.append(f"log error ({entry.get('source')}): {entry['text']} {short(entry.get('url', ''))}")

        images: list[dict[str, Any]] = _evaluate(
            cdp,
            session,
            "Array.from(document.images, i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}))",
        )
        problems += [f"image not shown: {i['src']}" for i in images if not i["ok"]]

        hrefs: list[str] = _evaluate(cdp, session, "Array.from(document.querySelectorAll('a[href]'), a => a.href)")
        internal = sorted({h for h in hrefs if h.startswith(origin + "/") or h == origin})
        for href in internal:
            target_url, _, fragment = href.partition("#")
            if target_url not in browser.link_cache:
                browser.link_cache[target_url] = _fetch(target_url)
            status, anchors = browser.link_cache[target_url]
            if status != 200:
                problems.append(f"dead link (HTTP {status}): {short(href)}")
            elif fragment and anchors is not None and urllib.parse.unquote(fragment) not in anchors:
                problems.append(f"link to a missing anchor: {short(href)}")
        if phone:
            problems += _phone_problems(browser, session, origin)
    finally:
        cdp.send("Target.closeTarget", {"targetId": target})
    return PageReport(url, problems, len(images), (blocks, drawn), len(internal))


#: Per chart image at the phone's width: its src, shown and natural width, and its figure's caption.
_CHARTS_JS = """Array.from(document.images).filter(i => /(^|\\/)figures\\//.test(i.getAttribute('src'))).map(i => {
  const f = i.closest('figure'), c = f && f.querySelector('figcaption');
  return {src: i.getAttribute('src'), url: i.src, shown: i.getBoundingClientRect().width,
          natural: i.naturalWidth, caption: c ? c.textContent.trim() : ''};
})"""
#: Copy buttons whose box overlaps the box of the code they copy.
_COPY_JS = """Array.from(document.querySelectorAll('pre > .md-code__nav, pre > .md-clipboard')).filter(b => {
  const c = b.parentElement.querySelector(':scope > code');
  if (!c) return false;
  const x = b.getBoundingClientRect(), y = c.getBoundingClientRect();
  return x.left < y.right && y.left < x.right && x.top < y.bottom && y.top < x.bottom;
}).map(b => b.parentElement.querySelector(':scope > code').textContent.split('\\n')[0].slice(0, 60))"""


def _font_sizes(svg: str) -> list[float]:
    """The font sizes (px) an SVG's text is drawn with: style attributes and its style sheet."""
    return [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", svg)] + [
        float(s) for s in re.findall(r'font-size="([\d.]+)(?:px)?"', svg)
    ]


def _phone_problems(browser: Browser, session: str, origin: str) -> list[str]:
    """What a reader finds at a phone's width: the page wider than the screen, a chart without a caption
    or too small to read, a Mermaid diagram too small to read, a copy button over the code."""
    cdp = browser.cdp
    short: Callable[[str], str] = lambda u: u.removeprefix(origin)  # noqa: E731
    cdp.send("Emulation.setDeviceMetricsOverride", PHONE, session)
    problems: list[str] = []
    try:
        _evaluate(cdp, session, "new Promise(r => requestAnimationFrame(() => setTimeout(r, 300)))")
        width = _evaluate(cdp, session, "[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        if width[0] > width[1]:
            problems.append(f"wider than the viewport at {PHONE['width']} px: {width[0]} px")
        for chart in _evaluate(cdp, session, _CHARTS_JS):
            if not chart["caption"]:
                problems.append(f"chart without a caption: {chart['src']}")
            if chart["natural"]:
                sizes = _font_sizes(browser.sources.setdefault(chart["url"], _source(chart["url"])))
                shown = min(sizes, default=0.0) * chart["shown"] / chart["natural"]
                if shown < MIN_TEXT_PX:
                    problems.append(f"chart text {shown:.1f} px at {PHONE['width']} px: {short(chart['url'])}")
        tree = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True}, session)["root"]
        for number, node in enumerate(_mermaid_svgs(tree), 1):
            box = cdp.send("DOM.getBoxModel", {"nodeId": node["nodeId"]}, session)["model"]
            attrs = dict(zip(node["attributes"][::2], node["attributes"][1::2], strict=True))
            view_width = float(attrs.get("viewBox", "0 0 0 0").split()[2])
            markup = cdp.send("DOM.getOuterHTML", {"nodeId": node["nodeId"]}, session)["outerHTML"]
            # The size of its text: the diagram's root rule (Mermaid's tooltip has a smaller one of its own).
            root = re.search(r"#[\w-]+\{[^}]*?font-size:\s*([\d.]+)px", markup)
            size = float(root.group(1)) if root else 16.0
            shown = size * box["width"] / view_width if view_width else 0.0
            if shown < MIN_TEXT_PX:
                problems.append(f"Mermaid diagram {number}: text {shown:.1f} px at {PHONE['width']} px")
        problems += [f"copy button over the code: {line!r}" for line in _evaluate(cdp, session, _COPY_JS)]
    finally:
        cdp.send("Emulation.clearDeviceMetricsOverride", {}, session)
    return problems


def _mermaid_svgs(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The <svg> nodes Mermaid drew, inside the shadow roots of the page's .mermaid hosts."""
    attrs = node.get("attributes", [])
    if "mermaid" in dict(zip(attrs[::2], attrs[1::2], strict=True)).get("class", "").split():
        return [s for root in node.get("shadowRoots", []) for s in _svgs(root)]
    return [s for c in [*node.get("children", []), *node.get("shadowRoots", [])] for s in _mermaid_svgs(c)]


def _svgs(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node.get("nodeName", "").lower() == "svg":
        return [node]
    return [s for c in node.get("children", []) for s in _svgs(c)]


def _report(reports: list[PageReport]) -> str:
    return "\n".join(f"{r.url}:\n  " + "\n  ".join(r.problems) for r in reports if r.problems)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    find_chromium()
    with launch(tmp_path_factory.mktemp("chromium") / "profile") as b:
        yield b


# ---------------------------------------------------------------- tests


def test_a_reader_finds_nothing_broken(browser: Browser, site: Path) -> None:
    pages = sitemap_pages(site)
    assert len(pages) >= 25 and set(PAGES) <= set(pages), pages
    with serve(site) as origin:
        reports = {page: check_page(browser, origin, page) for page in pages}
    broken = _report(list(reports.values()))
    assert broken == "", f"what a reader of the site finds broken:\n{broken}"
    # The checks looked at something: the charts are images, the concepts page draws its diagrams,
    # and every page links to the others (the navigation at least).
    assert reports["benchmarks/"].images >= 2, reports["benchmarks/"]
    assert reports["concepts/"].mermaid[1] >= 3, reports["concepts/"]
    assert all(r.links >= 10 for r in reports.values()), {p: r.links for p, r in reports.items()}


def test_the_404_page_works_at_any_depth(browser: Browser, site: Path) -> None:
    """Issue 29: the 404 page's links are root-absolute; served as a host serves it (under site_url's path,
    for any unknown path), its styles, scripts and links all load, and it says what happened."""
    with serve(site) as origin:
        report = check_page(browser, origin, "no/such/page/at/depth/", phone=False, status=404)
        # The page is styled (Material's stylesheet applied) and links home.
        target = browser.cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            browser.cdp.send("Page.enable", session=session)
            first = len(browser.cdp.events)
            browser.cdp.send("Page.navigate", {"url": f"{origin}/no/such/page/"}, session)
            assert browser.cdp.wait_event(session, "Page.loadEventFired", PAGE_TIMEOUT, first)
            header = _evaluate(browser.cdp, session, "getComputedStyle(document.querySelector('.md-header')).position")
            title = _evaluate(browser.cdp, session, "document.querySelector('article h1').textContent")
        finally:
            browser.cdp.send("Target.closeTarget", {"targetId": target})
    assert report.problems == [], report.problems
    assert report.links >= 10 and header == "sticky" and "404" in title, (report, header, title)


def test_the_colours_follow_the_system_and_the_toggle(browser: Browser, site: Path) -> None:
    """Issue 29: no dark mode. The scheme follows the system's preference until the reader picks one."""
    cdp = browser.cdp
    with serve(site) as origin:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            seen = {}
            for scheme in ("dark", "light"):
                cdp.send(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                    session,
                )
                cdp.send("Page.enable", session=session)
                first = len(cdp.events)
                cdp.send("Page.navigate", {"url": f"{origin}/"}, session)
                assert cdp.wait_event(session, "Page.loadEventFired", PAGE_TIMEOUT, first), scheme
                _evaluate(cdp, session, "new Promise(r => setTimeout(r, 300))")
                seen[scheme] = _evaluate(
                    cdp,
                    session,
                    "[document.body.dataset.mdColorScheme, getComputedStyle(document.body).backgroundColor]",
                )
            # The toggle: from "as the system" (dark here) to light, then to dark.
            clicks = []
            for _ in range(2):
                clicks.append(
                    _evaluate(
                        cdp,
                        session,
                        "new Promise(r => { const l = Array.from(document.querySelectorAll('label.md-header__button'))"
                        ".find(e => e.offsetParent !== null && e.getAttribute('for').startsWith('__palette'));"
                        " l.click(); setTimeout(() => r(document.body.dataset.mdColorScheme), 300); })",
                    )
                )
        finally:
            cdp.send("Target.closeTarget", {"targetId": target})
    assert seen["dark"][0] == "slate" and seen["light"][0] == "default", seen
    assert seen["dark"][1] != seen["light"][1], seen
    assert clicks == ["default", "slate"], clicks


def _plant(path: Path, before: str, text: str) -> None:
    html = path.read_text()
    assert before in html, (path, before)
    path.write_text(html.replace(before, text + before, 1))


def test_the_checker_finds_what_is_planted(browser: Browser, site: Path, tmp_path: Path) -> None:
    broken = tmp_path / "site"
    shutil.copytree(site, broken)
    # A chart gone, a script that throws and one that logs an error, a dead link and a dead
    # anchor, an image from the network, and the vendored Mermaid gone.
    (broken / "figures" / "chaos-cluster.svg").unlink()
    flytekit = broken / "quickstart" / "flytekit" / "index.html"
    _plant(flytekit, "</body>", '<script>throw new Error("planted exception")</script>')
    _plant(flytekit, "</body>", '<script>console.error("planted console error")</script>')
    _plant(flytekit, "</article>", '<a href="../no-such-page/">dead</a><a href="../../concepts/#no-such-anchor">x</a>')
    _plant(broken / "quickstart" / "ml-engineer" / "index.html", "</article>", '<img src="https://example.com/a.png">')
    concepts = broken / "concepts" / "index.html"
    diagrams = concepts.read_text().count('class="mermaid"')
    concepts.write_text(concepts.read_text().replace("assets/vendor/mermaid.min.js", "assets/vendor/gone.js"))
    # At a phone's width: a page made wider than the screen, a chart's caption gone, a chart drawn at
    # a third of its size, a copy button moved over its code.
    ml = broken / "quickstart" / "ml-engineer" / "index.html"
    _plant(ml, "</article>", '<div style="width: 700px; height: 1px"></div>')
    bench = broken / "benchmarks" / "index.html"
    html = bench.read_text()
    first, rest = html.split("</figcaption>", 1)
    bench.write_text(first.rsplit("<figcaption>", 1)[0] + rest)
    _plant(bench, "</head>", '<style>img[src$="plugin-buildresource.svg"] { width: 33% !important; }</style>')
    _plant(ml, "</head>", "<style>.md-typeset pre > code { margin-right: 0 !important; }</style>")

    with serve(broken) as origin:
        found = {page: check_page(browser, origin, page).problems for page in PAGES}
    text = json.dumps(found, indent=1)
    expected = {
        "benchmarks/": [
            "HTTP 404: /figures/chaos-cluster.svg",
            "image not shown: ../figures/chaos-cluster.svg",
            "chart without a caption: ../figures/launch-vs-workers.svg",
            "chart text ",  # the plugin chart at a third of its width
        ],
        "quickstart/flytekit/": [
            "uncaught exception: Error: planted exception",
            "console.error: planted console error",
            "dead link (HTTP 404): /quickstart/no-such-page/",
            "link to a missing anchor: /concepts/#no-such-anchor",
        ],
        "quickstart/ml-engineer/": [
            "request failed (net::ERR_NAME_NOT_RESOLVED): https://example.com/a.png",
            "image not shown: https://example.com/a.png",
            "wider than the viewport at 390 px",
            "copy button over the code: ",
        ],
        "concepts/": ["HTTP 404: /assets/vendor/gone.js", f"Mermaid: {diagrams} of {diagrams} diagrams not drawn"],
    }
    # Each expected problem starts one the checker reported on that page.
    missing = {
        page: [w for w in want if not any(p.startswith(w) for p in found[page])] for page, want in expected.items()
    }
    assert {k: v for k, v in missing.items() if v} == {}, f"the checker missed planted breakage; it found:\n{text}"
    # The pages nothing was planted on stay clean: the checker does not blame the wrong page.
    assert found["quickstart/propeller-go/"] == [], text
