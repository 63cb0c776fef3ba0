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
