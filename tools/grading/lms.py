"""Grades a learning platform can import: a Canvas gradebook CSV, a Moodle grade-import CSV, and the
result GitHub Classroom's reporter reads. Hand-written infrastructure.

``tools/classroom.py grade`` calls this after ``grades.csv``: next to it, ``canvas.csv`` and
``moodle.csv`` (one row per student, in the order of ``grades.csv``, the total score of
``grades.csv``). What the files are called inside each platform (column names, the assignment's
title and id) and how a grader id (the submission's file or folder name) becomes the platform's
student identifier (an optional roster CSV) are set in ``tools/grading/lms.toml``, whose comments
document every key.

    python tools/grading/lms.py export NAME [--out DIR] [--roster CSV] [--config TOML]
        write canvas.csv and moodle.csv again from DIR/grades.csv (default DIR:
        _build/classroom/grades/NAME), e.g. after fixing the roster, without grading again.

    python tools/grading/lms.py github NAME [--out DIR]
        print ``result=<base64 JSON>`` for GitHub Classroom's autograding reporter from the one
        student of DIR/grades.csv (the student-repository workflow in tools/grading/github_classroom/).

The formats follow each platform's import code and documentation:

* Canvas (``app/models/gradebook_importer.rb`` of instructure/canvas-lms): a header row whose first
  columns are ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``; then one column
  per assignment titled ``Title (assignment id)`` (or ``Title`` alone: matched by title, else a new
  assignment); an optional row whose first cell says ``Points Possible``. A student is found by the
  Canvas user id, then the SIS user id or SIS login id, then the name. An empty cell or ``-`` means
  "no score".
* Moodle (grade/import/csv, docs.moodle.org "Grade import"): any header; on import the teacher maps
  one column to the user field that identifies students (email address, ID number, username or
  Moodle id) and each other column to a grade item or its feedback. An empty cell or ``-`` means
  "no grade".

The roster is checked before any grading: UTF-8 (an Excel BOM is fine; Excel's Windows-1252 "CSV"
is an error that says how to save it), one row per grader id, and no identifier a platform finds
students by (canvas.columns' ID, SIS User ID and SIS Login ID, moodle.roster_column) given to two
students, which on import would let one grade overwrite the other. Every CSV the grader writes
(grades.csv, feedback.csv, canvas.csv, moodle.csv) puts a ' before a cell that a spreadsheet would run
as a formula (one starting with = + - @, a tab or a carriage return: OWASP's "CSV Injection"), such
as a student who calls themselves =HYPERLINK(...); numbers stay as they are.

So a graded student always gets a number, 0 included (a submission that failed or timed out earned
its points, possibly none); never an empty cell, which both platforms read as "no grade".
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIG = HERE / "lms.toml"
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_FINDS_BY = ("ID", "SIS User ID", "SIS Login ID", "Student")  # what Canvas matches a student on
# Canvas's importer drops every column whose title contains one of these (its totals): no assignment title may
CANVAS_NOT_ASSIGNMENTS = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                          "Final Grade", "Override Score", "Override Grade", "Override Status")
DEFAULTS = {
    "roster": {"path": "", "grader_id_column": "grader_id", "missing": "error"},
    "canvas": {"enabled": True, "points_possible_row": True, "grader_id_column": "SIS Login ID",
               "columns": {name: name for name in CANVAS_IDENTITY}},
    "moodle": {"enabled": True, "id_column": "Email address", "roster_column": "Email address",
               "feedback_column": "Feedback"},
    "assignments": {},
}
ASSIGNMENT_KEYS = {"canvas_title": str, "canvas_id": (str, int), "moodle_item": str}
KINDS = {str: "a string", bool: "true or false"}
CHOICES = {("roster", "missing"): ("error", "warn"), ("canvas", "grader_id_column"): CANVAS_FINDS_BY}


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# --- spreadsheet formulas ---------------------------------------------------------------------------
# A cell that starts with one of these is run as a formula when a CSV is opened in a spreadsheet
# (OWASP, "CSV Injection"): a student may call themselves =HYPERLINK(...). Every CSV the grader writes
# prefixes such a cell with ' (numbers, such as -1, are left as they are).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def spreadsheet_safe(cell: object) -> str:
    """``cell`` as text that no spreadsheet runs as a formula."""
    text = "" if cell is None else str(cell)
    return "'" + text if text.startswith(FORMULA_START) and not NUMBER.fullmatch(text) else text


def unescape_cell(text: str) -> str:
    """The text :func:`spreadsheet_safe` was given."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text


def write_csv(path: Path, rows) -> None:
    """Write ``rows`` to ``path`` as UTF-8 CSV, every cell :func:`spreadsheet_safe`."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([spreadsheet_safe(cell) for cell in row] for row in rows)


# --- the configuration ------------------------------------------------------------------------------

def load_config(path: Path = CONFIG, known: list[str] | None = None) -> dict:
    """The settings of ``path`` over the defaults, checked: an unknown key, a value of the wrong
    type or outside its choices, or a table for an assignment not in ``known`` is an error that
    names the file and the key."""
    path = Path(path)
    try:
        given = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SystemExit(f"cannot read the LMS settings {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise SystemExit(f"{path} is not valid TOML: {e}") from None
    config = _merged(DEFAULTS, given, path, "")
    for (table, key), allowed in CHOICES.items():
        if config[table][key] not in allowed:
            raise SystemExit(f"{path}: {table}.{key} = {config[table][key]!r}: expected one of "
                             f"{', '.join(map(repr, allowed))}")
    moodle = config["moodle"]
    if not moodle["id_column"] or moodle["id_column"] == moodle["feedback_column"]:
        raise SystemExit(f"{path}: moodle.id_column = {moodle['id_column']!r}: expected a name, other than "
                         "moodle.feedback_column, for the column Moodle identifies students by")
    for name, settings in config["assignments"].items():
        _check_assignment(path, name, settings, known)
    config["_path"] = path
    return config


def _merged(defaults: dict, given: dict, path: Path, where: str) -> dict:
    """``given`` over ``defaults``, one table deep at a time; the types are those of the defaults."""
    if not isinstance(given, dict):
        raise SystemExit(f"{path}: {where.rstrip('.')} must be a table, got {given!r}")
    merged = dict(defaults)
    for key, value in given.items():
        if key not in defaults:
            raise SystemExit(f"{path}: unknown key {where}{key}; expected one of {', '.join(defaults)}")
        default = defaults[key]
        if isinstance(default, dict) and default:
            merged[key] = _merged(default, value, path, f"{where}{key}.")
        elif isinstance(default, dict):
            if not isinstance(value, dict):
                raise SystemExit(f"{path}: {where}{key} must be a table, got {value!r}")
            merged[key] = value
        elif type(value) is not type(default):  # noqa: E721 (bool is an int, and must not pass for one)
            raise SystemExit(f"{path}: {where}{key} must be {KINDS[type(default)]}, got {value!r}")
        else:
            merged[key] = value
    return merged


def _check_assignment(path: Path, name: str, settings: object, known: list[str] | None) -> None:
    where = f"assignments.{name}"
    if known is not None and name not in known:
        raise SystemExit(f"{path}: [{where}] names no assignment; the assignments are {', '.join(known)}")
    if not isinstance(settings, dict):
        raise SystemExit(f"{path}: {where} must be a table, got {settings!r}")
    for key, value in settings.items():
        if key not in ASSIGNMENT_KEYS:
            raise SystemExit(f"{path}: unknown key {where}.{key}; expected one of {', '.join(ASSIGNMENT_KEYS)}")
        if not isinstance(value, ASSIGNMENT_KEYS[key]) or isinstance(value, bool):
            raise SystemExit(f"{path}: {where}.{key} must be a string{' or a number' if key == 'canvas_id' else ''}, "
                             f"got {value!r}")
    canvas_id = str(settings.get("canvas_id", ""))
    if canvas_id and not canvas_id.isdigit():
        raise SystemExit(f"{path}: {where}.canvas_id = {canvas_id!r}: expected the digits of the Canvas assignment id "
                         "(the number after /assignments/ in its address), or \"\" for none")
    if "moodle_item" in settings and not settings["moodle_item"]:
        raise SystemExit(f"{path}: {where}.moodle_item must not be empty: it heads the grade column in moodle.csv")
    _check_canvas_title(path, where, settings.get("canvas_title", name), canvas_id)


def _check_canvas_title(path: Path, where: str, title: str, canvas_id: str) -> None:
    """The title must reach Canvas's importer as an assignment's (app/models/gradebook_importer.rb)."""
    hidden = [word for word in CANVAS_NOT_ASSIGNMENTS if word in title]
    looks_like_id = not canvas_id and re.search(r"\s\(\d+\)$", title)  # Canvas would read the number as the id
    if not title or title in CANVAS_IDENTITY or hidden or looks_like_id:
        raise SystemExit(f"{path}: {where}.canvas_title = {title!r}: Canvas would not read it as an assignment "
                         "(it must not be empty, be one of its student columns, contain one of "
                         f"{', '.join(CANVAS_NOT_ASSIGNMENTS)}, or end in a number in brackets without a canvas_id)")


def assignment_settings(config: dict, name: str) -> dict:
    """The title and id of assignment ``name`` on each platform (the defaults: its name, no id)."""
    given = config["assignments"].get(name, {})
    return {"canvas_title": given.get("canvas_title", name), "canvas_id": str(given.get("canvas_id", "")),
            "moodle_item": given.get("moodle_item", name)}


# --- the roster ----------------------------------------------------------------------------------

def roster_path(config: dict, cli: Path | None) -> Path | None:
    """The roster to use: the command line's, else ``roster.path`` (relative to the settings file)."""
    if cli is not None:
        return Path(cli)
    if config["roster"]["path"]:
        return (config["_path"].parent / config["roster"]["path"]).resolve()
    return None


def load_roster(path: Path, config: dict) -> dict[str, dict[str, str]]:
    """``{grader id: row}`` from the roster CSV (UTF-8, an Excel BOM is fine); rows with an empty
    grader id (such as Canvas's "Points Possible" row) are skipped."""
    key = config["roster"]["grader_id_column"]
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise SystemExit(f"cannot read the roster {path}: {e.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SystemExit(f"the roster {path} is not UTF-8 (byte {data[e.start]:#04x} on line {line}"
                         + ("; it reads as Windows-1252, the encoding Excel's plain 'CSV (Comma delimited)' uses on "
                            "Windows" if _decodes(data, "cp1252") else "")
                         + "): save it as 'CSV UTF-8 (Comma delimited)', or convert it, e.g. "
                         "iconv -f WINDOWS-1252 -t UTF-8") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = reader.fieldnames or []
    rows = list(reader)
    if key not in columns:
        raise SystemExit(f"the roster {path} has no column {key!r} (roster.grader_id_column) giving each "
                         f"student's grader id; its columns are {', '.join(columns) or 'none'}")
    roster: dict[str, dict[str, str]] = {}
    lines: dict[str, int] = {}
    for number, row in enumerate(rows, start=2):
        grader_id = (row.get(key) or "").strip()
        if not grader_id:
            continue
        if grader_id in roster:
            raise SystemExit(f"the roster {path} gives the grader id {grader_id!r} twice (line {number})")
        roster[grader_id] = {k: (v or "").strip() for k, v in row.items() if k is not None}
        lines[grader_id] = number
    _check_roster_columns(path, columns, config)
    _check_identifiers(path, roster, lines, config)
    return roster


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _identifier_columns(config: dict) -> list[str]:
    """The roster's columns a platform finds a student by (a name is not one: two students may share it)."""
    columns = []
    if config["canvas"]["enabled"]:
        columns += [config["canvas"]["columns"][name] for name in CANVAS_FINDS_BY if name != "Student"]
    if config["moodle"]["enabled"]:
        columns.append(config["moodle"]["roster_column"])
    return list(dict.fromkeys(columns))


def _check_identifiers(path: Path, roster: dict[str, dict[str, str]], lines: dict[str, int], config: dict) -> None:
    """No two students share an identifier (on import one grade would overwrite the other), and none
    starts like a spreadsheet formula (written with a ' before it, it would match no student)."""
    for column in _identifier_columns(config):
        seen: dict[str, str] = {}
        for grader_id, row in roster.items():
            value = row.get(column, "")
            if not value:
                continue
            if value.startswith(FORMULA_START) and not NUMBER.fullmatch(value):
                raise SystemExit(f"the roster {path} gives {column} {value!r} on line {lines[grader_id]}: it starts "
                                 f"with {value[0]!r}, which a spreadsheet runs as a formula, so it is written with a ' "
                                 "before it and would match no student on import; correct the roster")
            key = value.casefold() if "@" in value else value  # e-mail addresses: case does not matter
            if key in seen:
                other = seen[key]
                raise SystemExit(f"the roster {path} gives {column} {value!r} to two students: line {lines[other]} "
                                 f"(grader id {other!r}) and line {lines[grader_id]} (grader id {grader_id!r}); on "
                                 "import one grade would overwrite the other: correct the roster")
            seen[key] = grader_id


def _check_roster_columns(path: Path, columns: list[str], config: dict) -> None:
    """Each enabled platform finds in the roster a column that identifies students."""
    canvas = config["canvas"]["columns"]
    if config["canvas"]["enabled"] and not any(canvas[name] in columns for name in CANVAS_FINDS_BY):
        raise SystemExit(f"the roster {path} has none of the columns Canvas finds students by "
                         f"({', '.join(canvas[name] for name in CANVAS_FINDS_BY)}, set in canvas.columns); "
                         "add one, or set canvas.enabled = false")
    column = config["moodle"]["roster_column"]
    if config["moodle"]["enabled"] and column not in columns:
        raise SystemExit(f"the roster {path} has no column {column!r} (moodle.roster_column) for Moodle's "
                         "user identifier; add it, or set moodle.enabled = false")


# --- what is exported ---------------------------------------------------------------------------------

@dataclass
class Grade:
    """One student's row of grades.csv."""
    student: str
    status: str
    score: float
    max_score: float
    tests: list[tuple[str, float, float]] = field(default_factory=list)  # (test, points, max points)


@dataclass
class Plan:
    """What to export for one assignment: the settings, the roster (None: without one) and where it is."""
    name: str
    config: dict
    roster: dict[str, dict[str, str]] | None
    roster_file: Path | None


def prepare(name: str, students: list[str], config_path: Path | None = None, roster: Path | None = None,
            known: list[str] | None = None) -> Plan:
    """Read and check the settings and the roster before any grading, so that a mistake costs nothing:
    a student missing from the roster is an error (``roster.missing = "error"``) or a warning."""
    config = load_config(config_path or CONFIG, known)
    source = roster_path(config, roster)
    plan = Plan(name, config, load_roster(source, config) if source else None, source)
    if plan.roster is None:
        warn(f"no roster (roster.path in {config['_path']}, or --roster): {_fallback_text(config)}. This matches "
             "only if the submissions are named by that identifier; see the comments of the settings file")
        return plan
    unmatched = [s for s in students if _unmatched(plan, s)]
    if unmatched:
        text = (f"{len(unmatched)} student(s) have no usable row in the roster {source}: {', '.join(unmatched)}; "
                f"give each a row with its grader id in {config['roster']['grader_id_column']!r}")
        if config["roster"]["missing"] == "error":
            raise SystemExit(f"{text} (or set roster.missing = \"warn\" in {config['_path']} to export them with "
                             "their grader id)")
        warn(f"{text}. Exported with their grader id: {_fallback_text(config)}")
    return plan


def _fallback_text(config: dict) -> str:
    """Where the grader id goes when no roster row gives the platform's identifier."""
    parts = []
    if config["canvas"]["enabled"]:
        parts.append(f"canvas.csv puts the grader id in 'Student' and {config['canvas']['grader_id_column']!r}")
    if config["moodle"]["enabled"]:
        parts.append(f"moodle.csv in {config['moodle']['id_column']!r}")
    return "; ".join(parts) or "both platforms are disabled"


def _unmatched(plan: Plan, student: str) -> bool:
    """Whether an enabled platform would not find ``student`` from the roster (no row, or its
    identifiers empty: Moodle skips such a row without a word, Canvas cannot match it)."""
    return ((plan.config["canvas"]["enabled"] and _canvas_row(plan, student) is None)
            or (plan.config["moodle"]["enabled"] and _moodle_id(plan, student) is None))


def _canvas_row(plan: Plan, student: str) -> dict[str, str] | None:
    """Canvas's five student columns from the roster, or None if no roster row identifies ``student``."""
    row = (plan.roster or {}).get(student)
    columns = plan.config["canvas"]["columns"]
    if row is None or not any(row.get(columns[name]) for name in CANVAS_FINDS_BY):
        return None
    return {name: row.get(columns[name], "") for name in CANVAS_IDENTITY}


def _moodle_id(plan: Plan, student: str) -> str | None:
    """Moodle's user identifier from the roster, or None."""
    row = (plan.roster or {}).get(student)
    return (row or {}).get(plan.config["moodle"]["roster_column"]) or None


def grades_from_results(results: list) -> list[Grade]:
    """The rows of grades.csv from the grader's ``StudentResult`` list, in the same order."""
    return [Grade(r.student, r.status, r.score, sum(t.max_points for t in r.tests),
                  [(t.test, t.points, t.max_points) for t in r.tests]) for r in results]


def grades_from_csv(path: Path) -> list[Grade]:
    """The rows of a grades.csv that ``tools/classroom.py grade`` wrote."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except OSError as e:
        raise SystemExit(f"cannot read {path}: {e.strerror}; run tools/classroom.py grade first") from None
    header = rows[0] if rows else []
    if header[:4] != ["student", "status", "score", "max_score"] or header[-2:] != ["submission", "seconds"]:
        raise SystemExit(f"{path} is not a grades.csv of tools/classroom.py: its header is {header}")
    tests = [re.fullmatch(r"(.*) \(([^()]*)\)", unescape_cell(column)) for column in header[4:-2]]
    if not all(tests):
        raise SystemExit(f"{path}: expected test columns named 'test (points)', got {header[4:-2]}")
    return [Grade(unescape_cell(row[0]), unescape_cell(row[1]), float(row[2]), float(row[3]),
                  [(m.group(1), float(points), float(m.group(2))) for m, points in zip(tests, row[4:-2])])
            for row in rows[1:] if row]


def _points(value: float) -> str:
    return f"{value:g}"  # as grades.csv writes them


# --- the files ----------------------------------------------------------------------------------------

def canvas_table(plan: Plan, grades: list[Grade]) -> list[list[str]]:
    """canvas.csv: Canvas's five student columns, the assignment's column and, if set, the Points
    Possible row; one row per student with the total score."""
    settings = assignment_settings(plan.config, plan.name)
    title = settings["canvas_title"] + (f" ({settings['canvas_id']})" if settings["canvas_id"] else "")
    table = [[*CANVAS_IDENTITY, title]]
    if plan.config["canvas"]["points_possible_row"] and grades:
        table.append(["Points Possible", "", "", "", "", _points(grades[0].max_score)])
    for grade in grades:
        identity = _canvas_identity(plan, grade.student)
        table.append([identity[name] for name in CANVAS_IDENTITY] + [_points(grade.score)])
    return table


def _canvas_identity(plan: Plan, student: str) -> dict[str, str]:
    """The roster's Canvas columns for ``student``, else the grader id in 'Student' and canvas.grader_id_column."""
    identity = _canvas_row(plan, student)
    if identity is not None:
        return identity
    identity = dict.fromkeys(CANVAS_IDENTITY, "")
    identity["Student"] = identity[plan.config["canvas"]["grader_id_column"]] = student
    return identity


def moodle_table(plan: Plan, grades: list[Grade]) -> list[list[str]]:
    """moodle.csv: the user identifier, the grade item's column and (unless switched off) a
    feedback column with the points of each test; one row per student."""
    moodle = plan.config["moodle"]
    item = assignment_settings(plan.config, plan.name)["moodle_item"]
    table = [[moodle["id_column"], item] + ([moodle["feedback_column"]] if moodle["feedback_column"] else [])]
    for grade in grades:
        identifier = _moodle_id(plan, grade.student) or grade.student
        feedback = [feedback_text(grade)] if moodle["feedback_column"] else []
        table.append([identifier, _points(grade.score), *feedback])
    return table


def feedback_text(grade: Grade) -> str:
    """A line for the platform's feedback field: the total, the status and each test's points (never
    a test's message: feedback.csv and the feedback pages have those)."""
    tests = "; ".join(f"{test} {_points(p)}/{_points(m)}" for test, p, m in grade.tests)
    return f"{_points(grade.score)}/{_points(grade.max_score)} points ({grade.status}). {tests}".strip()


def write(plan: Plan, grades: list[Grade], out: Path) -> list[Path]:
    """Write canvas.csv and moodle.csv into ``out`` (a disabled platform's old file is removed, so
    that a stale one is never imported); return the files written."""
    written = []
    for platform, table in (("canvas", canvas_table), ("moodle", moodle_table)):
        path = out / f"{platform}.csv"
        path.unlink(missing_ok=True)
        if plan.config[platform]["enabled"]:
            write_csv(path, table(plan, grades))
            written.append(path)
    return written


# --- GitHub Classroom -----------------------------------------------------------------------------------

def github_result(grade: Grade) -> str:
    """The base64 JSON that classroom-resources/autograding-grading-reporter reads from
    ``<RUNNER>_RESULTS``: it adds ``tests[].score`` and ``max_score`` into "Points x/y" on the check
    run GitHub Classroom reads."""
    tests = [{"name": test, "status": "pass" if points >= top else "fail", "score": points,
              "message": f"{_points(points)}/{_points(top)} points", "test_code": "", "filename": "",
              "line_no": 0, "duration": 0} for test, points, top in grade.tests]
    status = "pass" if grade.status == "graded" and grade.score >= grade.max_score else (
        "fail" if grade.status == "graded" else "error")
    result = {"version": 1, "status": status, "max_score": grade.max_score, "tests": tests}
    return base64.b64encode(json.dumps(result).encode()).decode()


# --- the command line ----------------------------------------------------------------------------------

def assignment_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "assignments").glob("*.md") if p.stem != "README")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command, text in (("export", "write canvas.csv and moodle.csv again from grades.csv"),
                          ("github", "print result=<base64> for GitHub Classroom's reporter")):
        p = sub.add_parser(command, help=text)
        p.add_argument("name", help="the assignment")
        p.add_argument("--out", type=Path, default=None,
                       help="the grading folder (default: _build/classroom/grades/NAME)")
        if command == "export":
            p.add_argument("--roster", type=Path, default=None, help="the roster CSV (default: roster.path)")
            p.add_argument("--config", type=Path, default=CONFIG,
                           help=f"the settings (default: {CONFIG.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    out = args.out or ROOT / "_build" / "classroom" / "grades" / args.name
    grades = grades_from_csv(out / "grades.csv")
    if args.command == "github":
        if len(grades) != 1:
            raise SystemExit(f"{out / 'grades.csv'} has {len(grades)} students; the GitHub workflow grades one")
        print(f"Points {_points(grades[0].score)}/{_points(grades[0].max_score)}", file=sys.stderr)
        print(f"result={github_result(grades[0])}")
        return 0
    plan = prepare(args.name, [g.student for g in grades], args.config, args.roster, assignment_names())
    for path in write(plan, grades, out):
        print(f"{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
