"""Colab, simulated here (hand-written infrastructure; `make check-colab`).

    python tools/colab_check.py [--notebook 00_setup] [--keep]

A Colab runtime has its own torch and a set of preinstalled libraries, and none of the course: the
setup cell that opens every generated notebook (``book/_ext/colab_setup.py``) must install the course
into it without breaking what is there and without a restart. This check builds the package as a
wheel, creates a clean virtual environment holding only what a Colab runtime preinstalls that the
course uses (torch at the course's tested version, numpy, pandas, matplotlib, seaborn, scikit-learn,
scipy, tqdm, the Jupyter kernel; not the course's lock file), generates the notebook as the site
publishes it for Colab, and executes it there (``smoke`` profile): the setup cell installs the local
wheel (``$ATTN_WHEEL``) with the dependencies pip adds, and takes the datasets from the local copy
(``$ATTN_DATA_DIR``) when one is given, as CI's is. Needs the network for PyPI (the packages a Colab
runtime lacks). Takes a few minutes, so it is not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "_build" / "colab"
# What a Colab runtime preinstalls that the course uses (Colab's list is much longer). torch is
# the course's tested release: the CPU build on disk here, where Colab has a CUDA one.
PREINSTALLED = ["torch==2.13.0", "numpy", "pandas", "matplotlib", "seaborn", "scikit-learn", "scipy", "tqdm",
                "ipykernel", "nbclient", "nbformat", "requests"]


def run(cmd: list[str], **kwargs) -> None:
    print("$ " + " ".join(map(str, cmd)), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", default="00_setup", help="the notebook to run (default 00_setup)")
    parser.add_argument("--keep", action="store_true", help="keep the virtual environment of an earlier run")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import jupytext
    import nbformat
    from colab_setup import for_colab

    venv = WORK / "venv"
    if not args.keep or not (venv / "bin" / "python").is_file():
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True)
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *PREINSTALLED])
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import importlib.util; print(importlib.util.find_spec('attn_tutorial'))"],
                           capture_output=True, text=True, check=True, cwd=WORK).stdout.strip()  # not from the checkout
    if probe != "None":
        raise SystemExit(f"the simulated runtime already has the course's package ({probe}): not a clean runtime")
    wheels = WORK / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)])
    wheel = next(wheels.glob("attn_tutorial-*.whl"))
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch folder in the checkout

    source = ROOT / "notebooks" / f"{args.notebook}.md"
    notebook = for_colab(jupytext.read(source), "attn-tutorial (from the local wheel, $ATTN_WHEEL)", args.notebook)
    target = WORK / f"{args.notebook}.ipynb"
    nbformat.write(notebook, target)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update({"ATTN_WHEEL": str(wheel), "ATTN_PROFILE": "smoke", "TQDM_DISABLE": "1", "MPLBACKEND": "Agg",
                "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    runner = (
        "import sys, nbformat\n"
        "from nbclient import NotebookClient\n"
        "notebook = nbformat.read(sys.argv[1], as_version=4)\n"
        "NotebookClient(notebook, timeout=900, kernel_name='python3', resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
        "nbformat.write(notebook, sys.argv[1].replace('.ipynb', '.executed.ipynb'))\n"
        "setup = ''.join(o.get('text', '') for o in notebook.cells[0].outputs)\n"
        "print(setup)\n"
    )
    print(f"executing {target.name} in the simulated Colab runtime (smoke profile) ...", flush=True)
    run([str(python), "-c", runner, str(target), str(WORK)], env=env, cwd=WORK)
    installed = subprocess.run([str(python), "-c", "import attn_tutorial, torch; print(attn_tutorial.__file__, torch.__version__)"],
                               capture_output=True, text=True, env=env, check=True, cwd=WORK).stdout.strip()
    print(f"check-colab: {args.notebook} ran in a clean runtime with the course installed by its setup cell "
          f"({installed}) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
