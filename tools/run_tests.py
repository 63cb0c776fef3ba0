"""The course's test command (`make test`, called by .ci/run). Hand-written infrastructure.

Steps, each timed:
  1. system packages: bubblewrap and a font with Chinese characters, then headless Chromium beside the
     next steps until the builds need it (installed from Debian's packages where missing)
  2. data: the local copies the offline tests need, checked against their SHA-256; when missing, fetched
     and built while the network is still allowed (online), else a stop with the way to provide them
  3. the export check, then the unit tests (pytest -n 2: one worker per core; sockets blocked except
     loopback) beside the Chinese edition's translations check (tools/translations.py check)
  4. every notebook under nbval, smoke profile, network off, two kernels side by side (pytest -n 2
     --dist loadfile): each notebook executes once, and nbval writes every notebook that passed whole
     into the strict build's execution cache (tools/nbval_cache.py); a notebook with a failing cell
     fails nbval and is executed again, and named, by the build
  5. the strict builds (-W -n --keep-going), rendering the notebooks from that cache: the English edition
     beside the student edition, then the Chinese one beside the English PDF's printing (tools/pdf.py, from
     the English build), then the headless-browser check of the built pages (pytest -m browser) while the
     PDF prints; then the PDF's checks (pytest -m pdf; make pdf prints the Chinese one too, and the same
     checks read it)
Ends with the per-step table (with the virtual environment's setup when this command made it), the
ten slowest tests, the benchmarks against their budgets ("OVER BUDGET" is loud but never fails: tests
assert behaviour, times are reported) and "course: N passed, N failed"; all of it also goes to
_build/test-reports/timings.json.

    python tools/run_tests.py            # the gate (make test)
    python tools/run_tests.py --quick    # the inner loop (make quick): export check, the fast unit tests
                                         # and beside them the notebooks changed since HEAD (else notebook 0)
    python tools/run_tests.py --bench    # only the benchmark tests, and their table (make bench)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from browser_check import find_chromium  # tools/ is on sys.path: this file runs as a script

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
REPORTS = BUILD / "test-reports"
PY = sys.executable
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # the book's (tools/build.py): figures as PNGs
# Rough nbval seconds per notebook (smoke, one thread, this 2-core machine): the longest start first, so
# that the two kernels end together. Only an order: a notebook missing here goes last.
NOTEBOOK_SECONDS = {"03_multihead_self_attention": 67, "09_comparison": 38, "13_decoder_lm": 31, "11_translation": 28, "12_transformer": 20,
                    "01_text_bilstm": 26, "02_attention_pooling": 25, "05_stacked_attention": 21,
                    "06_hierarchical_attention": 18, "10_attention_at_scale": 17, "04_differential_attention": 16,
                    "00_setup": 13, "07_co_attention": 12, "08_bilinear_attention": 11, "14_recall": 18}


def env_offline() -> dict:
    env = dict(os.environ)
    env.update({
        "ATTN_PROFILE": "smoke",
        "ATTN_NO_NETWORK": "1",  # kernels refuse non-loopback connections (attn_tutorial._netguard)
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TQDM_DISABLE": "1",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
    })
    return env


def apt_install(package: str, why: str, fallback: str) -> None:
    """Install a Debian package with apt-get (as root, or with sudo -n), or stop saying what to do."""
    apt = shutil.which("apt-get")
    if apt is None:
        raise SystemExit(f"{package} is needed {why}: {fallback}")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print(f"Installing Debian's {package} {why} ...", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    updates = [] if _APT["updated"] else [sudo + [apt, "update", "-qq"]]  # the package lists: once per run
    for cmd in (*updates, sudo + [apt, "install", "-y", "-qq", package]):
        if subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL) != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed: {fallback}")
    _APT["updated"] = True


_APT = {"updated": False}  # apt-get update has run in this command (installs run one at a time)


class InBackground(threading.Thread):
    """A function run beside the next steps; :meth:`result` waits for it and re-raises its error."""

    def __init__(self, function):
        super().__init__(daemon=True)
        self.function, self.value, self.error, self.seconds = function, None, None, 0.0

    def run(self) -> None:
        start = time.perf_counter()
        try:
            self.value = self.function()
        except BaseException as error:  # noqa: BLE001 (SystemExit too: re-raised by result())
            self.error = error
        self.seconds = time.perf_counter() - start

    def result(self):
        self.join()
        if self.error is not None:
            raise self.error
        return self.value


def ensure_chromium() -> str:
    path = find_chromium(required=False)
    if path:
        return path
    apt_install("chromium", "for the browser check", "install chromium yourself or set CHROMIUM=/path/to/chromium")
    path = find_chromium(required=False)
    if path is None:
        raise SystemExit("chromium was installed but is not on PATH; set CHROMIUM=/path/to/chromium")
    return path


def ensure_bubblewrap() -> None:
    """bubblewrap sandboxes the graded submissions (tools/grading/sandbox.py); the tests grade some."""
    if not shutil.which("bwrap"):
        apt_install("bubblewrap", "for the grading sandbox", "install bubblewrap (bwrap) yourself")


def ensure_cjk_font() -> None:
    """Chapter 11's figures label attention maps with Chinese characters: matplotlib needs a font that
    has them (the SVGs embed the glyphs as paths, so readers of the book need none)."""
    listed = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True) if shutil.which("fc-list") else None
    if listed is None or not listed.stdout.strip():
        apt_install("fonts-wqy-microhei", "for the Chinese labels of chapter 11's figures",
                    "install a font with Chinese characters (Debian: fonts-wqy-microhei or fonts-noto-cjk)")


def junit_counts(path: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a pytest junit XML file."""
    if not path.is_file():
        return 0, 1, 0
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - failed - skipped, failed, skipped


def notebook_durations(path: Path) -> dict[str, float]:
    times: dict[str, float] = defaultdict(float)
    if path.is_file():
        for case in ET.parse(path).getroot().iter("testcase"):
            notebook = case.get("file") or case.get("classname", "?")
            times[Path(notebook.split("::")[0]).name] += float(case.get("time", 0))
    return dict(times)


def slowest_tests(path: Path, n: int = 10) -> list[tuple[str, float]]:
    """The ``n`` slowest test cases of a junit XML file (setup included, as pytest's junit counts it)."""
    if not path.is_file():
        return []
    cases = [(f"{case.get('classname', '')}::{case.get('name', '')}", float(case.get("time", 0)))
             for case in ET.parse(path).getroot().iter("testcase")]
    return sorted(cases, key=lambda c: -c[1])[:n]


def benchmarks(path: Path) -> list[dict]:
    """Rows of the benchmark table from the tests' report lines: each time with a budget, and each
    group's total against the group's budget."""
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [{"name": r["name"], "seconds": r["seconds"], "budget_s": r["budget_s"]}
            for r in lines if r.get("budget_s") is not None]
    groups: dict[str, dict] = {}
    for r in lines:
        if r.get("group"):
            group = groups.setdefault(r["group"], {"name": r["group"], "seconds": 0.0,
                                                   "budget_s": r.get("group_budget_s"), "parts": 0})
            group["seconds"] = round(group["seconds"] + r["seconds"], 2)
            group["parts"] += 1
    return rows + list(groups.values())


def print_benchmarks(rows: list[dict]) -> list[dict]:
    """Print the benchmark table; return the rows over budget (loud, never a failure)."""
    over = [r for r in rows if r["budget_s"] is not None and r["seconds"] > r["budget_s"]]
    print("\n=== benchmarks (times against budgets: reported, never asserted) ===")
    for r in rows:
        flag = "OVER BUDGET" if r in over else "ok"
        parts = f" ({r['parts']} tests)" if r.get("parts") else ""
        print(f"  {flag:11s} {r['name'] + parts:70s} {r['seconds']:7.1f} s  (budget {r['budget_s']:g} s)")
    if over:
        print("\n" + "!" * 78 + f"\n!!! {len(over)} benchmark(s) OVER BUDGET: " + "; ".join(r["name"] for r in over)
              + "\n!!! (a busy or slower machine, or a slower change: compare with the table above; CI does not fail)\n"
              + "!" * 78)
    return over


def busy_core_seconds() -> float | None:
    """Seconds of CPU time the whole machine has spent busy since boot (all cores; Linux's /proc/stat),
    or None elsewhere. Two readings bound what a step cost: on two cores, a command that keeps the cores
    busy for N core-seconds cannot take less than N / 2 seconds of wall time."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def setup_seconds() -> float | None:
    """Seconds the Makefile's setup took, when this invocation of `make test` made the environment."""
    path = ROOT / ".venv" / ".setup-seconds"
    if not path.is_file() or time.time() - path.stat().st_mtime > 60:
        return None
    try:
        return float(path.read_text().strip())
    except ValueError:
        return None


def changed_notebooks() -> list[Path]:
    """The notebooks changed since HEAD (staged, unstaged or new), for the quick loop."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "notebooks"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    paths = [ROOT / line[3:].split(" -> ")[-1].strip() for line in out.splitlines()]
    return sorted(p for p in paths if p.suffix == ".md" and p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the inner loop: export check, fast unit tests, changed notebooks")
    mode.add_argument("--bench", action="store_true", help="only the benchmark tests and their table")
    args = parser.parse_args(argv)

    REPORTS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    busy_at_start = busy_core_seconds()
    steps: list[tuple[str, float, bool]] = []
    totals = [0, 0, 0]
    bench_file = REPORTS / "benchmarks.jsonl"
    bench_file.unlink(missing_ok=True)

    def run(name: str, cmd: list[str], env: dict | None = None, junit: Path | None = None) -> bool:
        print(f"\n=== {name} ===\n$ {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd, cwd=ROOT, env=env)
        return record(name, code, time.perf_counter() - start, junit)

    def start_in_background(name: str, cmd: list[str], env: dict) -> tuple:
        """Start a step whose output goes to a log, printed when :func:`finish` collects it."""
        log_path = REPORTS / f"{name.split()[0]}.log"
        log = open(log_path, "w")
        print(f"\n=== {name} (in the background, beside the next step; output below when it ends) ===\n"
              f"$ {' '.join(cmd)}", flush=True)
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        ended: list[float] = []  # when it ended, not when it was collected: the table shows its own time
        waiter = threading.Thread(target=lambda: (process.wait(), ended.append(time.perf_counter())), daemon=True)
        waiter.start()
        return name, process, log, log_path, time.perf_counter(), waiter, ended

    def finish(handle: tuple, junit: Path | None = None) -> bool:
        name, process, log, log_path, started_at, waiter, ended = handle
        code = process.wait()
        waiter.join()
        seconds = ended[0] - started_at
        log.close()
        print(f"\n=== {name}: output ===\n{log_path.read_text()}", flush=True)
        return record(name, code, seconds, junit)

    def record(name: str, code: int, seconds: float, junit: Path | None) -> bool:
        ok = code == 0
        if junit is not None:
            passed, failed, skipped = junit_counts(junit)
            if not ok and failed == 0:
                failed = 1  # the runner itself failed (collection error, crash)
        else:
            passed, failed, skipped = (1, 0, 0) if ok else (0, 1, 0)
        totals[0] += passed
        totals[1] += failed
        totals[2] += skipped
        steps.append((name, seconds, ok))
        return ok

    if (seconds := setup_seconds()) is not None:
        steps.append(("setup: virtual environment (make)", seconds, True))
    start = time.perf_counter()
    ensure_bubblewrap()
    ensure_cjk_font()
    steps.append(("system packages (bubblewrap, a Chinese font)", time.perf_counter() - start, True))
    # Chromium (the biggest package) is needed only by the PDF and the browser check: installed, where
    # missing, beside the unit tests and nbval, after the two packages above (apt takes one at a time)
    chromium_install = None if (args.quick or args.bench) else InBackground(ensure_chromium)
    if chromium_install is not None:
        chromium_install.start()

    # the data, while the network may still be used: the tests and notebooks run without it
    print("\n=== data ===", flush=True)
    start = time.perf_counter()
    from attn_tutorial.data import DataNotFoundError, prepare_test_data  # noqa: PLC0415

    try:
        data_dir, lines = prepare_test_data()
    except DataNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        if chromium_install is not None:
            chromium_install.join()  # no apt-get left running behind this command
        return 2
    print("\n".join(lines), flush=True)
    steps.append(("data (local copies, checksums)", time.perf_counter() - start, True))

    env = env_offline()
    env["ATTN_DATA_DIR"] = str(data_dir)
    env["ATTN_BENCH_REPORT"] = str(bench_file)
    socket_guard = ["--allow-unix-socket", "--allow-hosts=127.0.0.1,::1,localhost"]
    # one worker per core; worksteal: a worker that runs out of tests takes some of the other one's
    workers = ["-n", os.environ.get("ATTN_TEST_WORKERS", "2"), "--dist", "worksteal"]
    unit_xml = REPORTS / "unit.xml"
    pytest_unit = [PY, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", *socket_guard, *workers,
                   f"--junitxml={unit_xml}"]

    if args.bench:
        run("benchmark tests", pytest_unit[:4] + ["-m", "benchmark"] + pytest_unit[4:], env, unit_xml)
        return report(steps, totals, unit_xml, None, bench_file, started, busy_at_start)

    run("export check", [PY, "-m", "attn_tutorial.export", "--check"], env)
    # the Chinese edition follows the English (every message translated, faithfully): a single-threaded
    # check, beside the unit tests
    translations = None if args.quick else start_in_background(
        "translations check (Chinese edition)", [PY, "tools/translations.py", "check"], env)
    ipynb_dir = BUILD / "ipynb"
    shutil.rmtree(ipynb_dir, ignore_errors=True)
    run("notebooks to .ipynb", [PY, "tools/build.py", "ipynb", "--out", str(ipynb_dir)], env)
    nb_xml = REPORTS / "nbval.xml"
    # one thread per kernel; figures drawn as the book draws them (inline PNGs, not Agg's nothing)
    nb_env = dict(env, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND=INLINE_BACKEND,
                  PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH")])))
    nbval_cmd = [PY, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=600", "-q",
                 "-p", "no:cacheprovider", "--rootdir", str(ipynb_dir), f"--junitxml={nb_xml}", "-o", "junit_family=xunit1"]
    quick_nbval = None
    if args.quick:
        # the changed notebooks' kernel beside the fast unit tests (much of their time is start-up, not CPU)
        notebooks = [ipynb_dir / (p.stem + ".ipynb") for p in changed_notebooks()] or sorted(ipynb_dir.glob("00_*.ipynb"))
        quick_nbval = start_in_background("nbval (smoke): " + ", ".join(p.stem for p in notebooks),
                                          nbval_cmd[:3] + [str(p) for p in notebooks] + nbval_cmd[3:], nb_env)

    marker = "not browser and not pdf and not slow" if args.quick else "not browser and not pdf"
    run("unit tests" + (" (fast ones)" if args.quick else ""), pytest_unit[:4] + ["-m", marker] + pytest_unit[4:],
        env, unit_xml)
    if translations is not None:
        finish(translations)
    if quick_nbval is not None:
        finish(quick_nbval, nb_xml)
        return report(steps, totals, unit_xml, nb_xml, bench_file, started, busy_at_start)

    # Each notebook executes once: nbval runs it (two kernels side by side, one per core, each notebook's
    # cells on one worker) and writes every notebook that passed whole, with its outputs, into the strict
    # build's execution cache (tools/nbval_cache.py), so that the builds below render it without executing
    # it again. A notebook with a failing cell is not cached: nbval fails, and the build executes it again
    # and names it in its execution report. A model two notebooks train is trained by one kernel while the
    # other waits for its checkpoint (attn_tutorial.runs.exclusive).
    shared_cache = BUILD / ".jupyter_cache" / "smoke"  # tools/build.py's cache for the smoke profile
    notebook_files = sorted(ipynb_dir.glob("*.ipynb"), key=lambda p: -NOTEBOOK_SECONDS.get(p.stem, 0))
    run("nbval (smoke), 2 kernels; fills the build's execution cache",
        nbval_cmd[:3] + [str(p) for p in notebook_files] + nbval_cmd[3:]
        + ["-n", os.environ.get("ATTN_TEST_WORKERS", "2"), "--dist", "loadfile", "-p", "nbval_cache",
           "--nbval-cache", str(shared_cache), "--nbval-sources", str(ROOT / "notebooks")], nb_env, nb_xml)

    if chromium_install is not None:
        env["CHROMIUM"] = chromium_install.result()
        steps.append(("system package chromium (found or installed beside the steps above)",
                      chromium_install.seconds, True))
    # the strict builds (each renders from the cache nbval filled): the English edition beside the student
    # edition; then the English PDF, printed from the English build's environment (nothing read again),
    # beside the Chinese edition and then the browser check of all three; then the PDF's checks
    one_thread = dict(env, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND=INLINE_BACKEND)
    site, student = BUILD / "test" / "html", BUILD / "test-student" / "html"
    strict = [PY, "tools/build.py", "book", "--profile", "smoke", "--strict", "--no-figures"]
    student_build = start_in_background("student book build, strict (smoke)", strict + ["--student", "--out", str(student)],
                                        one_thread)
    run("book build, strict (smoke, English)", strict + ["--language", "en", "--switch", "--out", str(site)], one_thread)
    pdf_dir = BUILD / "test-pdf"
    # (the English PDF only: the Chinese one is printed by the same code from the same kind of page, and
    # would add minutes; make pdf prints both, and the same tests read whichever exist)
    pdf_build = start_in_background("pdf edition (smoke, English)", [
        PY, "tools/pdf.py", "--profile", "smoke", "--language", "en", "--out", str(pdf_dir), "--no-publish",
        "--from-build", str(site)], one_thread)
    run("book build, strict (smoke, Chinese)", strict + ["--language", "zh_CN", "--switch", "--out", str(site)],
        one_thread)
    browser_xml, pdf_xml = REPORTS / "browser.xml", REPORTS / "pdf.xml"
    env_browser = dict(env, ATTN_SITE=str(site), ATTN_STUDENT_SITE=str(student), ATTN_PDF_DIR=str(pdf_dir))
    browser = [PY, "-m", "pytest", "tests", "-m", "browser", "-q", "-p", "no:cacheprovider", *socket_guard]
    finish(student_build)
    run("browser check", browser + [f"--junitxml={browser_xml}"], env_browser, browser_xml)
    finish(pdf_build)
    run("pdf check", [PY, "-m", "pytest", "tests", "-m", "pdf", "-q", "-p", "no:cacheprovider", *socket_guard,
                      f"--junitxml={pdf_xml}"], env_browser, pdf_xml)
    return report(steps, totals, unit_xml, nb_xml, bench_file, started, busy_at_start)


def report(steps: list, totals: list, unit_xml: Path, nb_xml: Path | None, bench_file: Path, started: float,
           busy_at_start: float | None = None) -> int:
    """Print and write (``_build/test-reports/timings.json``) where the time went; the exit code."""
    notebooks = notebook_durations(nb_xml) if nb_xml is not None else {}
    if notebooks:
        print("\n=== per-notebook nbval time (smoke profile) ===")
        for notebook, seconds in sorted(notebooks.items()):
            print(f"  {notebook:40s} {seconds:7.1f} s")
    slowest = slowest_tests(unit_xml)
    print("\n=== the ten slowest unit tests ===")
    for name, seconds in slowest:
        print(f"  {name:96s} {seconds:7.1f} s")
    rows = benchmarks(bench_file)
    over = print_benchmarks(rows) if rows else []
    wall = time.perf_counter() - started
    print("\n=== steps ===")
    for name, seconds, ok in steps:
        print(f"  {'ok  ' if ok else 'FAIL'} {name:44s} {seconds:7.1f} s")
    side_by_side = any(name.startswith("book build") for name, _, _ in steps)
    print(f"  wall time of this command {wall:.0f} s" + (" (the translations check beside the unit tests, the "
                                                           "builds side by side, the PDF beside the Chinese build and "
                                                           "the browser check)" if side_by_side else ""))
    busy_now = busy_core_seconds()
    busy = None if busy_at_start is None or busy_now is None else busy_now - busy_at_start
    if busy is not None:
        cores = os.cpu_count() or 1
        print(f"  the machine's cores were busy for {busy:.0f} core-seconds ({busy / max(wall, 1e-9) / cores:.0%} of "
              f"{cores} cores over the wall time): no schedule of this work on {cores} cores ends before "
              f"{busy / cores:.0f} s")
    passed, failed, skipped = totals
    print(f"\ncourse: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    timings = {"steps": [{"step": n, "seconds": round(s, 1), "ok": ok} for n, s, ok in steps],
               "wall_s": round(wall, 1), "busy_core_s": None if busy is None else round(busy, 1), "slowest_unit_tests": [{"test": n, "seconds": s} for n, s in slowest],
               "notebooks_s": {k: round(v, 1) for k, v in sorted(notebooks.items())},
               "benchmarks": rows, "over_budget": [r["name"] for r in over],
               "passed": passed, "failed": failed, "skipped": skipped, "cores": os.cpu_count()}
    (REPORTS / "timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    print(f"timings: {(REPORTS / 'timings.json').relative_to(ROOT)}")
    return 0 if failed == 0 and all(ok for _, _, ok in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
