"""The graded assignments (tools/classroom.py): what the instructor guide promises.

The slow tests run the guide's own command, ``python tools/classroom.py check``, which grades for
each assignment its reference solution (full marks), its unchanged student version (zero, without
crashing the grader) and its plausible wrong answers (each loses exactly the points of the tests it
should fail, with feedback that names the mistake); for the first assignment also submissions that
loop forever, raise, kill their process or are not notebooks, and the red-team suite
(``tools/grading/redteam.py``: submissions that read the solutions, tamper with other students'
files and grades, neutralise the tests, leave daemons, print 100 MB, allocate 8 GB or use the
network), each of which must score exactly as its honest base. It also checks that no submitted
file and no file of the grader is modified. Each submission runs in a bubblewrap sandbox.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jupytext
import pytest

from conftest import ROOT, report_benchmark

sys.path.insert(0, str(ROOT / "tools"))
import classroom  # noqa: E402

NAMES = classroom.assignment_names()


def test_one_assignment_per_part_at_least():
    parts = {re.search(r"\(Part (I{1,3}|IV|VI?)\)", jupytext.read(classroom.assignment_source(n)).cells[0].source)
             for n in NAMES}
    assert {m.group(1) for m in parts if m} == {"I", "II", "III", "IV", "V", "VI"}


@pytest.mark.parametrize("name", NAMES)
def test_points_in_the_header_match_the_test_cells(name):
    notebook = jupytext.read(classroom.assignment_source(name))
    header = notebook.cells[0].source
    total = sum(c.metadata["nbgrader"]["points"] for c in notebook.cells
                if c.metadata.get("nbgrader", {}).get("grade"))
    assert f"{total} points" in header.split("\n\n")[1], f"{name}: the test cells give {total} points"
    table = sum(int(m) for m in re.findall(r"\| (\d+) \|$", header, re.M))
    assert table == total, f"{name}: the task table adds up to {table}, the test cells to {total}"
    ids = [c.metadata["nbgrader"]["grade_id"] for c in notebook.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)), f"{name}: grade ids must be unique"
    assert all(c.metadata.get("nbgrader", {}).get("locked") for c in notebook.cells
               if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("solution")), (
        f"{name}: every code cell that is not a solution must be locked")


@pytest.mark.parametrize("name", NAMES)
def test_wrong_answers_are_listed_and_apply(name):
    cases = classroom.wrong_answers(name)
    assert len(cases) >= 3, f"{name}: list at least three plausible wrong answers"
    tests = {c.metadata["nbgrader"]["grade_id"] for c in jupytext.read(classroom.assignment_source(name)).cells
             if c.metadata.get("nbgrader", {}).get("grade")}
    for case in cases:
        assert set(case["loses"]) <= tests and set(case["feedback"]) <= set(case["loses"]), case["name"]
        classroom.with_replacements(name, case["replace"])  # each text occurs exactly once


def test_release_removes_solutions_and_hidden_tests(tmp_path):
    out = subprocess.run([sys.executable, "tools/classroom.py", "release", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in NAMES:
        student = json.loads((tmp_path / "student" / f"{name}.ipynb").read_text())
        text = "\n".join("".join(c["source"]) for c in student["cells"])
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, name
        source = jupytext.read(classroom.assignment_source(name))
        solutions = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")]
        regions = sum(c.source.count("### BEGIN SOLUTION") for c in solutions)
        student_code = "\n".join("".join(c["source"]) for c in student["cells"] if c["cell_type"] == "code")
        assert student_code.count("raise NotImplementedError()") == regions, name
        for begin, end in (("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"), ("### BEGIN SOLUTION", "### END SOLUTION")):
            inside = [line.strip() for c in source.cells for part in c.source.split(begin)[1:]
                      for line in part.split(end)[0].splitlines() if len(line.strip()) > 20]
            outside = "\n".join(part.split(end)[-1] for c in source.cells for part in c.source.split(begin))
            leaked = [line for line in inside if line in text and line not in outside]
            assert inside and not leaked, f"{name}: {begin} text leaked into the student version: {leaked[:2]}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.benchmark
def test_assignment_grades_as_intended(name, tmp_path):
    """The instructor guide's `make check-assignments`, one assignment at a time."""
    robust = [] if name == NAMES[0] else ["--no-robustness"]
    out = subprocess.run([sys.executable, "tools/classroom.py", "check", name, "--out", str(tmp_path), *robust],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "all submissions graded as intended" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
    grades = (tmp_path / name / "grades" / "grades.csv").read_text().splitlines()
    assert grades[0].startswith("student,status,score,max_score,test-"), grades[0]
    if not robust:
        assert (tmp_path / name / "grades" / "feedback" / "solution.html").is_file()
        assert "interrupted after" in (tmp_path / name / "grades" / "feedback.csv").read_text()
        seconds = json.loads((tmp_path / name / "seconds.json").read_text())
        attacks = {student: s for student, s in seconds.items() if student.startswith("attack-")}
        slowest = max(attacks, key=attacks.get)
        # a time: reported against its budget (make bench), never asserted
        report_benchmark(f"grading an attack beyond the solution ({slowest})",
                         attacks[slowest] - seconds["solution"], classroom.ATTACK_EXTRA_S)


def test_submission_folders(tmp_path):
    (tmp_path / "ana.ipynb").write_text("{}")
    (tmp_path / "bo").mkdir()
    (tmp_path / "bo" / "homework.ipynb").write_text("{}")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.ipynb").write_text("{}")
    (tmp_path / "two" / "b.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a notebook")
    found = classroom.find_submissions(tmp_path)
    assert found == {"ana": tmp_path / "ana.ipynb", "bo": tmp_path / "bo" / "homework.ipynb"}
    (tmp_path / "ana").mkdir()
    (tmp_path / "ana" / "x.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match="two submissions map to the student id 'ana'"):
        classroom.find_submissions(tmp_path)
    empty = tmp_path / "none"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no submissions in .*expected <student>.ipynb files"):
        classroom.find_submissions(empty)
    with pytest.raises(SystemExit, match="does not exist"):
        classroom.find_submissions(tmp_path / "missing")


def test_a_notebook_suffix_in_any_case_is_graded_and_other_files_are_named(tmp_path, capsys):
    """Bob.IPYNB (as some systems upper-case it) is a submission; whatever is not is named as skipped."""
    (tmp_path / "Bob.IPYNB").write_text("{}")
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy" / "Homework.Ipynb").write_text("{}")
    (tmp_path / "dee.ipynb.zip").write_text("")
    (tmp_path / "notes.txt").write_text("not a notebook")
    found = classroom.find_submissions(tmp_path)
    assert found == {"Bob": tmp_path / "Bob.IPYNB", "cy": tmp_path / "cy" / "Homework.Ipynb"}
    err = capsys.readouterr().err
    assert f"skipping {tmp_path / 'dee.ipynb.zip'}: not a .ipynb notebook" in err
    assert f"skipping {tmp_path / 'notes.txt'}: not a .ipynb notebook" in err
    (tmp_path / "Bob.ipynb").write_text("{}")
    if len(list(tmp_path.iterdir())) == 5:  # a case-sensitive file system: two files, one student
        with pytest.raises(SystemExit, match="two submissions map to the student id 'Bob'"):
            classroom.find_submissions(tmp_path)


def test_unknown_assignment_is_a_clear_error():
    with pytest.raises(SystemExit, match="no assignment 'a9'.*the assignments are a1_"):
        classroom.assignment_source("a9")


@pytest.mark.parametrize("options, message", [({"timeout": 0}, "time limits must be positive"),
                                              ({"timeouts": {"ana": -1}}, "time limits must be positive"),
                                              ({"jobs": 0}, "jobs must be at least 1")])
def test_bad_grading_options_are_clear_errors(tmp_path, options, message):
    with pytest.raises(SystemExit, match=message):
        classroom.grade(NAMES[0], tmp_path, tmp_path / "out", **options)
