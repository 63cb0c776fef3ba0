"""The setup cell of the notebooks that Colab opens (book/_ext/colab_setup.py). Running it in a
simulated Colab runtime is `make check-colab` (tools/colab_check.py), minutes long."""

from __future__ import annotations

import ast
import re
import sys

import jupytext

from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import colab_setup  # noqa: E402


def test_the_setup_cell_is_plain_python_that_keeps_torch_unpinned():
    cell = colab_setup.setup_cell("attn-tutorial @ git+https://github.com/o/r@" + "a" * 40, "06_hierarchical_attention")
    ast.parse(cell.source)  # no IPython magic: runs in any kernel, and under nbclient
    assert "colab-setup" in cell.metadata["tags"]
    assert "['imdb', 'polarity_v2']" in cell.source
    assert "torch==" not in cell.source and "restart" in cell.source  # only said when torch is too old
    assert "--upgrade-strategy" in cell.source and "only-if-needed" in cell.source


def test_colab_copy_has_no_outputs_asks_for_a_gpu_and_one_setup_cell():
    notebook = jupytext.read(ROOT / "notebooks" / "00_setup.md")
    notebook.cells[1].outputs = [{"output_type": "stream", "name": "stdout", "text": "x"}] if notebook.cells[1].cell_type == "code" else []
    twice = colab_setup.for_colab(colab_setup.for_colab(notebook, "attn-tutorial", "00_setup"), "attn-tutorial", "00_setup")
    assert sum("colab-setup" in c.metadata.get("tags", []) for c in twice.cells) == 1
    assert "colab-setup" in twice.cells[0].metadata["tags"]
    assert twice.metadata["accelerator"] == "GPU" and twice.metadata["kernelspec"]["name"] == "python3"
    assert not any(c.get("outputs") for c in twice.cells if c.cell_type == "code")


def test_every_notebook_that_reads_a_dataset_gets_it_from_its_setup_cell():
    readers = {"imdb": r'load_dataset\("imdb"|imdb_text_data', "polarity_v2": r'load_dataset\("polarity_v2"',
               "tatoeba_cmn": r'load_dataset\("tatoeba_cmn"'}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md")):
        text = path.read_text()
        needed = {name for name, pattern in readers.items() if re.search(pattern, text)}
        assert needed <= set(colab_setup.NOTEBOOK_DATA.get(path.stem, [])), (path.name, needed)
