"""The built Chinese edition (ATTN_SITE/zh, built by the test command beside the English one):
pages render offline in a Chinese font, the language switch leads to the same page in the other
edition and back, and no English prose is left outside code, math, names and citations."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import browser_check  # noqa: E402

pytestmark = pytest.mark.browser

# Pages the browser opens (the student-read chapters, a notebook and the front matter);
# the English-run check below reads every page.
OPENED = ["book/intro.html", "book/how_to_use.html", "chapters/00_setup.html", "chapters/02_attention_pooling.html",
          "chapters/04_differential_attention.html", "chapters/08_bilinear_attention.html",
          "chapters/11_translation.html", "notebooks/00_setup.html", "book/glossary.html"]
CJK_FONT = re.compile(r"CJK|WenQuanYi|Hei|Song|Ming|Kai|PingFang|YaHei|Han Sans|Han Serif|Noto Sans SC|Noto Serif SC", re.I)
# Five or more English words in a row: prose left untranslated.
ENGLISH_RUN = re.compile(r"\b[A-Za-z][A-Za-z'’-]*(?:[ ,:;]+[A-Za-z][A-Za-z'’-]*){4,}")
# Not prose: code and its output, math, citations and the bibliography, the term table, the theme's
# own navigation, and text written by the notebooks' code (status page, tables of records).
NOT_PROSE = ["pre", "code", "script", "style", ".highlight", ".cell_input", ".cell_output", ".output", ".math",
             "mjx-container", ".citation", "#bibliography", ".bibliography", "table.terms-table", ".sig",
             "a.reference.internal[href*='references']", ".toctree-wrapper", "nav", "header", "footer",
             ".prev-next-area", ".headerlink"]


def zh_site() -> Path:
    value = os.environ.get("ATTN_SITE")
    if not value:
        pytest.skip("ATTN_SITE is not set (the test command sets it after building the book)")
    site = Path(value) / "zh"
    assert (site / "index.html").is_file(), f"{site} holds no built Chinese edition"
    return site


# Quoted strings (the data's questions and prompts, a test's message: what the code reads or prints)
# and English glosses in Chinese parentheses, 暂退法（dropout）, are English on purpose.
QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’|「[^」]*」|（[^（）]*）")


def prose_text(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article.bd-article") or soup.body
    for selector in NOT_PROSE:
        for element in article.select(selector):
            element.decompose()
    return QUOTED.sub(" ", re.sub(r"\s+", " ", article.get_text(" ")))


def english_runs(text: str) -> list[str]:
    return [m.group(0) for m in ENGLISH_RUN.finditer(text)]


def test_english_runs_are_found_in_a_made_up_page():
    html = ("<html><body><article class='bd-article'><p>这是中文。 This sentence was never translated at all.</p>"
            "<pre>for word in the list of words here</pre><p>使用 Multi-head self-attention 模块。</p>"
            "<p>问题“what shape is the green object?”与滑动窗口（sliding window, dilation, global tokens）。</p>"
            "</article></body></html>")
    assert english_runs(prose_text(html)) == ["This sentence was never translated at all"]


def test_no_english_prose_is_left_on_chinese_pages():
    site = zh_site()
    found = {}
    for page in browser_check.html_pages(site):
        runs = english_runs(prose_text((site / page).read_text(encoding="utf-8")))
        if runs:
            found[page] = runs[:3]
    assert not found, f"English prose on {len(found)} Chinese pages: {found}"


def test_chinese_pages_render_offline_in_a_chinese_font():
    site = zh_site()
    reports = browser_check.check_site(site, pages=OPENED, fonts_of="article p", workers=1)
    for report in reports:
        assert report.problems == [], (report.page, report.problems)
        assert report.lang.startswith("zh"), (report.page, report.lang)
        cjk = [f for f in report.fonts if CJK_FONT.search(f["familyName"])]
        assert cjk and sum(f["glyphCount"] for f in cjk) > 10, (report.page, report.fonts)


def test_the_language_switch_leads_to_the_same_page_and_back():
    site = zh_site()
    english = site.parent
    for page in OPENED:
        zh_link = _switch_href(site / page)
        target = (site / page).parent / zh_link
        assert target.resolve() == (english / page).resolve(), (page, zh_link)
        en_link = _switch_href(english / page)
        assert ((english / page).parent / en_link).resolve() == (site / page).resolve(), (page, en_link)


def _switch_href(path: Path) -> str:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    link = soup.select_one("a.btn-language-switch-button")
    assert link is not None, f"{path}: no language switch"
    return link["href"]
