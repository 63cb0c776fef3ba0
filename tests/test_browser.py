"""Headless-browser checks of a built book. Run by the test command after the strict builds:
ATTN_SITE (and ATTN_STUDENT_SITE) point at the built HTML."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import browser_check  # noqa: E402

pytestmark = pytest.mark.browser


def site(variable: str) -> Path:
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set (the test command sets it after building the book)")
    path = Path(value)
    assert (path / "index.html").is_file(), f"{path} holds no built book"
    return path


@pytest.fixture(scope="module")
def reports():
    root = site("ATTN_SITE")
    # Screenshots of the theory pages go with the build artefacts (next to the site).
    pages = browser_check.check_site(root, screenshots=root.parent / "screenshots", workers=2)  # one per core
    return {r.page: r for r in pages}


def test_every_page_renders_offline_without_errors(reports):
    assert "chapters/00_setup.html" in reports and "notebooks/00_setup.html" in reports
    failures = {page: report.problems for page, report in reports.items() if report.problems}
    assert not failures, failures


def test_equations_are_typeset(reports):
    chapter = reports["chapters/00_setup.html"]
    assert chapter.math_count >= 10 and chapter.mathjax == "v3"
    assert chapter.untypeset_math == []


def test_figures_load(reports):
    notebook = site("ATTN_SITE") / "notebooks" / "00_setup.html"
    assert notebook.read_text().count("<img") >= 2  # the two seaborn figures
    assert reports["notebooks/00_setup.html"].broken_images == []


def test_every_theory_page_shows_its_figures_with_alt_text(reports):
    chapters = {page: r for page, r in reports.items() if page.startswith("chapters/")}
    assert len(chapters) >= 10
    for page, report in chapters.items():
        figures = [f for f in report.figures if browser_check.is_drawn_figure(f["src"])]
        assert len(figures) >= 3, f"{page}: {len(figures)} drawn figures, at least 3 wanted"
        assert all(f["loaded"] for f in figures), f"{page}: {[f['src'] for f in figures if not f['loaded']]}"
        assert not any(browser_check._alt_missing(f) for f in figures), page
        assert report.screenshot and Path(report.screenshot).stat().st_size > 10_000, page


def test_checker_catches_a_figure_without_alt_text(tmp_path):
    (tmp_path / "index.html").write_text("<html><body>index</body></html>")
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "ch01_a.svg").write_text(svg)
    (tmp_path / "page.html").write_text('<html><body><main><img src="figures/ch01_a.svg" alt="figures/ch01_a.svg">'
                                        '</main></body></html>')
    (report,) = browser_check.check_site(tmp_path, pages=["page.html"])
    assert any("alt text" in p for p in report.problems)


def test_notebook_page_offers_ipynb_and_colab():
    root = site("ATTN_SITE")
    html = (root / "notebooks" / "00_setup.html").read_text()
    assert 'href="../_sources/notebooks/00_setup.ipynb"' in html
    assert "colab.research.google.com/github/" in html and "/_colab/notebooks/00_setup.ipynb" in html
    assert "00_setup.md" not in html.split("colab.research.google.com", 1)[1].split('"', 1)[0]
    import re

    import nbformat

    notebook = nbformat.read(root / "_sources" / "notebooks" / "00_setup.ipynb", as_version=4)
    assert "colab-setup" in notebook.cells[0].metadata["tags"]  # installs the package where it is missing
    assert any(c.get("outputs") for c in notebook.cells if c.cell_type == "code")  # the download keeps them
    colab = nbformat.read(root / "_colab" / "notebooks" / "00_setup.ipynb", as_version=4)
    assert "colab-setup" in colab.cells[0].metadata["tags"] and colab.metadata["accelerator"] == "GPU"
    assert not any(c.get("outputs") for c in colab.cells if c.cell_type == "code")
    # the package at the commit the book was built from, and the notebook's datasets
    assert re.search(r"attn-tutorial @ git\+https://github\.com/\S+@[0-9a-f]{40}", colab.cells[0].source)
    assert "['imdb']" in colab.cells[0].source


def test_status_page_reports_profile_and_times():
    html = (site("ATTN_SITE") / "book" / "status.html").read_text()
    assert "00_setup.md" in html and "smoke" in html and "seconds" in html


def test_checker_catches_raw_tex(tmp_path):
    """Break the math setup (no MathJax): the checker must report untypeset equations."""
    (tmp_path / "index.html").write_text("<html><body>index</body></html>")
    (tmp_path / "page.html").write_text(
        '<html><body><p>Inline <span class="math notranslate nohighlight">\\(x^2\\)</span></p>'
        '<div class="math notranslate nohighlight">\\[\\frac{a}{b}\\]</div></body></html>')
    (report,) = browser_check.check_site(tmp_path, pages=["page.html"])
    assert report.mathjax == "absent" and len(report.untypeset_math) == 2
    assert any("not typeset" in p for p in report.problems)


def test_checker_catches_an_equation_wider_than_the_column(tmp_path):
    """Plant a display equation far wider than the text column into a built chapter page (its MathJax and
    theme served from the built site): the checker must name it, with its width and TeX; the page's
    own equations (all within the column) are not reported."""
    built = site("ATTN_SITE")
    html = (built / "chapters" / "00_setup.html").read_text(encoding="utf-8")
    anchor = '<div class="math notranslate nohighlight">'
    assert anchor in html
    wide = " + ".join(f"x_{{{i}}} y_{{{i}}}" for i in range(60))
    html = html.replace(anchor, f'{anchor}\\[{wide}\\]</div>\n{anchor}', 1)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "planted.html").write_text(html, encoding="utf-8")
    for shared in ("_static", "_images"):
        if (built / shared).is_dir():
            (tmp_path / shared).symlink_to((built / shared).resolve())
    (tmp_path / "index.html").write_text("<html><body>index</body></html>")
    (report,) = browser_check.check_site(tmp_path, pages=["chapters/planted.html"])
    assert [m["tex"][:20] for m in report.wide_math] == [wide[:20]], report.wide_math
    assert report.wide_math[0]["wide"] > 2 * report.wide_math[0]["column"]
    assert any("wider than the text column" in p for p in report.problems)


def test_checker_catches_external_requests_and_broken_images(tmp_path):
    (tmp_path / "index.html").write_text("<html><body>index</body></html>")
    (tmp_path / "page.html").write_text(
        '<html><head><script src="https://cdn.example.org/x.js"></script></head>'
        '<body><img src="missing.png"></body></html>')
    (report,) = browser_check.check_site(tmp_path, pages=["page.html"])
    assert report.external_requests == ["https://cdn.example.org/x.js"]
    assert report.broken_images and any("404" in e for e in report.console_errors)


def test_student_edition_hides_solutions():
    student = site("ATTN_STUDENT_SITE")
    teacher = site("ATTN_SITE")
    full_html = (teacher / "chapters" / "00_setup.html").read_text()
    student_html = (student / "chapters" / "00_setup.html").read_text()
    assert "expected number of" in full_html and "colliding pairs is" in full_html.replace("\n", " ")
    assert "colliding pairs is" not in student_html.replace("\n", " ")
    assert "Exercise" in student_html and "ex-00-hash" in student_html


def test_the_pdf_link_leads_to_the_pdf_or_says_it_is_not_built():
    """The introduction links to the PDF only where the PDF is beside the book (make pdf copies it there,
    after make book); elsewhere the link becomes plain text, not a link to a missing file."""
    from playwright.sync_api import sync_playwright

    root = site("ATTN_SITE")
    pdf = root / "attention-step-by-step.pdf"
    assert not pdf.exists(), f"{pdf}: the test command's site has no PDF beside it (tools/pdf.py --no-publish)"

    def intro(base, tab) -> tuple[int, list[str]]:
        tab.goto(f"{base}/book/intro.html", wait_until="networkidle")
        tab.wait_for_timeout(300)  # the check's HEAD request has been answered (networkidle); its handler ran
        return tab.locator("a.course-pdf-link").count(), tab.locator("span.course-pdf-missing").all_text_contents()

    with browser_check.serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_check.find_chromium(), args=browser_check.CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            links, missing = intro(base, tab)
            assert links == 0 and missing == ["the whole book as a PDF"], (links, missing)
            marker = root / "pdf.json"
            assert json.loads(marker.read_text()) == {"pdf": False}, marker.read_text()
            saved = marker.read_text()
            pdf.write_bytes(b"%PDF-1.4\n%%EOF\n")  # a PDF beside the book, as make pdf leaves it: the link stays
            marker.write_text('{"pdf": true}\n')
            try:
                links, missing = intro(base, tab)  # the same tab: the marker is asked for again, not cached
            finally:
                pdf.unlink()
                marker.write_text(saved)
            assert links == 1 and missing == [], (links, missing)
        finally:
            browser.close()


def test_one_search_box_on_a_wide_screen_and_on_a_phone():
    """The reader sees one search field or button, not two (the sidebar's field is hidden: the navbar's
    stays in view), at the top of the landing page of both editions and of a chapter."""
    from playwright.sync_api import sync_playwright

    root = site("ATTN_SITE")
    visible = """() => [...document.querySelectorAll('.search-button-field, .search-button')].filter(e => {
        const r = e.getBoundingClientRect(), s = getComputedStyle(e);
        return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && r.bottom > 0 && r.top < innerHeight;
    }).length"""
    with browser_check.serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_check.find_chromium(), args=browser_check.CHROMIUM_ARGS)
        try:
            for width in (1280, 390):
                tab = browser.new_page(viewport={"width": width, "height": 900})
                for page in ("book/intro.html", "zh/book/intro.html", "chapters/04_differential_attention.html"):
                    tab.goto(f"{base}/{page}", wait_until="networkidle")
                    assert tab.evaluate(visible) == 1, f"{page} at {width} px: {tab.evaluate(visible)} search boxes"
                tab.close()
        finally:
            browser.close()


def test_no_page_is_wider_than_a_phone():
    """At 390 px the page itself does not scroll sideways (code, tables and equations scroll inside
    their own boxes): the landing page, a chapter and a notebook of both editions. The Chinese
    notebook header once pushed a button 16 px past the edge."""
    from playwright.sync_api import sync_playwright

    root = site("ATTN_SITE")
    pages = [f"{edition}{page}" for edition in ("", "zh/") for page in
             ("book/intro.html", "chapters/04_differential_attention.html", "notebooks/01_text_bilstm.html")]
    with browser_check.serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_check.find_chromium(), args=browser_check.CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 390, "height": 844})
            wider = {}
            for page in pages:
                tab.goto(f"{base}/{page}", wait_until="networkidle")
                width = tab.evaluate("() => document.documentElement.scrollWidth")
                if width > 390:
                    wider[page] = width
            assert not wider, f"pages wider than a 390 px phone (px): {wider}"
        finally:
            browser.close()
