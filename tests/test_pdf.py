"""The PDF edition (tools/pdf.py), read back: run by the test command after it prints the English PDF
(ATTN_PDF_DIR points at it; the Chinese one is read too where make pdf printed it). Every chapter is there, by title and in the outline, math is
typeset, no raw MyST is left, and each theory page has a figure drawn as vectors."""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import translations  # noqa: E402

pytestmark = pytest.mark.pdf
pdfium = pytest.importorskip("pypdfium2")  # PDFium, Chromium's own PDF library: fast text and objects
import pypdfium2.raw as pdfium_raw  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.md"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
# A page with a figure drawn as vectors (matplotlib's SVGs: text and marks as paths) holds hundreds of
# path objects; a page of text, a few dozen (boxes, rules); a notebook's PNG plot is one image.
VECTOR_FIGURE_PATHS = 200


def pdf_path(language: str) -> Path:
    folder = os.environ.get("ATTN_PDF_DIR")
    if not folder:
        pytest.skip("ATTN_PDF_DIR is not set (the test command sets it after printing the PDFs)")
    path = Path(folder) / f"attention-step-by-step{'' if language == 'en' else '.' + language}.pdf"
    if language != "en" and not path.is_file():
        pytest.skip(f"no {path.name}: the test command prints the English PDF only (make pdf prints both)")
    assert path.is_file(), f"{path} was not written"
    return path


@lru_cache(maxsize=None)
def read(language: str) -> tuple:
    """(document, text of each page, {title: first page} of the outline)."""
    document = pdfium.PdfDocument(str(pdf_path(language)))
    texts = [document[index].get_textpage().get_text_range() for index in range(len(document))]
    outline = {}
    for bookmark in document.get_toc():
        destination = bookmark.get_dest()
        if destination is not None:  # the first heading of that name: the page's own title
            outline.setdefault(squash(bookmark.get_title()), destination.get_index())
    return document, texts, outline


def page_titles(paths: list[Path], language: str) -> list[str]:
    """The first heading of each page, in the edition's language."""
    titles = []
    for path in paths:
        title = next(line[2:].strip() for line in path.read_text().splitlines() if line.startswith("# "))
        if language != "en":
            catalog = translations.read(translations.LOCALES / path.parent.name / f"{path.stem}.po")
            title = catalog.get(title).string if catalog.get(title) is not None else title
        titles.append(title)
    return titles


def squash(text: str) -> str:
    """Letters and digits only (ligatures such as "ﬀ" unfolded): a wrapped title loses or keeps its
    hyphens and spaces."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text))


def path_objects(page) -> int:
    return sum(1 for item in page.get_objects(max_depth=8) if item.type == pdfium_raw.FPDF_PAGEOBJ_PATH)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_every_chapter_is_in_the_text_and_the_outline(language):
    document, texts, outline = read(language)
    assert len(document) >= 100, f"{len(document)} pages"
    text = squash("".join(texts))
    for title in page_titles(CHAPTERS, language) + page_titles(NOTEBOOKS, language):
        assert squash(title) in text, f"{title!r} is not in the {language} PDF's text"
        assert squash(title) in outline, f"{title!r} is not in the {language} PDF's outline"


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_no_raw_markup_or_tex_is_left(language):
    _, texts, _ = read(language)
    for number, text in enumerate(texts, 1):
        for raw in ("$$", ":::", "\\frac", "\\mathbf"):
            assert raw not in text, f"page {number} of the {language} PDF shows {raw!r}: {text[:200]!r}"


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_each_theory_page_has_a_vector_figure(language):
    document, _, outline = read(language)
    for chapter, notebook in zip(page_titles(CHAPTERS, language), page_titles(NOTEBOOKS, language)):
        start, end = outline[squash(chapter)], outline[squash(notebook)]
        assert start < end, (chapter, start, end)
        counts = [path_objects(document[index]) for index in range(start, end)]
        assert max(counts) >= VECTOR_FIGURE_PATHS, (
            f"{chapter!r} (pages {start + 1}-{end}): no page with a figure drawn as vectors "
            f"(most path objects on a page: {max(counts)})")


def notebook_ranges(language: str) -> dict[str, range]:
    """Each notebook's pages in the PDF: from its title to the next chapter's (the last notebook's, to
    the end: a plot counted past it would only make the check stricter)."""
    document, _, outline = read(language)
    starts = [outline[squash(t)] for t in page_titles(CHAPTERS, language)]
    ranges = {}
    for index, (path, title) in enumerate(zip(NOTEBOOKS, page_titles(NOTEBOOKS, language))):
        start = outline[squash(title)]
        end = next((s for s in starts[index + 1:] if s > start), len(document))
        ranges[path.stem] = range(start, end)
    return ranges


def site_plots(notebook: str, language: str) -> int | None:
    """How many plots (PNG outputs, ``_images/*.png``) the site's page of ``notebook`` shows; None when
    the site is not at hand (ATTN_SITE unset)."""
    site = os.environ.get("ATTN_SITE")
    if not site:
        return None
    page = Path(site) / ("" if language == "en" else "zh") / "notebooks" / f"{notebook}.html"
    return len(re.findall(r'<img[^>]+src="\.\./_images/[^"]+\.png"', page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_every_notebook_plot_is_printed_whole(language):
    """Each notebook's plots are in the PDF, each as one image on one page: as many raster images in the
    notebook's pages as the site's page shows plots. Fewer: a plot missing (a backend that draws
    nothing); more: a plot taller than the paper sliced across two pages."""
    document, _, _ = read(language)
    if os.environ.get("ATTN_SITE") is None:
        pytest.skip("ATTN_SITE is not set (the test command sets it to the site the PDF was printed from)")
    wrong = {}
    for notebook, pages in notebook_ranges(language).items():
        printed = sum(1 for index in pages for item in document[index].get_objects(max_depth=8)
                      if item.type == pdfium_raw.FPDF_PAGEOBJ_IMAGE)
        shown = site_plots(notebook, language)
        if printed != shown:
            wrong[notebook] = f"{printed} images printed on pages {pages.start + 1}-{pages.stop}, {shown} plots on the site"
    assert not wrong, wrong
    assert sum(site_plots(n, language) for n in notebook_ranges(language)) >= len(NOTEBOOKS), "too few plots to check"
