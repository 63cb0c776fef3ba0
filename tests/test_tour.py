"""Chapter 0's bag-of-n-grams model."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial import tour, training

POSITIVE = ["a great film, loved it", "wonderful acting and great story", "loved every minute, great"]
NEGATIVE = ["a terrible film, hated it", "awful acting and boring story", "hated every minute, terrible"]


def make_loader(texts, labels, vocab_size=1024):
    dataset = tour.HashedBagDataset(texts, labels, tour.make_hasher(vocab_size))
    return torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=tour.collate_bags(dataset))


def test_batch_shapes_and_weights():
    loader = make_loader(POSITIVE + NEGATIVE + [""], [1, 1, 1, 0, 0, 0, 0])
    batch = next(iter(loader))
    assert batch["offsets"].shape == (4,) and batch["labels"].shape == (4,)
    assert batch["ids"].shape == batch["weights"].shape
    bounds = torch.cat([batch["offsets"], torch.tensor([len(batch["ids"])])])
    for start, end in zip(bounds[:-1], bounds[1:]):  # each text's frequencies sum to 1
        assert batch["weights"][start:end].sum().item() == pytest.approx(1.0)
    model = tour.BagOfNgrams(1024, 8)
    logits = model(batch["ids"], batch["offsets"], batch["weights"])
    assert logits.shape == (4, 2)


def test_empty_text_gives_finite_logits():
    loader = make_loader(["", "good"], [0, 1])
    batch = next(iter(loader))
    model = tour.BagOfNgrams(1024, 8)
    logits = model(batch["ids"], batch["offsets"], batch["weights"])
    assert torch.isfinite(logits).all()
    assert torch.allclose(logits[0], model.classifier.bias)  # an empty bag averages to zero


def test_hashing_is_stable_across_processes():
    import subprocess
    import sys

    code = "from attn_tutorial.tour import make_hasher; print(make_hasher(1024).transform(['great film']).indices.tolist())"
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin"}).stdout for seed in (1, 2)}
    assert len(outputs) == 1 and outputs.pop().startswith("[")


def test_learns_a_toy_sentiment_task():
    training.seed_everything(0)
    texts, labels = POSITIVE * 10 + NEGATIVE * 10, [1] * 30 + [0] * 30
    loader = make_loader(texts, labels)
    model = tour.BagOfNgrams(1024, 16)
    training.fit(model, loader, loader, epochs=15, lr=0.05, device=torch.device("cpu"), progress=False)
    assert training.evaluate(model, loader)["accuracy"] == 1.0


def test_mismatched_inputs_are_rejected():
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        tour.HashedBagDataset(["a", "b"], [1], tour.make_hasher(16))


def test_chapter_experiment_on_imdb(data_dir, monkeypatch):
    """The registered experiment trains on real reviews (smoke profile) and beats chance."""
    from attn_tutorial.results import run_experiment

    monkeypatch.setenv("ATTN_DATA_DIR", str(data_dir))
    record = run_experiment("ch00_bow", "smoke", seed=0, device="cpu", progress=False)
    assert record["metrics"]["accuracy"] > 0.6
    assert record["extra"]["sizes"] == {"train": 1800, "validation": 200, "test": 1000}
    again = run_experiment("ch00_bow", "smoke", seed=0, device="cpu", progress=False)
    assert again["reused_checkpoint"] and again["metrics"] == record["metrics"]
