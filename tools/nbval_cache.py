"""A pytest plugin for the test command's nbval step: one execution of each notebook serves both
nbval and the book build. Hand-written infrastructure.

nbval runs every cell of every notebook in a kernel and fails on an error, as always. With
``-p nbval_cache --nbval-cache DIR --nbval-sources NOTEBOOKS``, each notebook whose every code cell
passed is also written, with the outputs nbval collected from its kernel, into the book's
execution cache ``DIR`` (jupyter-cache, keyed exactly as myst-nb keys the ``.md`` notebook it reads
from ``NOTEBOOKS``). The strict build that follows then renders those notebooks from the cache
instead of executing them a second time.

A notebook with a failing, skipped or timed-out cell is never cached: nbval fails the command, and
the build, finding nothing in the cache, executes it again and names it in its execution report.
Runs under pytest-xdist with ``--dist loadfile`` (a notebook's cells stay on one worker, which owns
its kernel); writes to the cache are serialised by a file lock.
"""

from __future__ import annotations

import platform
import sys
from collections import defaultdict
from pathlib import Path

import pytest

# what ipykernel reports for this interpreter (myst-nb reads the lexer from it)
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": platform.python_version(),
}


def pytest_addoption(parser) -> None:
    group = parser.getgroup("nbval-cache", "write notebooks nbval executed into the book's execution cache")
    group.addoption("--nbval-cache", default=None, help="the jupyter-cache folder of the book build (its smoke profile)")
    group.addoption("--nbval-sources", default=None,
                    help="the folder of the text notebooks (.md) that the .ipynb files under test were made from")


def pytest_configure(config) -> None:
    cache, sources = config.getoption("--nbval-cache"), config.getoption("--nbval-sources")
    if cache is None and sources is None:
        return
    if cache is None or sources is None:
        raise pytest.UsageError("--nbval-cache and --nbval-sources go together: the cache folder and the "
                                f"folder of the .md notebooks (got {cache!r} and {sources!r})")
    if not Path(sources).is_dir():
        raise pytest.UsageError(f"--nbval-sources: expected the folder of the .md notebooks, {sources} is not one")
    config.pluginmanager.register(CacheWriter(Path(cache), Path(sources)), "nbval-cache-writer")


class CacheWriter:
    """Collects each cell's outputs as nbval runs it; caches every notebook that passed whole."""

    def __init__(self, cache: Path, sources: Path):
        self.cache, self.sources = cache, sources
        self.outputs: dict[Path, dict[int, list]] = defaultdict(dict)  # .ipynb -> code cell -> outputs
        self.seconds: dict[Path, float] = defaultdict(float)
        self.spoiled: set[Path] = set()  # a cell failed, was skipped or never ran: not cacheable
        self.cells: dict[Path, int] = {}  # .ipynb -> its number of code cells

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = (yield).get_result()
        if not hasattr(item, "cell_num") or not hasattr(item, "test_outputs"):
            return  # not an nbval cell
        path = Path(str(item.parent.fspath))
        self.cells.setdefault(path, sum(1 for c in item.parent.nb.cells if c.cell_type == "code"))
        self.seconds[path] += report.duration
        if report.failed or report.skipped:
            self.spoiled.add(path)
        elif report.when == "call":
            self.outputs[path][item.cell_num] = [_plain(o) for o in (item.test_outputs or [])]

    def pytest_sessionfinish(self, session) -> None:
        done = [p for p, cells in self.cells.items()
                if p not in self.spoiled and len(self.outputs[p]) == cells]
        for path in done:
            try:
                self.write(path)
            except Exception as error:  # noqa: BLE001  (a cache problem only costs the build an execution)
                print(f"\nnbval-cache: {path.name} not cached ({type(error).__name__}: {error}); "
                      "the book build will execute it", file=sys.stderr)

    def write(self, ipynb: Path) -> None:
        from filelock import FileLock
        from jupyter_cache import get_cache
        from jupyter_cache.base import CacheBundleIn

        source = self.sources / f"{ipynb.stem}.md"
        notebook = read_as_myst_nb(source)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        outputs = self.outputs[ipynb]
        if len(code) != len(outputs):
            raise ValueError(f"{source} has {len(code)} code cells, nbval ran {len(outputs)}")
        count = 0
        for index, cell in enumerate(code):
            count += 1
            cell.outputs = outputs[index]
            cell.execution_count = count
            for output in cell.outputs:
                if output.get("output_type") == "execute_result":
                    output["execution_count"] = count
        notebook.metadata["language_info"] = dict(LANGUAGE_INFO)
        self.cache.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.cache) + ".lock"):
            get_cache(str(self.cache)).cache_notebook_bundle(
                CacheBundleIn(notebook, str(source.resolve()), data={"execution_seconds": round(self.seconds[ipynb], 2)}),
                check_validity=False, overwrite=True)


def read_as_myst_nb(source: Path):
    """The notebook exactly as myst-nb reads the text notebook in the book build (the cache's key is
    a hash of its code cells and their metadata)."""
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.read import create_nb_reader
    from myst_parser.config.main import MdParserConfig

    text = source.read_text(encoding="utf-8")
    reader = create_nb_reader(str(source), MdParserConfig(), NbParserConfig(), text)
    if reader is None:
        raise ValueError(f"{source} is not a text notebook myst-nb reads")
    return reader.read(text)


def _plain(output):
    """An nbval output as an nbformat output (nbval builds them as NotebookNode with extra keys)."""
    import nbformat

    kind = output.get("output_type")
    if kind == "stream":
        return nbformat.v4.new_output("stream", name=output["name"], text=output["text"])
    if kind == "error":
        return nbformat.v4.new_output("error", ename=output["ename"], evalue=output["evalue"],
                                      traceback=output["traceback"])
    if kind == "execute_result":
        return nbformat.v4.new_output("execute_result", data=output["data"], metadata=output.get("metadata", {}),
                                      execution_count=output.get("execution_count"))
    return nbformat.v4.new_output(kind, data=output.get("data", {}), metadata=output.get("metadata", {}))
