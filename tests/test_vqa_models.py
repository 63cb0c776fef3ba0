"""Part III's VQA encoders and the no-attention baseline."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.vqa_data import VQADataset, generate_relational, question_vocab
from attn_tutorial.vqa_models import GridEncoder, NoAttentionVQA, QuestionEncoder


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def relational(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path))
    return generate_relational(40, questions_per_image=4, seed=5)


def test_batches_and_encoders_have_the_documented_shapes(relational):
    vocab = question_vocab(relational)
    batch = next(iter(VQADataset(relational, vocab).loader(6, shuffle=False)))
    assert batch["images"].shape == (6, 3, 64, 64) and batch["images"].dtype == torch.float32
    assert 0 <= batch["images"].min() and batch["images"].max() <= 1
    assert batch["ids"].shape[0] == 6 and batch["mask"].shape == batch["ids"].shape
    torch.testing.assert_close(batch["labels"], relational.answers[:6])
    regions = GridEncoder(dim=48)(batch["images"])
    assert regions.shape == (6, 64, 48)
    words, u = QuestionEncoder(len(vocab), dim=48)(batch["ids"], batch["lengths"], batch["mask"])
    assert words.shape == (6, batch["ids"].shape[1], 48) and u.shape == (6, 48)
    with pytest.raises(ValueError, match="divisible by 8"):
        GridEncoder()(torch.zeros(2, 3, 60, 60))


def test_question_vector_ignores_padding():
    torch.manual_seed(0)
    encoder = QuestionEncoder(20, dim=16).eval()
    ids = torch.tensor([[3, 4, 5]])
    padded = torch.tensor([[3, 4, 5, 0, 0]])
    _, short = encoder(ids, torch.tensor([3]), torch.ones(1, 3, dtype=torch.bool))
    _, long = encoder(padded, torch.tensor([3]), torch.tensor([[True, True, True, False, False]]))
    torch.testing.assert_close(short, long)


def test_baseline_fits_a_small_set_and_its_gradients_reach_both_encoders(relational):
    torch.manual_seed(0)
    vocab = question_vocab(relational)
    data = VQADataset(relational, vocab)
    batch = data.collate(list(range(32)))
    labels = batch.pop("labels")
    model = NoAttentionVQA(len(vocab), len(relational.answer_names), dim=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(120):
        loss = torch.nn.functional.cross_entropy(model(**batch), labels)
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert model.image.project.weight.grad.abs().sum() > 0 and model.question.embedding.weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        accuracy = (model(**batch).argmax(-1) == labels).float().mean().item()
    assert loss.item() < 0.5 * first and accuracy > 0.8, (first, loss.item(), accuracy)
