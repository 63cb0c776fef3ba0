"""The test command executes each notebook once: nbval runs it and writes it into the book build's
execution cache (tools/nbval_cache.py), and the strict build renders it from there.

A tiny book of two notebooks, one passing and one with a failing cell, each appending a line to a
file every time it executes:
  1. nbval with the cache plugin (two workers, as the test command runs it) fails, naming the failing
     notebook and its cell; the passing notebook, and only it, is in the cache;
  2. the book build then renders the passing notebook from the cache (it does not execute again, and its
     outputs, a printed line and a figure, are on the page) and executes the failing one again: exit 1,
     the failing notebook named in the execution report.
So a failing cell still fails the command (twice over), and a passing notebook costs one execution.
About 25 s on 2 cores (two kernels, one sphinx-build).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_build import notebook, write_tiny_book

sys.path.insert(0, str(ROOT / "tools"))

CELL_MARK = """\
import os
with open(os.environ["ATTN_TEST_EXECUTIONS"], "a") as log:
    log.write("{name}\\n")
"""
PLOT = """\
import matplotlib.pyplot as plt
plt.plot([0, 1], [1, 0])
plt.show()
"""


def write_book(root: Path) -> None:
    nb = write_tiny_book(root, ["passing", "failing"])
    (nb / "passing.md").write_text(notebook("Passing", CELL_MARK.format(name="passing"),
                                            "print('forty-two:', 6 * 7)", PLOT))
    (nb / "failing.md").write_text(notebook("Failing", CELL_MARK.format(name="failing"),
                                            "raise ValueError('a planted failure')", "print('never')"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    import jupytext

    root = tmp_path_factory.mktemp("sharedbook")
    write_book(root)
    ipynb = root / "_build" / "ipynb"
    ipynb.mkdir(parents=True)
    for source in sorted((root / "notebooks").glob("*.md")):
        jupytext.write(jupytext.read(source), ipynb / f"{source.stem}.ipynb", fmt="ipynb")
    executions = root / "executions.log"
    cache = root / "_build" / ".jupyter_cache" / "test"  # where `tools/build.py book --profile test` looks
    env = dict(os.environ, ATTN_TEST_EXECUTIONS=str(executions), MPLBACKEND="module://matplotlib_inline.backend_inline",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tools"), os.environ.get("PYTHONPATH")])))
    for key in [k for k in env if k.startswith("PYTEST_")]:  # not a worker of this run's xdist
        env.pop(key)
    nbval = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q", "-p", "no:cacheprovider",
         "-n", "2", "--dist", "loadfile", "-p", "nbval_cache", "--nbval-cache", str(cache),
         "--nbval-sources", str(root / "notebooks"), "--rootdir", str(ipynb), str(ipynb)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    after_nbval = executions.read_text().split()
    build = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "book", "--root", str(root),
                            "--profile", "test"], env=env, capture_output=True, text=True, timeout=300)
    return root, cache, nbval, after_nbval, build, executions.read_text().split()


def test_nbval_fails_on_the_failing_cell_and_names_it(shared):
    _, _, nbval, after_nbval, _, _ = shared
    assert nbval.returncode != 0
    out = nbval.stdout + nbval.stderr
    assert "failing.ipynb::Cell 1" in out and "a planted failure" in out
    assert sorted(after_nbval) == ["failing", "passing"]  # each executed once by nbval


def test_only_the_notebook_that_passed_whole_is_cached(shared):
    from jupyter_cache import get_cache
    from nbval_cache import read_as_myst_nb

    root, cache, *_ = shared
    store = get_cache(str(cache))
    record = store.match_cache_notebook(read_as_myst_nb(root / "notebooks" / "passing.md"))
    executed = store.get_cache_bundle(record.pk).nb
    outputs = [o for cell in executed.cells for o in cell.outputs]
    assert any(o.get("text") == "forty-two: 42\n" for o in outputs)
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the figure, drawn inline
    with pytest.raises(KeyError):
        store.match_cache_notebook(read_as_myst_nb(root / "notebooks" / "failing.md"))


def test_the_build_renders_the_cached_notebook_and_fails_on_the_other(shared):
    root, _, _, after_nbval, build, after_build = shared
    assert build.returncode == 1, build.stdout[-2000:] + build.stderr[-2000:]
    # the build executed the failing notebook again, never the passing one
    assert sorted(after_build) == sorted(after_nbval + ["failing"])
    report = {n["source"]: n for n in json.loads((root / "_build" / "html" / "execution.json").read_text())["notebooks"]}
    assert report["notebooks/passing.md"]["status"] == "ok"
    assert report["notebooks/failing.md"]["status"] == "failed"
    assert "a planted failure" in report["notebooks/failing.md"]["error"]
    assert "notebooks/failing.md" in build.stdout
    page = (root / "_build" / "html" / "notebooks" / "passing.html").read_text()
    assert "forty-two: 42" in page and "<img" in page


def test_the_download_of_a_cached_notebook_keeps_its_outputs(shared):
    """myst-nb writes the notebook it read, without the cached outputs, where the download is copied
    from; course_ext puts them back (the course's download offers the outputs to read offline)."""
    from types import SimpleNamespace

    import nbformat
    from nbval_cache import read_as_myst_nb

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from course_ext import with_cached_outputs

    root, cache, *_ = shared
    app = SimpleNamespace(env=SimpleNamespace(mystnb_config=SimpleNamespace(execution_cache_path=str(cache))))
    read = read_as_myst_nb(root / "notebooks" / "passing.md")
    assert not any(cell.get("outputs") for cell in read.cells)
    download = with_cached_outputs(app, nbformat.from_dict(read))
    assert any(o.get("text") == "forty-two: 42\n" for cell in download.cells for o in cell.get("outputs", []))
    failing = read_as_myst_nb(root / "notebooks" / "failing.md")  # not in the cache: as it was
    assert with_cached_outputs(app, failing) is failing


def test_the_plugin_refuses_half_its_options(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
    for key in [k for k in env if k.startswith("PYTEST_")]:  # not a worker of this run's xdist
        env.pop(key)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "nbval_cache", "--nbval-cache", str(tmp_path),
                          "-p", "no:cacheprovider", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "--nbval-cache and --nbval-sources go together" in out.stderr + out.stdout


def test_the_slow_lists_name_existing_tests():
    """conftest's SLOW_FIRST and QUICK_LEAVES_OUT name tests by node-id prefix: a renamed test would
    silently come back into the quick loop (or lose its early start)."""
    import re

    from conftest import QUICK_LEAVES_OUT, SLOW_FIRST

    tests = Path(__file__).parent
    for prefix in (*SLOW_FIRST, *QUICK_LEAVES_OUT):
        file, _, name = prefix.partition("::")
        source = (tests / file).read_text()
        name = re.sub(r"\[.*", "", name)
        assert not name or re.search(rf"^def {re.escape(name)}\w*\(", source, re.M), prefix
