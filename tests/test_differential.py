"""Chapter 4: difference-sequence attention, the Differential Transformer's attention, and the
defects of article 000's layer."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial.diff_models import ArticleBiLSTM, ArticleMultiHeadDifferentialAttention, article_attention
from attn_tutorial.differential import (DifferenceSequenceAttention, MultiHeadDiffAttention,
                                        diff_attention_explicit, diff_attention_sdpa, first_difference,
                                        lambda_init)
from attn_tutorial.mhsa import MultiHeadSelfAttention
from attn_tutorial.text import lengths_to_mask


pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- article 000, as published

def test_article_bilstm_mixes_the_reviews_of_a_batch():
    torch.manual_seed(0)
    bilstm = ArticleBiLSTM(4, 4).eval()
    x = torch.randn(3, 5, 4)  # (B, T, E) batch first
    changed = x.clone()
    changed[1] += 1.0
    with torch.no_grad():
        assert (bilstm(changed)[0] - bilstm(x)[0]).abs().max() > 1e-3  # review 1 moved


def test_article_layer_has_fake_keys_and_half_precision_overflow():
    torch.manual_seed(0)
    layer = ArticleMultiHeadDifferentialAttention(8, 2).eval()
    states = torch.randn(1, 4, 8)
    states[0, 2:] = 0.0  # 2 real tokens, then padding
    with torch.no_grad():
        assert (layer(states[:, :2]) - layer(states)[:, :2]).abs().max() > 1e-3
        assert torch.allclose(layer(torch.randn(1, 1, 8))[0, 0], layer.out.bias)  # no keys: bias only
    q = torch.randn(1, 1, 3, 4, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="overflow"):
        article_attention(q, q, q, mask=torch.tensor([1, 1, 0]))


# ---------------------------------------------------------------- difference-sequence attention

def test_first_difference_and_its_key_mask():
    x = torch.arange(12.0).view(1, 4, 3) ** 2
    mask = lengths_to_mask(torch.tensor([3]), 4)
    diff, key_mask = first_difference(x, mask)
    torch.testing.assert_close(diff, x[:, 1:] - x[:, :-1])
    assert key_mask.tolist() == [[True, True, False]]  # the key across the padding boundary is fake
    with pytest.raises(TypeError, match="mask must be bool"):
        first_difference(x, mask.long())
    with pytest.raises(ValueError, match="expected x of shape"):
        first_difference(x[0])


@pytest.mark.parametrize("need_weights", [False, True])
def test_difference_attention_ignores_padding_and_fake_keys(need_weights):
    torch.manual_seed(0)
    layer = DifferenceSequenceAttention(8, 2).eval()
    x = torch.randn(3, 5, 8)
    mask = lengths_to_mask(torch.tensor([5, 3, 1]))
    with torch.no_grad():
        out, w = layer(x, mask, need_weights=need_weights)
        for b, n in enumerate([5, 3, 1]):
            alone = layer(x[b:b + 1, :n])[0]
            torch.testing.assert_close(alone[0], out[b, :n], atol=1e-6, rtol=1e-5)
    assert torch.isfinite(out).all()
    if need_weights:
        assert w.shape == (3, 2, 5, 4) and (w >= 0).all()
        assert w[1, :, :, 2:].abs().max() == 0 and w[2].abs().max() == 0  # fake keys; no key at all
        torch.testing.assert_close(w[0].sum(-1), torch.ones(2, 5))
    else:
        assert w is None


def test_difference_attention_length_one_half_precision_and_gradients():
    torch.manual_seed(0)
    layer = DifferenceSequenceAttention(8, 2)
    out, w = layer(torch.randn(2, 1, 8), need_weights=True)
    assert w.shape == (2, 2, 1, 0)
    torch.testing.assert_close(out, layer.out.bias.expand(2, 1, 8))  # zero context
    x = torch.randn(2, 6, 8, requires_grad=True)
    mask = lengths_to_mask(torch.tensor([6, 2]))
    layer(x, mask)[0][mask].sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad[1, 2:].abs().max() == 0  # padding gets no gradient
    half = DifferenceSequenceAttention(8, 2).half().eval()
    with torch.no_grad():
        assert torch.isfinite(half(x.detach().half(), mask)[0][mask]).all()
    with pytest.raises(ValueError, match="divisible"):
        DifferenceSequenceAttention(10, 4)
    with pytest.raises(ValueError, match="expected x of shape"):
        layer(torch.randn(2, 6, 4))


# ---------------------------------------------------------------- Differential Transformer

def test_lambda_init_follows_the_paper():
    assert lambda_init(1) == pytest.approx(0.2)
    assert lambda_init(2) == pytest.approx(0.8 - 0.6 * torch.exp(torch.tensor(-0.3)).item())
    assert lambda_init(100) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError, match="layer counts from 1"):
        lambda_init(0)


def random_halves(seed=0, B=2, H=3, T=6, d=8):
    generator = torch.Generator().manual_seed(seed)
    q1, k1, q2, k2 = torch.randn(4, B, H, T, d, generator=generator).unbind(0)
    return q1, k1, q2, k2, torch.randn(B, H, T, 2 * d, generator=generator)


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8])
def test_fast_path_equals_the_reference_and_rows_sum_to_one_minus_lambda(lam):
    q1, k1, q2, k2, v = random_halves()
    mask = lengths_to_mask(torch.tensor([6, 4]))[:, None, None, :]
    lam = torch.tensor(lam)
    context, weights = diff_attention_explicit(q1, k1, q2, k2, v, lam, mask)
    torch.testing.assert_close(diff_attention_sdpa(q1, k1, q2, k2, v, lam, mask), context)
    torch.testing.assert_close(weights.sum(-1), (1 - lam).expand(2, 3, 6))
    assert weights[1, :, :, 4:].abs().max() == 0
    if lam > 0.5:
        assert (weights < 0).any()  # a difference of maps may be negative


def test_lambda_zero_is_ordinary_attention():
    q1, k1, q2, k2, v = random_halves(1)
    context, weights = diff_attention_explicit(q1, k1, q2, k2, v, torch.tensor(0.0))
    expected = torch.softmax(q1 @ k1.transpose(-2, -1) / 8 ** 0.5, -1)
    torch.testing.assert_close(weights, expected)


def test_fully_masked_rows_give_zeros_in_both_paths():
    q1, k1, q2, k2, v = random_halves(2)
    mask = torch.zeros(2, 1, 1, 6, dtype=torch.bool)
    context, weights = diff_attention_explicit(q1, k1, q2, k2, v, torch.tensor(0.5), mask)
    assert context.abs().max() == 0 and weights.abs().max() == 0
    assert diff_attention_sdpa(q1, k1, q2, k2, v, torch.tensor(0.5), mask).abs().max() == 0
    with pytest.raises(ValueError, match="twice as wide"):
        diff_attention_sdpa(q1, k1, q2, k2, v[..., :8], torch.tensor(0.5))


def test_diff_layer_paths_agree_parameters_match_mhsa_and_gradients_flow():
    torch.manual_seed(0)
    layer = MultiHeadDiffAttention(64, num_heads=2, layer=3)
    baseline = MultiHeadSelfAttention(64, num_heads=4)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(layer) - count(baseline) == 4 * 16 + 2 * 16  # four lambda vectors + RMSNorm weights
    assert layer.lambda_init == pytest.approx(lambda_init(3))
    x = torch.randn(3, 7, 64, requires_grad=True)
    mask = lengths_to_mask(torch.tensor([7, 5, 1]))
    layer.eval()
    fast, none = layer(x, mask)
    slow, maps = layer(x, mask, need_weights=True)
    assert none is None and maps.shape == (3, 2, 7, 7)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(maps.sum(-1), (1 - layer.lam().detach()).expand(3, 2, 7), atol=1e-5, rtol=0)
    fast[mask].sum().backward()
    grads = [layer.lambda_q1.grad, layer.lambda_k2.grad, layer.in_proj.weight.grad, x.grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert layer.lambda_q1.grad.abs().sum() > 0  # lambda learns


def test_diff_layer_in_bfloat16_and_bad_input():
    torch.manual_seed(0)
    layer = MultiHeadDiffAttention(32, num_heads=2).eval()
    x = torch.randn(2, 5, 32)
    mask = lengths_to_mask(torch.tensor([5, 3]))
    with torch.no_grad():
        reference = layer(x, mask)[0]
        low = layer.bfloat16()(x.bfloat16(), mask)[0]
    assert low.dtype == torch.bfloat16 and (low.float() - reference).abs().max() < 0.05
    with pytest.raises(ValueError, match="divisible by 2"):
        MultiHeadDiffAttention(30, num_heads=4)
    with pytest.raises(ValueError, match="expected x of shape"):
        layer.float()(torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match="implementation must be"):
        layer(x, implementation="fast")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("implementation", ["sdpa", "explicit"])
def test_diff_layer_in_half_precision_matches_float32_and_keeps_padding_out(dtype, implementation):
    torch.manual_seed(0)
    layer = MultiHeadDiffAttention(32, num_heads=2).eval()
    x = 4 * torch.randn(2, 7, 32)  # large scores: a float16 softmax without float32 would overflow
    mask = lengths_to_mask(torch.tensor([7, 4]))
    with torch.no_grad():
        reference, ref_w = layer(x, mask, need_weights=True, implementation=implementation)
        low, low_w = layer.to(dtype)(x.to(dtype), mask, need_weights=True, implementation=implementation)
    assert low.dtype == dtype and torch.isfinite(low).all()
    tolerance = 0.02 if dtype == torch.float16 else 0.08
    assert (low.float() - reference)[mask].abs().max() < tolerance * reference.abs().max()
    assert low_w[1, :, :, 4:].abs().max() == 0  # padded keys get exactly zero weight
    torch.testing.assert_close(low_w.float().sum(-1)[mask[:, None].expand(-1, 2, -1)],
                               ref_w.sum(-1)[mask[:, None].expand(-1, 2, -1)], atol=0.02, rtol=0)


# ---------------------------------------------------------------- the IMDB classifiers

@pytest.mark.parametrize("kind", ["mhsa", "difference", "diff"])
def test_classifiers_are_padding_independent_and_learn_a_toy_task(kind):
    from attn_tutorial import training
    from attn_tutorial.diff_models import BiLSTMAttentionClassifier
    from attn_tutorial.text import pad_batch
    from conftest import contains_token_batches

    torch.manual_seed(0)
    model = BiLSTMAttentionClassifier(20, 16, 16, kind, num_heads=4, dropout=0.0).eval()
    ids, lengths, mask = pad_batch([torch.tensor([5, 6, 7, 8]), torch.tensor([9, 3])])
    with torch.no_grad():
        batch = model(ids, lengths, mask)["logits"]
        alone = model(ids[1:, :2], lengths[1:], mask[1:, :2])["logits"]
    assert batch.shape == (2, 2)
    torch.testing.assert_close(batch[1:], alone, atol=1e-5, rtol=1e-4)
    training.seed_everything(0)
    batches = contains_token_batches(n_batches=14)
    model = BiLSTMAttentionClassifier(20, 16, 16, kind, num_heads=4, dropout=0.0)
    history = training.fit(model, batches[:10], batches[10:12], epochs=8, lr=1e-2,
                           device=torch.device("cpu"), progress=False)
    assert history["best_value"] >= 0.9


def test_classifier_rejects_unknown_attention():
    from attn_tutorial.diff_models import BiLSTMAttentionClassifier

    with pytest.raises(ValueError, match="attention must be one of"):
        BiLSTMAttentionClassifier(20, 16, 16, "linear")


# ---------------------------------------------------------------- the retrieval task

def test_retrieval_batches_have_distinct_keys_and_the_right_targets():
    from attn_tutorial.diff_models import retrieval_batch

    keys, values, position, target = retrieval_batch(32, 10, 20, 5, torch.Generator().manual_seed(0))
    assert keys.shape == values.shape == (32, 10) and position.shape == target.shape == (32,)
    assert all(len(set(row.tolist())) == 10 for row in keys)  # distinct keys in each example
    assert torch.equal(target, values[torch.arange(32), position])
    assert values.max() < 5 and keys.max() < 20
    with pytest.raises(ValueError, match="distinct keys"):
        retrieval_batch(4, 30, 20, 5, torch.Generator())


def test_retrieval_models_return_logits_and_the_query_row():
    from attn_tutorial.diff_models import RetrievalModel, train_retrieval, retrieval_batch

    keys, values, position, _ = retrieval_batch(3, 6, 20, 5, torch.Generator().manual_seed(0))
    for kind, heads in (("mhsa", 4), ("diff", 2)):
        model = RetrievalModel(kind, 20, 5, dim=16, num_heads=4).eval()
        logits, row = model(keys, values, position, need_weights=True)
        assert logits.shape == (3, 5) and row.shape == (3, heads, 6)
    with pytest.raises(ValueError, match="attention must be"):
        RetrievalModel("rnn", 20, 5)
    with pytest.raises(ValueError, match="steps must be"):
        train_retrieval("mhsa", 4, steps=0)


@pytest.mark.parametrize("kind", ["mhsa", "diff"])
def test_retrieval_models_learn_above_chance_and_report_their_attention(kind):
    from attn_tutorial.diff_models import evaluate_retrieval, train_retrieval

    model = train_retrieval(kind, 4, steps=150, n_keys=32, n_values=4, noise=0.1, lr=1e-2)
    scores = evaluate_retrieval(model, 4, size=256)
    assert scores["accuracy"] > 0.6  # chance is 1/4
    assert scores["mass_on_target"] + scores["mass_on_distractors"] == pytest.approx(1.0)
    assert scores["mass_on_target"] > 0.25 + 0.1  # the query attends to its pair more than uniformly
    assert scores["rows"].shape == (256, 2 if kind == "diff" else 4, 4)
    if kind == "diff":
        assert (scores["rows"] < 0).any()  # a differential map may go negative


def test_classifier_step_timing_rejects_degenerate_sizes():
    from attn_tutorial.diff_models import time_classifier_steps

    with pytest.raises(ValueError, match="length >= 4"):
        time_classifier_steps(2, 3, 8, 8)


def test_lambda_modes_hold_diffs_lambda_as_named():
    """Chapter 14's diagnosis of chapter 4's retrieval: lambda fixed, slowed, or kept at or above 0;
    "free" is chapter 4's own run, weight for weight."""
    from attn_tutorial.diff_models import train_retrieval

    small = dict(n_keys=32, n_values=4, noise=0.1, lr=1e-2)
    default = train_retrieval("diff", 4, steps=5, seed=3, **small)
    free = train_retrieval("diff", 4, steps=5, seed=3, lambda_mode="free", **small)
    assert all(torch.equal(a, b) for a, b in zip(default.state_dict().values(), free.state_dict().values()))
    start = train_retrieval("diff", 4, steps=1, seed=3, lambda_mode="fixed", **small).attention.lam().item()
    fixed = train_retrieval("diff", 4, steps=30, seed=3, lambda_mode="fixed", **small)
    assert fixed.attention.lam().item() == pytest.approx(start)  # lr 0 for lambda's four vectors
    assert default.attention.lam().item() != pytest.approx(start)
    positive = train_retrieval("diff", 4, steps=2, seed=3, lambda_mode="positive", **small)
    with torch.no_grad():  # push the learned lambda far below 0: the model still uses 0
        positive.attention.lambda_q2.fill_(1.0)
        positive.attention.lambda_k2.fill_(1.0)
    assert type(positive.attention).lam(positive.attention) < -1 and positive.attention.lam().item() == 0.0
    with pytest.raises(ValueError, match=r"lambda_mode must be one of \('free', 'fixed', 'slow', 'positive'\)"):
        train_retrieval("diff", 4, steps=1, lambda_mode="frozen")
    with pytest.raises(ValueError, match="needs attention='diff'"):
        train_retrieval("mhsa", 4, steps=1, lambda_mode="fixed")
