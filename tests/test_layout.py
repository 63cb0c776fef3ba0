"""The repository's shape: chapters and notebooks paired by number, both in the table of contents."""

from __future__ import annotations

import yaml

from conftest import ROOT


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [entry["file"] for part in toc["parts"] for entry in part["chapters"]]


def test_chapters_and_notebooks_are_paired_and_listed_in_order():
    chapters = sorted(p.stem for p in (ROOT / "chapters").glob("*.md"))
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))
    assert chapters == notebooks, "every chapters/NN_x.md needs a notebooks/NN_x.md and vice versa"
    files = toc_files()
    for stem in chapters:
        chapter, notebook = f"chapters/{stem}", f"notebooks/{stem}"
        assert chapter in files and notebook in files, stem
        assert files.index(notebook) == files.index(chapter) + 1, f"{notebook} must follow {chapter}"


def test_no_ipynb_in_the_repository():
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked.strip() == ""


def test_no_backtick_fence_has_a_backtick_in_its_title():
    """A backtick fence's first line may not contain a backtick (CommonMark): ```` ````{exercise} 6.3:
    why `x` ```` is a paragraph of raw text, and the fence meant to close it opens a code block that
    swallows what follows. Use a colon fence (:::) for such a title."""
    import re

    bad = [f"{path.relative_to(ROOT)}:{number}" for folder in ("chapters", "notebooks", "book")
           for path in sorted((ROOT / folder).glob("*.md"))
           for number, line in enumerate(path.read_text().splitlines(), 1)
           if re.match(r"^\s*`{3,}\{[\w:-]+\}.*`", line)]
    assert not bad, f"backtick fences with a backtick in their first line: {bad}"


def test_every_notebook_prints_its_run_header_first():
    import jupytext

    for path in sorted((ROOT / "notebooks").glob("*.md")):
        first_code = next(c for c in jupytext.read(path).cells if c.cell_type == "code")
        assert "print_run_header()" in first_code.source, path.name


def test_every_chapter_has_four_exercises_with_solutions():
    import re

    for path in sorted((ROOT / "chapters").glob("*.md")):
        text = path.read_text()
        labels = re.findall(r"^`{3,}\{exercise\}[^\n]*\n:label: (\S+)", text, re.M)
        solved = set(re.findall(r"^`{3,}\{solution\} (\S+)", text, re.M))
        assert len(labels) >= 4, f"{path.name}: {len(labels)} exercises, at least four wanted"
        assert set(labels) <= solved, f"{path.name}: exercises without a solution: {set(labels) - solved}"


# --- a textbook page: objectives, figures drawn by code, takeaways, a word budget ---------------

import re  # noqa: E402

WORD_BUDGET = 3500  # words of a theory page, counted like `wc -w` (prose, math, code and solutions)
FIGURE_RE = re.compile(r"^:::+\{figure\} (\S+)\n((?::\S+:.*\n)*)", re.M)


def chapter_figures(text: str) -> list[tuple[str, dict]]:
    """(path, options) of every ``{figure}`` directive of a page."""
    found = []
    for path, options in FIGURE_RE.findall(text):
        opts = dict(re.findall(r"^:(\S+):\s*(.*)$", options, re.M))
        found.append((path, opts))
    return found


# Chapters that build a source article's model (../shared/reference/SEEDS.md): each corrects it in
# one box, "The article's version", after the mechanism is taught (after its second section).
ARTICLE_CHAPTERS = ("01", "03", "04", "05", "06", "07", "08")
ARTICLE_LEADS = ("What it does.", "What goes wrong.", "The fix.", "Measured.")


def article_box_problems(name: str, text: str) -> list[str]:
    boxes = list(re.finditer(r"^(:::+)\{admonition\} The article's version\n:class:[^\n]*\barticle\b(.*?)^\1\s*$",
                             text, re.M | re.S))
    if not name.startswith(ARTICLE_CHAPTERS):
        return [f"{len(boxes)} article box(es) in a chapter without an article's model"] if boxes else []
    if len(boxes) != 1:
        return [f"{len(boxes)} \"The article's version\" boxes (:class: article), exactly one wanted"]
    body, problems = boxes[0].group(2), []
    positions = [body.find(f"**{lead}**") for lead in ARTICLE_LEADS]
    if -1 in positions or positions != sorted(positions):
        problems.append(f"the article box must say, in order: {', '.join(ARTICLE_LEADS)}")
    if len(re.findall(r"^## ", text[:boxes[0].start()], re.M)) < 2:
        problems.append("the article box comes before the mechanism is taught (before the second section)")
    return problems


def layout_problems(name: str, text: str) -> list[str]:
    """What a theory page lacks; empty when it has everything a chapter of the book must have."""
    problems = []
    if not re.search(r"^:::+\{admonition\}.*\n:class:.*\bobjectives\b", text, re.M):
        problems.append("no learning-objectives box (an admonition with :class: objectives)")
    else:
        box = re.search(r"^:::+\{admonition\}.*\n:class:.*\bobjectives\b(.*?)^:::", text, re.M | re.S).group(1)
        if "notation" not in box:
            problems.append("the objectives box does not link to the notation page")
        if "ssumes" not in box:
            problems.append("the objectives box does not say what the chapter assumes")
    if not re.search(r"^:::+\{admonition\}.*\n:class:.*\btakeaways\b", text, re.M):
        problems.append("no key-takeaways box (an admonition with :class: takeaways)")
    figures = chapter_figures(text)
    explanatory = [p for p, _ in figures if "_results" not in p]
    results = [p for p, _ in figures if "_results" in p]
    if len(explanatory) < 2:
        problems.append(f"{len(explanatory)} explanatory figure(s), at least 2 wanted")
    if not results:
        problems.append("no results figure (a book/figures/chNN_results_*.svg drawn from book/results)")
    for path, opts in figures:
        if not opts.get("alt", "").strip():
            problems.append(f"figure {path} has no :alt: text")
        if not path.startswith("../book/figures/") or not path.endswith(".svg"):
            problems.append(f"figure {path} is not drawn by book/figures (../book/figures/<name>.svg)")
        elif not (ROOT / "chapters" / path).resolve().is_file():
            problems.append(f"figure {path} does not exist (run python tools/figures.py)")
    problems += article_box_problems(name, text)
    # TeX's layout markers are not words: breaking a wide equation into lines must not cost prose
    words = sum(1 for token in text.split() if not LAYOUT_TEX.fullmatch(token))
    if words > WORD_BUDGET:
        problems.append(f"{words} words, over the budget of {WORD_BUDGET}")
    return problems


LAYOUT_TEX = re.compile(r"\\\\|\\(begin|end)\{[a-z*]+\}")  # \\, \begin{gathered}, \end{aligned}, ...


def test_every_theory_page_teaches_like_a_textbook():
    problems = {}
    for path in sorted((ROOT / "chapters").glob("*.md")):
        found = layout_problems(path.name, path.read_text())
        if found:
            problems[path.name] = found
    assert not problems, "\n".join(f"{name}: {'; '.join(p)}" for name, p in problems.items())


def test_the_layout_check_notices_a_missing_piece():
    """Remove each required piece from a complete page once: the check must name what is missing."""
    page = (ROOT / "chapters" / "02_attention_pooling.md").read_text()
    assert layout_problems("ch02", page) == []
    no_objectives = re.sub(r":class:(.*)\bobjectives\b", r":class:\1", page)
    assert any("objectives" in p for p in layout_problems("ch02", no_objectives))
    no_takeaways = re.sub(r":class:(.*)\btakeaways\b", r":class:\1", page)
    assert any("takeaways" in p for p in layout_problems("ch02", no_takeaways))
    one_figure = page
    for path in [p for p, _ in chapter_figures(page) if "_results" not in p][1:]:
        one_figure = one_figure.replace(f"{{figure}} {path}", "{note}")  # the directive is no figure now
    assert any("explanatory figure" in p for p in layout_problems("ch02", one_figure))
    no_results = page.replace("_results", "_other")
    assert any("results figure" in p for p in layout_problems("ch02", no_results))
    no_alt = re.sub(r"^:alt:.*\n", "", page, flags=re.M)
    assert any("alt" in p for p in layout_problems("ch02", no_alt))
    assert any("budget" in p for p in layout_problems("ch02", page + " word" * WORD_BUDGET))


def test_figures_match_the_code_that_draws_them():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "tools" / "figures.py"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_figure_check_compares_drawings_not_float_bits():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from figures import same_drawing

    svg = b'<path d="M 353.789575 149.540591 L 403.4 96.6"/><use xlink:href="#DejaVuSans-35" x="12.5"/>'
    assert same_drawing(svg, svg.replace(b"149.540591", b"149.540589"))  # another CPU's last bits
    assert not same_drawing(svg, svg.replace(b"149.540591", b"150.540591"))  # a point moved
    assert not same_drawing(svg, svg.replace(b"Sans-35", b"Sans-36"))  # a label changed
    assert not same_drawing(svg, svg + b"<path/>")  # something added
    assert same_drawing(b'id="p6e433"', b'id="p6e433"') and not same_drawing(b'id="p6e433"', b'id="p6e434"')


def test_figure_check_draws_again_what_changed(tmp_path, monkeypatch):
    """book/figures/inputs.json lets the check skip a module whose inputs and SVGs are as drawn; an
    edited SVG or a changed input (here: the module's own code) makes it draw the module again."""
    import shutil
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import figures

    folder = tmp_path / "figures"
    shutil.copytree(ROOT / "book" / "figures", folder)
    monkeypatch.setattr(figures, "FIGURES", folder)
    shared = figures.shared_inputs_digest()
    module = folder / "ch01.py"
    svgs = sorted(folder.glob("ch01_*.svg"))
    # the entry drawing writes (the committed one may be stale: that only makes the check draw again)
    manifest = {"ch01": {"inputs": figures.module_inputs(module, shared),
                         "svgs": {svg.stem: figures._sha(svg.read_bytes()) for svg in svgs}}}
    assert svgs and figures.up_to_date(module, shared, manifest)  # as drawn: the check skips it
    svg = svgs[0]
    svg.write_bytes(svg.read_bytes().replace(b"<svg", b"<svg data-edited='1'", 1))
    assert not figures.up_to_date(module, shared, manifest)  # a hand-edited SVG
    shutil.copy(ROOT / "book" / "figures" / svg.name, svg)
    module.write_text(module.read_text() + "\n# changed\n")
    assert not figures.up_to_date(module, shared, manifest)  # changed code
    assert figures.shared_inputs_digest() == shared and shared != figures._sha(b"")


def test_notation_page_is_linked_from_every_chapter():
    assert (ROOT / "book" / "notation.md").is_file()
    for path in sorted((ROOT / "chapters").glob("*.md")):
        assert "book/notation" in path.read_text(), f"{path.name} does not link to book/notation"


# --- one rounding rule for "mean ± std" everywhere (attn_tutorial.results.decimals_for) -----------
MEAN_STD_RE = re.compile(r"(?<![\d.])(\d[\d,]*)(?:\.(\d+))? ± (\d+)(?:\.(\d+))?(?![\d.])")


def rounding_problems(text: str) -> list[str]:
    """Every "mean ± std" whose decimals break the book's rule: the std keeps two significant
    digits, at least one decimal and at most two, and the mean the same decimals."""
    from attn_tutorial.results import decimals_for

    problems = []
    for m in MEAN_STD_RE.finditer(text):
        std = float(m.group(3) + "." + (m.group(4) or "0"))
        want = decimals_for(std)
        if len(m.group(2) or "") != want or len(m.group(4) or "") != want:
            problems.append(f"{m.group(0)!r} should have {want} decimal(s)")
    return problems


def test_every_mean_and_std_follows_one_rounding_rule():
    pages = sorted((ROOT / "chapters").glob("*.md")) + sorted((ROOT / "notebooks").glob("*.md")) \
        + sorted((ROOT / "book").glob("*.md"))
    problems = {p.relative_to(ROOT).as_posix(): found for p in pages if (found := rounding_problems(p.read_text()))}
    assert not problems, "\n".join(f"{name}: {'; '.join(p)}" for name, p in problems.items())


def test_the_rounding_check_bites():
    assert rounding_problems("87.87 ± 0.53, 74.7 ± 3.2, 92.3 ± 13.2, 14.04 ± 0.08, 100.0 ± 0.0") == []
    assert len(rounding_problems("87.9 ± 0.5 and 74.70 ± 3.20 and 45 ± 9")) == 3
