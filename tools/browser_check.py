"""Headless-browser check of a built book (hand-written infrastructure).

Serves the site on 127.0.0.1, opens every page in Debian's Chromium through Playwright (no
browser download) and reports, per page:
  * any request that leaves the machine (the book must render offline; such requests are blocked),
  * console errors and uncaught exceptions,
  * images that did not load,
  * math that MathJax did not typeset (raw TeX left on the page),
  * figures without alt text (an image whose alt is empty or just its file name),
and, when asked, saves a screenshot of each theory page (``--screenshots DIR``).

    python tools/browser_check.py _build/html [--chromium /usr/bin/chromium] [--screenshots DIR]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

# Resolves once MathJax (2 or 3) has finished every queued typesetting job, or at once if absent.
MATH_READY_JS = """
() => new Promise(resolve => {
  const MJ = window.MathJax;
  if (!MJ) { resolve('absent'); return; }
  if (MJ.Hub && MJ.Hub.Queue) { MJ.Hub.Queue(() => resolve('v2')); return; }
  if (MJ.startup && MJ.startup.promise) { MJ.startup.promise.then(() => resolve('v3')); return; }
  resolve('unknown');
})
"""

# Per math element: typeset output present? raw TeX visible?
MATH_STATE_JS = """
() => Array.from(document.querySelectorAll('.math.notranslate')).map(el => {
  const text = el.innerText || '';
  const rendered = !!el.querySelector('.MathJax, .MathJax_CHTML, .MathJax_SVG, .MathJax_Display, mjx-container, .MathJax_MathML');
  const raw = /\\\\\\(|\\\\\\)|\\\\\\[|\\\\\\]|\\$\\$|\\\\(frac|sum|mathbf|operatorname|begin)/.test(text);
  return {rendered, raw, text: text.slice(0, 80)};
})
"""

# Display equations wider than the text column (at the page's viewport): on screen their right end hides
# in a scroll box, in print it is shrunk to the paper. Each with its TeX (MathJax 3 keeps it).
WIDE_MATH_JS = """
() => {
  const items = (window.MathJax && MathJax.startup && MathJax.startup.document)
    ? Array.from(MathJax.startup.document.math) : [];
  return items.filter(m => m.display && m.typesetRoot && m.typesetRoot.getClientRects().length > 0)
    .map(m => ({tex: m.math.trim().replace(/\\s+/g, ' ').slice(0, 120),
                wide: Math.ceil(m.typesetRoot.scrollWidth), column: Math.floor(m.typesetRoot.parentElement.clientWidth)}))
    .filter(m => m.wide > m.column + 1);
}
"""

IMAGES_JS = """
() => Array.from(document.images).filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src)
"""

# Every content image: where it comes from, its alt text, and whether it loaded.
FIGURES_JS = """
() => Array.from(document.querySelectorAll('main img, article img')).map(img => ({
  src: img.getAttribute('src') || '', alt: (img.getAttribute('alt') || '').trim(),
  loaded: img.complete && img.naturalWidth > 0}))
"""


def is_drawn_figure(src: str) -> bool:
    """An SVG drawn by book/figures (named chNN_*.svg; Sphinx copies it to _images/)."""
    import re

    return re.search(r"(^|/)ch\d\d_\w+\.svg$", src) is not None


def _alt_missing(image: dict) -> bool:
    """No alt text, or only the file name Sphinx writes when none was given."""
    alt = image["alt"]
    return not alt or alt == image["src"] or alt.rsplit("/", 1)[-1] == image["src"].rsplit("/", 1)[-1]


@dataclass
class PageReport:
    page: str
    external_requests: list = field(default_factory=list)
    console_errors: list = field(default_factory=list)
    broken_images: list = field(default_factory=list)
    untypeset_math: list = field(default_factory=list)
    math_count: int = 0
    mathjax: str = ""
    figures: list = field(default_factory=list)  # {src, alt, loaded} of each content image
    screenshot: str | None = None
    lang: str = ""  # the page's <html lang>
    fonts: list = field(default_factory=list)  # with fonts_of: the fonts that drew its Chinese text
    wide_math: list = field(default_factory=list)  # display equations wider than the column: {tex, wide, column}

    @property
    def problems(self) -> list[str]:
        out = []
        if self.external_requests:
            out.append(f"requests leaving the machine: {self.external_requests[:5]}")
        if self.console_errors:
            out.append(f"console errors: {self.console_errors[:5]}")
        if self.broken_images:
            out.append(f"images that did not load: {self.broken_images[:5]}")
        no_alt = [f["src"] for f in self.figures if is_drawn_figure(f["src"]) and _alt_missing(f)]
        if no_alt:
            out.append(f"figures without alt text: {no_alt[:5]}")
        if self.untypeset_math:
            out.append(f"{len(self.untypeset_math)} of {self.math_count} equations not typeset "
                       f"(MathJax: {self.mathjax}), e.g. {self.untypeset_math[:3]}")
        if self.wide_math:
            out.append(f"{len(self.wide_math)} display equation(s) wider than the text column at 1280 px (break them, "
                       f"e.g. with aligned): " + "; ".join(f"{m['wide']} px in {m['column']} px: {m['tex']}"
                                                            for m in self.wide_math[:3]))
        return out


def _benign(message: str) -> bool:
    """Console messages that are not failures of the book.

    * blocked external requests, already reported under ``external_requests``;
    * pydata-sphinx-theme's note on a first visit, when no colour mode is stored yet.
    """
    return "ERR_FAILED" in message or message.startswith("Got invalid theme mode")


def find_chromium(required: bool = True) -> str | None:
    """Path of Chromium: ``$CHROMIUM``, else ``chromium``/``chromium-browser`` on PATH."""
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    if required:
        raise FileNotFoundError("Chromium not found: install Debian's `chromium` or set CHROMIUM=/path/to/chromium")
    return None


@contextmanager
def serve(directory: Path):
    """Serve ``directory`` on an ephemeral loopback port; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


EDITION_DIRS = ("zh",)  # the Chinese edition lives inside the English one's folder


def html_pages(site: Path) -> list[str]:
    """Pages to check: every HTML page of this edition except Sphinx's generated index/search pages
    (the Chinese edition in ``zh/`` is a site of its own)."""
    skip = {"genindex.html", "search.html", "index.html"}
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if p.name not in skip and "_static" not in p.parts and "_sources" not in p.parts
                  and p.relative_to(site).parts[0] not in EDITION_DIRS)


def _local_only(base: str, report: PageReport):
    """Route handler: let requests to the local server through, block and record all others."""

    def route(route):
        url = route.request.url
        if url.startswith(base) or url.startswith(("data:", "blob:", "about:")):
            route.continue_()
        else:
            report.external_requests.append(url)
            route.abort()

    return route


# Marks the first element matching a selector whose text has Chinese characters (for the font probe).
MARK_CJK_JS = """
(selector) => { const el = Array.from(document.querySelectorAll(selector))
  .find(e => /[\u3400-\u9fff]/.test(e.textContent));
  if (el) { el.setAttribute('data-cjk-probe', '1'); return true; } return false; }
"""


def platform_fonts(page, selector: str) -> list[dict]:
    """The fonts Chromium really drew the Chinese text of ``selector`` with (DevTools'
    ``CSS.getPlatformFontsForNode``: family and glyph count; a missing glyph's box has no CJK font)."""
    if not page.evaluate(MARK_CJK_JS, selector):
        return []
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "[data-cjk-probe]"})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    cdp.detach()
    return fonts


def check_site(site: str | Path, pages: list[str] | None = None, chromium: str | None = None,
               timeout_ms: int = 30_000, screenshots: Path | None = None, workers: int = 1,
               fonts_of: str | None = None) -> list[PageReport]:
    """Open each page of a built site in headless Chromium; return one report per page.

    With ``fonts_of`` (a CSS selector), each report also lists the fonts that drew the Chinese text
    of the first matching element.

    With ``screenshots``, each theory page (``chapters/*.html``) is also saved there as a PNG of its
    first screen, for the build artefacts. ``workers`` > 1 splits the pages between that many
    processes, each with its own server and browser (the reports come back in page order).
    """
    site = Path(site)
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"{site} is not a built site (no index.html)")
    pages = pages if pages is not None else html_pages(site)
    if workers > 1 and len(pages) > 1:
        import multiprocessing  # noqa: PLC0415
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        chunks = [pages[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = pool.map(check_site, [site] * workers, chunks, [chromium] * workers,
                             [timeout_ms] * workers, [screenshots] * workers)
            by_page = {report.page: report for part in parts for report in part}
        return [by_page[page] for page in pages]
    from playwright.sync_api import sync_playwright

    reports = []
    with serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium or find_chromium(), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})  # a desktop reader
            for rel in pages:
                report = PageReport(rel)
                page = context.new_page()

                page.route("**/*", _local_only(base, report))
                page.on("console", lambda m, report=report: report.console_errors.append(m.text)
                        if m.type == "error" else None)
                page.on("pageerror", lambda e, report=report: report.console_errors.append(str(e)))
                page.on("response", lambda r, report=report: report.console_errors.append(f"HTTP {r.status}: {r.url}")
                        if r.status >= 400 else None)
                page.goto(f"{base}/{rel}", wait_until="load", timeout=timeout_ms)
                report.mathjax = page.evaluate(MATH_READY_JS)
                states = page.evaluate(MATH_STATE_JS)
                report.math_count = len(states)
                report.untypeset_math = [s["text"] for s in states if s["raw"] or not s["rendered"]]
                report.broken_images = page.evaluate(IMAGES_JS)
                report.wide_math = page.evaluate(WIDE_MATH_JS)
                report.figures = page.evaluate(FIGURES_JS)
                report.lang = page.evaluate("() => document.documentElement.lang")
                if fonts_of:
                    report.fonts = platform_fonts(page, fonts_of)
                if screenshots is not None and rel.startswith("chapters/"):
                    screenshots.mkdir(parents=True, exist_ok=True)
                    shot = screenshots / (Path(rel).stem + ".png")
                    page.set_viewport_size({"width": 1280, "height": 1600})
                    page.screenshot(path=str(shot))
                    report.screenshot = str(shot)
                page.wait_for_timeout(300)  # late requests (fonts) after typesetting
                report.console_errors = [e for e in report.console_errors if not _benign(e)]
                reports.append(report)
                page.close()
        finally:
            browser.close()
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--screenshots", type=Path, default=None, help="save a PNG of each theory page here")
    args = parser.parse_args(argv)
    failures = 0
    for report in check_site(args.site, chromium=args.chromium, screenshots=args.screenshots):
        status = "ok  " if not report.problems else "FAIL"
        print(f"{status} {report.page} ({report.math_count} equations)")
        for problem in report.problems:
            print(f"       {problem}")
        failures += bool(report.problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
