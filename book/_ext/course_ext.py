"""Sphinx glue for the course book (hand-written infrastructure).

* Colab: the theme's Colab button would open ``notebooks/NN_x.md`` (Colab cannot read text
  notebooks). It is pointed at the generated ``.ipynb`` that the published site carries under
  ``_colab/`` on the Pages branch (``course_pages_branch``) instead: no outputs, a GPU asked for.
* Downloads: the ``.ipynb`` offered for download keeps the outputs; it and Colab's copy get a
  first cell (``colab_setup.py``) that installs the course's package at the commit the book was
  built from (repository URL from ``_config.yml``), gets the notebook's datasets and says which run
  profile it will use.
* Editions: the English book and its Chinese translation (``-D language=zh_CN``, from the
  catalogues in ``locales/``) are built side by side, the Chinese one in ``zh/`` of the English
  one's folder. ``course_other_edition`` (set by ``tools/build.py``) is the path from one edition's
  root to the other's; where it is set, every page gets a header button to the same page in the
  other language.
* The status page (``book/status``) is read last, so it sees every executed notebook.
* Execution report: myst-nb keeps each notebook's execution result in the Sphinx environment
  (``env.nb_metadata[docname]["exec_data"]``: succeeded, error class, traceback) and writes the
  traceback of a failed one to ``<outdir>/reports/<docname>.err.log``, but a failed notebook is
  only a warning: the build still "succeeds". This extension writes every notebook's outcome to
  ``<outdir>/execution.json`` (``ok``, ``failed`` or ``timed out``, the failing cell's error in one
  line, its line in the source, the log), which ``tools/build.py`` turns into a non-zero exit and
  the status page into a visible mark. jupyter-cache does not cache a failed execution, and Sphinx
  would not re-read an unchanged source, so a notebook that failed is re-read (and so executed
  again) on every build until it succeeds; one reused from the cache counts as succeeded.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

STATUS_DOC = "book/status"
from colab_setup import SETUP_TAG, for_colab, setup_cell  # noqa: E402  (book/_ext is on sys.path, as this module)

COLAB_DIR = "_colab"  # in the site: the notebooks as Colab opens them (no outputs, GPU asked for)
EXECUTION_REPORT = "execution.json"  # in the output folder; read by tools/build.py and book/status.md
REPORT_ENV = "ATTN_EXECUTION_REPORT"  # its path, for the status page's kernel
FAILURE_KEY = "course_failure"  # our summary of a failed execution, next to myst-nb's exec_data
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

logger = logging.getLogger(__name__)


def _repo_parts(app: Sphinx) -> tuple[str, str] | None:
    url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    if not url.startswith("https://github.com/"):
        return None
    parts = url.removeprefix("https://github.com/").split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def course_requirement(app: Sphinx, repo_url: str) -> str:
    """The pip requirement that installs the course's package as the book was built: at
    ``$ATTN_COURSE_REF`` (a release tag) when set, else at the commit being built, else the branch."""
    ref = os.environ.get("ATTN_COURSE_REF", "").strip()
    if not ref:
        import subprocess

        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=app.srcdir, capture_output=True, text=True)
        ref = out.stdout.strip() if out.returncode == 0 else app.config.html_context.get("github_version", "main")
    return f"attn-tutorial @ git+{repo_url}@{ref}"


def notebook_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    repo_url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    path = Path(app.outdir) / "_sources" / ipynb
    if path.is_file() and repo_url:
        notebook = nbformat.read(path, as_version=4)
        course = course_requirement(app, repo_url)
        if not any(SETUP_TAG in c.get("metadata", {}).get("tags", []) for c in notebook.cells):
            # the download keeps the outputs (to read offline); Colab's copy has none
            notebook.cells.insert(0, setup_cell(course, Path(ipynb).stem))
            nbformat.write(notebook, path)
        colab_copy = Path(app.outdir) / COLAB_DIR / ipynb
        colab_copy.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(for_colab(nbformat.read(path, as_version=4), course, Path(ipynb).stem), colab_copy)
    parts = _repo_parts(app)
    if parts is None:
        return
    org, repo = parts
    colab = app.config.html_theme_options.get("launch_buttons", {}).get("colab_url", "").rstrip("/")
    url = f"{colab}/github/{org}/{repo}/blob/{app.config.course_pages_branch}/{COLAB_DIR}/{ipynb}"
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Colab":
                button["url"] = url


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """A header button to the same page in the other edition (English <-> Chinese)."""
    other = app.config.course_other_edition
    if not other or "header_buttons" not in context:
        return
    to_root = "../" * pagename.count("/")
    chinese = (app.config.language or "en").startswith("zh")
    context["header_buttons"].insert(0, {
        "type": "link",
        "url": f"{to_root}{other}{pagename}.html",
        "text": "English" if chinese else "中文",
        "tooltip": "Read this page in English" if chinese else "阅读本页的中文版",
        "icon": "fas fa-language",
        "label": "language-switch-button",
    })


class CodeOutputIsNotTranslated(SphinxTransform):
    """What a notebook's code prints (text, tables, Markdown it displays) is code output, the same in
    both editions and often different on every machine (the status page's device line): not a
    message to translate, unless its cell is tagged ``translate-output`` (the results page's tables,
    made from the records, the same on every machine). Runs before Sphinx's translation (priority 20)."""

    default_priority = 10

    def apply(self, **kwargs) -> None:
        for container in self.document.findall(nodes.container):
            cell = container.parent
            if cell is not None and "tag_translate-output" in cell.get("classes", []):
                continue
            if container.get("nb_element") == "cell_code_output" or "cell_output" in container.get("classes", []):
                for node in container.findall(nodes.TextElement):
                    node["translatable"] = False


class TranslateTocCaptions(SphinxTransform):
    """The parts' captions ("Part II: differential attention") come from _toc.yml: sphinx-external-toc
    adds their toctrees (priority 100) after Sphinx has translated the page (priority 20), so the
    Chinese sidebar would show them in English. Gettext extracts them from the root page: translate
    them from its catalogue, before the toctree collector reads them (the doctree-read event, 880)."""

    default_priority = 870

    def apply(self, **kwargs) -> None:
        language = self.config.language
        if not language or language == "en":
            return
        from sphinx import addnodes, locale
        from sphinx.util.i18n import docname_to_domain

        docname = self.env.docname
        dirs = [os.path.join(self.env.srcdir, d) for d in self.config.locale_dirs]
        catalog, found = locale.init(dirs, language, docname_to_domain(docname, self.config.gettext_compact),
                                     namespace=f"course-toc:{docname}")
        if not found:
            return
        for toctree in self.document.findall(addnodes.toctree):
            caption = toctree.get("caption")
            if caption:
                toctree["caption"] = catalog.gettext(caption)


EXERCISE_TITLES = "course_exercise_titles"  # env attribute: {docname: [(source, line, title)]}


def translatable_exercise_titles(app: Sphinx) -> None:
    """sphinx-exercise parses an exercise's title ("2.1: a masked softmax by hand") into a subtitle
    node with no source and no raw text, which Sphinx takes for a built-in message, and its
    post-transforms fold that node away before the gettext builder extracts messages. The wrapped
    directive gives the title its source and raw text, so the Chinese build translates it while
    reading, and notes it, so the gettext builder extracts it (``exercise_title_messages``)."""
    from sphinx_exercise.directive import ExerciseDirective
    from sphinx_exercise.nodes import exercise_subtitle

    class Exercise(ExerciseDirective):
        def run(self):
            made = super().run()
            if self.arguments:
                source, line = self.state_machine.get_source_and_line(self.lineno)
                for node in made:
                    for subtitle in node.findall(exercise_subtitle):
                        subtitle.rawsource, subtitle.source, subtitle.line = self.arguments[0], source, line
                titles = getattr(self.env, EXERCISE_TITLES, None)
                if titles is None:
                    titles = {}
                    setattr(self.env, EXERCISE_TITLES, titles)
                titles.setdefault(self.env.docname, []).append((source, line, self.arguments[0].strip()))
            return made

    app.add_directive("exercise", Exercise, override=True)


def registry_after_translation(app: Sphinx, doctree) -> None:
    """sphinx-exercise's registry keeps the exercise node as its directive made it, before Sphinx
    translated its title; the solutions' link text ("Solution to Exercise (2.1: ...)") is read from
    there. Point the registry at the translated node of the doctree."""
    registry = getattr(app.env, "sphinx_exercise_registry", None)
    if not registry or not (app.config.language or "en").startswith("zh"):
        return
    from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node

    for node in doctree.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node))):
        entry = registry.get(node.get("label"))
        if entry is not None:
            entry["node"] = node


def exercise_title_messages(app: Sphinx, doctree, docname: str) -> None:
    """For the gettext builder: add the exercise titles noted while reading to the page's catalogue."""
    if app.builder.name != "gettext":
        return
    from sphinx.builders.gettext import MsgOrigin
    from sphinx.util.i18n import docname_to_domain

    catalog = app.builder.catalogs[docname_to_domain(docname, app.config.gettext_compact)]
    for source, line, title in getattr(app.env, EXERCISE_TITLES, {}).get(docname, []):
        catalog.add(title, MsgOrigin(source, line))


def purge_exercise_titles(app: Sphinx, env, docname: str) -> None:
    getattr(env, EXERCISE_TITLES, {}).pop(docname, None)


def merge_exercise_titles(app: Sphinx, env, docnames, other) -> None:
    titles = getattr(env, EXERCISE_TITLES, None)
    if titles is None:
        titles = {}
        setattr(env, EXERCISE_TITLES, titles)
    for docname in docnames:
        if docname in getattr(other, EXERCISE_TITLES, {}):
            titles[docname] = getattr(other, EXERCISE_TITLES)[docname]


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", translatable_exercise_titles)
    app.add_transform(CodeOutputIsNotTranslated)
    app.add_transform(TranslateTocCaptions)
    app.connect("doctree-resolved", exercise_title_messages)
    app.connect("doctree-read", registry_after_translation)
    app.connect("env-purge-doc", purge_exercise_titles)
    app.connect("env-merge-info", merge_exercise_titles)
    app.add_config_value("course_pages_branch", "gh-pages", "html")
    app.add_config_value("course_other_edition", "", "html")
    app.connect("builder-inited", set_report_path)
    app.connect("env-get-outdated", reread_failed_and_status)
    app.connect("env-before-read-docs", reorder_docs)
    app.connect("doctree-read", note_failure)
    app.connect("source-read", status_source_read)
    app.connect("env-updated", final_report)
    app.connect("html-page-context", notebook_links, priority=502)
    app.connect("html-page-context", language_switch, priority=503)
    # the theme opens header links in a new tab; the other edition of a page replaces this one
    app.add_js_file(None, body="document.addEventListener('DOMContentLoaded', () => document.querySelectorAll("
                    "'a.btn-language-switch-button').forEach(a => a.removeAttribute('target')));")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
