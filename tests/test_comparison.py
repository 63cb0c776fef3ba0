"""Chapter 9: the recorded comparison the book shows."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.results import load_records

from conftest import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def committed_results(monkeypatch):
    """Read the records the book shows, not the empty per-test results folder."""
    monkeypatch.setenv("ATTN_RESULTS_DIR", str(ROOT / "book" / "results"))


COMPARED = ["ch05_none", "ch05_san", "ch07_coatt", "ch07_hiecoatt", "ch08_ban"]


@pytest.mark.usefixtures("committed_results")
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


def test_select_types_keeps_only_those_questions_with_their_images_and_answers():
    from attn_tutorial.comparison import select_types
    from attn_tutorial.vqa_data import generate_relational

    split = generate_relational(40, questions_per_image=10, seed=5, cache=False)
    horizontal = select_types(split, ("horizontal",))
    expected = [q for q, t in enumerate(split.question_types) if t == "horizontal"]
    assert 0 < len(horizontal) == len(expected) < len(split)
    assert set(horizontal.question_types) == {"horizontal"}
    assert horizontal.images is split.images  # images are shared, not copied
    assert horizontal.image_index.tolist() == split.image_index[expected].tolist()
    assert horizontal.answers.tolist() == split.answers[expected].tolist()
    assert horizontal.questions == [split.questions[q] for q in expected]
    # the answer still agrees with the scene: left iff the asked colour's centre is in the left half
    centres, colours = horizontal.scenes["centres"], horizontal.scenes["question_colour"]
    for q in range(len(horizontal)):
        x = float(centres[horizontal.image_index[q], colours[q], 0])
        assert horizontal.answer_text(q) == ("left" if x < 32 else "right")
    both = select_types(split, ("shape", "count"))
    assert set(both.question_types) == {"shape", "count"} and not both.relational.all() and both.relational.any()
    # cached region features belong to the images, so they travel with them
    import dataclasses

    import torch

    with_features = dataclasses.replace(split, features=torch.randn(len(split.images), 8, 5))
    assert select_types(with_features, ("shape",)).features is with_features.features


def test_select_types_rejects_unknown_or_no_types():
    from attn_tutorial.comparison import select_types
    from attn_tutorial.vqa_data import generate_relational

    split = generate_relational(10, questions_per_image=4, seed=5, cache=False)
    with pytest.raises(ValueError, match="non-empty subset"):
        select_types(split, ("colour",))
    with pytest.raises(ValueError, match="non-empty subset"):
        select_types(split, ())


def test_data_budgets_compare_images_at_equal_steps():
    from attn_tutorial.comparison import DATA_BUDGETS
    from attn_tutorial.results import run_experiment
    from attn_tutorial.vqa_models import VQA_TRAINING

    for profile in ("cpu", "smoke"):
        budgets = DATA_BUDGETS[profile]
        (small, small_epochs), (same, long_epochs), (large, large_epochs) = (
            budgets["small"], budgets["small_long"], budgets["large"])
        assert small == same < large and small_epochs == large_epochs
        assert long_epochs * small == large_epochs * large  # "small_long" takes the steps of "large"
    run = run_experiment("ch09_horizontal_small", "smoke", seed=0, progress=False)
    extra = run["extra"]
    per_batch = VQA_TRAINING["smoke"]["images_per_batch"]
    assert extra["types"] == ["horizontal"] and extra["epochs"] == 1
    assert extra["train_images"] == 360 and extra["steps"] == -(-360 // per_batch)
    assert 0 < extra["train_questions"] < 10 * 360 / 2
    assert 0.0 <= run["metrics"]["accuracy"] <= 1.0 and len(extra["history"]) == 1


def _batch_norm_model():
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


def test_batch_statistics_mode_normalises_with_the_batch_and_updates_nothing():
    from attn_tutorial.comparison import batch_statistics_mode

    model, x = _batch_norm_model(), 5 + 3 * torch.randn(64, 3)  # far from the initial running stats
    norm = model[1]
    before = (norm.running_mean.clone(), norm.running_var.clone())
    eval_out = model.eval()(x)
    out = batch_statistics_mode(model)(x)
    assert not model[0].training and norm.training
    torch.testing.assert_close(norm.running_mean, before[0])
    torch.testing.assert_close(norm.running_var, before[1])
    torch.testing.assert_close(out.mean(0), torch.zeros(4), atol=1e-5, rtol=0)  # normalised by the batch itself
    assert not torch.allclose(out, eval_out)  # the stale running statistics give something else


def test_recalibrated_copy_averages_the_statistics_of_the_given_batches():
    from attn_tutorial.comparison import recalibrated

    model = _batch_norm_model()
    batches = [{"input": 2 + torch.randn(32, 3), "labels": torch.zeros(32)} for _ in range(4)]

    class Wrapped(torch.nn.Module):  # the loader yields batch dicts, as VQA loaders do
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input):
            return self.inner(input)

    wrapped = Wrapped(model)
    fresh = recalibrated(wrapped, ({**b} for b in batches), batches=3)
    per_batch_means = torch.stack([model[0](b["input"]).mean(0) for b in batches[:3]]).detach()
    torch.testing.assert_close(fresh.inner[1].running_mean, per_batch_means.mean(0))
    assert not fresh.training and torch.allclose(model[1].running_mean, torch.zeros(4))  # the original is untouched
    with pytest.raises(ValueError, match="batches must be >= 1"):
        recalibrated(wrapped, iter(batches), batches=0)


def test_vqa_accuracy_counts_correct_answers():
    from attn_tutorial.comparison import vqa_accuracy

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, answer):
            return {"logits": torch.nn.functional.one_hot(answer, 3).float()}

    batches = [{"answer": torch.tensor([0, 1, 2]), "labels": torch.tensor([0, 1, 0])},
               {"answer": torch.tensor([2]), "labels": torch.tensor([2])}]
    assert vqa_accuracy(Fixed(), batches) == 3 / 4
