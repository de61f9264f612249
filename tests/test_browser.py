"""The built book in a real browser: headless Chromium (Debian's package) driven by Playwright.

Every page of the table of contents is served from _build/html on localhost and
opened at a desktop and a phone width.  Checked: MathJax typeset every formula
and no raw TeX delimiters are left, every image loaded, every figure has a
number and every figure/equation reference shows one, no error output and no
JavaScript errors, nothing is requested from another host, the page fits the
phone's width, every visible cell output fits its box at the desktop width, the
previous/next navigation goes to the neighbouring pages of the table of
contents, and the search page finds results.  A screenshot of each page at each
width goes to ``_build/screenshots/{desktop,mobile}/`` (ignored by git).

Chromium comes from ``scripts/install_browser.sh`` (run by ``scripts/test.sh``);
``FLATBOOK_CHROMIUM`` points at another binary.  Without one the tests skip,
except under CI, where they fail.
"""

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

from conftest import ROOT, toc_pages

pytestmark = pytest.mark.book

CHROMIUM = Path(os.environ.get("FLATBOOK_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "mobile": {"width": 390, "height": 844}}
#: Chromium must not phone home: this machine's network is closed (and a book must not need it).
#: Playwright adds --headless and a fresh, empty profile directory itself.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = toc_pages()


@pytest.fixture(scope="module")
def site(html_dir):
    """The built site on an HTTP server at 127.0.0.1 (its base URL)."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = (
            f"no Chromium at {CHROMIUM}: run `bash scripts/install_browser.sh` (Debian's chromium) "
            "or set FLATBOOK_CHROMIUM to a Chromium binary"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def open_page(browser, site, path, viewport):
    """Open ``path`` (e.g. "book/intro.html") at ``viewport``; return (tab, JS errors, requests to other hosts)."""
    context = browser.new_context(
        viewport=VIEWPORTS[viewport], is_mobile=viewport == "mobile", has_touch=viewport == "mobile"
    )
    tab = context.new_page()
    errors, remote = [], []
    tab.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    tab.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    tab.on(
        "response",
        lambda response: errors.append(f"HTTP {response.status}: {response.url}") if response.status >= 400 else None,
    )
    tab.on(
        "request",
        lambda req: remote.append(req.url) if not req.url.startswith((site, "data:", "blob:", "about:")) else None,
    )
    tab.goto(f"{site}/{path}", wait_until="load")
    # MathJax 3 typesets asynchronously; startup.promise resolves when the page is done.
    tab.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise.then(() => true) : true")
    return tab, errors, remote


PAGE_REPORT = """() => {
  const prose = document.querySelector('main') || document.body;
  const copy = prose.cloneNode(true);
  copy.querySelectorAll('pre, code, .cell_input, script, style').forEach(e => e.remove());
  const text = copy.innerText;
  const maths = [...document.querySelectorAll('.math')];
  return {
    math: maths.length,
    untypeset: maths.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60)),
    raw_tex: ['$$', '\\\\(', '\\\\[', '{glue:', '{eq}', '{numref}'].filter(s => text.includes(s)),
    broken_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
    figures: [...document.querySelectorAll('figure')].map(f => {
      const n = f.querySelector('.caption-number'); return n ? n.textContent.trim() : null; }),
    references: [...document.querySelectorAll('a.reference.internal')]
      .filter(a => /#(fig-|eq-)|#equation-/.test(a.getAttribute('href') || ''))
      .map(a => a.textContent.trim()),
    error_outputs: document.querySelectorAll('.output.traceback, .output.error, .output.stderr').length,
    error_text: ['Traceback (most recent call last)', 'CellExecutionError', 'Exception:']
      .filter(s => document.body.innerText.includes(s)),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    wide_outputs: [...document.querySelectorAll('.cell_output pre')]  // not the drawing code: code may scroll
      .filter(p => !p.closest('details.drawing-code') && p.scrollWidth > p.clientWidth + 1)
      .map(p => p.textContent.slice(0, 60)),
    next: (document.querySelector('a.right-next') || {}).href || null,
    prev: (document.querySelector('a.left-prev') || {}).href || null,
  };
}"""


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_in_chromium(browser, site, page, viewport):
    tab, errors, remote = open_page(browser, site, f"{page}.html", viewport)
    report = tab.evaluate(PAGE_REPORT)
    shot = SCREENSHOTS / viewport / f"{page.replace('/', '_')}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(shot), full_page=True)
    tab.context.close()

    assert not errors, f"{page}: JavaScript errors {errors}"
    assert not remote, f"{page}: requests to other hosts {remote}"
    assert not report["untypeset"], f"{page}: formulas MathJax did not typeset: {report['untypeset']}"
    assert not report["raw_tex"], f"{page}: raw TeX or MyST left in the prose: {report['raw_tex']}"
    assert not report["broken_images"], f"{page}: images that did not load: {report['broken_images']}"
    assert all(n and n.startswith("Fig.") for n in report["figures"]), f"{page}: unnumbered figures {report}"
    assert all(ref and "?" not in ref for ref in report["references"]), f"{page}: unresolved references"
    for ref in report["references"]:
        assert ref.startswith("Fig.") or (ref.startswith("(") and ref.endswith(")")), f"{page}: reference {ref!r}"
    assert report["error_outputs"] == 0 and not report["error_text"], f"{page}: error output {report}"
    assert report["overflow"] <= 1, f"{page}: {report['overflow']} px wider than the {viewport} window"
    if viewport == "desktop":  # a cell output fits its box without scrolling, collapsed or not (a phone scrolls)
        assert not report["wide_outputs"], f"{page}: outputs wider than their box: {report['wide_outputs']}"
    if page.startswith("book/0"):  # chapters: equations and figures are there and typeset
        assert report["math"] > 10 and report["figures"], f"{page}: no maths or figures? {report}"
    index = PAGES.index(page)
    if index + 1 < len(PAGES):
        assert report["next"] == f"{site}/{PAGES[index + 1]}.html", f"{page}: next link {report['next']}"
    if index > 0:
        assert report["prev"] and report["prev"].endswith(f"/{PAGES[index - 1]}.html"), f"{page}: previous link"


def test_next_links_walk_the_whole_book(browser, site):
    """Clicking "next" from the first page visits every page of the table of contents in order."""
    tab, errors, _ = open_page(browser, site, f"{PAGES[0]}.html", "desktop")
    visited = [tab.url]
    for _ in PAGES[1:]:
        tab.click("a.right-next")
        tab.wait_for_load_state("load")
        visited.append(tab.url)
    tab.context.close()
    assert visited == [f"{site}/{page}.html" for page in PAGES]
    assert not errors


@pytest.mark.parametrize("query,expected", [("flatness", "flattest"), ("hyperbolic entropy", "mirror")])
def test_search_finds_the_chapters(browser, site, query, expected):
    tab, errors, remote = open_page(browser, site, f"search.html?q={query.replace(' ', '+')}", "desktop")
    tab.wait_for_selector("ul.search li", timeout=30_000)
    hits = tab.eval_on_selector_all("ul.search li a", "links => links.map(a => a.getAttribute('href'))")
    tab.context.close()
    assert hits and any(expected in href for href in hits), hits
    assert not errors and not remote
