"""The Chinese edition's checks (tools/translations.py): fidelity, terms, and what needs no translator.
The catalogues themselves are checked by the test command's "translations check" step."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import translations as tr  # noqa: E402

ENGLISH = ("Lin et al. {cite:p}`lin2017structured` use $L = 3$ hops ({numref}`fig-ch02-hops`); "
           "see {ref}`the table <tab-ch09>`, `attn_tutorial.attention` and [the data](../book/how_to_use.md). "
           "Accuracy rises from 88.0 to 88.83 ± 0.28 %.")
FAITHFUL = ("Lin 等人 {cite:p}`lin2017structured` 同时使用 $L = 3$ 跳（{numref}`fig-ch02-hops`）；"
            "见 {ref}`该表 <tab-ch09>`、`attn_tutorial.attention` 和 [数据](../book/how_to_use.md)。"
            "准确率从 88.0 升至 88.83 ± 0.28 %。")


def test_a_faithful_translation_passes():
    assert tr.fidelity_problems(ENGLISH, FAITHFUL) == []


@pytest.mark.parametrize("broken, kind", [
    (FAITHFUL.replace("88.83", "88.8"), "number"),
    (FAITHFUL.replace("$L = 3$", "$L=3$"), "math"),
    (FAITHFUL.replace("<tab-ch09>", "<tab-ch9>"), "role"),
    (FAITHFUL.replace("{numref}`fig-ch02-hops`", "图"), "role"),
    (FAITHFUL.replace("`attn_tutorial.attention`", "注意力模块"), "code"),
    (FAITHFUL.replace("(../book/how_to_use.md)", "(how_to_use.md)"), "link"),
    (FAITHFUL + " 共 5 个种子。", "number"),  # a number the English does not have
])
def test_a_changed_number_math_role_code_or_link_is_caught(broken, kind):
    problems = tr.fidelity_problems(ENGLISH, broken)
    assert any(p.startswith(kind) for p in problems), problems


def test_role_targets_titles_may_be_translated():
    assert tr.role_target("ref", "the table <tab-ch09>") == "tab-ch09"
    assert tr.role_target("term", "mask") == "mask"
    assert tr.fidelity_problems("A {term}`mask`.", "一个{term}`掩码 <mask>`。") == []


def test_strict_terms_are_enforced_and_names_may_stay_english():
    terms = tr.load_terms()
    assert any(t["english"] == "multi-head self-attention" and t["strict"] == "yes" for t in terms)
    english = "Multi-head self-attention from scratch."
    assert tr.term_problems(english, "从零实现多头自注意力。", terms) == []
    assert tr.term_problems(english, "从零实现多头自我关注。", terms) != []
    assert tr.term_problems(english, "从零实现 Multi-head self-attention。", terms) == []  # kept as a name
    assert tr.term_problems("The `co_attention` module.", "`co_attention` 模块。", terms) == []  # code is not prose


def test_only_messages_without_prose_are_filled_with_themselves():
    terms = tr.load_terms()
    assert tr.nothing_to_translate("88.83 ± 0.28", terms)
    assert tr.nothing_to_translate("$\\mathbf{A}\\mathbf{H}$", terms)
    assert tr.nothing_to_translate("`ch09_relnet_features`", terms)
    assert tr.nothing_to_translate("多头自注意力", terms)  # the term table's Chinese column
    assert not tr.nothing_to_translate("Mean over 5 seeds", terms)


def test_every_catalogue_has_its_page_and_the_term_table_is_well_formed():
    terms = tr.load_terms()
    english = [t["english"].lower() for t in terms]
    assert len(english) == len(set(english)) >= 80, "one row per term"
    assert all(tr.CJK.search(t["chinese"]) or t["chinese"] == t["english"] for t in terms)
    pages = {p.relative_to(tr.LOCALES).with_suffix("").as_posix() for p in tr.LOCALES.rglob("*.po")}
    sources = {p.relative_to(ROOT).with_suffix("").as_posix()
               for folder in ("chapters", "notebooks", "book") for p in (ROOT / folder).glob("*.md")}
    assert pages <= sources and {"chapters/00_setup", "notebooks/00_setup", "book/glossary"} <= pages


def test_bold_that_does_not_render_in_chinese_is_caught():
    english = "**What it does.** The model pools."
    assert tr.fidelity_problems(english, "**做法**。该模型做池化。") == []
    assert any(p.startswith("markup") for p in tr.fidelity_problems(english, "**做法。**该模型做池化。"))


def test_display_math_may_translate_only_its_text():
    english = "\\operatorname{acc} = \\min\\Big(\\frac{\\#\\{\\text{humans who answered } \\hat{a}\\}}{3}, 1\\Big)"
    assert tr.is_display_math(english)
    assert tr.fidelity_problems(english, english.replace("humans who answered ", "回答为 ")) == []
    assert tr.fidelity_problems(english, english.replace("{3}", "{4}")) != []
    assert tr.nothing_to_translate("\ne_t = \\frac{\\mathbf{q}\\mathbf{h}_t^\\top}{\\sqrt{D}} .\n", tr.load_terms())


def test_chinese_quoted_in_english_prose_still_needs_a_translator():
    assert not tr.nothing_to_translate("The wrong output 这只是上个 means \"this is only the last one\".", tr.load_terms())


def test_a_wrong_page_or_file_is_a_clear_error(tmp_path):
    import subprocess

    def run(*args):
        return subprocess.run([sys.executable, str(ROOT / "tools" / "translations.py"), *args], capture_output=True, text=True)

    out = run("todo", "chapters/99_nothing")
    assert out.returncode != 0 and "no catalogue for page 'chapters/99_nothing'" in out.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    out = run("fill", "chapters/00_setup", str(bad))
    assert out.returncode != 0 and "expected a JSON object" in out.stderr


# --- bad input: malformed or non-UTF-8 catalogues, unknown pages, no templates, signs -----------------
REAL = tr.LOCALES / "chapters" / "00_setup.po"


@pytest.fixture
def catalogues(tmp_path, monkeypatch):
    """A copy of one real catalogue (chapters/00_setup) and a template of its English, in tmp_path."""
    locales, pots = tmp_path / "locales", tmp_path / "gettext"
    (locales / "chapters").mkdir(parents=True)
    (pots / "chapters").mkdir(parents=True)
    po = locales / "chapters" / "00_setup.po"
    po.write_bytes(REAL.read_bytes())
    template = tr.read(REAL)
    for message in template:
        if message.id:
            message.string = ""
    with open(pots / "chapters" / "00_setup.pot", "wb") as handle:
        tr.write_po(handle, template, width=tr.WIDTH)
    monkeypatch.setattr(tr, "LOCALES", locales)
    monkeypatch.setattr(tr, "POT_DIR", pots)
    monkeypatch.setattr(tr, "extract", lambda: sorted(pots.rglob("*.pot")))  # no Sphinx run
    return po


def corrupt(po, how: str) -> tuple[int, str]:
    """Break the first translated one-line msgstr of ``po``; return its line number and the translation."""
    lines = po.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines) if line.startswith('msgstr "') and len(line) > 12
                  and lines[i - 1].startswith('msgid "') and i > 20)
    text = tr.read(po)[lines[number - 1][7:-1]].string
    if how == "unquoted continuation":
        lines.insert(number + 1, "这一行没有引号")
        bad_line = number + 2
    else:  # the msgstr's closing quote lost: Babel alone would drop the last character
        lines[number] = lines[number][:-1]
        bad_line = number + 1
    po.write_text("\n".join(lines), encoding="utf-8")
    return bad_line, text


@pytest.mark.parametrize("how", ["unquoted continuation", "missing closing quote"])
def test_a_malformed_catalogue_fails_check_and_is_never_rewritten(catalogues, how):
    bad_line, _ = corrupt(catalogues, how)
    before = catalogues.read_bytes()
    problems = tr.check(extract_first=False)
    assert any(f"00_setup.po:{bad_line}: malformed" in p for p in problems), problems
    key = next(tr.key(m.id) for m in tr.read(REAL) if m.id)
    with pytest.raises(tr.CatalogueError, match=rf"00_setup.po:{bad_line}: malformed"):
        tr.fill("chapters/00_setup", {key: "新的译文"})
    with pytest.raises(tr.CatalogueError, match=rf"00_setup.po:{bad_line}: malformed"):
        tr.update()
    with pytest.raises(SystemExit, match=rf"error: .*00_setup.po:{bad_line}: malformed"):
        tr.main(["fill", "chapters/00_setup", str(_json(catalogues.parent.parent, {key: "新的译文"}))])
    assert tr.main(["check", "--no-extract"]) == 1
    assert catalogues.read_bytes() == before, "a malformed catalogue is never rewritten"


def _json(folder, data):
    import json

    path = folder / "fill.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_write_that_would_lose_text_is_refused(catalogues):
    before = catalogues.read_bytes()
    key = next(tr.key(m.id) for m in tr.read(REAL) if m.id)
    # a lone surrogate (JSON allows one) would be written as the six characters \ud800
    with pytest.raises(tr.CatalogueError, match=r"refusing to write .*00_setup.po.*the file is unchanged"):
        tr.fill("chapters/00_setup", {key: "译文\ud800"})
    assert catalogues.read_bytes() == before
    assert tr.fill("chapters/00_setup", {key: "新的译文"}) != None  # noqa: E711 (a good fill still writes)
    assert tr.read(catalogues)[next(m.id for m in tr.read(REAL) if m.id and tr.key(m.id) == key)].string == "新的译文"


def test_a_catalogue_not_in_utf8_is_an_error_naming_the_file_and_encoding(catalogues):
    catalogues.write_bytes(REAL.read_text(encoding="utf-8").encode("gbk"))
    with pytest.raises(tr.CatalogueError, match=r"00_setup.po:\d+: not UTF-8 text .*reads as GB18030 \(GBK\)"):
        tr.read(catalogues)
    assert any("not UTF-8 text" in p for p in tr.check(extract_first=False))
    with pytest.raises(SystemExit, match=r"error: .*00_setup.po:\d+: not UTF-8"):
        tr.main(["stats"])


def test_check_of_an_unknown_page_or_without_templates_fails(catalogues, capsys):
    with pytest.raises(SystemExit, match=r"no such page: 'chapters/99_nothing'"):
        tr.main(["check", "--page", "chapters/99_nothing"])
    problems = tr.check(extract_first=False, only={"chapters/99_nothing"})
    assert any(p.startswith("no such page: chapters/99_nothing") for p in problems), problems
    assert tr.check(extract_first=False, only={"chapters/00_setup"}) == []
    for pot in tr.POT_DIR.rglob("*.pot"):
        pot.unlink()
    assert tr.main(["check", "--no-extract"]) == 1
    assert "no message templates in" in capsys.readouterr().out


@pytest.mark.parametrize("english, chinese, faithful", [
    ("The loss falls to −3.5.", "损失降至 3.5。", False),
    ("The loss falls to −3.5.", "损失降至−3.5。", True),  # a sign right after Chinese
    ("The loss falls to −3.5.", "损失降至 -3.5。", True),  # U+2212 and the hyphen-minus are one sign
    ("A change of −0.09.", "变化为 +0.09。", False),
    ("A change of +0.09.", "变化为 0.09。", False),
    ("A change of (-0.09).", "变化为（−0.09）。", True),
    ("GPT-2 has layers 1-2 and 10-fold CV.", "GPT-2 有第 1-2 层，并做 10-fold 交叉验证。", True),
])
def test_fidelity_compares_signs(english, chinese, faithful):
    problems = tr.fidelity_problems(english, chinese)
    assert (problems == []) == faithful, problems
