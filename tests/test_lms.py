"""Grades for learning platforms (tools/grading/lms.py, tools/grading/lms.toml) and the GitHub
Classroom template (tools/grading/github_classroom/): what the instructor guide promises.

canvas.csv and moodle.csv follow the import formats of Canvas (its gradebook importer) and Moodle
(its CSV grade import): the header columns each platform reads, one row per student in the order of
grades.csv, the totals of grades.csv, a number (0 included) for every graded student, the roster's
identifiers. The settings are checked before any grading. No test here grades a submission.
"""

from __future__ import annotations

import base64
import csv
import json
import sys

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import classroom  # noqa: E402  (puts tools/grading on the path)
import lms  # noqa: E402

NAME = "a1_masked_attention"
WORKFLOW = ROOT / "tools" / "grading" / "github_classroom" / ".github" / "workflows" / "classroom.yml"
SETTINGS = """
[assignments.a1_masked_attention]
canvas_title = "A1 Masked attention"
canvas_id = "4242"
moodle_item = "A1: masked attention"
"""


def result(student: str, status: str, points: list[float]) -> classroom.StudentResult:
    """A student's result on three tests worth 3, 2 and 1.5 points (floats, as the grader records them)."""
    tests = [classroom.TestResult(f"test-{i}", float(p), top, "message") for i, (p, top) in
             enumerate(zip(points, [3.0, 2.0, 1.5]), start=1)]
    return classroom.StudentResult(student, ROOT / f"{student}.ipynb", status, tests)


@pytest.fixture
def results():
    """Not in alphabetical order, as find_submissions could give them; a timed-out and a failed one."""
    return [result("zoe", "graded", [3, 2, 1.5]), result("ana", "graded", [3, 0, 1.5]),
            result("max", "timed out", [0, 2, 0]), result("bo", "failed", [0, 0, 0])]


def read(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def export(tmp_path, results, settings: str = SETTINGS, roster: str | None = None):
    """grades.csv, canvas.csv and moodle.csv as ``grade`` writes them, with these settings and roster."""
    config = tmp_path / "lms.toml"
    config.write_text(settings)
    roster_file = None
    if roster is not None:
        roster_file = tmp_path / "roster.csv"
        roster_file.write_text(roster, encoding="utf-8-sig")  # as Excel saves it, with a BOM
    plan = lms.prepare(NAME, [r.student for r in results], config, roster_file, classroom.assignment_names())
    out = tmp_path / "out"
    out.mkdir()
    classroom.write_tables(results, out)
    lms.write(plan, lms.grades_from_results(results), out)
    return read(out / "grades.csv"), read(out / "canvas.csv"), read(out / "moodle.csv")


ROSTER = """grader_id,Student,ID,SIS User ID,SIS Login ID,Section,Email address
,Points Possible,,,,,
zoe,"Zed, Zoe",101,S-1,zzed,Sec 1,zoe@uni.example
ana,"Lopez, Ana",102,S-2,alopez,Sec 2,ana@uni.example
max,"Mann, Max",103,S-3,mmann,Sec 1,max@uni.example
bo,"Berg, Bo",104,S-4,bberg,Sec 2,bo@uni.example
eve,"Eve, Never",105,S-5,enever,Sec 2,eve@uni.example
"""


def test_canvas_file_follows_the_gradebook_import_format(tmp_path, results):
    grades, canvas, _ = export(tmp_path, results, roster=ROSTER)
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "A1 Masked attention (4242)"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "6.5"]
    rows = canvas[2:]
    assert [row[3] for row in rows] == ["zzed", "alopez", "mmann", "bberg"]  # grades.csv's order
    assert [row[-1] for row in rows] == [row[2] for row in grades[1:]] == ["6.5", "4.5", "2", "0"]
    assert rows[1][:5] == ["Lopez, Ana", "102", "S-2", "alopez", "Sec 2"]
    assert all(cell for row in rows for cell in row), "every cell filled: an empty score means 'no score'"


def test_moodle_file_has_the_identifier_the_grade_and_feedback(tmp_path, results):
    grades, _, moodle = export(tmp_path, results, roster=ROSTER)
    assert moodle[0] == ["Email address", "A1: masked attention", "Feedback"]
    assert [row[0] for row in moodle[1:]] == ["zoe@uni.example", "ana@uni.example", "max@uni.example", "bo@uni.example"]
    assert [row[1] for row in moodle[1:]] == [row[2] for row in grades[1:]]
    assert moodle[3][2].startswith("2/6.5 points (timed out). test-1 0/3; test-2 2/2")
    assert moodle[4][1] == "0" and "(failed)" in moodle[4][2]
    assert "message" not in "".join(row[2] for row in moodle[1:]), "no test's message in the platform"


def test_defaults_and_no_roster_put_the_grader_id_in_the_id_columns(tmp_path, results, capsys):
    grades, canvas, moodle = export(tmp_path, results, settings="")
    assert "no roster" in capsys.readouterr().err
    assert canvas[0][-1] == NAME and moodle[0] == ["Email address", NAME, "Feedback"]
    assert [row[:5] for row in canvas[2:]] == [[s, "", "", s, ""] for s in ("zoe", "ana", "max", "bo")]
    assert [row[0] for row in moodle[1:]] == ["zoe", "ana", "max", "bo"]
    assert [row[-1] for row in canvas[2:]] == [row[1] for row in moodle[1:]] == [row[2] for row in grades[1:]]


def test_settings_choose_columns_and_switch_parts_off(tmp_path, results):
    settings = """
[roster]
grader_id_column = "login"
[canvas]
points_possible_row = false
[canvas.columns]
"SIS Login ID" = "login"
[moodle]
id_column = "ID number"
roster_column = "matriculation"
feedback_column = ""
"""
    roster = "login,matriculation\nzoe,1\nana,2\nmax,3\nbo,4\n"
    _, canvas, moodle = export(tmp_path, results, settings, roster)
    assert canvas[0][-1] == NAME and canvas[1][:5] == ["", "", "", "zoe", ""]
    assert moodle == [["ID number", NAME], ["1", "6.5"], ["2", "4.5"], ["3", "2"], ["4", "0"]]
    settings += "\n[assignments.a1_masked_attention]\ncanvas_id = 77\n"
    (tmp_path / "out").rename(tmp_path / "first")
    config = tmp_path / "lms.toml"
    config.write_text(settings.replace("[canvas]\n", "[canvas]\nenabled = false\n"))
    plan = lms.prepare(NAME, ["zoe"], config, tmp_path / "roster.csv")
    (tmp_path / "first" / "canvas.csv").write_text("stale")
    assert lms.write(plan, lms.grades_from_results(results), tmp_path / "first") == [tmp_path / "first" / "moodle.csv"]
    assert not (tmp_path / "first" / "canvas.csv").exists(), "a disabled platform's old file is removed"


def test_a_student_missing_from_the_roster_is_an_error_or_a_warning(tmp_path, results, capsys):
    roster = ROSTER.replace("max,", "maxi,")
    with pytest.raises(SystemExit, match=r"1 student\(s\) have no usable row in the roster .*roster.csv: max;"
                                         r".*roster.missing = \"warn\""):
        export(tmp_path, results, roster=roster)
    blank_email = ROSTER.replace("bo@uni.example", "")  # Moodle would skip the row without a word
    with pytest.raises(SystemExit, match=r"roster .*: bo;"):
        export(tmp_path, results, roster=blank_email)
    _, canvas, moodle = export(tmp_path, results, SETTINGS + '[roster]\nmissing = "warn"\n', roster)
    assert "no usable row" in capsys.readouterr().err
    assert canvas[4][:5] == ["max", "", "", "max", ""] and moodle[3][0] == "max"
    assert canvas[3][:5] == ["Lopez, Ana", "102", "S-2", "alopez", "Sec 2"]


@pytest.mark.parametrize("roster, message", [
    ("name,Email address\nzoe,z@x\n", r"has no column 'grader_id' .*its columns are name, Email address"),
    ("grader_id,Email address,Student\nzoe,z@x,Z\nzoe,y@x,Y\n", r"gives the grader id 'zoe' twice \(line 3\)"),
    ("grader_id,Student\nzoe,Zoe\n", r"no column 'Email address' \(moodle.roster_column\)"),
    ("grader_id,Section,Email address\nzoe,1,z@x\n", r"none of the columns Canvas finds students by"),
])
def test_a_bad_roster_is_a_clear_error(tmp_path, roster, message):
    (tmp_path / "roster.csv").write_text(roster)
    config = tmp_path / "lms.toml"
    config.write_text("")
    with pytest.raises(SystemExit, match=message):
        lms.prepare(NAME, ["zoe"], config, tmp_path / "roster.csv")


@pytest.mark.parametrize("settings, message", [
    ("[canvas]\ntitel = 'A1'\n", r"unknown key canvas.titel; expected one of enabled, points_possible_row"),
    ("[canvas]\nenabled = 'yes'\n", r"canvas.enabled must be true or false, got 'yes'"),
    ("[moodle]\nfeedback_column = false\n", r"moodle.feedback_column must be a string, got False"),
    ("[roster]\nmissing = 'maybe'\n", r"roster.missing = 'maybe': expected one of 'error', 'warn'"),
    ("[canvas]\ngrader_id_column = 'Section'\n", r"canvas.grader_id_column = 'Section': expected one of"),
    ("[canvas.columns]\nSection = 5\n", r"canvas.columns.Section must be a string, got 5"),
    ("[canvas.columns]\nGroup = 'group'\n", r"unknown key canvas.columns.Group"),
    ("[moodle]\nid_column = ''\n", r"moodle.id_column = '': expected a name"),
    ("[moodle]\nid_column = 'Feedback'\n", r"moodle.id_column = 'Feedback': expected a name, other than"),
    ("[assignments.a1_masked_attention]\nmoodle_item = ''\n", r"moodle_item must not be empty"),
    ("canvas = 3\n", r"canvas must be a table"),
    ("[canvas\nenabled = true\n", r"is not valid TOML: .*line 1"),
    ("[assignments.a9_nothing]\ncanvas_title = 'x'\n", r"\[assignments.a9_nothing\] names no assignment"),
    ("[assignments.a1_masked_attention]\ncanvas_id = 'A-12'\n", r"assignments.a1_masked_attention.canvas_id = 'A-12'"),
    ("[assignments.a1_masked_attention]\nmoodle_title = 'x'\n",
     r"unknown key assignments.a1_masked_attention.moodle_title"),
    ("[assignments.a1_masked_attention]\ncanvas_title = 'Final Score A1'\n", r"Canvas would not read it"),
    ("[assignments.a1_masked_attention]\ncanvas_title = 'A1 (2024)'\n", r"Canvas would not read it"),
])
def test_a_malformed_setting_is_an_error_naming_the_key(tmp_path, settings, message):
    config = tmp_path / "lms.toml"
    config.write_text(settings)
    with pytest.raises(SystemExit, match=message) as error:
        lms.load_config(config, classroom.assignment_names())
    assert str(config) in str(error.value)


def test_grade_checks_the_settings_and_roster_before_grading(tmp_path):
    """A mistake in the settings or the roster costs no grading run."""
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "ana.ipynb").write_text("{}")
    config = tmp_path / "lms.toml"
    config.write_text("[canvas]\ntitel = 'A1'\n")
    with pytest.raises(SystemExit, match="unknown key canvas.titel"):
        classroom.grade(NAME, tmp_path / "subs", tmp_path / "out", unsafe=True, lms_config=config)
    config.write_text("")
    (tmp_path / "roster.csv").write_text("grader_id,Student,Email address\nbo,Bo,bo@x\n")
    with pytest.raises(SystemExit, match="have no usable row in the roster .*: ana"):
        classroom.grade(NAME, tmp_path / "subs", tmp_path / "out", unsafe=True, lms_config=config,
                        roster=tmp_path / "roster.csv")
    assert not (tmp_path / "out").exists()


def test_the_shipped_settings_load_and_document_every_key():
    config = lms.load_config(lms.CONFIG, classroom.assignment_names())
    text = lms.CONFIG.read_text()
    for table, keys in lms.DEFAULTS.items():
        assert f"[{table}]" in text
        assert all(f"{key} = " in text or f'"{key}" = ' in text for key in keys if key != "columns"), table
    assert set(config["canvas"]["columns"]) == set(lms.CANVAS_IDENTITY)
    for key in lms.ASSIGNMENT_KEYS:
        assert f"# {key} = " in text


def test_export_again_from_grades_csv(tmp_path, results, capsys):
    """`lms.py export` rewrites the files from grades.csv alone (after fixing the roster): the same files."""
    _, canvas, moodle = export(tmp_path, results, roster=ROSTER)
    (tmp_path / "out" / "canvas.csv").unlink()
    args = ["export", NAME, "--out", str(tmp_path / "out"), "--config", str(tmp_path / "lms.toml"),
            "--roster", str(tmp_path / "roster.csv")]
    assert lms.main(args) == 0
    assert read(tmp_path / "out" / "canvas.csv") == canvas and read(tmp_path / "out" / "moodle.csv") == moodle
    (tmp_path / "out" / "grades.csv").write_text("name,points\nana,3\n")
    with pytest.raises(SystemExit, match="is not a grades.csv of tools/classroom.py"):
        lms.main(args)


def test_github_classroom_result_carries_each_tests_points(tmp_path, results, capsys):
    out = tmp_path / "out"
    out.mkdir()
    classroom.write_tables(results[1:2], out)
    assert lms.main(["github", NAME, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == "Points 4.5/6.5"
    line = captured.out.strip()
    assert line.startswith("result=") and "\n" not in line
    data = json.loads(base64.b64decode(line.removeprefix("result=")))
    assert data["max_score"] == 6.5 and sum(t["score"] for t in data["tests"]) == 4.5
    assert [t["status"] for t in data["tests"]] == ["pass", "fail", "pass"] and data["status"] == "fail"
    classroom.write_tables(results, out)
    with pytest.raises(SystemExit, match="has 4 students; the GitHub workflow grades one"):
        lms.main(["github", NAME, "--out", str(out)])


def strings(node):
    """Every string in a parsed YAML document, keys and values."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


def test_github_classroom_workflow_grades_with_hidden_tests_from_outside_the_students_repository():
    text = WORKFLOW.read_text()
    workflow = yaml.safe_load(text)
    assert workflow["name"] == "Autograding Tests" and "push" in workflow["on"]
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    student = next(s["with"]["path"] for s in checkouts if "repository" not in s["with"])
    course_step = next(s for s in checkouts if "repository" in s["with"])
    course = course_step["with"]["path"]
    assert student != course and not course.startswith(student + "/") and not student.startswith(course + "/")
    assert course_step["with"]["token"] == "${{ secrets.COURSE_REPO_TOKEN }}"
    assert [s for s in steps if "COURSE_REPO_TOKEN" in str(s)] == [course_step], "the token serves this checkout only"
    runs = [s for s in steps if "run" in s]
    grading = next(s for s in runs if "tools/classroom.py grade" in s["run"])
    assert grading["working-directory"] == course and "--unsafe" not in text
    install = next(i for i, s in enumerate(steps) if "apt-get install -y -q bubblewrap" in s.get("run", ""))
    assert install < steps.index(grading) and "make setup" in steps[install]["run"]
    assert "lms.py github" in grading["run"] and 'GITHUB_OUTPUT' in grading["run"]
    reporter = next(s for s in steps
                    if s.get("uses", "").startswith("classroom-resources/autograding-grading-reporter@"))
    assert reporter["with"]["runners"] == grading["id"]
    assert reporter["env"][f"{grading['id'].upper()}_RESULTS"] == f"${{{{ steps.{grading['id']}.outputs.result }}}}"
    for value in strings(workflow):  # the hidden tests: only in the course's checkout, never the student's
        assert f"{student}/assignments" not in value, value
        assert "assignments/" not in value or value.count("assignments/") == value.count(f"{course}/assignments/")
    for placeholder in ("ASSIGNMENT:", "NOTEBOOK:", "COURSE_REPOSITORY:", "COURSE_REF:"):
        assert any(placeholder in line and "<<< PLACEHOLDER" in line for line in text.splitlines()), placeholder
    readme = (WORKFLOW.parents[2] / "README.md").read_text()
    assert "COURSE_REPO_TOKEN" in readme and "<<< PLACEHOLDER" in readme


# --- bad input: shared identifiers, a roster not in UTF-8, names that are spreadsheet formulas ---------
@pytest.mark.parametrize("change, message", [
    (("bo@uni.example", "ana@uni.example"),
     r"gives Email address 'ana@uni.example' to two students: line 4 \(grader id 'ana'\) and line 6 "
     r"\(grader id 'bo'\); on import one grade would overwrite the other"),
    (("bo@uni.example", "ANA@uni.example"), r"gives Email address 'ANA@uni.example' to two students: line 4"),
    ((",104,", ",102,"), r"gives ID '102' to two students: line 4 \(grader id 'ana'\) and line 6 \(grader id 'bo'\)"),
    ((",S-3,", ",S-1,"), r"gives SIS User ID 'S-1' to two students: line 3 \(grader id 'zoe'\) and line 5"),
    ((",mmann,", ",zzed,"), r"gives SIS Login ID 'zzed' to two students: line 3 .* and line 5 \(grader id 'max'\)"),
    ((",mmann,", ",=cmd|' /C calc'!A0,"), r"gives SIS Login ID .* on line 5: it starts with '=', which a spreadsheet"),
])
def test_two_students_with_one_identifier_are_refused_naming_both_rows(tmp_path, results, change, message):
    with pytest.raises(SystemExit, match=message):
        export(tmp_path, results, roster=ROSTER.replace(*change))
    assert not (tmp_path / "out").exists()


def test_two_students_may_share_a_name_or_a_section(tmp_path, results):
    _, canvas, _ = export(tmp_path, results, roster=ROSTER.replace('"Berg, Bo"', '"Lopez, Ana"'))
    assert [row[0] for row in canvas[2:]].count("Lopez, Ana") == 2


def test_a_roster_not_in_utf8_is_an_error_naming_the_file_and_encoding(tmp_path):
    (tmp_path / "roster.csv").write_bytes("grader_id,Student,ID,Email address\nzoe,Zoë Café,101,z@x\n".encode("cp1252"))
    config = tmp_path / "lms.toml"
    config.write_text("")
    with pytest.raises(SystemExit, match=r"the roster .*roster.csv is not UTF-8 \(byte 0xeb on line 2; it reads as "
                                         r"Windows-1252.*save it as 'CSV UTF-8 \(Comma delimited\)'"):
        lms.prepare(NAME, ["zoe"], config, tmp_path / "roster.csv")


FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
            "\tTab", "\rReturn"]


def test_spreadsheet_formulas_are_neutralised_in_every_csv(tmp_path, results, capsys):
    """OWASP's CSV injection: a cell starting with = + - @ tab or CR gets a ' before it, in grades.csv,
    feedback.csv, canvas.csv and moodle.csv; numbers stay numbers."""
    results[0].tests[0].message = FORMULAS[0]
    results[1].detail = FORMULAS[3]
    results[2] = result("-max", "timed out", [0, 2, 0])  # a grader id may start with -
    roster = ROSTER.replace("max,", "-max,")
    for formula, name in zip(FORMULAS, ['"Zed, Zoe"', '"Lopez, Ana"', '"Mann, Max"', '"Berg, Bo"']):
        roster = roster.replace(name, '"' + formula.replace('"', '""') + '"')
    roster = roster.replace("Sec 2", "=Sec 2")
    grades, canvas, moodle = export(tmp_path, results, roster=roster)
    feedback = read(tmp_path / "out" / "feedback.csv")
    cells = [cell for table in (grades, canvas, moodle, feedback) for row in table for cell in row]
    assert not [c for c in cells if c.startswith(tuple(lms.FORMULA_START)) and not lms.NUMBER.fullmatch(c)]
    assert [row[0] for row in canvas[2:]] == ["'" + f for f in FORMULAS[:4]]
    assert canvas[3][4] == "'=Sec 2" and grades[3][0] == "'-max" and feedback[1][4] == "'" + FORMULAS[0]
    assert "'" + FORMULAS[3] in [row[4] for row in feedback]
    # lms.py export reads grades.csv back: the same students, the same files
    assert [g.student for g in lms.grades_from_csv(tmp_path / "out" / "grades.csv")] == ["zoe", "ana", "-max", "bo"]
    args = ["export", NAME, "--out", str(tmp_path / "out"), "--config", str(tmp_path / "lms.toml"),
            "--roster", str(tmp_path / "roster.csv")]
    assert lms.main(args) == 0
    assert read(tmp_path / "out" / "canvas.csv") == canvas and read(tmp_path / "out" / "moodle.csv") == moodle
    assert lms.spreadsheet_safe("-1") == "-1" and lms.spreadsheet_safe("2.5") == "2.5"
    assert all(lms.spreadsheet_safe(f) == "'" + f for f in FORMULAS)
