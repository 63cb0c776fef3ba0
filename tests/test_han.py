"""Chapter 6's hierarchical attention: masks, padding invariance, heads, the article's code."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.documents import DocumentDataset, document_vocab, to_documents
from attn_tutorial.han import (ArticleHierarchicalAttention, ArticleMultiHeadHierarchicalAttention, ContextAttention,
                               HierarchicalAttentionNetwork, article_hierarchical_reshaped,
                               article_hierarchical_unbind, loop_speed_table)

pytestmark = pytest.mark.usefixtures("one_thread")

REVIEWS = ["A good film. I liked it a lot. The cast shines.", "Bad.", "Fine. Not great. Not bad at all, really."]


@pytest.fixture
def batch_and_vocab():
    docs = to_documents(REVIEWS, [1, 0, 1])
    vocab = document_vocab(docs, min_freq=1)
    return DocumentDataset(docs, vocab), vocab


def test_context_attention_masks_and_matches_the_formula():
    torch.manual_seed(0)
    attention = ContextAttention(6, attn_dim=4)
    states, mask = torch.randn(2, 5, 6), torch.tensor([[True] * 5, [True, True, False, False, False]])
    pooled, weights = attention(states, mask)
    u = torch.tanh(attention.project(states)) @ attention.context[0]  # (N, T)
    expected = torch.softmax(u.masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(weights[:, 0], expected)
    torch.testing.assert_close(pooled, (expected[..., None] * states).sum(1))
    assert (weights[1, :, 2:] == 0).all()
    changed = states.clone()
    changed[1, 2:] = 50.0
    torch.testing.assert_close(attention(changed, mask)[0], pooled)
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(N, T\) = \(2, 5\)"):
        attention(states, mask[:, :3])
    with pytest.raises(ValueError, match="heads must be"):
        ContextAttention(6, heads=0)


def test_multi_head_context_attention_has_one_map_per_head_and_merges_them():
    torch.manual_seed(0)
    attention = ContextAttention(8, heads=3, learn_temperature=True)
    pooled, weights = attention(torch.randn(4, 7, 8), torch.ones(4, 7, dtype=torch.bool))
    assert pooled.shape == (4, 8) and weights.shape == (4, 3, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 3))
    assert not torch.allclose(weights[:, 0], weights[:, 1])  # different context vectors, different maps
    pooled.sum().backward()
    assert attention.context.grad.abs().sum(-1).min() > 0 and attention.log_temperature.grad is not None


def test_han_gives_zero_weight_to_padding_and_is_padding_invariant(batch_and_vocab):
    data, vocab = batch_and_vocab
    torch.manual_seed(0)
    model = HierarchicalAttentionNetwork(len(vocab), embed_dim=8, hidden_dim=6, heads=2, level_residual=True).eval()
    batch = data.collate([0, 1, 2])
    out = model(batch["ids"], batch["word_mask"])
    word_mask, sentence_mask = batch["word_mask"], batch["word_mask"].any(-1)
    assert out["logits"].shape == (3, 2) and out["word_weights"].shape == (3, 2, *word_mask.shape[1:])
    assert out["sentence_weights"].shape == (3, 2, word_mask.shape[1])
    assert (out["word_weights"].masked_select(~word_mask[:, None]) == 0).all()
    assert (out["sentence_weights"].masked_select(~sentence_mask[:, None]) == 0).all()
    real_rows = out["word_weights"].sum(-1).transpose(1, 2)[sentence_mask]  # (N, heads)
    torch.testing.assert_close(real_rows, torch.ones_like(real_rows))
    torch.testing.assert_close(out["sentence_weights"].sum(-1), torch.ones(3, 2))
    for i in range(3):  # each document alone (no padding) gives the same logits
        alone = data.collate([i])
        torch.testing.assert_close(model(alone["ids"], alone["word_mask"])["logits"], out["logits"][i:i + 1])
    changed = batch["ids"].clone()
    changed[~word_mask] = 3  # garbage under the mask changes nothing
    torch.testing.assert_close(model(changed, word_mask)["logits"], out["logits"])


def test_han_learns_a_toy_task_and_its_gradients_reach_both_levels():
    torch.manual_seed(0)
    texts = [f"The plot is thin. The film is {w}. It runs long." for w in ("great", "awful")] * 16
    labels = [1, 0] * 16
    docs = to_documents(texts, labels)
    vocab = document_vocab(docs, min_freq=1)
    batch = DocumentDataset(docs, vocab).collate(list(range(32)))
    model = HierarchicalAttentionNetwork(len(vocab), embed_dim=16, hidden_dim=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(40):
        loss = torch.nn.functional.cross_entropy(model(batch["ids"], batch["word_mask"])["logits"], batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            assert model.word_attention.context.grad.abs().sum() > 0
            assert model.sentence_attention.context.grad.abs().sum() > 0
        optimizer.step()
    model.eval()
    out = model(batch["ids"], batch["word_mask"])
    assert (out["logits"].argmax(-1) == batch["labels"]).float().mean() == 1.0


def test_han_rejects_bad_input(batch_and_vocab):
    data, vocab = batch_and_vocab
    model = HierarchicalAttentionNetwork(len(vocab), embed_dim=8, hidden_dim=4)
    batch = data.collate([0, 1])
    with pytest.raises(ValueError, match=r"expected ids \(B, S, W\) long"):
        model(batch["ids"][0], batch["word_mask"][0])
    with pytest.raises(TypeError, match=r"word_mask must be bool of shape \(B, S, W\)"):
        model(batch["ids"], batch["word_mask"].long())
    holes = batch["word_mask"].clone()
    holes[0, 0, 0] = False  # a padded word before a real one
    with pytest.raises(ValueError, match="real words first"):
        model(batch["ids"], holes)
    empty = torch.zeros_like(batch["word_mask"])
    empty[0] = batch["word_mask"][0]
    with pytest.raises(ValueError, match="at least one real word"):
        model(batch["ids"], empty)


def test_article_loop_equals_the_reshape_and_its_flaws_are_real():
    torch.manual_seed(0)
    article = ArticleHierarchicalAttention(16, 16)
    document = torch.randn(3, 5, 4, 16)
    loop = article(document)
    torch.testing.assert_close(article_hierarchical_reshaped(article, document), loop)
    torch.testing.assert_close(article_hierarchical_unbind(article, document), loop)
    with pytest.raises(RuntimeError):  # sentence vectors have the word width
        ArticleHierarchicalAttention(16, 32)(document)
    padded = torch.cat([document, torch.zeros(3, 5, 2, 16)], dim=2)  # no masks: padding changes the result
    assert (article(padded) - loop).abs().max() > 1e-3
    assert ArticleMultiHeadHierarchicalAttention(16, 16)(document) is None  # its forward is `pass`


def test_loop_speed_table_times_every_variant():
    rows = loop_speed_table(sentences=(2,), batch=2, words=3, dim=8, min_run_time=0.001, rounds=1)
    assert [(r["sentences"], r["input needs grad"]) for r in rows] == [(2, False), (2, True)]
    for name in ("loop x[:, i]", "loop unbind", "one reshape"):
        assert all(r[f"{name} fwd"] > 0 and r[f"{name} fwd+bwd"] > 0 for r in rows)
