"""Chapter 9: the diagnostic's question filter, and the recorded comparison the book shows."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.comparison import questions_of_type
from attn_tutorial.results import load_records
from attn_tutorial.vqa_data import generate_relational

pytestmark = pytest.mark.usefixtures("one_thread")


def test_questions_of_type_keeps_one_type_with_its_images():
    split = generate_relational(12, questions_per_image=6, seed=2)
    part = questions_of_type(split, "horizontal")
    keep = [q for q, t in enumerate(split.question_types) if t == "horizontal"]
    assert len(part) == len(keep) and set(part.question_types) == {"horizontal"}
    assert part.questions == [split.questions[q] for q in keep]
    for new, old in enumerate(keep):  # every question still points at its own image and answer
        assert torch.equal(part.images[part.image_index[new]], split.images[split.image_index[old]])
        assert part.answer_text(new) == split.answer_text(old)
    assert len(part.images) == len(set(split.image_index[keep].tolist()))
    with pytest.raises(ValueError, match="no question of type 'colour'"):
        questions_of_type(split, "colour")


COMPARED = ["ch05_none", "ch05_san", "ch07_coatt", "ch07_hiecoatt", "ch08_ban"]


@pytest.mark.parametrize("dataset", ["relational", "easy"])
def test_the_comparison_is_recorded_for_every_model_in_the_cpu_profile(dataset):
    for prefix in COMPARED:
        records = {r["profile"]: r for r in load_records(f"{prefix}_{dataset}")}
        assert "cpu" in records, f"{prefix}_{dataset} has no cpu record"
        record = records["cpu"]
        assert len(record["seeds"]) >= 2, f"{prefix}_{dataset}: {record['seeds']}"
        assert all(run["profile"] == "cpu" and run["n_params"] > 0 for run in record["runs"])
        expected = {"accuracy", "relational", "non_relational"} if dataset == "relational" else {"accuracy"}
        assert expected <= set(record["summary"]), prefix
