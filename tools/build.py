"""Build the course book (hand-written infrastructure; called by the Makefile).

    python tools/build.py book [--profile P] [--student] [--strict] [--out DIR]
    python tools/build.py ipynb --out DIR       # text notebooks -> .ipynb (no outputs)

The book is built with sphinx-build from a conf.py that ``jupyter-book config sphinx`` generates
out of ``_config.yml``, so that each run profile gets its own execution cache (the notebooks'
code is the same in every profile, their outputs are not) and the student build can hide
solutions. MathJax is copied from a PyPI package so that pages render offline.
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
BUILD = ROOT / "_build"
MATHJAX_DEST = ROOT / "book" / "_static" / "mathjax"


def copy_mathjax() -> None:
    """Copy MathJax 3 (its ``es5`` build) from the installed ``django-static-mathjax`` package.

    That PyPI package is a plain copy of the MathJax distribution (importable as ``mathjax``;
    nothing of Django is used or needed). Copied once per version.
    """
    import importlib.metadata

    import mathjax

    version = importlib.metadata.version("django-static-mathjax")
    stamp = MATHJAX_DEST / ".copied-from"
    if stamp.is_file() and stamp.read_text() == version:
        return
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise SystemExit(f"tex-chtml.js not found in {source}: reinstall django-static-mathjax")
    shutil.rmtree(MATHJAX_DEST, ignore_errors=True)
    shutil.copytree(source, MATHJAX_DEST, ignore=shutil.ignore_patterns("*.map"))
    stamp.write_text(version)


CONF_SUFFIX = """
# --- added by tools/build.py ---
# sphinx-thebe and the theme both declare THEBE_JS_URL (a JavaScript error on every page), and
# thebe would load from a CDN anyway: the book launches notebooks on Colab instead.
extensions = [e for e in extensions if e != "sphinx_thebe"]
"""


def write_conf() -> None:
    """Generate conf.py from _config.yml (plus the path of the local Sphinx extension)."""
    out = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "config", "sphinx", str(ROOT)], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"jupyter-book config sphinx failed:\n{out.stdout}\n{out.stderr}")
    conf = ROOT / "conf.py"
    text = conf.read_text()
    prefix = "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'book', '_ext'))\n"
    if not text.startswith(prefix):
        text = prefix + text + CONF_SUFFIX
    conf.write_text(text)


def default_profile() -> str:
    from attn_tutorial.profiles import current_profile

    return current_profile().name


def build_book(profile: str, out: Path, student: bool, strict: bool, jobs: str = "1") -> int:
    copy_mathjax()
    write_conf()
    env = dict(os.environ)
    env["ATTN_PROFILE"] = profile
    env["TQDM_DISABLE"] = "1"  # progress bars are noise on a static page
    env["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    env["ATTN_NB_CACHE"] = str(BUILD / ".jupyter_cache" / profile)
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    variant = f"{out.relative_to(BUILD) if out.is_relative_to(BUILD) else out.name}".replace("/", "_")
    cmd = [
        sys.executable, "-m", "sphinx", "-b", "html", str(ROOT), str(out),
        "-c", str(ROOT), "-d", str(BUILD / ".doctrees" / variant), "-j", jobs,
        "-D", f"nb_execution_cache_path={env['ATTN_NB_CACHE']}",
    ]
    if student:
        cmd += ["-D", "hide_solutions=1"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    print(f"Building the book: profile {profile}{', student edition' if student else ''} -> {out}", flush=True)
    start = time.perf_counter()
    code = subprocess.call(cmd, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    if code == 0:
        (out / ".nojekyll").touch()  # GitHub Pages must serve _static/, _sources/ as they are
        print(f"\nBuilt in {seconds:.0f} s: {out / 'index.html'}")
        print(f"Serve it locally:  python -m http.server --directory {out.relative_to(ROOT)} 8000"
              "   then open http://localhost:8000")
    return code


def write_ipynb(out: Path) -> list[Path]:
    """Convert every text notebook to .ipynb (no outputs) under ``out``."""
    import jupytext

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sorted((ROOT / "notebooks").glob("*.md")):
        target = out / f"{source.stem}.ipynb"
        jupytext.write(jupytext.read(source), target, fmt="ipynb")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    book = sub.add_parser("book", help="execute the notebooks and build the HTML book")
    book.add_argument("--profile", default=None, help="smoke | cpu | full (default: $ATTN_PROFILE or the hardware)")
    book.add_argument("--student", action="store_true", help="hide the solutions of the exercises")
    book.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    book.add_argument("--out", type=Path, default=None, help="output folder (default _build/html)")
    book.add_argument("-j", "--jobs", default="1")
    nb = sub.add_parser("ipynb", help="write .ipynb versions of the notebooks")
    nb.add_argument("--out", type=Path, default=BUILD / "ipynb")
    args = parser.parse_args(argv)
    if args.command == "ipynb":
        for path in write_ipynb(args.out.resolve()):
            print(f"wrote {path}")
        return 0
    profile = args.profile or default_profile()
    out = (args.out or (BUILD / ("student/html" if args.student else "html"))).resolve()
    return build_book(profile, out, args.student, args.strict, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
