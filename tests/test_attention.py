"""Chapter 2: masked softmax, scorers, attention pooling, structured self-attention."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_tutorial import attention, text, training
from attn_tutorial.pooling import AttentionPoolingClassifier
from conftest import contains_token_batches


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_masked_softmax_sums_to_one_and_ignores_masked(dtype):
    scores = torch.randn(3, 6).to(dtype) * 50  # large scores: overflow-prone in half precision
    mask = text.lengths_to_mask(torch.tensor([6, 2, 1]))
    weights = attention.masked_softmax(scores, mask)
    assert weights.dtype == dtype and torch.isfinite(weights).all()
    assert torch.all(weights[~mask] == 0)
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(3), atol=1e-2, rtol=0)


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    scores = torch.randn(2, 4, requires_grad=True)
    mask = torch.tensor([[True, False, True, False], [False] * 4])
    weights = attention.masked_softmax(scores, mask)
    assert weights[1].abs().sum() == 0 and not torch.isnan(weights).any()
    (weights * torch.arange(4.0)).sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.all(scores.grad[1] == 0)


def test_masked_softmax_matches_softmax_without_mask_and_rejects_int_masks():
    scores = torch.randn(2, 5)
    torch.testing.assert_close(attention.masked_softmax(scores, torch.ones(2, 5, dtype=torch.bool)),
                               torch.softmax(scores, -1))
    torch.testing.assert_close(attention.masked_softmax(scores, None), torch.softmax(scores, -1))
    with pytest.raises(TypeError, match="must be bool"):
        attention.masked_softmax(scores, torch.ones(2, 5))


def test_scaled_dot_attention_equals_pytorch_sdpa_with_padding():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 4, 8), torch.randn(3, 6, 8), torch.randn(3, 6, 8)
    mask = text.lengths_to_mask(torch.tensor([6, 3, 1]))
    context, weights = attention.attend(attention.ScaledDotScore()(q, k), v, mask)
    reference = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1))
    torch.testing.assert_close(context, reference, atol=1e-6, rtol=1e-5)
    assert weights.shape == (3, 4, 6) and torch.all(weights[2, :, 1:] == 0)
    with pytest.raises(ValueError, match="equal widths"):
        attention.ScaledDotScore()(q, torch.randn(3, 6, 5))


def test_additive_score_matches_its_formula():
    torch.manual_seed(0)
    scorer = attention.AdditiveScore(3, 5, 7)
    q, k = torch.randn(2, 1, 3), torch.randn(2, 4, 5)
    expected = torch.stack([torch.stack([
        scorer.v(torch.tanh(scorer.query(q[b, 0]) + scorer.key(k[b, j]))).squeeze() for j in range(4)])
        for b in range(2)]).unsqueeze(1)  # (B, 1, Tk)
    torch.testing.assert_close(scorer(q, k), expected)


def test_attention_pooling_shapes_and_padding_weights():
    torch.manual_seed(0)
    pool = attention.AttentionPooling(6, 4)
    states = torch.randn(2, 5, 6)
    mask = text.lengths_to_mask(torch.tensor([5, 2]))
    pooled, weights = pool(states, mask)
    assert pooled.shape == (2, 6) and weights.shape == (2, 5)
    assert torch.all(weights[1, 2:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    torch.testing.assert_close(pooled[1], weights[1, :2] @ states[1, :2])


def test_structured_self_attention_penalty():
    torch.manual_seed(0)
    layer = attention.StructuredSelfAttention(6, 8, hops=3)
    states = torch.randn(2, 7, 6)
    mask = text.lengths_to_mask(torch.tensor([7, 4]))
    pooled, weights, penalty = layer(states, mask)
    assert pooled.shape == (2, 3, 6) and weights.shape == (2, 3, 7)
    assert torch.all(weights[1, :, 4:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))
    gram = weights @ weights.transpose(1, 2)
    torch.testing.assert_close(penalty, (gram - torch.eye(3)).square().sum((1, 2)).mean())
    # one-hot, non-overlapping hops have zero penalty
    onehot = torch.eye(3, 7).unsqueeze(0)
    assert ((onehot @ onehot.transpose(1, 2)) - torch.eye(3)).abs().sum() == 0
    penalty.backward()
    assert layer.w1.weight.grad is not None and torch.isfinite(layer.w1.weight.grad).all()


@pytest.mark.parametrize("hops", [0, 3])
def test_classifier_learns_a_toy_task_with_attention(hops):
    """Label = whether token 3 occurs anywhere; attention should find it (> 90 %)."""
    training.seed_everything(0)
    batches = contains_token_batches()
    model = AttentionPoolingClassifier(20, 16, 16, hops=hops, penalty_weight=0.1, dropout=0.0)
    history = training.fit(model, batches[:10], batches[10:], epochs=12, lr=1e-2,
                           device=torch.device("cpu"), progress=False)
    assert history["best_value"] > 0.9
    out = model(**{k: v for k, v in batches[10].items() if k != "labels"})
    weights = out["weights"] if hops else out["weights"].unsqueeze(1)  # (B, hops, T)
    padded = ~batches[10]["mask"].unsqueeze(1).expand_as(weights)
    assert torch.all(weights[padded] == 0)
