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
