"""The first cell of every downloadable (and Colab) notebook: install the course where it is missing.

Hand-written infrastructure, used by ``course_ext`` (which adds the cell to the ``.ipynb`` files the
site offers) and by ``tools/colab_check.py`` (which runs it in a simulated Colab runtime).

On Colab (or any machine without the course's package), the cell
* keeps the runtime's own torch (no pin: a pinned torch would replace Colab's CUDA build and need a
  restart) and says so when it is older than the course needs or newer than it was tested with;
* installs the package ``attn-tutorial`` at the commit the book was built from (``$ATTN_WHEEL``, a
  local wheel, instead when set), with pip's default "only if needed" upgrades, so nothing already
  imported changes and no restart is needed;
* makes the datasets the notebook reads available in ``$ATTN_DATA_DIR`` (default ``~/attn-data``):
  copied from the Hugging Face hub, or built from their published archives where the hub has none;
* prints the run profile the notebooks will use: ``full`` on a GPU, ``cpu`` otherwise.
Where the package is already importable (the course's own environment), it does nothing.
"""

from __future__ import annotations

import nbformat

SETUP_TAG = "colab-setup"
TORCH_MIN = (2, 4)        # the package's own floor (pyproject.toml)
TORCH_TESTED = "2.13.0"   # requirements.lock

# The datasets each notebook reads (attn_tutorial.data.DATASETS keys); the others need none or make
# their own (easy-VQA is a pip package, the relational sets are generated).
NOTEBOOK_DATA = {
    "00_setup": ["imdb"], "01_text_bilstm": ["imdb"], "02_attention_pooling": ["imdb"],
    "03_multihead_self_attention": ["imdb"], "04_differential_attention": ["imdb"],
    "06_hierarchical_attention": ["imdb", "polarity_v2"], "10_attention_at_scale": ["imdb"],
    "11_translation": ["tatoeba_cmn"], "12_transformer": ["tatoeba_cmn"], "13_decoder_lm": ["imdb"],
}

TEMPLATE = '''\
# Setup for Google Colab (or any machine without the course installed); elsewhere it does nothing.
# It keeps this runtime's torch, installs the course's package at the book's commit, gets the
# datasets this notebook reads and picks the run profile: `full` on a GPU, `cpu` otherwise.
import importlib.util, os, subprocess, sys
from pathlib import Path

COURSE = {course!r}
DATASETS = {datasets!r}
if importlib.util.find_spec("attn_tutorial") is None:
    import torch
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if version < {torch_min!r}:
        print(f"torch {{torch.__version__}} is older than the course needs ({torch_min_text} or newer; tested "
              f"with {torch_tested}): upgrade it (%pip install -U torch), restart the runtime, run this cell again")
    else:
        print(f"torch {{torch.__version__}} (the course was tested with {torch_tested})")
    source = os.environ.get("ATTN_WHEEL") or COURSE
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--upgrade-strategy", "only-if-needed", source],
                   check=True)
    importlib.invalidate_caches()
    os.environ.setdefault("ATTN_DATA_DIR", str(Path.home() / "attn-data"))
    Path(os.environ["ATTN_DATA_DIR"]).mkdir(parents=True, exist_ok=True)
    from attn_tutorial import data

    target = Path(os.environ["ATTN_DATA_DIR"])
    for name in DATASETS:
        spec = data.DATASETS[name]
        if all((target / relative).is_file() for relative in spec.local_files.values()):
            continue
        data.fetch(name, target) if spec.hub_id else data.build(name, target)
        print(f"{{name}}: ready in {{target}}")
    from attn_tutorial.profiles import current_profile, describe_device

    print(f"course installed; run profile {{current_profile().name}} on {{describe_device()}}")
'''


def setup_cell(course: str, notebook: str) -> nbformat.NotebookNode:
    """The setup cell for ``notebook`` (its stem), installing ``course`` (a pip requirement)."""
    source = TEMPLATE.format(course=course, datasets=NOTEBOOK_DATA.get(notebook, []), torch_min=TORCH_MIN,
                             torch_min_text=".".join(map(str, TORCH_MIN)), torch_tested=TORCH_TESTED)
    return nbformat.v4.new_code_cell(source, metadata={"tags": [SETUP_TAG]})


def for_colab(notebook: nbformat.NotebookNode, course: str, stem: str) -> nbformat.NotebookNode:
    """``notebook`` as Colab should open it: the setup cell first, no outputs, a GPU runtime asked for."""
    cells = [c for c in notebook.cells if SETUP_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.cells = [setup_cell(course, stem), *cells]
    notebook.metadata["accelerator"] = "GPU"
    notebook.metadata["colab"] = {"provenance": [], "gpuType": "T4", "name": f"{stem}.ipynb"}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook
