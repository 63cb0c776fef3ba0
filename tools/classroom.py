"""Graded assignments with nbgrader: student versions and autograding. Hand-written infrastructure.

The assignments live in ``assignments/<name>.md`` (jupytext MyST, like the notebooks), with nbgrader's
cell metadata: solution cells (``### BEGIN SOLUTION`` ... ``### END SOLUTION``) and test cells with
points, whose ``### BEGIN HIDDEN TESTS`` regions the students never see.

    python tools/classroom.py release [NAME ...] [--out DIR]
        student versions (solutions and hidden tests removed) -> DIR/student/<name>.ipynb

    python tools/classroom.py grade NAME SUBMISSIONS [--out DIR] [--timeout S]
        autograde every submitted notebook of assignment NAME in the folder SUBMISSIONS
        (``<student>.ipynb`` or ``<student>/<any>.ipynb``) -> DIR/grades.csv (one row per student,
        a column per test), DIR/feedback.csv (one row per student and test, with the message the
        test gave) and DIR/feedback/<student>.html (nbgrader's feedback page).

Each submission is graded in its own process with a time limit per cell (``--timeout``) and per
submission, so a notebook that loops forever, raises or kills its kernel is recorded as failing and
the others are graded. Submitted files are copied, never modified.

``make release`` and ``make grade ASSIGNMENT=... SUBMISSIONS=...`` call this file.
"""

from __future__ import annotations

import argparse
import csv
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
PY = sys.executable
STUDENT_ID = re.compile(r"[^A-Za-z0-9_.-]+")
KERNEL_START_FAILED = "Kernel died before replying to kernel_info"


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
    cmd = [PY, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}",
           f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}", "--log-level=WARN"]
    # nbgrader runs the `alembic` command of its own environment to set up the gradebook.
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


def prepare_course(name: str, course: Path) -> Path:
    """Write the source notebook into an nbgrader course folder and register it (checksums, points)."""
    import jupytext  # noqa: PLC0415  (heavy import, only here)

    source = course / "source" / name / f"{name}.ipynb"
    source.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(assignment_source(name)), source)
    result = nbgrader(course, "generate_assignment", name, "--force", "--create")
    release = course / "release" / name / f"{name}.ipynb"
    if result.returncode != 0 or not release.is_file():
        raise SystemExit(f"nbgrader generate_assignment {name} failed:\n{result.stdout}")
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
    """``{student id: notebook}`` from ``<student>.ipynb`` files and ``<student>/`` folders holding one."""
    if not folder.is_dir():
        raise SystemExit(f"submissions folder {folder} does not exist")
    found: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            notebooks = sorted(p for p in entry.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
            if len(notebooks) != 1:
                print(f"skipping {entry}: expected one .ipynb inside, found {len(notebooks)}", file=sys.stderr)
                continue
            student, notebook = entry.name, notebooks[0]
        elif entry.suffix == ".ipynb":
            student, notebook = entry.stem, entry
        else:
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

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)


def test_cells(notebook: Path) -> dict[str, tuple[float, str]]:
    """``{grade_id: (max points, message)}`` of the graded test cells of an (executed) notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    found = {}
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade"):
            continue
        message = ""
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr" and not message:
                text = "".join(output.get("text", "")).strip().splitlines()
                message = ("wrote to stderr, which nbgrader counts as failing: "
                           + (text[0] if text else "")).strip()
            if output.get("output_type") == "error":
                message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".strip()
                if output.get("ename") == "KeyboardInterrupt":
                    message = "timed out: the cell ran past the time limit and was interrupted"
        found[meta["grade_id"]] = (float(meta.get("points", 0)), message)
    return found


def timed_out_cells(notebook: Path) -> list[str]:
    """Names (grade ids, else cell numbers) of the cells that the time limit interrupted."""
    names = []
    for number, cell in enumerate(json.loads(notebook.read_text())["cells"], start=1):
        if any(o.get("output_type") == "error" and o.get("ename") == "KeyboardInterrupt"
               for o in cell.get("outputs", [])):
            names.append(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {number}")
    return names


def grader_error(log: str) -> str:
    """The most telling line of a failed nbgrader run: its last exception line, else its last lines."""
    errors = [line.strip() for line in log.splitlines()
              if re.search(r"(Error|Exception|timed out)\b", line) and "[AutogradeApp" not in line]
    if errors:
        return errors[-1][-500:]
    lines = [line for line in log.splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-500:] or "nbgrader gave no output"


def grade_one(name: str, master: Path, student: str, submission: Path, timeout: float,
              total_timeout: float, html: bool) -> StudentResult:
    """Autograde one submission in a course folder of its own (a copy of the master's source and
    gradebook), so that submissions can be graded in parallel and one cannot disturb another."""
    course = master / "students" / student
    shutil.rmtree(course, ignore_errors=True)
    shutil.copytree(master / "source", course / "source")
    shutil.copyfile(master / "gradebook.db", course / "gradebook.db")
    target = course / "submitted" / student / name / f"{name}.ipynb"
    target.parent.mkdir(parents=True)
    shutil.copyfile(submission, target)  # nbgrader works on the copy; the submission stays as it is
    start = time.perf_counter()
    for _attempt in range(3):
        run = nbgrader(course, "autograde", name, f"--student={student}", "--force", "--create",
                       f"--ExecutePreprocessor.timeout={timeout:g}",
                       # the grader's own Python kernel, whatever kernel the student's notebook names
                       "--ExecutePreprocessor.kernel_name=python3", timeout=total_timeout)
        # A kernel that dies before its first reply never ran the submission (seen: kernels started
        # at the same moment on a busy machine); that is the grader's failure, so try again.
        if run.returncode == 0 or KERNEL_START_FAILED not in run.stdout:
            break
    graded = course / "autograded" / student / name / f"{name}.ipynb"
    expected = test_cells(course / "source" / name / f"{name}.ipynb")
    if run.returncode != 0 or not graded.is_file():
        status = "timed out" if run.returncode == -9 else "failed"
        tests = [TestResult(t, 0.0, p, f"not graded: the submission {status}") for t, (p, _) in expected.items()]
        return StudentResult(student, submission, status, tests, grader_error(run.stdout),
                             time.perf_counter() - start)

    from nbgrader.api import Gradebook  # noqa: PLC0415

    messages = test_cells(graded)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        record = gradebook.find_submission_notebook(name, name, student)
        scores = {g.name: (float(g.score or 0), float(g.max_score)) for g in record.grades}
    tests = []
    for test, (max_points, _) in expected.items():
        points, max_points = scores.get(test, (0.0, max_points))
        message = messages.get(test, (0, "the test cell is missing"))[1]
        tests.append(TestResult(test, points, max_points, message if points < max_points else "passed"))
    stopped = timed_out_cells(graded)
    detail = (f"interrupted after {timeout:g} s (an endless loop?): {', '.join(stopped)}; "
              "the cells after it still ran") if stopped else ""
    if html:
        feedback = nbgrader(course, "generate_feedback", name, f"--student={student}", "--force", timeout=120)
        page = course / "feedback" / student / name / f"{name}.html"
        if feedback.returncode != 0 or not page.is_file():
            detail = (detail + "; " if detail else "") + f"no feedback page: {grader_error(feedback.stdout)}"
    return StudentResult(student, submission, "graded", tests, detail, time.perf_counter() - start)


def write_tables(results: list[StudentResult], out: Path) -> None:
    tests = [t.test for t in results[0].tests] if results else []
    with open(out / "grades.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        maxima = {t.test: t.max_points for t in results[0].tests} if results else {}
        writer.writerow(["student", "status", "score", "max_score", *[f"{t} ({maxima[t]:g})" for t in tests],
                         "submission", "seconds"])
        for r in results:
            by_test = {t.test: t.points for t in r.tests}
            writer.writerow([r.student, r.status, f"{r.score:g}", f"{sum(maxima.values()):g}",
                             *[f"{by_test.get(t, 0):g}" for t in tests], str(r.submission), f"{r.seconds:.1f}"])
    with open(out / "feedback.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "test", "points", "max_points", "feedback"])
        for r in results:
            for t in r.tests:
                writer.writerow([r.student, t.test, f"{t.points:g}", f"{t.max_points:g}", t.message])
            if r.detail:
                writer.writerow([r.student, "(grader)", "", "", r.detail])


def grade(name: str, submissions: Path, out: Path, timeout: float = 60.0, total_timeout: float | None = None,
          jobs: int | None = None, html: bool = True) -> list[StudentResult]:
    """Autograde every submission of ``name`` in ``submissions``, ``jobs`` at a time (default: one per
    CPU core); tables and, with ``html``, nbgrader's feedback pages into ``out``."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    if not timeout > 0 or (total_timeout is not None and not total_timeout > 0):
        raise SystemExit(f"time limits must be positive seconds, got timeout={timeout}, total_timeout={total_timeout}")
    if jobs is not None and jobs < 1:
        raise SystemExit(f"jobs must be at least 1, got {jobs}")
    assignment_source(name)  # a clear error for an unknown assignment before any work
    found = find_submissions(submissions)
    shutil.rmtree(out / "nbgrader", ignore_errors=True)
    shutil.rmtree(out / "feedback", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    master = out / "nbgrader"
    prepare_course(name, master)
    total_timeout = total_timeout or max(120.0, 10 * timeout)

    def one(item: tuple[str, Path]) -> StudentResult:
        result = grade_one(name, master, *item, timeout, total_timeout, html)
        print(f"{result.student:30s} {result.status:10s} {result.score:g}/"
              f"{sum(t.max_points for t in result.tests):g}  ({result.seconds:.1f} s)", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(one, found.items()))
    write_tables(results, out)
    for r in results:
        page = master / "students" / r.student / "feedback" / r.student / name / f"{name}.html"
        if page.is_file():
            (out / "feedback").mkdir(exist_ok=True)
            shutil.copyfile(page, out / "feedback" / f"{r.student}.html")
    print(f"grades: {out / 'grades.csv'}; per-test feedback: {out / 'feedback.csv'}"
          + (f"; feedback pages: {out / 'feedback'}" if html else ""))
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


def check(name: str, out: Path, timeout: float = 20.0, robustness: bool = True) -> list[str]:
    """Grade the reference solution, the unchanged student version and every plausible wrong answer
    (and, with ``robustness``, submissions that loop forever, raise, kill the kernel, are not
    notebooks, or name a kernel the grader does not have); return what did not grade as intended
    (empty: all is well)."""
    import hashlib  # noqa: PLC0415

    import jupytext  # noqa: PLC0415

    shutil.rmtree(out, ignore_errors=True)
    folder = out / "submissions"
    folder.mkdir(parents=True)
    jupytext.write(jupytext.read(assignment_source(name)), folder / "solution.ipynb")
    student = release([name], out / "release")[0]
    shutil.copyfile(student, folder / "unchanged.ipynb")
    cases = wrong_answers(name)
    for case in cases:
        jupytext.write(with_replacements(name, case["replace"]), folder / f"wrong-{case['name']}.ipynb")
    if robustness:
        for kind in ("loops-forever", "raises", "kills-kernel"):
            jupytext.write(broken(name, kind), folder / f"{kind}.ipynb")
        (folder / "not-a-notebook.ipynb").write_text("{ this is not JSON")
        other_kernel = jupytext.read(assignment_source(name))
        other_kernel.metadata["kernelspec"] = {"name": "my-laptop-env", "display_name": "My env", "language": "python"}
        jupytext.write(other_kernel, folder / "other-kernel.ipynb")
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    results = {r.student: r for r in grade(name, folder, out / "grades", timeout, html=robustness)}

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
        if results["raises"].status != "graded" or results["raises"].score >= full:
            problems.append(f"the raising submission: {results['raises'].status}, {results['raises'].score:g}")
        for kind in ("kills-kernel", "not-a-notebook"):
            if results[kind].status == "graded" or results[kind].score != 0 or not results[kind].detail:
                problems.append(f"the {kind} submission was not recorded as failing: {results[kind].status}")
    for path, digest in digests.items():
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"the grader modified the submitted file {path.name}")
    print(f"check {name}: " + ("all submissions graded as intended" if not problems else
                               "PROBLEMS:\n  " + "\n  ".join(problems)))
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
    grd.add_argument("--no-html", action="store_true", help="skip nbgrader's feedback pages")
    chk = sub.add_parser("check", help="prove that assignments grade as intended (what CI runs)")
    chk.add_argument("names", nargs="*", help="assignments (default: all)")
    chk.add_argument("--out", type=Path, default=DEFAULT_OUT / "check")
    chk.add_argument("--timeout", type=float, default=20.0, help="seconds per cell (default 20)")
    chk.add_argument("--no-robustness", action="store_true",
                     help="skip the submissions that loop forever, raise, kill the kernel or are not notebooks")
    args = parser.parse_args(argv)
    if args.command == "release":
        release(args.names, args.out)
    elif args.command == "check":
        problems = [p for name in (args.names or assignment_names())
                    for p in check(name, args.out / name, args.timeout, not args.no_robustness)]
        return 1 if problems else 0
    else:
        grade(args.name, args.submissions, args.out or DEFAULT_OUT / "grades" / args.name, args.timeout,
              jobs=args.jobs, html=not args.no_html)
    return 0


if __name__ == "__main__":
    sys.exit(main())
