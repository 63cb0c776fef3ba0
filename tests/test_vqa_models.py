"""Part III's VQA encoders and the no-attention baseline."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.vqa_data import VQADataset, generate_relational, question_vocab
from attn_tutorial.vqa_models import (ArticleStackedAttention, GridEncoder, NoAttentionVQA, QuestionEncoder,
                                      StackedAttention, StackedAttentionVQA)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def relational():  # conftest gives every test its own cache folder
    return generate_relational(40, questions_per_image=4, seed=5)


def test_batches_and_encoders_have_the_documented_shapes(relational):
    vocab = question_vocab(relational)
    batch = next(iter(VQADataset(relational, vocab).loader(6, shuffle=False)))
    # 6 questions, 4 per image: images 0 and 1, each once
    assert batch["images"].shape == (2, 3, 64, 64) and batch["images"].dtype == torch.float32
    assert batch["image_of_question"].tolist() == [0, 0, 0, 0, 1, 1]
    torch.testing.assert_close(batch["images"], relational.images[:2].float() / 255)
    assert 0 <= batch["images"].min() and batch["images"].max() <= 1
    assert batch["ids"].shape[0] == 6 and batch["mask"].shape == batch["ids"].shape
    torch.testing.assert_close(batch["labels"], relational.answers[:6])
    regions = GridEncoder(dim=48)(batch["images"])
    assert regions.shape == (2, 64, 48)
    words, u = QuestionEncoder(len(vocab), dim=48)(batch["ids"], batch["lengths"], batch["mask"])
    assert words.shape == (6, batch["ids"].shape[1], 48) and u.shape == (6, 48)
    with pytest.raises(ValueError, match="divisible by 8"):
        GridEncoder()(torch.zeros(2, 3, 60, 60))


def test_image_batches_hold_whole_images_and_cover_every_question_once(relational):
    data = VQADataset(relational, question_vocab(relational))
    loader = data.loader(None, True, torch.Generator().manual_seed(0), images_per_batch=6)
    epochs = [list(loader), list(loader)]
    for batches in epochs:
        assert len(batches) == 7  # 40 images, 6 per batch
        assert sorted(torch.cat([b["labels"] for b in batches]).tolist()) == sorted(relational.answers.tolist())
        for b in batches[:-1]:
            assert b["images"].shape[0] == 6 and torch.bincount(b["image_of_question"]).tolist() == [4] * 6
    first_images = [b["images"] for b in epochs[0]]
    assert not all(torch.equal(a, b["images"]) for a, b in zip(first_images, epochs[1]))  # reshuffled
    with pytest.raises(ValueError, match="exactly one of batch_size and images_per_batch"):
        data.loader(8, True, images_per_batch=4)
    with pytest.raises(ValueError, match="exactly one"):
        data.loader(None, True)
    with pytest.raises(ValueError, match="images_per_batch must be"):
        data.loader(None, True, images_per_batch=0)


def test_shared_images_give_the_same_outputs_as_one_image_per_question(relational):
    from attn_tutorial.vqa_models import question_regions

    torch.manual_seed(0)
    vocab = question_vocab(relational)
    batch = VQADataset(relational, vocab).collate(list(range(10)))
    batch.pop("labels")
    repeated = dict(batch, images=batch["images"][batch["image_of_question"]], image_of_question=None)
    for cls in (NoAttentionVQA, StackedAttentionVQA):
        model = cls(len(vocab), len(relational.answer_names), dim=32).eval()
        shared, alone = model(**batch), model(**repeated)
        if isinstance(shared, dict):
            torch.testing.assert_close(shared["weights"], alone["weights"])
            shared, alone = shared["logits"], alone["logits"]
        torch.testing.assert_close(shared, alone)
    regions = torch.randn(3, 5, 4)
    with pytest.raises(ValueError, match="pass image_of_question"):
        question_regions(regions, None, 6)
    with pytest.raises(ValueError, match="must index the 3 images"):
        question_regions(regions, torch.tensor([0, 3]), 2)
    with pytest.raises(ValueError, match="long tensor of shape"):
        question_regions(regions, torch.tensor([0.0, 1.0]), 2)


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
    with torch.no_grad():  # training mode: batch normalisation's statistics of these 8 images
        accuracy = (model(**batch).argmax(-1) == labels).float().mean().item()
    assert loss.item() < 0.5 * first and accuracy > 0.8, (first, loss.item(), accuracy)


def test_stacked_attention_equals_the_article_and_follows_the_paper():
    torch.manual_seed(0)
    article = ArticleStackedAttention(16, num_layers=2)
    ours = StackedAttention.from_article(article)
    u, regions = torch.randn(3, 16), torch.randn(3, 10, 16)
    refined, maps = ours(u, regions)
    torch.testing.assert_close(refined, article(u, regions))
    assert maps.shape == (3, 2, 10)
    torch.testing.assert_close(maps.sum(-1), torch.ones(3, 2))
    # one hop by hand: u1 = u + sum_r p_r v_r
    p = torch.softmax(ours.hops[0](u[:, None], regions)[:, 0], dim=-1)  # (B, R)
    torch.testing.assert_close(maps[:, 0], p)
    one_hop = StackedAttention(16, hops=1)
    one_hop.hops[0].load_state_dict(ours.hops[0].state_dict())
    torch.testing.assert_close(one_hop(u, regions)[0], u + (p[:, :, None] * regions).sum(1))


def test_stacked_attention_masks_regions_and_rejects_bad_input():
    torch.manual_seed(0)
    san = StackedAttention(8, hops=2)
    u, regions = torch.randn(2, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    refined, maps = san(u, regions, mask)
    assert (maps[1, :, 2:] == 0).all()
    changed = regions.clone()
    changed[1, 2:] = 100.0  # masked regions cannot matter
    torch.testing.assert_close(san(u, changed, mask)[0], refined)
    with pytest.raises(ValueError, match="expected u"):
        san(torch.randn(2, 6), regions)
    with pytest.raises(ValueError, match="hops must be"):
        StackedAttention(8, hops=0)


def test_stacked_attention_vqa_returns_logits_and_hop_maps(relational):
    vocab = question_vocab(relational)
    batch = VQADataset(relational, vocab).collate(list(range(4)))
    batch.pop("labels")
    out = StackedAttentionVQA(len(vocab), len(relational.answer_names), dim=32)(**batch)
    assert out["logits"].shape == (4, 12) and out["weights"].shape == (4, 2, 64)
    out["logits"].sum().backward()


def test_split_by_image_keeps_each_image_on_one_side(relational):
    from attn_tutorial.vqa_models import split_by_image

    train, val = split_by_image(relational, 0.25, seed=0)
    assert len(train.images) == 30 and len(val.images) == 10 and len(train) + len(val) == len(relational)
    seen = {img.numpy().tobytes() for img in train.images}
    assert not any(img.numpy().tobytes() in seen for img in val.images)
    def triples(split):  # (image bytes, question, answer): questions still point at their own image
        return sorted((split.images[split.image_index[q]].numpy().tobytes(), split.questions[q],
                       int(split.answers[q])) for q in range(len(split)))

    assert sorted(triples(train) + triples(val)) == triples(relational)
    with pytest.raises(ValueError, match="val_fraction"):
        split_by_image(relational, 1.0, seed=0)


def test_accuracy_by_type_counts_each_kind(relational):
    from attn_tutorial.vqa_models import accuracy_by_type

    class Oracle(torch.nn.Module):  # answers right on relational questions, wrong otherwise
        def __init__(self):
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))
            self.calls = 0

        def forward(self, images, ids, lengths, mask, image_of_question):
            rows = torch.arange(self.calls, self.calls + len(ids))
            self.calls += len(ids)
            truth = relational.answers[rows]
            wrong = (truth + 1) % len(relational.answer_names)
            answer = torch.where(relational.relational[rows], truth, wrong)
            return torch.nn.functional.one_hot(answer, len(relational.answer_names)).float()

    scores = accuracy_by_type(Oracle(), relational, question_vocab(relational), batch_size=32)
    assert scores["relational"] == 1.0 and scores["non_relational"] == 0.0 and scores["accuracy"] == 0.5
    assert scores["type_closest"] == 1.0 and scores["type_shape"] == 0.0
    empty = relational.__class__(relational.images, [], relational.image_index[:0], relational.answers[:0], [],
                                 relational.relational[:0], relational.answer_names)
    with pytest.raises(ValueError, match="at least one question"):
        accuracy_by_type(Oracle(), empty, question_vocab(relational))
