"""Chapter 7: parallel / alternating co-attention, the phrase level, the VQA models, the article's code."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.coattention import (AlternatingCoAttention, ArticleCoAttention, ArticleHierarchicalCoAttention,
                                       CoAttentionVQA, HierarchicalCoAttentionVQA, ParallelCoAttention,
                                       PhraseFeatures)
from attn_tutorial.vqa_data import VQADataset, generate_relational, question_vocab

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def pair():
    torch.manual_seed(0)
    regions, words = torch.randn(3, 16, 8), torch.randn(3, 6, 8)
    mask = torch.arange(6)[None] < torch.tensor([[6], [4], [1]])
    return regions, words, mask


@pytest.mark.parametrize("transfer", ["sum", "mean", "sqrt"])
def test_parallel_co_attention_follows_lu_et_al(pair, transfer):
    regions, words, mask = pair
    co = ParallelCoAttention(8, 8, hidden_dim=5, transfer=transfer)
    v, q, a_v, a_q = co(regions, words)  # no mask: the paper's formulas, written out
    c = torch.tanh(words @ co.affinity @ regions.transpose(1, 2))  # (B, L, R)
    power = {"sum": 0.0, "mean": 1.0, "sqrt": 0.5}[transfer]  # divide by the number of terms to this power
    n_words, n_regions = words.shape[1] ** power, regions.shape[1] ** power
    h_v = torch.tanh(co.region(regions) + c.transpose(1, 2) @ co.word(words) / n_words)
    h_q = torch.tanh(co.word(words) + c @ co.region(regions) / n_regions)
    expected_a_v = torch.softmax(co.region_score(h_v).squeeze(-1), -1)
    expected_a_q = torch.softmax(co.word_score(h_q).squeeze(-1), -1)
    torch.testing.assert_close(a_v, expected_a_v)
    torch.testing.assert_close(a_q, expected_a_q)
    torch.testing.assert_close(v, torch.einsum("br,brd->bd", expected_a_v, regions))
    torch.testing.assert_close(q, torch.einsum("bl,bld->bd", expected_a_q, words))


def test_mean_transfer_averages_over_the_real_words_only(pair):
    """With a mask, a question of 4 real words divides its transfer by 4, not by the padded length."""
    regions, words, mask = pair
    co = ParallelCoAttention(8, 8, hidden_dim=5)
    _, _, a_v, _ = co(regions, words, mask)
    for b, length in enumerate(mask.sum(-1).tolist()):
        _, _, alone, _ = co(regions[b:b + 1], words[b:b + 1, :length])  # the question without its padding
        torch.testing.assert_close(a_v[b:b + 1], alone)


def test_co_attention_rejects_an_unknown_transfer():
    with pytest.raises(ValueError, match="transfer must be one of"):
        ParallelCoAttention(8, 8, 5, transfer="max")


@pytest.mark.parametrize("module", [ParallelCoAttention(8, 8, 5), AlternatingCoAttention(8, 5)])
def test_co_attention_masks_padded_words(pair, module):
    regions, words, mask = pair
    v, q, a_v, a_q = module(regions, words, mask)
    assert v.shape == (3, 8) and q.shape == (3, 8) and a_v.shape == (3, 16) and a_q.shape == (3, 6)
    torch.testing.assert_close(a_v.sum(-1), torch.ones(3))
    torch.testing.assert_close(a_q.sum(-1), torch.ones(3))
    assert (a_q[~mask] == 0).all()
    noisy = words.masked_fill(~mask.unsqueeze(-1), 9.0)
    for x, y in zip((v, q, a_v, a_q), module(regions, noisy, mask)):
        torch.testing.assert_close(x, y)
    # the same question alone, without its padding, gives the same result
    alone = module(regions[1:2], words[1:2, :4], mask[1:2, :4])
    torch.testing.assert_close(alone[0], v[1:2])
    torch.testing.assert_close(alone[2], a_v[1:2])
    (v.sum() + q.sum()).backward()  # every parameter is used (the first alternating step's guide is 0)
    assert all(p.grad is not None for p in module.parameters())


def test_co_attention_rejects_bad_input(pair):
    regions, words, mask = pair
    with pytest.raises(ValueError, match="regions .B, R, D. and words"):
        ParallelCoAttention(8, 8, 5)(regions[0], words)
    with pytest.raises(TypeError, match="word_mask must be bool"):
        ParallelCoAttention(8, 8, 5)(regions, words, mask.long())
    with pytest.raises(ValueError, match="one width"):
        AlternatingCoAttention(8, 5)(torch.randn(3, 16, 4), words)
    with pytest.raises(ValueError, match="co-attention must be one of"):
        CoAttentionVQA(10, 3, dim=8, co_attention="sideways")


def test_phrase_features_see_three_words_and_no_padding():
    torch.manual_seed(0)
    phrases = PhraseFeatures(6)
    x, mask = torch.randn(2, 7, 6), torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    base = phrases(x, mask)
    assert base.shape == (2, 7, 6) and (base[1, 4:] == 0).all()
    changed = x.clone()
    changed[0, 3] += 1.0
    moved = (phrases(changed, mask) - base).abs().amax(-1)[0]
    assert 3 in moved.nonzero().flatten().tolist() and set(moved.nonzero().flatten().tolist()) <= {2, 3, 4}
    noisy = x.masked_fill(~mask.unsqueeze(-1), 5.0)
    torch.testing.assert_close(phrases(noisy, mask), base)
    with pytest.raises(ValueError, match="widths must be positive"):
        PhraseFeatures(6, widths=())


@pytest.fixture
def relational():
    return generate_relational(24, questions_per_image=4, seed=3)


@pytest.mark.parametrize("cls", [CoAttentionVQA, HierarchicalCoAttentionVQA])
def test_co_attention_models_fit_a_small_set(relational, cls):
    torch.manual_seed(0)
    vocab = question_vocab(relational)
    batch = VQADataset(relational, vocab).collate(list(range(32)))
    labels = batch.pop("labels")
    model = cls(len(vocab), len(relational.answer_names), dim=32, pad_id=vocab.pad_id)
    out = model(**batch)
    levels = 3 if cls is HierarchicalCoAttentionVQA else None
    assert out["logits"].shape == (32, len(relational.answer_names))
    shape_v, shape_q = ((32, 3, 64), (32, 3, batch["ids"].shape[1])) if levels else ((32, 64), (32, batch["ids"].shape[1]))
    assert out["region_weights"].shape == shape_v and out["word_weights"].shape == shape_q
    word_mask = batch["mask"][:, None] if levels else batch["mask"]
    assert (out["word_weights"].masked_select(~word_mask.expand_as(out["word_weights"])) == 0).all()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(100):
        loss = torch.nn.functional.cross_entropy(model(**batch)["logits"], labels)
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = (model(**batch)["logits"].argmax(-1) == labels).float().mean().item()
    assert loss.item() < 0.5 * first and accuracy > 0.8, (first, loss.item(), accuracy)


def test_article_co_attention_is_max_pooled_and_unmasked():
    torch.manual_seed(0)
    article = ArticleCoAttention(8, 8)
    v, q = torch.randn(1, 16, 8), torch.randn(1, 5, 8)
    q_att, v_att = article(v, q)
    affinity = v @ article.W(q).transpose(1, 2)  # (1, R, L), no tanh
    torch.testing.assert_close(v_att, torch.softmax(affinity.amax(2), -1) @ v[0])
    torch.testing.assert_close(q_att, torch.softmax(affinity.amax(1), -1) @ q[0])
    # padding the question with zero vectors changes its answer: nothing masks the padding
    padded = torch.cat([q, torch.zeros(1, 4, 8)], dim=1)
    assert not torch.allclose(article(v, padded)[0], q_att)


def test_article_hierarchical_co_attention_crashes_for_unequal_widths():
    hier = ArticleHierarchicalCoAttention(8, 8, 16)
    with pytest.raises(RuntimeError, match="size of tensor"):
        hier(torch.randn(2, 16, 8), torch.randn(2, 5, 8), torch.randn(2, 1, 16))
    fused_v, fused_q = ArticleHierarchicalCoAttention(8, 8, 8)(torch.randn(2, 16, 8), torch.randn(2, 5, 8),
                                                               torch.randn(2, 1, 8))
    assert fused_v.shape == (2, 8) and fused_q.shape == (2, 8)
