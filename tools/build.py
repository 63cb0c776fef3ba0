"""Build the course book (hand-written infrastructure; called by the Makefile).

    python tools/build.py book [--profile P] [--student] [--strict] [--out DIR] [--root DIR] [--language L]
    python tools/build.py ipynb --out DIR       # text notebooks -> .ipynb (no outputs)

The book is built with sphinx-build from a conf.py that ``jupyter-book config sphinx`` generates
out of ``_config.yml``, so that each run profile gets its own execution cache (the notebooks'
code is the same in every profile, their outputs are not) and the student build can hide
solutions. The Chinese edition is built from the same sources and the catalogues in
``locales/zh_CN`` into ``<out>/zh`` (``--language`` builds one edition). MathJax is copied from a PyPI package so that pages render offline.

Before anything else the build checks the data every notebook loads (IMDB, polarity v2.0, Tatoeba:
``ensure_data``): a local copy (checked against its SHA-256), or, online, the hub or the authors'
archive; without them it stops at once, saying how to provide them, instead of
executing every notebook and failing those that need them.

A notebook that fails or times out makes the build fail (exit 1) whatever Sphinx says: the local
extension (book/_ext/course_ext.py) writes each notebook's outcome to ``<out>/execution.json``
and ``report_execution`` names every notebook that did not execute, its error and its log.

Before executing in the ``cpu`` or ``full`` profile the build prints an estimate of the training
time on this machine (``python -m attn_tutorial.results estimate --book``; skip it with
``ATTN_NO_ESTIMATE=1``). While notebooks execute, training loops append a heartbeat to
``_build/progress-<profile>.log`` (see ``attn_tutorial.runs.Heartbeat``) and the build prints it,
so a long cell is visibly alive and a busy machine is named as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
MATHJAX_DEST = ROOT / "book" / "_static" / "mathjax"
EXT_DIR = ROOT / "book" / "_ext"  # the course's Sphinx extension, also for a book at another root
EXECUTION_REPORT = "execution.json"  # written into the output folder by course_ext


def copy_mathjax() -> None:
    """Copy MathJax 3 (its ``es5`` build) from the installed ``django-static-mathjax`` package.

    That PyPI package is a plain copy of the MathJax distribution (importable as ``mathjax``;
    nothing of Django is used or needed). Copied once per version.
    """
    import importlib.metadata

    import mathjax

    from filelock import FileLock

    version = importlib.metadata.version("django-static-mathjax")
    stamp = MATHJAX_DEST / ".copied-from"
    BUILD.mkdir(exist_ok=True)
    with FileLock(str(BUILD / ".mathjax.lock")):  # builds side by side (the test command's) copy it once
        if stamp.is_file() and stamp.read_text() == version:
            return
        source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
        if not (source / "tex-chtml.js").is_file():
            raise SystemExit(f"tex-chtml.js not found in {source}: reinstall django-static-mathjax")
        partial = BUILD / f".mathjax.{os.getpid()}"  # a whole copy, then one rename
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial, ignore=shutil.ignore_patterns("*.map"))
        (partial / ".copied-from").write_text(version)
        shutil.rmtree(MATHJAX_DEST, ignore_errors=True)
        os.replace(partial, MATHJAX_DEST)


CONF_SUFFIX = """
# --- added by tools/build.py ---
# sphinx-thebe and the theme both declare THEBE_JS_URL (a JavaScript error on every page), and
# thebe would load from a CDN anyway: the book launches notebooks on Colab instead.
extensions = [e for e in extensions if e != "sphinx_thebe"]
# jupyter-book's LaTeX helpers are for its pdflatex route, which the course does not take (the PDF
# edition is printed from HTML, tools/pdf.py); in a single-page build they leave nodes no HTML
# writer can write.
extensions = [e for e in extensions if e != "sphinx_jupyterbook_latex"]
"""


def write_conf(root: Path = ROOT) -> None:
    """Generate ``root``/conf.py from ``root``/_config.yml (plus the path of the local Sphinx extension).

    Skipped when conf.py is newer than _config.yml and already has this version's additions: the
    test command runs builds side by side, and ``jupyter-book config sphinx`` rewrites conf.py in
    place, so a build starting meanwhile could read a half-written or unpatched one (another set of
    extensions: Sphinx then reads every page again). The final file is written atomically.
    """
    conf, config = root / "conf.py", root / "_config.yml"
    prefix = _conf_prefix(root)
    if (conf.is_file() and config.is_file() and conf.stat().st_mtime >= config.stat().st_mtime
            and (text := conf.read_text()).startswith(prefix) and text.endswith(CONF_SUFFIX)):
        return
    with tempfile.TemporaryDirectory() as scratch:  # jupyter-book writes conf.py next to the config it reads
        shutil.copyfile(config, Path(scratch) / "_config.yml")
        out = subprocess.run(
            [str(Path(sys.executable).parent / "jupyter-book"), "config", "sphinx", scratch], capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"jupyter-book config sphinx failed:\n{out.stdout}\n{out.stderr}")
        text = (Path(scratch) / "conf.py").read_text()
    partial = conf.with_name(f".conf.py.{os.getpid()}")
    partial.write_text(prefix + text + CONF_SUFFIX)
    os.replace(partial, conf)


def _conf_prefix(root: Path) -> str:
    if root == ROOT:
        return "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'book', '_ext'))\n"
    return f"import os, sys\nsys.path.insert(0, {str(EXT_DIR)!r})\n"  # a book elsewhere (the tests' tiny books)


def default_profile() -> str:
    from attn_tutorial.profiles import current_profile

    return current_profile().name


def book_env(profile: str, root: Path = ROOT) -> dict:
    """The environment sphinx-build (and so every notebook's kernel) runs with."""
    env = dict(os.environ)
    env["ATTN_PROFILE"] = profile
    env["TQDM_DISABLE"] = "1"  # progress bars are noise on a static page
    env["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    env["ATTN_NB_CACHE"] = str(root / "_build" / ".jupyter_cache" / profile)
    env["ATTN_PROGRESS_FILE"] = str(root / "_build" / f"progress-{profile}.log")  # the kernels' heartbeat
    env.setdefault("ATTN_HEARTBEAT_S", "60")
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return env


def print_estimate(profile: str, env: dict, root: Path) -> None:
    """Before a long build: how long its training should take here, and how to choose another profile."""
    if profile == "smoke" or env.get("ATTN_NO_ESTIMATE") or root != ROOT:
        return
    print(f"Estimating the training time of the {profile} profile on this machine "
          "(two timed steps per experiment; ATTN_NO_ESTIMATE=1 skips this)...", flush=True)
    out = subprocess.run([sys.executable, "-m", "attn_tutorial.results", "estimate", "--book", "--profile", profile],
                         cwd=root, env=env, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines()
             if line.startswith(("estimated", "not counted")) or "FAILED" in line]
    print("\n".join(lines) if lines else f"(no estimate: {out.stderr.strip().splitlines()[-1:]})")
    print("Finished checkpoints and recorded runs are reused, so a rebuild is much shorter. For a quicker "
          "book: ATTN_PROFILE=smoke make book (seconds per notebook; numbers only prove the code runs)"
          + (", or ATTN_PROFILE=cpu make book." if profile == "full" else "."), flush=True)


class ProgressTail(threading.Thread):
    """Print the heartbeat lines the notebooks' training loops append to ``path``."""

    def __init__(self, path: Path, every: float = 5.0):
        super().__init__(daemon=True)
        self.path, self.every, self.stopped = path, every, threading.Event()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")  # this build's lines only

    def run(self) -> None:
        offset = 0
        while not self.stopped.wait(self.every):
            offset = self._print_new(offset)
        self._print_new(offset)

    def _print_new(self, offset: int) -> int:
        try:
            with open(self.path, encoding="utf-8") as handle:
                handle.seek(offset)
                text = handle.read()
        except OSError:
            return offset
        for line in text.splitlines():
            print(f"  training: {line}", flush=True)
        return offset + len(text.encode("utf-8"))


EDITIONS = {"en": "", "zh_CN": "zh"}  # language -> its folder inside the English edition's output


def sphinx_command(root: Path, out: Path, cache: str, student: bool, strict: bool, jobs: str,
                   language: str = "en", other_edition: str = "") -> list[str]:
    build = root / "_build"
    variant = f"{out.relative_to(build) if out.is_relative_to(build) else out.name}".replace("/", "_")
    cmd = [
        sys.executable, "-m", "sphinx", "-b", "html", str(root), str(out),
        "-c", str(root), "-d", str(build / ".doctrees" / variant), "-j", jobs,
        "-D", f"nb_execution_cache_path={cache}",
    ]
    if student:
        cmd += ["-D", "hide_solutions=1"]
    if language != "en":
        cmd += ["-D", f"language={language}"]
    if other_edition:  # the language switch's path from this edition's root to the other's
        cmd += ["-D", f"course_other_edition={other_edition}"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    return cmd


def _shown(path: Path, root: Path) -> str:
    """A path as the reader of the build log can use it: relative to the book's root when inside."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def report_execution(out: Path, root: Path = ROOT) -> list[dict] | None:
    """Print every notebook that failed or timed out in the build into ``out`` (from the
    ``execution.json`` that course_ext writes); return them, or None where there is no report."""
    path = out / EXECUTION_REPORT
    if not path.is_file():
        print(f"\nNo execution report ({_shown(path, root)}): cannot tell whether every notebook executed.")
        return None
    notebooks = json.loads(path.read_text())["notebooks"]
    bad = [n for n in notebooks if n["status"] != "ok"]
    if bad:
        print(f"\n{len(bad)} of {len(notebooks)} notebooks did not execute; their pages show the error:")
    for n in bad:
        where = f" (cell at line {n['line']})" if n.get("line") else ""
        log = _shown(out / n["log"], root) if n.get("log") else "none written"
        print(f"  {n['source']}: {n['status']}{where}")
        print(f"      error: {n['error']}")
        print(f"      log:   {log}")
    if bad:
        print("A notebook that did not execute runs again on every build until it succeeds "
              "(the others come from the execution cache).")
    return bad


def notebook_datasets(root: Path = ROOT) -> list[str]:
    """The datasets the book's executed pages load (``load_dataset("name"`` in notebooks/ and
    chapters/), with those the test command provides for them (``attn_tutorial.data.TEST_DATASETS``)."""
    import re

    from attn_tutorial.data import DATASETS, TEST_DATASETS

    text = "\n".join(p.read_text(encoding="utf-8") for folder in ("notebooks", "chapters")
                     for p in sorted((root / folder).glob("*.md")))
    used = set(re.findall(r"load_dataset\(\s*[\"']([\w-]+)[\"']", text)) | set(TEST_DATASETS)
    return [name for name in DATASETS if name in used]


def ensure_data(names: list[str] | None = None) -> list[str]:
    """Before any notebook executes: every dataset the notebooks load is here (a local copy, checked
    against its SHA-256), or can be had (online: built from its authors' archive now, or loaded from
    the hub by the notebooks; offline: a hub copy in the course's cache); else stop at once
    (SystemExit) naming what is missing and how to provide it, not after every notebook executed.
    Returns one line per dataset."""
    from attn_tutorial import data
    from attn_tutorial.paths import cache_dir

    names = notebook_datasets() if names is None else names
    try:
        target = data.data_target()
        lines, missing = [], []
        for name in names:
            spec = data.DATASETS[name]
            if all((target / rel).is_file() for rel in spec.local_files.values()):
                for rel in spec.local_files.values():
                    data.verify_checksum(target / rel, data.expected_sha256(target, rel, spec))
                lines.append(f"{name}: local copy in {target}, checksums verified")
            else:
                missing.append(name)
        reachable = bool(missing) and data.online()
        unavailable = []
        for name in missing:
            spec = data.DATASETS[name]
            cached = spec.hub_id and not data._offline() and any(
                (cache_dir() / "hf_datasets").glob(spec.hub_id.replace("/", "___") + "*"))
            if spec.hub_id and reachable:
                lines.append(f"{name}: no local copy in {target}; the notebooks load {spec.hub_id} from the hub")
            elif cached:
                lines.append(f"{name}: no local copy in {target}; the notebooks use the hub copy cached in "
                             f"{cache_dir() / 'hf_datasets'}")
            elif name in data.SOURCES and reachable:
                lines.append(f"{name}: built {data.build(name, target)} from {data.SOURCES[name]}")
            else:
                unavailable.append(name)
    except (data.DataNotFoundError, data.ChecksumError) as error:
        raise SystemExit(f"data: {error}\nThe book was not built: no notebook was executed.") from None
    if unavailable:
        files = ", ".join(rel for n in unavailable for rel in data.DATASETS[n].local_files.values())
        make = [f"`python -m attn_tutorial.data {'fetch' if data.DATASETS[n].fetchable else 'build'} {n} --to DIR`"
                for n in unavailable if data.DATASETS[n].fetchable or n in data.SOURCES]
        raise SystemExit(
            f"data: the notebooks need {', '.join(unavailable)}, with no local copy in {target} and no way to get "
            f"{'it' if len(unavailable) == 1 else 'them'} here: {data.HUB_HOST[0]} cannot be reached, or the session "
            "is offline (ATTN_OFFLINE, HF_DATASETS_OFFLINE, HF_HUB_OFFLINE or ATTN_NO_NETWORK). The book was not "
            "built: no notebook was executed. Provide them: run make test once with internet, which makes the "
            f"local copies; or copy {files} into {target} (or set {data.DATA_DIR_ENV} to a folder "
            "holding them; see the data README)"
            + (f"; or make them on a machine with internet with {', '.join(make)} and copy DIR" if make else "") + ".")
    for line in lines:
        print(f"data: {line}", flush=True)
    return lines


def build_book(profile: str, out: Path, student: bool, strict: bool, jobs: str = "1", root: Path = ROOT,
               draw_figures: bool = True, languages: tuple[str, ...] = ("en", "zh_CN"), switch: bool = False) -> int:
    """Build the book at ``root`` into ``out`` (English) and ``out/zh`` (Chinese); non-zero when
    Sphinx failed or a notebook did not execute.

    The notebooks execute once, for the first edition built; the second reads their outputs from
    the same execution cache. The Chinese edition is built only for the course itself (not the
    student edition, nor the tests' tiny books, which have no translations). The figures of the
    theory pages are drawn from code (book/figures) first, unless ``draw_figures`` is false (the
    test command checks them for drift once and builds twice).
    """
    if root != ROOT or student:
        languages = tuple(lang for lang in languages if lang == "en") or ("en",)
    if root == ROOT:
        ensure_data()  # before anything: a missing dataset stops the build at once, not after every notebook
        copy_mathjax()  # the course's _config.yml points mathjax_path at this copy
        if draw_figures:
            subprocess.run([sys.executable, str(ROOT / "tools" / "figures.py")], check=True, cwd=ROOT)
    write_conf(root)
    env = book_env(profile, root)
    print_estimate(profile, env, root)
    both = switch or set(languages) == set(EDITIONS)  # the language switch: both editions in one site
    code = 0
    for language in languages:
        target = out if language == "en" else out / EDITIONS[language]
        other = ("zh/" if language == "en" else "../") if both else ""
        cmd = sphinx_command(root, target, env["ATTN_NB_CACHE"], student, strict, jobs, language, other)
        code = _run_sphinx(cmd, target, root, env, profile, student, language) or code
    return code


def _run_sphinx(cmd: list[str], out: Path, root: Path, env: dict, profile: str, student: bool, language: str) -> int:
    edition = {"en": "English", "zh_CN": "Chinese"}.get(language, language)
    print(f"Building the book ({edition}): profile {profile}{', student edition' if student else ''} -> {out}", flush=True)
    (out / EXECUTION_REPORT).unlink(missing_ok=True)  # never read the report of an earlier build
    tail = ProgressTail(Path(env["ATTN_PROGRESS_FILE"]))
    tail.start()
    start = time.perf_counter()
    try:
        code = subprocess.call(cmd, cwd=root, env=env)
    finally:
        tail.stopped.set()
        tail.join()
    seconds = time.perf_counter() - start
    failed = report_execution(out, root)
    if code == 0 and failed is None:
        code = 1
    if failed:
        print(f"\nBook build FAILED: {len(failed)} notebook(s) did not execute "
              f"({', '.join(n['source'] for n in failed)}).")
        code = code or 1
    if code == 0:
        (out / ".nojekyll").touch()  # GitHub Pages must serve _static/, _sources/ as they are
        print(f"\nBuilt the {edition} edition in {seconds:.0f} s: {out / 'index.html'}")
        if language == "en":
            print(f"Serve it locally:  python -m http.server --directory {_shown(out, root)} 8000"
                  "   then open http://localhost:8000 (the Chinese edition: /zh/)")
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
    book.add_argument("--no-figures", action="store_true", help="use the committed SVGs without redrawing them")
    book.add_argument("--switch", action="store_true",
                      help="with --language en or zh_CN: the pages link to the other edition all the same (it is "
                           "built by another call into the same OUT, e.g. side by side with this one)")
    book.add_argument("--language", choices=["all", *EDITIONS], default="all",
                      help="the English edition (en), the Chinese one (zh_CN, into OUT/zh) or both (default)")
    book.add_argument("--root", type=Path, default=ROOT, help="the book to build (default: this course; the tests build tiny ones)")
    nb = sub.add_parser("ipynb", help="write .ipynb versions of the notebooks")
    nb.add_argument("--out", type=Path, default=BUILD / "ipynb")
    args = parser.parse_args(argv)
    if args.command == "ipynb":
        for path in write_ipynb(args.out.resolve()):
            print(f"wrote {path}")
        return 0
    profile = args.profile or default_profile()
    root = args.root.resolve()
    out = (args.out or (root / "_build" / ("student/html" if args.student else "html"))).resolve()
    languages = tuple(EDITIONS) if args.language == "all" else (args.language,)
    return build_book(profile, out, args.student, args.strict, args.jobs, root, draw_figures=not args.no_figures,
                      languages=languages, switch=args.switch)


if __name__ == "__main__":
    sys.exit(main())
