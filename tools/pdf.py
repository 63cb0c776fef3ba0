"""The book as a PDF (hand-written infrastructure; `make pdf`).

    python tools/pdf.py [--profile P] [--language en|zh_CN|all] [--out DIR]

Each edition is built as one HTML page (Sphinx's ``singlehtml`` builder, the notebooks' outputs read
from the execution cache of the book built in the same profile, so nothing is executed again when the
book is built) and printed to PDF by headless Chromium:
``_build/pdf/attention-step-by-step.pdf`` (English) and ``attention-step-by-step.zh_CN.pdf`` (Chinese).
Where the HTML book is built, the PDFs are also copied into its root (``_build/html/`` and
``_build/html/zh/``), where the introduction links to them and the Pages workflow publishes them.

Why Chromium and not LaTeX: the test command already installs it and uses it for the browser check;
it prints what a reader of the site sees (MathJax's typesetting, the notebooks' outputs, the exercise
boxes, Chinese in a Chinese font), the SVG figures stay vector drawings, internal links keep working,
and it writes a PDF outline (bookmarks) from the headings. Sphinx's LaTeX writer would need a TeX
distribution of several gigabytes (xelatex and ctex for the Chinese edition) and a second rendering of
everything MyST and myst-nb produce, each a source of its own failures. What it costs: the outline
stands in for a table of contents with page numbers, and page breaks are the browser's (every
chapter and notebook starts on a new page).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build  # noqa: E402  (tools/build.py: conf.py, the kernels' environment, MathJax)
from browser_check import CHROMIUM_ARGS, find_chromium, serve  # noqa: E402

ROOT = build.ROOT
NAME = "attention-step-by-step"
EDITIONS = {"en": "", "zh_CN": ".zh_CN"}  # language -> suffix of the PDF's name
TITLE = {"en": "Attention, step by step", "zh_CN": "Attention, step by step（循序渐进学注意力机制）"}

# Before printing: typeset math, open every collapsed block (solutions, hidden cells), so the PDF
# holds what the page holds.
PREPARE_JS = r"""
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  document.querySelectorAll('details').forEach(d => d.open = true);
  // the contents' part captions are headings for screen readers, not chapters of the outline
  document.querySelectorAll('p.caption[role="heading"]').forEach(e => e.removeAttribute('role'));
  // a heading's permalink "#" would end up in the outline's titles
  document.querySelectorAll('a.headerlink').forEach(e => e.remove());
  // the outline takes a heading's name from its lines, which loses or repeats words where a long
  // heading wraps: name each heading once, whole
  const names = Array.from(document.querySelectorAll('h1, h2, h3, h4, h5, h6, [role="heading"]'))
    .filter(h => h.getClientRects().length > 0)  // printed: not inside what print hides
    .map(h => h.textContent.replace(/\s+/g, ' ').trim());
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('.toggle-details__container, .toggle-details__summary').forEach(e => e.style.display = 'block');
  await document.fonts.ready;
  // the page is narrower than a screen: shrink a display equation or a table that would overflow it
  // (on screen they scroll; on paper they would be cut off)
  document.querySelectorAll('mjx-container[display="true"], table').forEach(e => {
    const box = e.parentElement.getBoundingClientRect().width;
    const wide = e.scrollWidth;
    if (box > 0 && wide > box) { e.style.zoom = (box / wide).toFixed(3); }
  });
  return names;
}
"""
MARGIN_MM = {"top": 16, "bottom": 16, "left": 14, "right": 14}
PRINT_WIDTH_PX = round((210 - MARGIN_MM["left"] - MARGIN_MM["right"]) / 25.4 * 96)
FOOTER = ('<div style="font-size:8px; width:100%; text-align:center; color:#555;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def header(language: str) -> str:
    return (f'<div style="font-size:8px; width:100%; text-align:center; color:#777;">{TITLE[language]}</div>')


def doctrees_of(site: Path, language: str) -> Path:
    """The doctrees (Sphinx's environment) of the HTML book built into ``site`` (tools/build.py's layout)."""
    out = site if language == "en" else site / build.EDITIONS[language]
    built = ROOT / "_build"
    variant = (out.relative_to(built) if out.is_relative_to(built) else Path(out.name)).as_posix().replace("/", "_")
    return built / ".doctrees" / variant


def check_from_build(site: Path, languages: tuple[str, ...]) -> None:
    """``--from-build DIR``: DIR must hold the HTML book of each edition and its environment (the
    doctrees tools/build.py wrote), else a clear error at once, not a build of every page from the
    sources (notebooks executed where the cache lacks them)."""
    missing = []
    for language in languages:
        out = site if language == "en" else site / build.EDITIONS[language]
        for needed in (out / "index.html", doctrees_of(site, language) / "environment.pickle"):
            if not needed.is_file():
                missing.append(str(needed))
    if missing:
        raise SystemExit(f"--from-build {site}: no HTML book built there (missing {', '.join(missing)}). Build it "
                         f"first (make book, or python tools/build.py book --out {site}), or leave out --from-build "
                         "to build the single page from the sources")


def single_page(profile: str, language: str, out: Path, from_build: Path | None = None) -> Path:
    """Build the book at ``out`` as one HTML page; return that page. With ``from_build``, the
    environment of the HTML book built there is reused: no page is read again, only written."""
    build.copy_mathjax()
    build.write_conf()
    env = build.book_env(profile)
    doctrees = doctrees_of(from_build, language) if from_build else ROOT / "_build" / ".doctrees" / f"pdf_{language}"
    cmd = [sys.executable, "-m", "sphinx", "-b", "singlehtml", str(ROOT), str(out), "-c", str(ROOT), "-q",
           "-d", str(doctrees),
           "-D", f"nb_execution_cache_path={env['ATTN_NB_CACHE']}", "-D", f"language={language}"]
    started = time.perf_counter()
    code = subprocess.call(cmd, cwd=ROOT, env=env)
    if code != 0:
        raise SystemExit(f"the single-page build of the {language} edition failed (exit {code})")
    # the single page is named after the root document (book/intro.html) but its links are written
    # from the site's root (_static/, _images/): print a copy that sits there
    page = out / "book.html"
    shutil.copyfile(out / "book" / "intro.html", page)
    print(f"single page ({language}) in {time.perf_counter() - started:.0f} s: {page}", flush=True)
    return page


def print_pdf(page: Path, site: Path, target: Path, language: str, chromium: str | None = None) -> Path:
    """Print ``page`` (inside ``site``) to ``target`` with headless Chromium."""
    from playwright.sync_api import sync_playwright

    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium or find_chromium(), args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                      or route.request.url.startswith(("data:", "blob:")) else route.abort())
            tab.goto(f"{base}/{page.relative_to(site).as_posix()}", wait_until="load", timeout=300_000)
            tab.emulate_media(media="print")
            # lay the page out as wide as the printed text column (A4 less the margins, 96 px to the
            # inch) so that what would overflow the paper overflows here too
            tab.set_viewport_size({"width": PRINT_WIDTH_PX, "height": 1100})
            headings = tab.evaluate(PREPARE_JS)
            tab.pdf(path=str(target), format="A4", print_background=True, outline=True, tagged=True,
                    display_header_footer=True, header_template=header(language), footer_template=FOOTER,
                    margin={side: f"{mm}mm" for side, mm in MARGIN_MM.items()})
        finally:
            browser.close()
    fix_outline(target, headings)
    print(f"printed {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target} "
          f"({target.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - started:.0f} s", flush=True)
    return target


def fix_outline(path: Path, headings: list[str]) -> None:
    """Chromium names each outline entry after the lines of its heading, and where a long heading wraps
    it drops the space or repeats words ("...theBiLSTMBiLSTM"). The entries follow the headings in
    document order: give each its heading's text. (pikepdf, on qpdf: 3 s for the 800-page book where
    pypdf's rewrite took 38 s.)"""
    import pikepdf

    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        entries = []

        def walk(item):
            while item is not None:
                entries.append(item)
                if "/First" in item:
                    walk(item.First)
                item = item.get("/Next")

        outlines = pdf.Root.get("/Outlines")
        if outlines is not None and "/First" in outlines:
            walk(outlines.First)
        if len(entries) != len(headings):
            print(f"outline: {len(entries)} entries for {len(headings)} headings; names left as Chromium wrote them")
            return
        for entry, name in zip(entries, headings):
            entry.Title = pikepdf.String(name)
        pdf.save(path)


def make_pdf(profile: str, languages: tuple[str, ...], out: Path, publish: bool = True,
             from_build: Path | None = None) -> list[Path]:
    written = []
    for language in languages:
        site = out / "single" / language
        page = single_page(profile, language, site, from_build)
        target = print_pdf(page, site, out / f"{NAME}{EDITIONS[language]}.pdf", language)
        written.append(target)
        book = ROOT / "_build" / "html" / ("" if language == "en" else "zh")
        if publish and (book / "index.html").is_file():  # beside the HTML book, where the intro links to it
            shutil.copyfile(target, book / f"{NAME}.pdf")
            (book / "pdf.json").write_text('{"pdf": true}\n')  # the intro's link to it shows (course_ext)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default=None, help="the profile whose executed notebooks to print "
                        "(default: $ATTN_PROFILE or the hardware, as make book)")
    parser.add_argument("--language", choices=["all", *EDITIONS], default="all")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf")
    parser.add_argument("--no-publish", action="store_true", help="do not copy the PDFs into _build/html")
    parser.add_argument("--from-build", type=Path, default=None, help="reuse the environment of the HTML book "
                        "built into this folder (the test command's strict build): nothing is read again")
    args = parser.parse_args(argv)
    languages = tuple(EDITIONS) if args.language == "all" else (args.language,)
    if args.from_build:
        check_from_build(args.from_build.resolve(), languages)
    profile = args.profile or build.default_profile()
    started = time.perf_counter()
    for path in make_pdf(profile, languages, args.out.resolve(), publish=not args.no_publish,
                         from_build=args.from_build.resolve() if args.from_build else None):
        print(f"wrote {path}")
    print(f"make pdf: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
