"""Chapter 9: the recorded comparison the book shows."""

from __future__ import annotations

import pytest

from attn_tutorial.results import load_records

from conftest import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _committed_results(monkeypatch):
    """These tests read the records the book shows, not the empty per-test results folder."""
    monkeypatch.setenv("ATTN_RESULTS_DIR", str(ROOT / "book" / "results"))


COMPARED = ["ch05_none", "ch05_san", "ch07_coatt", "ch07_hiecoatt", "ch08_ban"]


@pytest.mark.parametrize("dataset", ["relational", "easy"])
def test_the_comparison_is_recorded_for_every_model_in_the_cpu_profile(dataset):
    for prefix in COMPARED:
        records = {r["profile"]: r for r in load_records(f"{prefix}_{dataset}")}
        assert "cpu" in records, f"{prefix}_{dataset} has no cpu record"
        record = records["cpu"]
        # three seeds on the relational set; easy-VQA saturates, at least two seeds where time allowed one more
        assert len(record["seeds"]) >= (3 if dataset == "relational" else 1), f"{prefix}_{dataset}: {record['seeds']}"
        assert all(run["profile"] == "cpu" and run["n_params"] > 0 for run in record["runs"])
        expected = {"accuracy", "relational", "non_relational"} if dataset == "relational" else {"accuracy"}
        assert expected <= set(record["summary"]), prefix
