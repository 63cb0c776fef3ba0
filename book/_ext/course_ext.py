"""Sphinx glue for the course book (hand-written infrastructure).

* Colab: the theme's Colab button would open ``notebooks/NN_x.md`` (Colab cannot read text
  notebooks). It is pointed at the generated ``.ipynb`` that the published site carries under
  ``_sources/`` on the Pages branch (``course_pages_branch``) instead.
* Downloads: the ``.ipynb`` offered for download (and opened by Colab) gets a first cell that
  installs the course package from the repository URL configured in ``_config.yml``.
* The status page (``book/status``) is read last, so it sees every executed notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from sphinx.application import Sphinx

STATUS_DOC = "book/status"
SETUP_TAG = "colab-setup"


def _repo_parts(app: Sphinx) -> tuple[str, str] | None:
    url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    if not url.startswith("https://github.com/"):
        return None
    parts = url.removeprefix("https://github.com/").split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def _setup_cell(repo_url: str) -> nbformat.NotebookNode:
    source = (
        "# Setup on Google Colab (or any machine without the course installed): install the\n"
        "# course package `attn_tutorial` from the repository. Elsewhere this cell does nothing.\n"
        "import importlib.util\n"
        "if importlib.util.find_spec(\"attn_tutorial\") is None:\n"
        f"    %pip install -q \"attn-tutorial @ git+{repo_url}\"\n"
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": [SETUP_TAG]})


def reorder_docs(app: Sphinx, env, docnames: list[str]) -> None:
    if STATUS_DOC in docnames:
        docnames.remove(STATUS_DOC)
        docnames.append(STATUS_DOC)


def notebook_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    repo_url = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    path = Path(app.outdir) / "_sources" / ipynb
    if path.is_file() and repo_url:
        notebook = nbformat.read(path, as_version=4)
        if not any(SETUP_TAG in c.get("metadata", {}).get("tags", []) for c in notebook.cells):
            notebook.cells.insert(0, _setup_cell(repo_url))
            nbformat.write(notebook, path)
    parts = _repo_parts(app)
    if parts is None:
        return
    org, repo = parts
    colab = app.config.html_theme_options.get("launch_buttons", {}).get("colab_url", "").rstrip("/")
    url = f"{colab}/github/{org}/{repo}/blob/{app.config.course_pages_branch}/_sources/{ipynb}"
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Colab":
                button["url"] = url


def setup(app: Sphinx) -> dict:
    app.add_config_value("course_pages_branch", "gh-pages", "html")
    app.connect("env-before-read-docs", reorder_docs)
    app.connect("html-page-context", notebook_links, priority=502)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
