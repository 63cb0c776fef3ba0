"""Chapter 8: article 004's bilinear attention (crashes and its collapse), the mended variants, BAN."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.bilinear import (ArticleBilinearAttention, ArticleMultiHeadBilinearAttention,
                                    ArticleSparseBilinearAttention, BANVQA, BilinearAttentionMap,
                                    BilinearAttentionNetwork, BilinearPooling, LowRankBilinearAttention,
                                    MultiHeadBilinearAttention, SparseBilinearAttention, article_scores_corrected,
                                    keep_count, pair_mask)
from attn_tutorial.vqa_data import VQADataset, generate_relational, question_vocab

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("b, q, a, k", [(4, 32, 16, 32), (4, 32, 32, 32), (32, 32, 32, 32), (1, 16, 16, 16),
                                        (8, 64, 64, 48), (2, 8, 4, 6)])
def test_article_bilinear_attention_crashes_for_every_shape(b, q, a, k):
    with pytest.raises((RuntimeError, IndexError)):
        ArticleBilinearAttention(q, k, a)(torch.randn(b, q), torch.randn(b, 5, k))


def test_article_variants_crash_too_and_the_sparse_k_can_be_zero():
    with pytest.raises((RuntimeError, IndexError)):
        ArticleMultiHeadBilinearAttention(32, 32, 32, num_heads=4)(torch.randn(4, 32), torch.randn(4, 10, 32))
    with pytest.raises((RuntimeError, IndexError)):
        ArticleSparseBilinearAttention(32, 32, 32, 0.5)(torch.randn(4, 32), torch.randn(4, 10, 32))
    assert int(8 * (1 - 0.9)) == 0 and keep_count(8, 0.9) == 1  # the article's k, and ours
    assert keep_count(64, 0.5) == 32 and keep_count(10, 0.0) == 10
    with pytest.raises(ValueError, match="sparsity must be in"):
        keep_count(10, 1.0)


def test_the_corrected_einsum_collapses_to_one_bilinear_form():
    torch.manual_seed(0)
    article = ArticleBilinearAttention(6, 5, 7)
    query, keys = torch.randn(3, 6), torch.randn(3, 4, 5)
    scores = article_scores_corrected(article, query, keys)
    q, k = article.query_proj(query), article.key_proj(keys)
    loops = torch.stack([torch.stack([torch.stack([q[b] @ article.W[:, a, :] @ k[b, s] for a in range(7)]).mean()
                                      for s in range(4)]) for b in range(3)])
    torch.testing.assert_close(scores, loops)
    torch.testing.assert_close(scores, torch.einsum("bi,ij,bsj->bs", q, article.W.mean(1), k))


def test_low_rank_bilinear_attention_masks_and_rejects_bad_input():
    torch.manual_seed(0)
    attention = LowRankBilinearAttention(6, 5, 4)
    query, keys = torch.randn(3, 6), torch.randn(3, 7, 5)
    mask = torch.arange(7)[None] < torch.tensor([[7], [3], [1]])
    context, weights = attention(query, keys, mask)
    assert context.shape == (3, 5) and weights.shape == (3, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    assert (weights[~mask] == 0).all() and weights[2, 0] == 1
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, keys))
    with pytest.raises(ValueError, match="query .B, Dq. and keys"):
        attention(query[0], keys)
    with pytest.raises(TypeError, match="mask must be bool"):
        attention(query, keys, mask.float())
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        MultiHeadBilinearAttention(6, 5, 4, num_heads=4)


def test_multi_head_and_sparse_variants_work():
    torch.manual_seed(0)
    query, keys = torch.randn(3, 8), torch.randn(3, 10, 8)
    mask = torch.arange(10)[None] < torch.tensor([[10], [6], [2]])
    context, weights = MultiHeadBilinearAttention(8, 8, 8, num_heads=2)(query, keys, mask)
    assert context.shape == (3, 8) and weights.shape == (3, 2, 10) and (weights[~mask[:, None].expand(-1, 2, -1)] == 0).all()
    dense = LowRankBilinearAttention(8, 8, 4)
    for sparsity, kept in ((0.0, [10, 6, 2]), (0.5, [5, 3, 1]), (0.95, [1, 1, 1])):  # k of each row's real keys
        sparse = SparseBilinearAttention(8, 8, 4, sparsity)
        sparse.attention.load_state_dict(dense.state_dict())
        context, weights = sparse(query, keys, mask)
        assert (weights > 0).sum(-1).tolist() == kept, sparsity
        assert (weights[~mask] == 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(3))
        torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, keys))  # raw keys, as dense
        assert (weights.argmax(-1) == dense(query, keys, mask)[1].argmax(-1)).all()
    zero = SparseBilinearAttention(8, 8, 4, 0.0)
    zero.attention.load_state_dict(dense.state_dict())
    for x, y in zip(zero(query, keys, mask), dense(query, keys, mask)):
        torch.testing.assert_close(x, y)  # sparsity 0 is the dense attention
    with pytest.raises(ValueError, match="sparsity"):
        SparseBilinearAttention(8, 8, 4, sparsity=1.0)


def test_bilinear_attention_map_is_a_joint_softmax_over_real_pairs():
    torch.manual_seed(0)
    x, y = torch.randn(2, 5, 6), torch.randn(2, 4, 3)
    region_mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    word_mask = torch.tensor([[True] * 4, [True, True, False, False]])
    attention = BilinearAttentionMap(6, 3, rank=7, glimpses=3)
    maps = attention(x, y, region_mask, word_mask)
    assert maps.shape == (2, 3, 5, 4)
    torch.testing.assert_close(maps.sum((-2, -1)), torch.ones(2, 3))
    real = pair_mask(region_mask, word_mask, 5, 4).expand_as(maps)
    assert (maps[~real] == 0).all()
    logits = attention.logits(x, y)  # (B, G, R, L): p_g^T (relu(U^T x_i) * relu(V^T y_j)) + b_g
    xu, yv = attention.region(x), attention.word(y)
    torch.testing.assert_close(logits[1, 2, 4, 1], attention.pool[2] @ (xu[1, 4] * yv[1, 1]) + attention.bias[2])
    expected = torch.softmax(logits[1, 0, :3, :2].flatten(), 0).view(3, 2)
    torch.testing.assert_close(maps[1, 0, :3, :2], expected)
    with pytest.raises(ValueError, match="word_mask must be bool"):
        attention(x, y, None, word_mask[:, :3])
    with pytest.raises(ValueError, match="rank and glimpses"):
        BilinearAttentionMap(6, 3, rank=0)


def test_ban_joint_feature_glimpses_and_padding():
    torch.manual_seed(0)
    x, y = torch.randn(2, 5, 6), torch.randn(2, 4, 6)
    a = torch.softmax(torch.randn(2, 20), -1).view(2, 5, 4)
    pool = BilinearPooling(6, 6, rank=3)
    xu, yv = pool.region(x), pool.word(y)
    expected = torch.stack([sum(a[b, i, j] * xu[b, i] * yv[b, j] for i in range(5) for j in range(4)) for b in range(2)])
    torch.testing.assert_close(pool(x, y, a), expected)
    word_mask = torch.tensor([[True] * 4, [True, True, False, False]])
    ban = BilinearAttentionNetwork(6, rank=3, glimpses=4)
    fused, maps = ban(x, y, word_mask)
    assert fused.shape == (2, 6) and maps.shape == (2, 4, 5, 4) and len(ban.features) == 4
    noisy = y.masked_fill(~word_mask.unsqueeze(-1), 7.0)
    torch.testing.assert_close(ban(x, noisy, word_mask)[0], fused)
    torch.testing.assert_close(ban(x[1:], y[1:, :2], word_mask[1:, :2])[0], fused[1:])
    fused.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in ban.parameters())


def test_ban_vqa_fits_a_small_set():
    relational = generate_relational(24, questions_per_image=4, seed=3)
    torch.manual_seed(0)
    vocab = question_vocab(relational)
    batch = VQADataset(relational, vocab).collate(list(range(32)))
    labels = batch.pop("labels")
    model = BANVQA(len(vocab), len(relational.answer_names), dim=32, pad_id=vocab.pad_id)
    out = model(**batch)
    assert out["logits"].shape == (32, len(relational.answer_names))
    assert out["maps"].shape == (32, 2, 64, batch["ids"].shape[1])
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


def test_the_timed_poolings_agree_with_dense_attention_when_nothing_is_dropped():
    from attn_tutorial.bilinear import article_topk_pool, dense_pool, gathered_topk_pool

    scores, values = torch.randn(3, 20), torch.randn(3, 20, 8)
    dense = dense_pool(scores, values)  # (B, D)
    assert dense.shape == (3, 8)
    torch.testing.assert_close(article_topk_pool(scores, values, 20), dense)
    torch.testing.assert_close(gathered_topk_pool(scores, values, 20), dense)
    # with k < S the two top-k ways are the same function: softmax over the k best, their values summed
    torch.testing.assert_close(article_topk_pool(scores, values, 5), gathered_topk_pool(scores, values, 5))
    one = gathered_topk_pool(scores, values, 1)  # k = 1: the best-scored value itself
    torch.testing.assert_close(one, values[torch.arange(3), scores.argmax(-1)])


def test_topk_timing_times_every_method_with_and_without_scoring():
    from attn_tutorial.bilinear import topk_ratios, topk_timing

    rows = topk_ratios(topk_timing(sizes=((32, 8, 2),), sparsity=0.75, fixed_k=4, min_run_time=0.001))
    assert [r["method"] for r in rows] == ["dense", "article's top-k", "gathered top-k", "gathered top-4"]
    assert [r["k"] for r in rows] == [32, 8, 8, 4]
    assert all(r["pool µs"] > 0 and r["score + pool µs"] > 0 for r in rows)
    assert rows[0]["pool / dense"] == rows[0]["score + pool / dense"] == 1.0


def test_sparse_bilinear_attention_does_not_depend_on_padding():
    """A row's top-k counts its real keys: padding the batch to a longer length changes nothing."""
    torch.manual_seed(0)
    sparse = SparseBilinearAttention(8, 8, 16, sparsity=0.5)
    query, keys = torch.randn(1, 8), torch.randn(1, 6, 8)
    assert sparse.attention.scores(query, keys).unique().numel() == 6  # no ties: the top 3 are one set
    alone = sparse(query, keys)
    padded_keys = torch.cat([keys, torch.randn(1, 14, 8)], 1)  # (1, 20, 8): 14 padded keys
    mask = torch.arange(20)[None] < 6
    context, weights = sparse(query, padded_keys, mask)
    torch.testing.assert_close(context, alone[0])
    torch.testing.assert_close(weights[:, :6], alone[1])
    assert (weights > 0).sum().item() == 3  # ceil(6 * 0.5), not ceil(20 * 0.5) = 10


def test_ban_question_without_real_words_is_a_clear_error_not_nan():
    torch.manual_seed(0)
    ban = BilinearAttentionNetwork(6, rank=3, glimpses=2)
    regions, words = torch.randn(2, 5, 6), torch.randn(2, 4, 6)
    word_mask = torch.tensor([[True, True, False, False], [False] * 4])
    with pytest.raises(ValueError, match="no real tokens"):
        ban(regions, words, word_mask)
    fused, _ = ban(regions[:1], words[:1], word_mask[:1])
    assert torch.isfinite(fused).all()
