"""The course's test command (`make test`, called by .ci/run). Hand-written infrastructure.

Steps, each timed:
  1. headless Chromium and bubblewrap present (installed from Debian's packages where missing)
  2. unit tests (pytest tests/, sockets blocked except loopback)
  3. every notebook under nbval, smoke profile, network off; per-notebook durations
  4. strict book build (-W -n --keep-going), smoke profile, side by side with step 3 (one thread
     each), then the student edition
  5. headless-browser check of the built pages (pytest -m browser)
Ends with one line "course: N passed, N failed".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from browser_check import find_chromium  # tools/ is on sys.path: this file runs as a script

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
REPORTS = BUILD / "test-reports"
PY = sys.executable


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
    for cmd in (sudo + [apt, "update", "-qq"], sudo + [apt, "install", "-y", "-qq", package]):
        if subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL) != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed: {fallback}")


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


def main() -> int:
    REPORTS.mkdir(parents=True, exist_ok=True)
    steps: list[tuple[str, float, bool]] = []
    totals = [0, 0, 0]

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
        return name, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log, \
            log_path, time.perf_counter()

    def finish(handle: tuple, junit: Path | None = None) -> bool:
        name, process, log, log_path, started = handle
        code = process.wait()
        seconds = time.perf_counter() - started
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

    chromium = ensure_chromium()
    ensure_bubblewrap()
    env = env_offline()
    env["CHROMIUM"] = chromium
    socket_guard = ["--allow-unix-socket", "--allow-hosts=127.0.0.1,::1,localhost"]

    run("export check", [PY, "-m", "attn_tutorial.export", "--check"], env)
    unit_xml = REPORTS / "unit.xml"
    run("unit tests", [PY, "-m", "pytest", "tests", "-m", "not browser", "-q", "-p", "no:cacheprovider", *socket_guard,
                       "--durations=15", f"--junitxml={unit_xml}"], env, unit_xml)  # the slowest, for the time budget

    ipynb_dir = BUILD / "ipynb"
    shutil.rmtree(ipynb_dir, ignore_errors=True)
    run("notebooks to .ipynb", [PY, "tools/build.py", "ipynb", "--out", str(ipynb_dir)], env)
    nb_xml = REPORTS / "nbval.xml"
    # nbval and the strict book build execute the same notebooks independently: side by side, one
    # thread each, they share the two cores (each alone leaves one mostly idle).
    one_thread = dict(env, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    nbval = start_in_background(
        "nbval (smoke)", [PY, "-m", "pytest", str(ipynb_dir), "--nbval-lax", "--nbval-current-env",
                          "--nbval-cell-timeout=600", "-q", "-p", "no:cacheprovider", "--rootdir", str(ipynb_dir),
                          f"--junitxml={nb_xml}", "-o", "junit_family=xunit1"], one_thread)

    site, student = BUILD / "test" / "html", BUILD / "test-student" / "html"
    run("book build, strict (smoke)", [PY, "tools/build.py", "book", "--profile", "smoke", "--strict",
                                       "--no-figures", "--out", str(site)], one_thread)
    finish(nbval, nb_xml)
    run("student book build, strict (smoke)", [PY, "tools/build.py", "book", "--profile", "smoke", "--strict",
                                               "--no-figures", "--student", "--out", str(student)], env)
    browser_xml = REPORTS / "browser.xml"
    env_browser = dict(env, ATTN_SITE=str(site), ATTN_STUDENT_SITE=str(student))
    run("browser check", [PY, "-m", "pytest", "tests", "-m", "browser", "-q", "-p", "no:cacheprovider",
                          *socket_guard, f"--junitxml={browser_xml}"],
        env_browser, browser_xml)

    print("\n=== per-notebook nbval time (smoke profile) ===")
    for notebook, seconds in sorted(notebook_durations(nb_xml).items()):
        print(f"  {notebook:40s} {seconds:7.1f} s")
    print("\n=== steps ===")
    for name, seconds, ok in steps:
        print(f"  {'ok  ' if ok else 'FAIL'} {name:40s} {seconds:7.1f} s")
    print(f"  total {sum(s for _, s, _ in steps):.0f} s")
    passed, failed, skipped = totals
    print(f"\ncourse: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and all(ok for _, _, ok in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
