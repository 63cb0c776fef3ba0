"""The test command's report (tools/run_tests.py): times are printed against their budgets, loudly
when over, and never fail the run."""

from __future__ import annotations

import json
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import run_tests  # noqa: E402


def test_benchmarks_over_budget_are_loud_but_not_failures(tmp_path, capsys):
    report = tmp_path / "benchmarks.jsonl"
    lines = [{"name": "grading", "seconds": 3.0, "budget_s": 15.0},
             {"name": "sweep a", "seconds": 70.0, "budget_s": None, "group": "sweep", "group_budget_s": 100.0},
             {"name": "sweep b", "seconds": 40.0, "budget_s": None, "group": "sweep", "group_budget_s": 100.0}]
    report.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = run_tests.benchmarks(report)
    assert [(r["name"], r["seconds"], r["budget_s"]) for r in rows] == [("grading", 3.0, 15.0), ("sweep", 110.0, 100.0)]
    over = run_tests.print_benchmarks(rows)
    out = capsys.readouterr().out
    assert [r["name"] for r in over] == ["sweep"]
    assert "OVER BUDGET" in out and "1 benchmark(s) OVER BUDGET: sweep" in out and "CI does not fail" in out
    assert run_tests.benchmarks(tmp_path / "missing.jsonl") == []


def test_report_writes_the_step_table_and_fails_only_on_failed_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_tests, "REPORTS", tmp_path)
    monkeypatch.setattr(run_tests, "ROOT", tmp_path.parent)
    bench = tmp_path / "benchmarks.jsonl"
    bench.write_text(json.dumps({"name": "slow", "seconds": 9.0, "budget_s": 1.0}) + "\n")
    steps = [("unit tests", 12.0, True), ("browser check", 3.0, True)]
    assert run_tests.report(steps, [10, 0, 0], tmp_path / "none.xml", None, bench, 0.0) == 0  # over budget: still 0
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert [s["step"] for s in timings["steps"]] == ["unit tests", "browser check"]
    assert timings["over_budget"] == ["slow"] and timings["passed"] == 10
    assert run_tests.report([("unit tests", 1.0, False)], [0, 1, 0], tmp_path / "none.xml", None, bench, 0.0) == 1
    assert "course: 10 passed, 0 failed" in capsys.readouterr().out
