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
* Speed of the Chinese edition (measured: 113 s against the English 45 s, the same pages): Sphinx's
  i18n transform parses each translated message as a document of its own and leaves the nodes it
  inserts pointing at that document, settings and all, so that each page's pickled doctree was 20
  times larger (2.5 MB against 125 KB) and loading them for cross-references and figure numbers took
  most of the build; :func:`one_document_per_page` points them back at their page's document. The
  Chinese search index looked each Latin word up in a list of every Latin word seen so far
  (quadratic): :func:`_fast_chinese_stem` does the same test against a set. And each message built
  docutils' default settings anew (an option parser per message): :func:`_cached_default_settings`
  builds them once per parser and hands out copies.
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
import records_role  # noqa: E402  (book/_ext is on sys.path, as this module)
from colab_setup import SETUP_TAG, for_colab, setup_cell  # noqa: E402

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


def reorder_docs(app: Sphinx, env, docnames: list[str]) -> None:
    if STATUS_DOC in docnames:
        docnames.remove(STATUS_DOC)
        docnames.append(STATUS_DOC)


def _exec_data(env) -> dict[str, dict]:
    """myst-nb's per-document data (``NbMetadataCollector``), kept in the pickled environment."""
    return getattr(env, "nb_metadata", None) or {}


def _one_line(text: str, limit: int = 200) -> str:
    lines = [line.strip() for line in ANSI.sub("", text).strip().splitlines() if line.strip()]
    line = lines[0] + (" ..." if len(lines) > 1 else "") if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def summarize_failure(exec_data: dict, notebook: nbformat.NotebookNode | None) -> dict:
    """The failing cell's error in one line and its line in the source, from myst-nb's execution
    data and the executed notebook (whose error output carries the exception's name and value)."""
    timed_out = exec_data.get("error") == "CellTimeoutError"
    traceback = ANSI.sub("", exec_data.get("traceback") or "")
    error, index = None, None
    if notebook is not None:
        code = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
        # The cell that stopped the run is the last one with an error output (earlier ones may be
        # allowed errors, tag raises-exception); a timed-out cell is the last one that started
        # (its page shows the KeyboardInterrupt of the stopped kernel).
        for i in reversed(code):
            errors = [o for o in notebook.cells[i].get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                index = i
                error = f"{errors[-1].get('ename', 'Error')}: {errors[-1].get('evalue', '')}".rstrip(": ")
                break
        if timed_out:
            started = [i for i in code if notebook.cells[i].get("execution_count") is not None]
            index = started[-1] if started else index
    if timed_out:
        # nbclient: "A cell timed out while it was being executed, after N seconds."
        match = re.search(r"CellTimeoutError: (.*)", traceback)
        error = "CellTimeoutError: " + (match.group(1).strip() if match else "a cell ran past the time limit")
    elif error is None:
        lines = [line for line in traceback.strip().splitlines() if line.strip()]
        error = lines[-1].strip() if lines else exec_data.get("error") or "unknown error"
    line = None
    source_map = notebook.metadata.get("source_map") if notebook is not None else None
    if index is not None and source_map and index < len(source_map):
        line = source_map[index] + 1  # as myst-nb counts: the first line of the cell's code
    return {"status": "timed out" if timed_out else "failed", "error": _one_line(error), "line": line}


def note_failure(app: Sphinx, doctree) -> None:
    """After a notebook is read: summarize a failed execution while its executed copy is fresh."""
    env = app.env
    data = _exec_data(env).get(env.docname, {})
    exec_data = data.get("exec_data")
    if not exec_data or exec_data.get("succeeded"):
        return
    config = getattr(env, "mystnb_config", None)
    if config is None or not config.output_folder:
        return
    executed = Path(config.output_folder).joinpath(*f"{env.docname}.ipynb".split("/"))
    try:
        notebook = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):
        notebook = None
    data[FAILURE_KEY] = summarize_failure(exec_data, notebook)


def execution_report(app: Sphinx) -> dict:
    """Every executed document's outcome, as written to ``<outdir>/execution.json``."""
    env, outdir = app.env, Path(app.outdir)
    notebooks = []
    for docname, data in sorted(_exec_data(env).items()):
        exec_data = data.get("exec_data")
        if not exec_data or docname not in env.found_docs:
            continue
        entry = {
            "docname": docname,
            "source": str(env.doc2path(docname, False)).replace(os.sep, "/"),
            "status": "ok",
            "method": exec_data.get("method"),
            "executed": datetime.fromtimestamp(exec_data["mtime"], timezone.utc).isoformat(timespec="seconds")
            if exec_data.get("mtime") else None,
            "seconds": exec_data.get("runtime"),
            "error": None,
            "line": None,
            "log": None,
        }
        if not exec_data.get("succeeded"):
            failure = data.get(FAILURE_KEY) or summarize_failure(exec_data, None)
            log = Path("reports", *f"{docname}.err.log".split("/"))
            entry.update(failure, log=log.as_posix() if (outdir / log).is_file() else None)
        notebooks.append(entry)
    return {"version": 1, "notebooks": notebooks}


def write_report(app: Sphinx) -> dict:
    report = execution_report(app)
    path = Path(app.outdir) / EXECUTION_REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
    return report


def status_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    """Just before the status page executes (it is read last): the report of the notebooks so far."""
    if docname == STATUS_DOC:
        write_report(app)


def final_report(app: Sphinx, env) -> list[str]:
    """Once every document is read: the final report; the logs of notebooks that now succeed go."""
    report = write_report(app)
    for entry in report["notebooks"]:
        log = Path(app.outdir, "reports", *f"{entry['docname']}.err.log".split("/"))
        if entry["status"] == "ok" and log.is_file():
            log.unlink()
    failed = [e for e in report["notebooks"] if e["status"] != "ok"]
    if failed:
        logger.info(f"{len(failed)} notebook(s) did not execute: "
                    + ", ".join(f"{e['source']} ({e['status']})" for e in failed))
    return []


def reread_failed_and_status(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Read again, whatever changed: every notebook whose execution failed (jupyter-cache kept no
    result, so it is executed again) and the status page (it shows every notebook's outcome)."""
    failed = [d for d, data in _exec_data(env).items()
              if (data.get("exec_data") or {}).get("succeeded") is False]
    return [d for d in [*failed, STATUS_DOC] if d in env.found_docs]


def set_report_path(app: Sphinx) -> None:
    # Kernels inherit this process's environment: the status page finds the report here.
    os.environ[REPORT_ENV] = str(Path(app.outdir) / EXECUTION_REPORT)


def with_cached_outputs(app: Sphinx, notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` with its outputs from the execution cache when it has none.

    myst-nb renders a notebook it finds in the execution cache from a merged copy, but writes the
    notebook it read, without outputs, to the folder the download is copied from: a rebuild, the
    Chinese edition and the test command's builds (which render what nbval executed) would offer a
    download without outputs."""
    if any(c.get("outputs") for c in notebook.cells if c.cell_type == "code"):
        return notebook
    cache_path = getattr(getattr(app.env, "mystnb_config", None), "execution_cache_path", None)
    if not cache_path or not Path(cache_path).is_dir():
        return notebook
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_path)).merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache (a notebook that failed): as it was
        return notebook
    return merged


def notebook_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    repo_url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    path = Path(app.outdir) / "_sources" / ipynb
    notebook = nbformat.read(path, as_version=4) if path.is_file() else None
    if notebook is not None and not any(SETUP_TAG in c.get("metadata", {}).get("tags", []) for c in notebook.cells):
        # the download keeps the outputs (to read offline); Colab's copy has none
        notebook = with_cached_outputs(app, notebook)
        if repo_url:
            notebook.cells.insert(0, setup_cell(course_requirement(app, repo_url), Path(ipynb).stem))
        nbformat.write(notebook, path)
    if path.is_file() and repo_url:
        course = course_requirement(app, repo_url)
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


def one_document_per_page(app: Sphinx, doctree) -> None:
    """Every node of a page belongs to the page's document, not to a translated message's own
    (see the module's docstring): a smaller pickle, the same page."""
    for node in doctree.findall(include_self=False):
        if getattr(node, "document", None) is not None and node.document is not doctree:
            node.document = doctree


def _fast_chinese_stem() -> None:
    """``SearchChinese.stem`` with its membership test in a set (same result, linear time)."""
    from sphinx.search import zh

    if getattr(zh.SearchChinese, "_course_fast_stem", False):
        return

    def stem(self, word: str) -> str:
        terms = self.latin_terms  # a list that split() extends (shared by every instance)
        seen = self.__dict__.get("_course_terms")
        if seen is None or seen[0] is not terms:
            seen = self.__dict__["_course_terms"] = [terms, 0, set()]
        if seen[1] < len(terms):
            seen[2].update(terms[seen[1]:])
            seen[1] = len(terms)
        lower = word.lower()
        if word in seen[2] and len(word) >= 3 and len(self.stemmer.stemWord(lower)) < 3:
            return lower  # too short once stemmed: kept whole, as Sphinx does
        return self.stemmer.stemWord(lower)

    zh.SearchChinese.stem = stem
    zh.SearchChinese._course_fast_stem = True


def _cached_default_settings() -> None:
    """docutils' ``get_default_settings``, computed once per set of components, a deep copy each call
    (callers may change their settings)."""
    import copy

    from docutils import frontend

    if getattr(frontend.get_default_settings, "_course_cached", False):
        return
    original, cache = frontend.get_default_settings, {}

    def get_default_settings(*components):
        key = tuple(components)
        try:
            defaults = cache.get(key)
        except TypeError:  # an unhashable component: no cache
            return original(*components)
        if defaults is None:
            defaults = cache[key] = original(*components)
        return copy.deepcopy(defaults)

    get_default_settings._course_cached = True
    frontend.get_default_settings = get_default_settings


PDF_NAME = "attention-step-by-step.pdf"  # beside each edition's root, where tools/pdf.py copies it
PDF_MARKER = "pdf.json"  # beside it: {"pdf": true} once the PDF is there (tools/pdf.py writes it so)


def write_pdf_marker(app: Sphinx, exception) -> None:
    """Say beside the built edition whether its PDF is there (a rebuild keeps a PDF copied earlier)."""
    if exception is None and app.builder.format == "html":
        out = Path(app.outdir)
        (out / PDF_MARKER).write_text(json.dumps({"pdf": (out / PDF_NAME).is_file()}) + "\n")


def setup(app: Sphinx) -> dict:
    _fast_chinese_stem()
    _cached_default_settings()
    app.connect("doctree-read", one_document_per_page, priority=900)  # after every other handler
    records_role.setup(app)  # {rec}`experiment metric`: numbers read from book/results at build time
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
    # the PDF is printed after the book (make pdf), and only then copied beside it: a link to it that
    # would lead nowhere becomes plain text (a make book build without make pdf; the sentence around it
    # says that make pdf makes it). Whether it is there is read from PDF_MARKER beside it (asking for the
    # PDF itself would log a 404 on every page view of a book without it), asked for again each time (a
    # copy cached before make pdf would hide the link after it).
    app.connect("build-finished", write_pdf_marker)
    app.add_js_file(None, body="document.addEventListener('DOMContentLoaded', () => document.querySelectorAll("
                    "'a.course-pdf-link').forEach(a => fetch(new URL('" + PDF_MARKER + "', a.href), {cache: 'no-cache'})"
                    ".then(r => r.ok ? r.json() : {}).then(m => m.pdf === true).catch(() => false)"
                    ".then(ok => { if (!ok) { const s = document.createElement('span'); s.className = 'course-pdf-missing'; "
                    "s.textContent = a.textContent; a.replaceWith(s); } })));")
    # the theme opens header links in a new tab; the other edition of a page replaces this one
    app.add_js_file(None, body="document.addEventListener('DOMContentLoaded', () => document.querySelectorAll("
                    "'a.btn-language-switch-button').forEach(a => a.removeAttribute('target')));")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
