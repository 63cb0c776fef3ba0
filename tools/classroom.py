"""Graded assignments: student versions (nbgrader) and sandboxed autograding. Hand-written infrastructure.

The assignments live in ``assignments/<name>.md`` (jupytext MyST, like the notebooks), with nbgrader's
cell metadata: solution cells (``### BEGIN SOLUTION`` ... ``### END SOLUTION``) and test cells with
points, whose ``### BEGIN HIDDEN TESTS`` regions the students never see.

    python tools/classroom.py release [NAME ...] [--out DIR]
        student versions (solutions and hidden tests removed, by nbgrader) -> DIR/student/<name>.ipynb

    python tools/classroom.py grade NAME SUBMISSIONS [--out DIR] [--timeout S] [--jobs N] [--unsafe]
                                    [--roster CSV] [--lms-config TOML] [--no-lms]
        autograde every submitted notebook of assignment NAME in the folder SUBMISSIONS
        (``<student>.ipynb`` or ``<student>/<any>.ipynb``) -> DIR/grades.csv (one row per student,
        a column per test), DIR/feedback.csv (one row per student and test, with the message the
        test gave), DIR/feedback/<student>.html (the student's page: no hidden test's code or inputs),
        DIR/work/<student>.json (everything recorded, for the teacher), and DIR/canvas.csv and
        DIR/moodle.csv for the learning platforms' grade import (``tools/grading/lms.py``, set up in
        ``tools/grading/lms.toml``: titles, ids, and the roster mapping students to the platform's ids).

    python tools/classroom.py check [NAME ...] [--unsafe]
        prove that each assignment grades as intended: solution, blank, plausible wrong answers,
        broken submissions and (assignment 1) the red-team suite of cheating submissions.

Submissions are untrusted code. Each is graded by ``tools/grading/harness.py`` in a process of its
own: the student's cells run in a bubblewrap sandbox (``tools/grading/sandbox.py``: no access to the
repository, the grader's files, other submissions or the network; limits on time, memory, processes
and output), the tests run in the harness, which calls the student's functions across the sandbox
and compares their answers with its own references. Where no sandbox can be made, ``grade`` refuses
unless given ``--unsafe``. Submitted files are read, never modified.

``make release``, ``make grade ASSIGNMENT=... SUBMISSIONS=...`` and ``make check-assignments`` call this file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ROOT / "assignments"
DEFAULT_OUT = ROOT / "_build" / "classroom"
sys.path.insert(0, str(ROOT / "tools" / "grading"))  # the harness, the sandbox and their wire format
PY = sys.executable
STUDENT_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def assignment_names() -> list[str]:
    return sorted(p.stem for p in ASSIGNMENTS.glob("*.md") if p.stem != "README")


def assignment_source(name: str) -> Path:
    path = ASSIGNMENTS / f"{name}.md"
    if not path.is_file():
        raise SystemExit(f"no assignment {name!r}: expected {path.relative_to(ROOT)}; "
                         f"the assignments are {', '.join(assignment_names())}")
    return path


def nbgrader(course: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run one nbgrader command in ``course`` in a new process group (killed whole on timeout)."""
    cmd = [PY, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}", "--log-level=WARN"]
    # its own environment's commands first on PATH (a gradebook, should a command make one, runs `alembic`)
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("OMP_NUM_THREADS", "1")  # small tensors, several submissions at once: no oversubscription
    proc = subprocess.Popen(cmd, cwd=course, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the kernel is in the same group
        out, _ = proc.communicate()
        return subprocess.CompletedProcess(cmd, -9, out + f"\n[timed out after {timeout:.0f} s]")
    return subprocess.CompletedProcess(cmd, proc.returncode, out)


RELEASE_CACHE = ROOT / "_build" / ".cache" / "student-versions"  # nbgrader's output, by its input's digest


def _release_key(source_text: str) -> str:
    import hashlib  # noqa: PLC0415
    from importlib.metadata import version  # noqa: PLC0415

    return hashlib.sha256(f"nbgrader {version('nbgrader')}\n{source_text}".encode()).hexdigest()[:20]


def prepare_course(name: str, course: Path) -> Path:
    """Write the source notebook into an nbgrader course folder and let nbgrader write its student version.
    No gradebook: the course grades with its own harness, and setting one up (alembic) took 7 of 11 s.
    nbgrader's output is kept under ``RELEASE_CACHE`` by the digest of the assignment's source and nbgrader's
    version: the same source is not converted twice (each conversion started nbgrader anew, about 5 s; the
    test command converted each assignment twice)."""
    import jupytext  # noqa: PLC0415  (heavy import, only here)

    source = course / "source" / name / f"{name}.ipynb"
    source.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(assignment_source(name)), source)
    release = course / "release" / name / f"{name}.ipynb"
    # keyed by the text source (the .ipynb written above gets new random cell ids each time)
    cached = RELEASE_CACHE / f"{name}-{_release_key(assignment_source(name).read_text(encoding='utf-8'))}.ipynb"
    if cached.is_file():
        release.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, release)
        return release
    result = nbgrader(course, "generate_assignment", name, "--force", "--no-db")
    if result.returncode != 0 or not release.is_file():
        raise SystemExit(f"nbgrader generate_assignment {name} failed:\n{result.stdout}")
    RELEASE_CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{os.getpid()}")  # written whole, then renamed: atomic
    shutil.copyfile(release, partial)
    os.replace(partial, cached)
    return release


def release(names: list[str], out: Path) -> list[Path]:
    """Student versions of the assignments, in ``out/student``."""
    written = []
    for name in names or assignment_names():
        student = prepare_course(name, out / "nbgrader")
        target = out / "student" / student.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(student, target)
        written.append(target)
        print(f"student version of {name}: {target}")
    return written


def find_submissions(folder: Path) -> dict[str, Path]:
    """``{student id: notebook}`` from ``<student>.ipynb`` files and ``<student>/`` folders holding one
    (the suffix in any case: ``Bob.IPYNB``); every other entry is named on stderr as skipped."""
    if not folder.is_dir():
        raise SystemExit(f"submissions folder {folder} does not exist")
    found: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            notebooks = sorted(p for p in entry.iterdir() if p.suffix.lower() == ".ipynb" and p.is_file())
            if len(notebooks) != 1:
                print(f"skipping {entry}: expected one .ipynb inside, found {len(notebooks)}", file=sys.stderr)
                continue
            student, notebook = entry.name, notebooks[0]
        elif entry.suffix.lower() == ".ipynb":
            student, notebook = entry.stem, entry
        else:
            print(f"skipping {entry}: not a .ipynb notebook nor a folder holding one", file=sys.stderr)
            continue
        student = STUDENT_ID.sub("_", student).strip("_") or "student"
        if student in found:
            raise SystemExit(f"two submissions map to the student id {student!r}: {found[student]} and {notebook}")
        found[student] = notebook
    if not found:
        raise SystemExit(f"no submissions in {folder}: expected <student>.ipynb files or <student>/ folders")
    return found


@dataclass
class TestResult:
    test: str
    points: float
    max_points: float
    message: str


@dataclass
class StudentResult:
    student: str
    submission: Path
    status: str  # "graded", "timed out" or "failed"
    tests: list[TestResult] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0
    cells: dict = field(default_factory=dict)  # the student's cells that raised: {cell id: {error, traceback}}
    output: str = ""  # what the submission printed (the first bytes)
    harness_rss_mib: float = 0.0

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)


def assignment_spec(name: str) -> dict:
    """What the harness needs of an assignment, from its source: each code cell with its kind
    (setup, solution or test), the names a solution cell defines, a test's points and its visible part."""
    import jupytext  # noqa: PLC0415

    from harness import HIDDEN_REGION, defined_names  # noqa: PLC0415

    cells = []
    for number, cell in enumerate(jupytext.read(assignment_source(name)).cells, start=1):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        entry = {"id": meta.get("grade_id", f"cell {number}"), "source": cell.source}
        if meta.get("grade"):
            entry.update(kind="test", points=float(meta.get("points", 0)),
                         visible=HIDDEN_REGION.sub("# (hidden tests)\n", cell.source).rstrip())
        elif meta.get("solution"):
            entry.update(kind="solution", names=defined_names(cell.source))
        else:
            entry.update(kind="setup")
        cells.append(entry)
    return {"name": name, "cells": cells}


class HarnessServer:
    """Each submission's harness, forked from one process that has imported torch and the harness
    (``harness.py --serve``): a submission then costs one torch import (its sandboxed worker's)
    instead of two. The harness is the grader's own code; the student's code runs in the sandbox
    that each forked harness starts, exactly as in a harness started afresh."""

    def __init__(self):
        import threading  # noqa: PLC0415

        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # small tensors, several at once
        self.process = subprocess.Popen([PY, str(ROOT / "tools" / "grading" / "harness.py"), "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.lock = threading.Lock()

    def start(self, args: list[str], log: Path) -> int:
        """Fork a harness for ``args`` (harness.py's command line) writing to ``log``; its pid."""
        with self.lock:
            try:
                self.process.stdin.write(json.dumps({"argv": args, "log": str(log)}) + "\n")
                self.process.stdin.flush()
                line = self.process.stdout.readline()
            except OSError as error:
                line, why = "", str(error)
            else:
                why = f"exit code {self.process.poll()}"
        if not line:
            raise RuntimeError(f"the grader's harness server ended ({why}): see the output above")
        return int(json.loads(line)["pid"])

    @staticmethod
    def wait(pid: int, seconds: float) -> None:
        """Until the forked harness ``pid`` has ended, or ``seconds``: then its session is killed."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return  # ended (the server's kernel reaps it: no zombie keeps the pid)
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # its session: the harness and its sandbox
                return
            time.sleep(0.05)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def grade_one(name: str, spec_file: Path, student: str, submission: Path, work: Path, timeout: float,
              total_timeout: float, unsafe: bool, server: HarnessServer | None = None) -> StudentResult:
    """Grade one submission with the harness (``tools/grading/harness.py``) in a process of its own
    (forked by ``server``, else started afresh): the student's code
    runs in a sandbox, the tests in the harness. The submission is read, never changed, and never
    seen by the other submissions' sandboxes."""
    import tempfile  # noqa: PLC0415

    start = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    result_file = work / f"{student}.json"
    result_file.unlink(missing_ok=True)
    sandbox_dir = Path(tempfile.mkdtemp(prefix=f"attn-grade-{student}-"))
    args = [str(spec_file), str(submission), str(sandbox_dir), str(result_file), f"--cell-timeout={timeout:g}",
            f"--total-timeout={total_timeout:g}"] + (["--unsafe"] if unsafe else [])
    try:
        if server is not None:
            server.wait(server.start(args, work / f"{student}.log"), total_timeout + 60)
        else:
            cmd = [PY, str(ROOT / "tools" / "grading" / "harness.py"), *args]
            env = dict(os.environ, OMP_NUM_THREADS="1")  # small tensors, several submissions at once
            with open(work / f"{student}.log", "wb") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
                try:
                    proc.wait(timeout=total_timeout + 60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)  # the harness's sandbox dies with it (--die-with-parent)
                    proc.wait()
    finally:
        shutil.rmtree(sandbox_dir, ignore_errors=True)
    expected = [c for c in json.loads(spec_file.read_text())["cells"] if c["kind"] == "test"]
    try:
        data = json.loads(result_file.read_text())
    except (OSError, ValueError):
        tail = (work / f"{student}.log").read_text(errors="replace")[-500:]
        tests = [TestResult(t["id"], 0.0, t["points"], "not graded: the grader failed") for t in expected]
        return StudentResult(student, submission, "failed", tests, f"grader error: {tail}", time.perf_counter() - start)
    by_test = {t["test"]: t for t in data.get("tests", [])}
    tests = [TestResult(t["id"], float(by_test.get(t["id"], {}).get("points", 0.0)), t["points"],
                        by_test.get(t["id"], {}).get("message", "not graded")) for t in expected]
    return StudentResult(student, submission, data.get("status", "failed"), tests, "; ".join(data.get("notes", [])),
                         time.perf_counter() - start, data.get("cells", {}), data.get("output", ""),
                         float(data.get("harness_max_rss_mib", 0.0)))


def feedback_page(name: str, spec: dict, result: StudentResult) -> str:
    """The student's feedback: score, each test's points and message, the visible tests' code, the
    errors of the student's own cells and what it printed. Never the hidden tests' code or inputs."""
    from html import escape  # noqa: PLC0415

    total = sum(t.max_points for t in result.tests)
    visible = {c["id"]: c["visible"] for c in spec["cells"] if c["kind"] == "test"}
    rows = "".join(
        f"<tr class=\"{'pass' if t.points >= t.max_points else 'fail'}\"><td>{escape(t.test)}</td>"
        f"<td>{t.points:g} / {t.max_points:g}</td><td><pre>{escape(t.message)}</pre></td></tr>" for t in result.tests)
    tests = "".join(f"<h3>{escape(t)}</h3><pre>{escape(code)}</pre>" for t, code in visible.items())
    cells = "".join(f"<h3>{escape(cell)}</h3><pre>{escape(info.get('error', ''))}\n\n"
                    f"{escape(info.get('traceback', ''))}</pre>" for cell, info in result.cells.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(name)}: feedback for {escape(result.student)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:.5em}}td{{vertical-align:top;padding:.3em}}
td pre{{margin:0}}td:first-child{{white-space:nowrap}}
tr.pass td:nth-child(2){{color:#1a7f37}}tr.fail td:nth-child(2){{color:#b3261e}}</style></head><body>
<h1>{escape(name)}</h1>
<p>Student: <b>{escape(result.student)}</b>. Score: <b>{result.score:g} / {total:g}</b> ({escape(result.status)}).</p>
{f"<p>Grader: {escape(result.detail)}</p>" if result.detail else ""}
<h2>Tests</h2><p>Each test cell scores all its points or none. The grader ran the visible tests below together with
hidden tests of the same kind; a failed hidden test shows its message here, not its code.</p>
<table><tr><th>test</th><th>points</th><th>message</th></tr>{rows}</table>
{f"<h2>Your cells that raised an error</h2>{cells}" if cells else ""}
{f"<h2>What your code printed</h2><pre>{escape(result.output)}</pre>" if result.output.strip() else ""}
<h2>The visible tests</h2>{tests}
</body></html>
"""


def write_tables(results: list[StudentResult], out: Path) -> None:
    """grades.csv and feedback.csv (UTF-8; a cell that a spreadsheet would run as a formula, such as
    a test's message starting with =, is written with a ' before it: lms.spreadsheet_safe)."""
    import lms  # noqa: PLC0415

    tests = [t.test for t in results[0].tests] if results else []
    maxima = {t.test: t.max_points for t in results[0].tests} if results else {}
    grades = [["student", "status", "score", "max_score", *[f"{t} ({maxima[t]:g})" for t in tests],
               "submission", "seconds"]]
    for r in results:
        by_test = {t.test: t.points for t in r.tests}
        grades.append([r.student, r.status, f"{r.score:g}", f"{sum(maxima.values()):g}",
                       *[f"{by_test.get(t, 0):g}" for t in tests], str(r.submission), f"{r.seconds:.1f}"])
    lms.write_csv(out / "grades.csv", grades)
    feedback = [["student", "test", "points", "max_points", "feedback"]]
    for r in results:
        for t in r.tests:
            feedback.append([r.student, t.test, f"{t.points:g}", f"{t.max_points:g}", t.message])
        if r.detail:
            feedback.append([r.student, "(grader)", "", "", r.detail])
    lms.write_csv(out / "feedback.csv", feedback)


def grade(name: str, submissions: Path, out: Path, timeout: float = 60.0, total_timeout: float | None = None,
          jobs: int | None = None, html: bool = True, unsafe: bool = False,
          timeouts: dict[str, float] | None = None, lms_export: bool = True, roster: Path | None = None,
          lms_config: Path | None = None) -> list[StudentResult]:
    """Autograde every submission of ``name`` in ``submissions``, ``jobs`` at a time (default: one per
    CPU core), each in a sandbox (refused where none can be made, unless ``unsafe``); tables and,
    with ``html``, a feedback page per student into ``out``. ``timeouts`` gives some students a cell
    time limit of their own (the self-check's endless loop: it need not burn the full limit); they
    are graded first, so that a long one does not end the run alone. With ``lms_export``, also the
    learning platforms' files (``tools/grading/lms.py``; its settings and ``roster`` are checked
    before any grading)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import lms  # noqa: PLC0415
    import sandbox  # noqa: PLC0415

    timeouts = timeouts or {}
    if not timeout > 0 or (total_timeout is not None and not total_timeout > 0) or not all(
            t > 0 for t in timeouts.values()):
        raise SystemExit(f"time limits must be positive seconds, got timeout={timeout}, total_timeout={total_timeout}"
                         + (f", timeouts={timeouts}" if timeouts else ""))
    if jobs is not None and jobs < 1:
        raise SystemExit(f"jobs must be at least 1, got {jobs}")
    assignment_source(name)  # a clear error for an unknown assignment before any work
    found = find_submissions(submissions)
    problem = sandbox.sandbox_problem()
    if problem and not unsafe:
        raise SystemExit(f"refusing to grade: submissions are untrusted code and {problem}. Without a sandbox a "
                         "submission can read the hidden tests and solutions, change other students' grades and "
                         "leave processes behind. Fix the sandbox, or pass --unsafe to grade submissions you trust.")
    if unsafe:
        print("warning: --unsafe: submissions run WITHOUT a sandbox (only time limits and the harness's checks)",
              file=sys.stderr)
    elif sandbox.process_limit() == "none":
        print("warning: no limit on the number of processes a submission starts (the grader runs as root and "
              f"cannot write {sandbox.PIDS_V1}); memory and time limits still apply", file=sys.stderr)
    export = lms.prepare(name, list(found), lms_config, roster, assignment_names()) if lms_export else None
    out = out.resolve()
    for old in ("work", "feedback"):
        shutil.rmtree(out / old, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("canvas.csv", "moodle.csv"):  # an old run's: written again below, or not at all
        (out / stale).unlink(missing_ok=True)
    spec = assignment_spec(name)
    spec_file = out / "work" / "assignment.json"
    spec_file.parent.mkdir(parents=True)
    spec_file.write_text(json.dumps(spec))
    total_timeout = total_timeout or max(120.0, 10 * timeout)

    server = HarnessServer()

    def one(item: tuple[str, Path]) -> StudentResult:
        result = grade_one(name, spec_file, *item, out / "work", timeouts.get(item[0], timeout), total_timeout, unsafe,
                           server)
        print(f"{result.student:30s} {result.status:10s} {result.score:g}/"
              f"{sum(t.max_points for t in result.tests):g}  ({result.seconds:.1f} s)", flush=True)
        return result

    try:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            order = sorted(found.items(), key=lambda item: item[0] not in timeouts)  # stable: the rest by name
            by_student = {r.student: r for r in pool.map(one, order)}
    finally:
        server.close()
    results = [by_student[student] for student in found]
    write_tables(results, out)
    exported = lms.write(export, lms.grades_from_results(results), out) if export else []
    if html:
        (out / "feedback").mkdir(exist_ok=True)
        for r in results:
            (out / "feedback" / f"{r.student}.html").write_text(feedback_page(name, spec, r))
    print(f"grades: {out / 'grades.csv'}; per-test feedback: {out / 'feedback.csv'}"
          + (f"; feedback pages: {out / 'feedback'}" if html else "")
          + "".join(f"; {path.stem} import: {path}" for path in exported))
    return results


# --- the proof that an assignment grades as intended ------------------------------------------------

def wrong_answers(name: str) -> list[dict]:
    """The plausible wrong answers of ``assignments/<name>.wrong.yml``: name, why, replace, loses, feedback."""
    import yaml  # noqa: PLC0415

    path = ASSIGNMENTS / f"{name}.wrong.yml"
    if not path.is_file():
        raise SystemExit(f"{path.relative_to(ROOT)} is missing: every assignment lists its plausible wrong answers")
    cases = yaml.safe_load(path.read_text()) or []
    for case in cases:
        missing = {"name", "why", "replace", "loses", "feedback"} - set(case)
        if missing:
            raise SystemExit(f"{path.name}: wrong answer {case.get('name', '?')!r} lacks {', '.join(sorted(missing))}")
    return cases


def solution_cells(notebook) -> list:
    return [c for c in notebook.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


def with_replacements(name: str, replace: dict[str, str]):
    """The reference solution with each ``old`` text (found exactly once in the solution cells) replaced."""
    import jupytext  # noqa: PLC0415

    notebook = jupytext.read(assignment_source(name))
    for old, new in replace.items():
        hits = [c for c in solution_cells(notebook) if old in c.source]
        if len(hits) != 1 or hits[0].source.count(old) != 1:
            raise SystemExit(f"{name}.wrong.yml: {old!r} must occur exactly once in the solution cells")
        hits[0].source = hits[0].source.replace(old, new)
    return notebook


def broken(name: str, kind: str):
    """The reference solution made to loop forever, raise, or kill its kernel in its first solution cell."""
    import jupytext  # noqa: PLC0415

    notebook = jupytext.read(assignment_source(name))
    first = solution_cells(notebook)[0]
    prefix = {"loops-forever": "while True:\n    pass\n",
              "raises": "raise RuntimeError('a submission that raises')\n",
              "kills-kernel": "import os\nos._exit(1)\n"}[kind]
    first.source = prefix + first.source
    return notebook


def _serve(text: str):
    """A local HTTP server that answers every GET with ``text`` (the network attack's "internet")."""
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _processes_with(markers: tuple[str, ...]) -> list[str]:
    """Command lines of this machine's processes that contain one of ``markers``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if any(m in line for m in markers):
                found.append(line)
    return found


LOOP_TIMEOUT = 5.0  # seconds: the cell time limit of the self-check's endless loop


def check(name: str, out: Path, timeout: float = 20.0, robustness: bool = True, unsafe: bool = False) -> list[str]:
    """Grade the reference solution, the unchanged student version and every plausible wrong answer
    (and, with ``robustness``, submissions that loop forever, raise, kill their process or are not
    notebooks, and for the first assignment the red-team suite, ``tools/grading/redteam.py``); return
    what did not grade as intended (empty: all is well)."""
    import hashlib  # noqa: PLC0415

    import jupytext  # noqa: PLC0415
    import redteam  # noqa: PLC0415

    out = out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    folder = out / "submissions"
    folder.mkdir(parents=True)
    jupytext.write(jupytext.read(assignment_source(name)), folder / "solution.ipynb")
    student = release([name], out / "release")[0]
    shutil.copyfile(student, folder / "unchanged.ipynb")
    cases = wrong_answers(name)
    for case in cases:
        jupytext.write(with_replacements(name, case["replace"]), folder / f"wrong-{case['name']}.ipynb")
    attacks = redteam.ATTACKS if robustness and name == redteam.ASSIGNMENT else []
    server = None
    if robustness:
        for kind in ("loops-forever", "raises", "kills-kernel"):
            jupytext.write(broken(name, kind), folder / f"{kind}.ipynb")
        (folder / "not-a-notebook.ipynb").write_text("{ this is not JSON")
        other_kernel = jupytext.read(assignment_source(name))
        other_kernel.metadata["kernelspec"] = {"name": "my-laptop-env", "display_name": "My env", "language": "python"}
        jupytext.write(other_kernel, folder / "other-kernel.ipynb")
    if attacks:
        bases = {"blank": "unchanged", "solution": "solution"}
        solution = json.loads((folder / "solution.ipynb").read_text())
        server = _serve(redteam.solution_code(solution))
        url = f"http://127.0.0.1:{server.server_address[1]}/solution.py"
        for attack in attacks:
            base = json.loads((folder / f"{bases.get(attack.base, attack.base)}.ipynb").read_text())
            (folder / f"attack-{attack.name}.ipynb").write_text(
                redteam.dumps(redteam.attack_notebook(attack, base, name, str(ROOT), url)))
    protected = [*folder.iterdir(), *ASSIGNMENTS.iterdir()]
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in protected if p.is_file()}
    try:
        # the endless loop is interrupted after LOOP_TIMEOUT s, not the full limit: any limit shows the
        # interruption, and the honest cells after it still run within the usual one after the restart
        graded = grade(name, folder, out / "grades", timeout, html=robustness, unsafe=unsafe,
                       timeouts={"loops-forever": min(timeout, LOOP_TIMEOUT)} if robustness else None,
                       lms_export=False)  # its students are no class: no roster to map them
    finally:
        if server is not None:
            server.shutdown()
    results = {r.student: r for r in graded}
    grades_csv = (out / "grades" / "grades.csv").read_text()

    problems = []
    full = sum(t.max_points for t in results["solution"].tests)
    if results["solution"].score != full or results["solution"].status != "graded":
        problems.append(f"the reference solution scores {results['solution'].score:g}/{full:g}")
    if results["unchanged"].score != 0 or results["unchanged"].status != "graded":
        problems.append(f"the unchanged student version scores {results['unchanged'].score:g} "
                        f"({results['unchanged'].status})")
    for case in cases:
        result = results[f"wrong-{case['name']}"]
        lost = sorted(t.test for t in result.tests if t.points < t.max_points)
        if lost != sorted(case["loses"]):
            problems.append(f"wrong answer {case['name']!r} loses {lost}, expected {sorted(case['loses'])}")
        messages = {t.test: t.message for t in result.tests}
        for test, hint in case["feedback"].items():
            if hint.lower() not in messages.get(test, "").lower():
                problems.append(f"wrong answer {case['name']!r}: the feedback of {test} does not say "
                                f"{hint!r}: {messages.get(test)!r}")
    if robustness:
        looping = results["loops-forever"]
        if looping.status != "graded" or "interrupted" not in looping.detail or looping.score >= full:
            problems.append(f"the endless loop was not interrupted and graded: {looping.status}, {looping.detail!r}")
        if results["other-kernel"].score != full:
            problems.append(f"the solution saved with another kernel name scores {results['other-kernel'].score:g}")
        for kind, says in (("raises", ""), ("kills-kernel", "exited with code 1")):
            r = results[kind]
            if r.status != "graded" or r.score >= full or says not in r.detail + str(r.cells):
                problems.append(f"the {kind} submission: {r.status}, {r.score:g}, {r.detail!r}")
        bad = results["not-a-notebook"]
        if bad.status == "graded" or bad.score != 0 or "not a notebook" not in bad.detail:
            problems.append(f"the not-a-notebook submission was not recorded as failing: {bad.status}")
    if attacks:
        problems += _check_attacks(attacks, results, cases, out / "grades", grades_csv)
    for path, digest in digests.items():
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"a file of the grader or a submission was changed: {path}")
    (out / "seconds.json").write_text(json.dumps({r.student: round(r.seconds, 2) for r in graded}, indent=1))
    print(f"check {name}: " + ("all submissions graded as intended" if not problems else
                               "PROBLEMS:\n  " + "\n  ".join(problems)))
    return problems


ATTACK_EXTRA_S = 15.0  # seconds an attack may add to grading before the check warns (seen: 2.6 s at most)


def _check_attacks(attacks: list, results: dict, cases: list[dict], grades: Path, grades_csv: str) -> list[str]:
    """Each red-team submission scored exactly as its honest base, and left nothing behind."""
    import redteam  # noqa: PLC0415
    import sandbox  # noqa: PLC0415

    problems = []
    tests = [t.test for t in results["solution"].tests]
    honest = {"blank": set(tests), "solution": set()}
    honest |= {f"wrong-{c['name']}": set(c["loses"]) for c in cases}
    print(f"\n{'attack':20s} {'score':>7s} {'honest':>7s} {'seconds':>8s}  what it tries")
    for attack in attacks:
        result = results[f"attack-{attack.name}"]
        lost = {t.test for t in result.tests if t.points < t.max_points}
        expected = sum(t.max_points for t in result.tests if t.test not in honest[attack.base])
        print(f"{attack.name:20s} {result.score:7g} {expected:7g} {result.seconds:8.1f}  {attack.what}")
        if lost != honest[attack.base] or result.status != "graded":
            problems.append(f"attack {attack.name!r} scores {result.score:g} ({result.status}), its honest "
                            f"score is {expected:g}: it lost {sorted(lost)}")
        if result.seconds > results["solution"].seconds + ATTACK_EXTRA_S:  # a time, so a warning, not a failure
            print(f"warning: attack {attack.name!r} took {result.seconds:.1f} s to grade, the solution "
                  f"{results['solution'].seconds:.1f} s: more than {ATTACK_EXTRA_S:g} s longer (a busy machine, or an "
                  "attack that stretches grading)")
    edited = results.get("attack-edited-metadata")
    if edited is not None and "locked cells changed" not in edited.detail:
        problems.append(f"the edited test cells were not reported to the teacher: {edited.detail!r}")
    for honest_one in ("solution", "unchanged"):
        if "locked cells changed" in results[honest_one].detail:
            problems.append(f"the {honest_one} submission is reported as changing locked cells: "
                            f"{results[honest_one].detail!r}")
    printer = results.get("attack-print-100mb")
    if printer is not None and (printer.harness_rss_mib > 500 or len(printer.output) > 2**20):
        problems.append(f"the 100 MB print: harness {printer.harness_rss_mib:.0f} MiB, "
                        f"{len(printer.output):,} bytes of output kept")
    grader_rss = sandbox.peak_memory_mib()
    if grader_rss > 500:
        problems.append(f"the grader's own memory reached {grader_rss:.0f} MiB")
    if any(a.name == "daemon" for a in attacks):
        time.sleep(redteam.DAEMON_DELAY + 2)  # the daemon's moment to rewrite grades.csv, if it lived
        if (grades / "grades.csv").read_text() != grades_csv:
            problems.append("grades.csv was rewritten after grading (a daemon survived)")
        survivors = _processes_with(redteam.DAEMON_MARKERS)
        if survivors:
            problems.append(f"processes of a submission outlived its grading: {survivors}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="write the student versions")
    rel.add_argument("names", nargs="*", help=f"assignments (default: all: {', '.join(assignment_names())})")
    rel.add_argument("--out", type=Path, default=DEFAULT_OUT)
    grd = sub.add_parser("grade", help="autograde a folder of submitted notebooks")
    grd.add_argument("name", help="the assignment")
    grd.add_argument("submissions", type=Path, help="folder of <student>.ipynb files or <student>/ folders")
    grd.add_argument("--out", type=Path, default=None, help="default: _build/classroom/grades/<name>")
    grd.add_argument("--timeout", type=float, default=60.0, help="seconds per cell (default 60)")
    grd.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: CPU cores)")
    grd.add_argument("--no-html", action="store_true", help="skip the feedback pages")
    grd.add_argument("--unsafe", action="store_true",
                     help="grade without a sandbox where none can be made (only for submissions you trust)")
    grd.add_argument("--roster", type=Path, default=None,
                     help="CSV mapping grader ids to Canvas/Moodle ids (default: roster.path of the LMS settings)")
    grd.add_argument("--lms-config", type=Path, default=None,
                     help="settings of canvas.csv and moodle.csv (default: tools/grading/lms.toml)")
    grd.add_argument("--no-lms", action="store_true", help="write no canvas.csv and moodle.csv")
    chk = sub.add_parser("check", help="prove that assignments grade as intended (what CI runs)")
    chk.add_argument("names", nargs="*", help="assignments (default: all)")
    chk.add_argument("--out", type=Path, default=DEFAULT_OUT / "check")
    chk.add_argument("--timeout", type=float, default=20.0, help="seconds per cell (default 20)")
    chk.add_argument("--no-robustness", action="store_true",
                     help="skip the submissions that loop forever, raise, kill the kernel or are not notebooks")
    chk.add_argument("--unsafe", action="store_true", help="without the sandbox: shows what the red team gets through")
    args = parser.parse_args(argv)
    if args.command == "release":
        release(args.names, args.out)
    elif args.command == "check":
        problems = [p for name in (args.names or assignment_names())
                    for p in check(name, args.out / name, args.timeout, not args.no_robustness, args.unsafe)]
        return 1 if problems else 0
    else:
        grade(args.name, args.submissions, args.out or DEFAULT_OUT / "grades" / args.name, args.timeout,
              jobs=args.jobs, html=not args.no_html, unsafe=args.unsafe, lms_export=not args.no_lms,
              roster=args.roster, lms_config=args.lms_config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
