from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from attn_tutorial import results
from attn_tutorial.paths import checkpoint_path, results_dir
from conftest import ROOT


@pytest.fixture
def toy_experiment():
    @results.experiment("toy_test", "a toy experiment for the tests")
    def run(ctx: results.RunContext) -> dict:
        score = torch.rand(1).item()  # depends on the seed only
        ctx.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        ctx.checkpoint.write_text("weights")
        return {"metrics": {"accuracy": score, "f1": score / 2}, "n_params": 10, "epochs_run": 1,
                "time_per_epoch_s": 0.01}

    yield "toy_test"
    results.EXPERIMENTS.pop("toy_test", None)


def test_record_carries_provenance(toy_experiment):
    record = results.run_experiment(toy_experiment, "smoke", seed=3, device="cpu")
    for key in ("experiment", "profile", "seed", "device", "metrics", "n_params", "versions", "git_commit",
                "created", "time_per_epoch_s", "profile_sizes"):
        assert key in record, key
    assert record["profile"] == "smoke" and record["seed"] == 3 and record["device"].startswith("cpu")
    assert record["versions"]["torch"] == torch.__version__
    assert checkpoint_path(toy_experiment, "smoke", 3).is_file()  # one checkpoint per experiment/profile/seed


def test_same_seed_same_record_metrics(toy_experiment):
    a = results.run_experiment(toy_experiment, "smoke", seed=1, device="cpu")
    b = results.run_experiment(toy_experiment, "smoke", seed=1, device="cpu")
    c = results.run_experiment(toy_experiment, "smoke", seed=2, device="cpu")
    assert a["metrics"] == b["metrics"] != c["metrics"]


def test_write_record_summarises_seeds(toy_experiment):
    runs = [results.run_experiment(toy_experiment, "smoke", seed=s, device="cpu") for s in (0, 1, 2)]
    path = results.write_record(toy_experiment, runs, command="pytest")
    assert path == results_dir() / "toy_test" / "smoke.json"
    record = json.loads(path.read_text())
    values = [r["metrics"]["accuracy"] for r in runs]
    assert record["summary"]["accuracy"]["mean"] == pytest.approx(sum(values) / 3)
    assert record["summary"]["accuracy"]["n"] == 3 and record["summary"]["accuracy"]["std"] > 0
    assert record["produced_by"] == "pytest" and record["seeds"] == [0, 1, 2]
    table = results.records_table(toy_experiment)
    assert list(table.index) == ["smoke"] and "±" in table.loc["smoke", "accuracy (%)"]
    (line,) = results.provenance(toy_experiment)  # plain text, as a notebook prints it
    assert line.startswith("smoke: seeds 0, 1, 2 on cpu") and "produced by pytest" in line and "`" not in line
    (line,) = results.provenance(toy_experiment, markdown=True)  # as the results page displays it
    assert line.startswith("`smoke`: seeds 0, 1, 2 on cpu") and "produced by `pytest`" in line


def test_unknown_experiment_and_bad_output():
    with pytest.raises(KeyError, match="unknown experiment 'nope'"):
        results.run_experiment("nope", "smoke")

    @results.experiment("broken_test", "returns no metrics")
    def broken(ctx):
        return {"accuracy": 1.0}

    try:
        with pytest.raises(ValueError, match="returned no 'metrics'"):
            results.run_experiment("broken_test", "smoke", device="cpu")
    finally:
        results.EXPERIMENTS.pop("broken_test")
    with pytest.raises(ValueError, match="at least one run"):
        results.write_record("x", [], command="")


def test_cli_lists_the_chapter_experiments():
    out = subprocess.run([sys.executable, "-m", "attn_tutorial.results", "list"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ch00_bow" in out.stdout


def test_recorded_results_in_the_book_are_well_formed():
    """Every committed record names its profile, device, seeds, versions and the command that made it."""
    folder = ROOT / "book" / "results"
    records = list(folder.glob("*/*.json"))
    for path in records:
        record = json.loads(path.read_text())
        assert path.stem == record["profile"] and path.parent.name == record["experiment"]
        commands = record["produced_by"]  # one command, or one per merge of later seeds (write_record)
        commands = [commands] if isinstance(commands, str) else commands
        assert commands and all(c.startswith("python -m attn_tutorial.results run") for c in commands)
        assert len(record["runs"]) == len(record["seeds"]) >= 1
        for run in record["runs"]:
            assert run["device"] and run["versions"]["torch"] and run["metrics"]
            assert all(isinstance(v, (int, float)) for v in run["metrics"].values())


def test_records_keep_lists_of_numbers_on_one_line_and_round_trip():
    import json

    from attn_tutorial.results import dumps_record

    record = {"runs": [{"metrics": {"accuracy": 0.5}, "maps": [[0.25, -1e-05, 3], [1.5e+20, 0.0]],
                        "note": "[0,\n 1] stays as written", "history": [{"epoch": 1}], "empty": []}]}
    text = dumps_record(record)
    assert json.loads(text) == record
    assert "[0.25, -1e-05, 3]" in text and "[1.5e+20, 0.0]" in text
    assert '"note": "[0,\\n 1] stays as written"' in text  # strings are never touched
    assert len(text) < len(json.dumps(record, indent=2)) and text.endswith("\n")


def test_a_record_names_the_commit_its_process_loaded(monkeypatch):
    """A commit made while a long run trains must not be credited with that run's numbers."""
    from attn_tutorial import results

    results.code_commit.cache_clear()
    monkeypatch.setattr(results, "git_commit", lambda: "aaaaaaa")
    assert results.code_commit() == "aaaaaaa"
    monkeypatch.setattr(results, "git_commit", lambda: "bbbbbbb")  # HEAD moves during the run
    assert results.code_commit() == "aaaaaaa"
    results.code_commit.cache_clear()


def test_per_seed_tables_of_the_results_page_match_the_records():
    """book/results.md's per-seed blocks are written from the records (tools/results_tables.py)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import results_tables

    text = (ROOT / "book" / "results.md").read_text()
    assert results_tables.BLOCK.search(text), "book/results.md has no per-seed block"
    assert results_tables.render(text) == text, "run python tools/results_tables.py"
    changed = text.replace("<!-- end per-seed -->", "| `x` | 9 | 1.0 |\n<!-- end per-seed -->", 1)
    assert results_tables.render(changed) != changed  # a hand-edited table is caught


def test_a_metric_that_is_not_a_number_is_refused_by_name():
    from attn_tutorial.results import summarise

    runs = [{"seed": 0, "metrics": {"loss": 1.0, "step": 3.0}}, {"seed": 1, "metrics": {"loss": 2.0, "step": float("nan")}}]
    with pytest.raises(ValueError, match=r"metric 'step' is not a finite number in seed\(s\) \[1\]"):
        summarise(runs)


def test_a_new_module_not_yet_committed_makes_the_commit_dirty(tmp_path, monkeypatch):
    import subprocess

    from attn_tutorial import results

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "attn_tutorial").mkdir()
    (tmp_path / "attn_tutorial" / "old.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    monkeypatch.setattr(results, "repo_root", lambda: tmp_path)
    assert not results.git_commit().endswith("-dirty")
    (tmp_path / "notes.md").write_text("prose\n")  # not code: still clean
    assert not results.git_commit().endswith("-dirty")
    (tmp_path / "attn_tutorial" / "new.py").write_text("y = 2\n")  # a new module the run imports
    assert results.git_commit().endswith("-dirty")
