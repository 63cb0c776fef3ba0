"""Chapter 3: multi-head self-attention (mhsa), the article's model and its fix (mhsa_models),
the measured costs (mhsa_costs)."""

from __future__ import annotations

import copy
import os

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_tutorial import text, training
from attn_tutorial.mhsa import (LearnedPositions, MultiHeadSelfAttention, causal_mask, combine_masks,
                                explicit_attention, merge_heads, sdpa_attention, sinusoidal_positions,
                                split_heads)
from attn_tutorial.mhsa_costs import (attention_matrix_bytes, batch_size_for, block_local_attention,
                                      block_local_mask, chunked_attention, compare_with_torch,
                                      measure_peak_memory)
from attn_tutorial.mhsa_models import (ArticleBiLSTMMultiHeadAttention, BiLSTMSelfAttentionClassifier,
                                       predict_long, windows)
from conftest import contains_token_batches

LENGTHS = [7, 4, 1]  # a full-length, a padded and a length-1 sequence


pytestmark = pytest.mark.usefixtures("one_thread")


def padded_states(seed=0, lengths=LENGTHS, dim=32):
    """x ``(B, T, D)`` and the package's mask ``(B, T)`` (True = real token)."""
    generator = torch.Generator().manual_seed(seed)
    mask = text.lengths_to_mask(torch.tensor(lengths))
    return torch.randn(len(lengths), max(lengths), dim, generator=generator), mask


def qkv(seed=0, B=3, H=2, T=7, d=4):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, B, H, T, d, generator=generator).unbind(0)  # each (B, H, T, d)


def layer_and_reference(seed=0, dim=32, heads=4):
    """Our layer with random (non-zero) biases, and nn.MultiheadAttention with the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadSelfAttention(dim, heads)
    with torch.no_grad():  # the default biases are zero: make them count
        ours.in_proj.bias.normal_()
        ours.out_proj.bias.normal_()
    return ours.eval(), ours.to_torch().eval()


# ---------------------------------------------------------------- heads


def test_split_and_merge_heads_shapes_round_trip_and_feature_slices():
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)  # (B=2, T=3, D=8)
    heads = split_heads(x, num_heads=4)
    assert heads.shape == (2, 4, 3, 2)
    for h in range(4):  # head h holds features 2h, 2h+1 of every token
        assert torch.equal(heads[:, h], x[..., 2 * h: 2 * h + 2])
    assert torch.equal(merge_heads(heads), x)
    assert torch.equal(split_heads(merge_heads(heads), 4), heads)


def test_split_and_merge_heads_reject_bad_shapes():
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        split_heads(torch.zeros(2, 3, 8), 3)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, T, D\)"):
        split_heads(torch.zeros(3, 8), 4)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, H, T, d_h\)"):
        merge_heads(torch.zeros(2, 3, 8))


# ---------------------------------------------------------------- attention functions


def causal_and_padding_mask(lengths=LENGTHS):
    """(B, 1, T, T): causal AND key padding; every query row keeps key 0."""
    key_mask = text.lengths_to_mask(torch.tensor(lengths))
    T = key_mask.shape[1]
    return key_mask[:, None, None, :] & torch.ones(T, T, dtype=torch.bool).tril()


@pytest.mark.parametrize("which", ["key padding (B,1,1,T)", "causal & padding (B,1,T,T)"])
def test_explicit_and_sdpa_equal_pytorch_sdpa(which):
    """float32, assert_close's default tolerance (rtol 1.3e-6, atol 1e-5)."""
    q, k, v = qkv()
    key_mask = text.lengths_to_mask(torch.tensor(LENGTHS))
    mask = key_mask[:, None, None, :] if which.startswith("key") else causal_and_padding_mask()
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    context, weights = explicit_attention(q, k, v, mask)
    torch.testing.assert_close(context, reference)
    torch.testing.assert_close(sdpa_attention(q, k, v, mask), reference)
    assert weights.shape == (3, 2, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 7))  # every query row has a real key
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)  # exactly 0 where masked
    assert torch.all(weights[1, :, :, 4:] == 0) and torch.all(weights[2, :, :, 1:] == 0)


@pytest.mark.parametrize("which", ["whole sequence", "one query row"])
def test_fully_masked_rows_give_zeros_and_finite_gradients(which):
    """A query with no allowed key: zero context, zero weights, no NaN forward or backward."""
    q, k, v = (t.requires_grad_() for t in qkv())
    if which == "whole sequence":  # sequence 1 has no real token at all
        mask = torch.ones(3, 1, 1, 7, dtype=torch.bool)
        mask[1] = False
        empty = (1, slice(None), slice(None))
    else:  # (B, 1, T, T): query 2 of sequence 0 may attend to nothing
        mask = causal_and_padding_mask().clone()
        mask[0, 0, 2] = False
        empty = (0, slice(None), 2)
    context, weights = explicit_attention(q, k, v, mask)
    fused = sdpa_attention(q, k, v, mask)
    for out in (context, fused):
        assert not torch.isnan(out).any() and torch.all(out[empty] == 0)
    assert torch.all(weights[empty] == 0) and not torch.isnan(weights).any()
    for out in (context, fused):
        grads = torch.autograd.grad((out * torch.randn_like(out)).sum(), (q, k, v))
        assert all(torch.isfinite(g).all() for g in grads)
        if which == "whole sequence":  # nothing flows through the empty sequence
            assert all(torch.all(g[1] == 0) for g in grads)
    torch.testing.assert_close(context, fused)


def test_attention_functions_reject_bad_input():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="share one float dtype"):
        explicit_attention(q, k.bfloat16(), v)
    with pytest.raises(TypeError, match="share one float dtype"):
        sdpa_attention(q, k, v.double())
    with pytest.raises(TypeError, match="share one float dtype"):
        explicit_attention(q.long(), k.long(), v.long())
    with pytest.raises(TypeError, match="mask must be bool"):
        explicit_attention(q, k, v, torch.ones(3, 1, 1, 7))
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(B, H, Tq, Tk\) = \(3, 2, 7, 7\) "
                                         r"or broadcast to it, got bool of shape \(3, 1, 1, 6\)"):
        explicit_attention(q, k, v, torch.ones(3, 1, 1, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="or broadcast to it"):  # broadcastable, but grows the result
        sdpa_attention(q, k, v, torch.ones(2, 3, 1, 1, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"must be \(B, H, T, d\)"):
        explicit_attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="equal width"):
        explicit_attention(q, k[..., :3], v)


def test_combine_masks_is_the_and_of_key_and_attention_masks():
    key_mask = text.lengths_to_mask(torch.tensor(LENGTHS))  # (3, 7)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    combined = combine_masks(key_mask, causal, 3, 7)
    assert combined.shape == (3, 1, 7, 7)
    for b in range(3):
        for i in range(7):
            for j in range(7):
                assert combined[b, 0, i, j] == (key_mask[b, j] and causal[i, j])
    per_batch = torch.rand(3, 7, 7) > 0.5
    assert torch.equal(combine_masks(key_mask, per_batch, 3, 7), key_mask[:, None, None, :] & per_batch[:, None])
    assert torch.equal(combine_masks(key_mask, None, 3, 7), key_mask[:, None, None, :])
    assert torch.equal(combine_masks(None, causal, 3, 7), causal[None, None])
    assert combine_masks(None, None, 3, 7) is None


def test_combine_masks_rejects_bad_shapes_and_dtypes():
    key_mask = text.lengths_to_mask(torch.tensor(LENGTHS))
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(B, T\) = \(3, 7\), got bool of shape \(3, 5\)"):
        combine_masks(key_mask[:, :5], None, 3, 7)
    with pytest.raises(TypeError, match=r"mask must be bool of shape \(B, T\) = \(3, 7\), got int64"):
        combine_masks(key_mask.long(), None, 3, 7)
    with pytest.raises(ValueError, match=r"attn_mask must be bool of shape \(T, T\) or \(B, T, T\) = \(7, 7\) "
                                         r"or \(3, 7, 7\), got bool of shape \(6, 6\)"):
        combine_masks(key_mask, torch.ones(6, 6, dtype=torch.bool), 3, 7)
    with pytest.raises(TypeError, match="attn_mask must be bool"):
        combine_masks(key_mask, torch.ones(7, 7), 3, 7)


# ---------------------------------------------------------------- the layer against nn.MultiheadAttention


@pytest.mark.parametrize("implementation", ["sdpa", "explicit"])
@pytest.mark.parametrize("direction", ["to_torch", "from_torch"])
def test_layer_equals_nn_multihead_attention_in_float32(implementation, direction):
    """Outputs and every head's weights, assert_close's float32 default (rtol 1.3e-6, atol 1e-5)."""
    ours, reference = layer_and_reference()
    if direction == "from_torch":  # copy the other way round: from a fresh nn.MultiheadAttention
        torch.manual_seed(1)
        reference = nn.MultiheadAttention(32, 4, batch_first=True).eval()
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
        ours = MultiHeadSelfAttention.from_torch(reference).eval()
    x, mask = padded_states()
    with torch.no_grad():
        expected, expected_w = reference(x, x, x, key_padding_mask=text.to_key_padding_mask(mask),
                                         average_attn_weights=False)
        out, none = ours(x, mask, implementation=implementation)
        out_w, weights = ours(x, mask, need_weights=True, implementation=implementation)
    assert none is None and weights.shape == (3, 4, 7, 7)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out_w, expected)
    torch.testing.assert_close(weights, expected_w)
    assert torch.all(weights[1, :, :, 4:] == 0)


@pytest.mark.parametrize("implementation", ["sdpa", "explicit"])
def test_layer_in_bfloat16_is_as_accurate_as_pytorch(implementation):
    """Both bf16 outputs against the float32 one: ours <= 2 x PyTorch's max error + 1e-3, and <= 0.05."""
    ours, reference = layer_and_reference()
    x, mask = padded_states()
    with torch.no_grad():
        exact = reference(x, x, x, key_padding_mask=~mask, need_weights=False)[0]
        xb = x.bfloat16()
        ours_bf = copy.deepcopy(ours).bfloat16()(xb, mask, implementation=implementation)[0]
        torch_bf = copy.deepcopy(reference).bfloat16()(xb, xb, xb, key_padding_mask=~mask, need_weights=False)[0]
    assert ours_bf.dtype == torch.bfloat16
    ours_error = (ours_bf.float() - exact).abs().max().item()
    torch_error = (torch_bf.float() - exact).abs().max().item()
    assert ours_error <= 2 * torch_error + 1e-3, (ours_error, torch_error)
    assert ours_error <= 0.05


@pytest.mark.parametrize("implementation", ["sdpa", "explicit"])
def test_layer_gradients_equal_nn_multihead_attention(implementation):
    """Gradients w.r.t. the input and every weight, float32, atol 1e-5 (rtol 1e-5)."""
    ours, reference = layer_and_reference()
    x, mask = padded_states()
    upstream = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(1))
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    (ours(x_ours, mask, implementation=implementation)[0] * upstream).sum().backward()
    (reference(x_ref, x_ref, x_ref, key_padding_mask=~mask)[0] * upstream).sum().backward()
    pairs = [(x_ours, x_ref), (ours.in_proj.weight, reference.in_proj_weight),
             (ours.in_proj.bias, reference.in_proj_bias), (ours.out_proj.weight, reference.out_proj.weight),
             (ours.out_proj.bias, reference.out_proj.bias)]
    for mine, theirs in pairs:
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("implementation, need_weights, expected", [
    ("auto", False, "sdpa"), ("sdpa", False, "sdpa"), ("explicit", False, "explicit"),
    ("auto", True, "explicit"), ("sdpa", True, "explicit")])
def test_layer_runs_the_requested_path(monkeypatch, implementation, need_weights, expected):
    """Both paths give the same numbers, so spy on which function runs: SDPA unless the weights
    are asked for or the explicit path is requested."""
    from attn_tutorial import mhsa

    calls = []
    for name in ("explicit_attention", "sdpa_attention"):
        original = getattr(mhsa, name)
        monkeypatch.setattr(mhsa, name, lambda *a, _f=original, _n=name, **kw: calls.append(_n) or _f(*a, **kw))
    ours, _ = layer_and_reference()
    x, mask = padded_states()
    ours(x, mask, need_weights=need_weights, implementation=implementation)
    assert calls == [f"{expected}_attention"]


def test_layer_without_bias_round_trips_through_nn_multihead_attention():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(16, 2, bias=False).eval()
    reference = ours.to_torch().eval()
    back = MultiHeadSelfAttention.from_torch(reference).eval()
    assert reference.in_proj_bias is None and back.in_proj.bias is None and back.out_proj.bias is None
    x, mask = padded_states(dim=16)
    with torch.no_grad():
        expected = reference(x, x, x, key_padding_mask=~mask, need_weights=False)[0]
        torch.testing.assert_close(ours(x, mask)[0], expected)
        torch.testing.assert_close(back(x, mask)[0], expected)


def test_layer_attention_mask_restricts_what_each_query_sees():
    """A causal attn_mask: the weights are zero above the diagonal and on padding, and the output
    at position t does not change when later tokens change."""
    ours, _ = layer_and_reference()
    x, mask = padded_states()
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    with torch.no_grad():
        out, weights = ours(x, mask, attn_mask=causal, need_weights=True)
        fast, _ = ours(x, mask, attn_mask=causal)
        changed = x.clone()
        changed[:, 5:] += 1.0
        later = ours(changed, mask, attn_mask=causal)[0]
    torch.testing.assert_close(fast, out)
    assert torch.all(weights[..., ~causal] == 0) and torch.all(weights[1, :, :, 4:] == 0)
    torch.testing.assert_close(later[:, :5], out[:, :5])
    assert not torch.allclose(later[0, 5:], out[0, 5:])


def test_dropout_only_in_training():
    """Eval: bit-identical repeated calls on both paths. Train, p = 0.5, explicit path: two calls
    differ, and the returned weights are those before dropout (rows still sum to 1)."""
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(16, 2, dropout=0.5)
    x, mask = padded_states(dim=16)
    layer.eval()
    for implementation in ("sdpa", "explicit"):
        assert torch.equal(layer(x, mask, implementation=implementation)[0],
                           layer(x, mask, implementation=implementation)[0])
    layer.train()
    first, weights = layer(x, mask, need_weights=True)
    second, _ = layer(x, mask, implementation="explicit")
    assert not torch.allclose(first, second)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 7))


def test_layer_rejects_bad_input():
    layer = MultiHeadSelfAttention(32, 4)
    x, mask = padded_states()
    with pytest.raises(ValueError, match=r"expected x of shape \(B, T, D\) with D = 32, got float32 of shape \(3, 7, 16\)"):
        layer(x[..., :16], mask)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, T, D\) with D = 32, got float32 of shape \(7, 32\)"):
        layer(x[0], mask)
    with pytest.raises(TypeError, match="mask must be bool"):
        layer(x, mask.long())
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(B, T\) = \(3, 7\)"):
        layer(x, mask[:, :6])
    with pytest.raises(ValueError, match="attn_mask must be bool"):
        layer(x, mask, attn_mask=torch.ones(7, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="implementation must be 'auto', 'sdpa' or 'explicit'"):
        layer(x, mask, implementation="flash")
    with pytest.raises(ValueError, match="embed_dim=30 must be divisible by num_heads=4"):
        MultiHeadSelfAttention(30, 4)
    for p in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\)"):
            MultiHeadSelfAttention(32, 4, dropout=p)
    with pytest.raises(ValueError, match="only nn.MultiheadAttention with kdim = vdim = embed_dim"):
        MultiHeadSelfAttention.from_torch(nn.MultiheadAttention(32, 4, kdim=16, vdim=16))


# ---------------------------------------------------------------- word order: causal mask, positions


def test_causal_mask_is_the_lower_triangle_and_pytorchs_complement():
    mask = causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert torch.equal(mask, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    assert torch.equal(mask, nn.Transformer.generate_square_subsequent_mask(4) == 0)  # -inf = forbidden
    assert causal_mask(1).tolist() == [[True]]


@pytest.mark.parametrize("implementation", ["sdpa", "explicit"])
def test_causal_mask_in_the_layer_equals_is_causal_and_nn_multihead_attention(implementation):
    ours, reference = layer_and_reference()
    x, _ = padded_states()
    with torch.no_grad():
        out = ours(x, attn_mask=causal_mask(7), implementation=implementation)[0]
        q, k, v = (split_heads(t, 4) for t in ours.in_proj(x).chunk(3, dim=-1))  # each (B, H, T, d_h)
        by_sdpa = ours.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
        by_torch = reference(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(7),
                             need_weights=False)[0]
    torch.testing.assert_close(out, by_sdpa)
    torch.testing.assert_close(out, by_torch)


def test_causal_outputs_do_not_depend_on_future_tokens():
    """The gradient of output t with respect to every later input is exactly zero, and changing
    token 4 changes outputs 4.. only."""
    ours, _ = layer_and_reference()
    x = torch.randn(2, 7, 32, requires_grad=True)
    out = ours(x, attn_mask=causal_mask(7))[0]
    (grad,) = torch.autograd.grad(out[:, 3].sum(), x)
    assert torch.all(grad[:, 4:] == 0) and grad[:, :4].abs().sum() > 0
    with torch.no_grad():
        changed = x.detach().clone()
        changed[:, 4] += 1.0
        later = ours(changed, attn_mask=causal_mask(7))[0]
    torch.testing.assert_close(later[:, :4], out[:, :4].detach())
    assert not torch.allclose(later[:, 4:], out[:, 4:].detach())


def test_sinusoidal_positions_match_the_formula():
    T, D = 50, 16
    table = sinusoidal_positions(T, D)
    assert table.shape == (T, D) and table.dtype == torch.float32
    for t in (0, 1, 7, 49):
        for i in (0, 3, 7):
            angle = torch.tensor(t / 10000 ** (2 * i / D), dtype=torch.float64)
            assert table[t, 2 * i].item() == pytest.approx(torch.sin(angle).item(), abs=1e-6)
            assert table[t, 2 * i + 1].item() == pytest.approx(torch.cos(angle).item(), abs=1e-6)
    assert torch.equal(table[0, 0::2], torch.zeros(D // 2)) and torch.equal(table[0, 1::2], torch.ones(D // 2))


def test_sinusoidal_positions_are_distinct_and_a_shift_is_a_fixed_rotation():
    T, D, k = 64, 32, 5
    table = sinusoidal_positions(T, D)
    distances = torch.cdist(table, table) + torch.eye(T) * 10  # (T, T), diagonal pushed out of the way
    assert distances.min() > 0.1  # every position has its own code
    omega = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)  # (D/2,)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    pairs = table.view(T, D // 2, 2)  # (T, D/2, (sin, cos))
    rotated = torch.stack([pairs[..., 0] * c + pairs[..., 1] * s, pairs[..., 1] * c - pairs[..., 0] * s], -1)
    torch.testing.assert_close(rotated[:-k], pairs[k:], atol=1e-5, rtol=0)  # same rotation for every t


def test_self_attention_is_permutation_equivariant_without_positions_only():
    ours, _ = layer_and_reference()
    x = torch.randn(2, 7, 32)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    positions = sinusoidal_positions(7, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(x[:, perm])[0], ours(x)[0][:, perm])
        shuffled, permuted = ours(x[:, perm] + positions)[0], ours(x + positions)[0][:, perm]
    assert (shuffled - permuted).abs().max() > 1e-2


def test_learned_positions_add_one_vector_per_position():
    torch.manual_seed(0)
    layer = LearnedPositions(max_len=8, dim=16)
    x = torch.randn(3, 5, 16)
    out = layer(x)
    assert out.shape == (3, 5, 16)
    torch.testing.assert_close(out - x, layer.embedding.weight[:5].expand(3, 5, 16))
    out.sum().backward()
    assert layer.embedding.weight.grad[:5].abs().sum() > 0 and torch.all(layer.embedding.weight.grad[5:] == 0)
    assert layer(torch.randn(1, 8, 16)).shape == (1, 8, 16)  # exactly max_len is fine


def test_word_order_helpers_reject_bad_input():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="causal_mask needs an integer length T >= 1"):
            causal_mask(bad)
        with pytest.raises(ValueError, match="sinusoidal_positions needs an integer length T >= 1"):
            sinusoidal_positions(bad, 8)
    for bad in (0, 7, -2, 1):
        with pytest.raises(ValueError, match=r"sinusoidal_positions needs an even width D >= 2 .*dim="):
            sinusoidal_positions(4, bad)
    layer = LearnedPositions(max_len=8, dim=16)
    with pytest.raises(ValueError, match="sequence length T = 9 is longer than max_len = 8"):
        layer(torch.randn(2, 9, 16))
    with pytest.raises(ValueError, match=r"expected x of shape \(B, T, D\) with D = 16"):
        layer(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match="LearnedPositions needs max_len >= 1 and dim >= 1"):
        LearnedPositions(0, 16)


# ---------------------------------------------------------------- costs: chunked, local, formula, batch size


@pytest.mark.parametrize("chunk", [3, 5, 64])
def test_chunked_attention_equals_explicit_attention(chunk):
    """T = 13 is not a multiple of the chunk; padding and a (B, 1, T, T) mask both work."""
    q, k, v = qkv(T=13)
    key_mask = text.lengths_to_mask(torch.tensor([13, 9, 2]))[:, None, None, :]
    full, _ = explicit_attention(q, k, v, key_mask)
    torch.testing.assert_close(chunked_attention(q, k, v, key_mask, chunk), full)
    pairs = key_mask & torch.ones(13, 13, dtype=torch.bool).tril()
    torch.testing.assert_close(chunked_attention(q, k, v, pairs, chunk), explicit_attention(q, k, v, pairs)[0])
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        chunked_attention(q, k, v, key_mask, 0)


def test_chunked_attention_accepts_a_1d_key_mask_like_explicit_attention():
    q, k, v = qkv(T=10)
    key_mask = torch.arange(10) < 8  # (Tk,): broadcast to every batch, head and query
    torch.testing.assert_close(chunked_attention(q, k, v, key_mask, 4), explicit_attention(q, k, v, key_mask)[0])


def test_chunked_attention_rejects_a_mask_with_too_many_query_rows():
    q, k, v = qkv(T=10)
    too_tall = torch.ones(3, 1, 15, 10, dtype=torch.bool)  # 15 query rows for 10 queries
    with pytest.raises(ValueError, match="or broadcast to it, got bool of shape \\(3, 1, 15, 10\\)"):
        explicit_attention(q, k, v, too_tall)
    with pytest.raises(ValueError, match="or broadcast to it, got bool of shape \\(3, 1, 15, 10\\)"):
        chunked_attention(q, k, v, too_tall, 5)


@pytest.mark.parametrize("length, block", [(13, 4), (10, 3), (5, 8)])
def test_block_local_attention_equals_explicit_under_the_block_mask(length, block):
    q, k, v = qkv(T=length)
    key_mask = text.lengths_to_mask(torch.tensor([length, length - 3, 1]))  # (B, T)
    banded, _ = explicit_attention(q, k, v, key_mask[:, None, None, :] & block_local_mask(length, block))
    torch.testing.assert_close(block_local_attention(q, k, v, key_mask, block), banded)
    unmasked, _ = explicit_attention(q, k, v, block_local_mask(length, block))
    torch.testing.assert_close(block_local_attention(q, k, v, None, block), unmasked)


def test_block_local_mask_and_bad_arguments():
    local = block_local_mask(7, 2)  # blocks 0 0 1 1 2 2 3
    assert local[0, 3] and not local[0, 4] and local[6, 4] and not local[6, 3]
    assert torch.equal(local, local.T)
    q, k, v = qkv(T=7)
    with pytest.raises(ValueError, match="block must be >= 1"):
        block_local_attention(q, k, v, None, 0)
    with pytest.raises(ValueError, match=r"key_mask must be bool of shape \(B, T\) = \(3, 7\)"):
        block_local_attention(q, k, v, torch.ones(3, 6, dtype=torch.bool), 2)


def test_attention_matrix_bytes_is_the_articles_formula():
    assert attention_matrix_bytes(8, 4, 512) == 8 * 4 * 512 * 512 * 4
    assert attention_matrix_bytes(8, 4, 512, torch.bfloat16) == 8 * 4 * 512 * 512 * 2


def test_batch_size_for_recovers_slope_intercept_and_batch_count():
    """Synthetic peaks 100 MB + b * 10 MB (length 128) and 100 MB + b * 20 MB (length 256) in 1 GiB,
    85 % usable: (870.4 - 100) / 10 -> 77 reviews, / 20 -> 38."""
    MB = 2**20
    steps = pd.DataFrame([{"length": n, "batch": b, "peak_bytes": 100 * MB + b * per * MB}
                          for n, per in ((128, 10), (256, 20)) for b in (2, 4, 8)])
    table = batch_size_for(steps, 1024 * MB)
    assert table.loc[128, "MB per review"] == 10.0 and table.loc[256, "MB per review"] == 20.0
    assert table.loc[128, "fixed MB"] == 100.0 and table.loc[256, "fixed MB"] == 100.0
    assert table.loc[128, "batch that fits"] == 77 and table.loc[256, "batch that fits"] == 38
    with pytest.raises(ValueError, match="need at least two batch sizes"):
        batch_size_for(steps[steps["batch"] == 4], 1024 * MB)
    too_big = batch_size_for(steps.assign(peak_bytes=steps["peak_bytes"] + 2000 * MB), 1024 * MB)
    assert (too_big["batch that fits"] == 0).all()  # the fixed part alone exceeds the memory
    flat = steps.assign(peak_bytes=100 * MB)
    with pytest.raises(ValueError, match="does not grow with the batch"):
        batch_size_for(flat, 1024 * MB)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc/self/clear_refs")
def test_measured_peak_memory_explicit_vs_fused():
    """Batch 2, 2 heads, T = 512, d 16: the explicit forward holds at least one (B, H, T, T) float32
    matrix (the formula, 2 MiB); the fused SDPA path stays below the explicit one."""
    config = {"batch": 2, "heads": 2, "length": 512, "head_dim": 16}
    explicit = measure_peak_memory({"kind": "explicit", **config})["peak_bytes"]
    fused = measure_peak_memory({"kind": "sdpa", **config})["peak_bytes"]
    assert explicit >= attention_matrix_bytes(2, 2, 512)
    assert fused < explicit


def test_compare_with_torch_reports_four_positive_timings():
    timings = compare_with_torch(batch=2, length=16, dim=8, heads=2, rounds=1, min_run_time=0.01)
    assert set(timings) == {"ours (SDPA)", "ours (explicit)", "nn.MHA, need_weights=False", "nn.MHA, default"}
    assert all(ms > 0 for ms in timings.values())


# ---------------------------------------------------------------- article 001's model, defects documented


def article_batch():
    sequences = [torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10]), torch.tensor([11, 12, 13])]
    return sequences, nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=0)  # (3, 4)


def article_model():
    torch.manual_seed(0)
    return ArticleBiLSTMMultiHeadAttention(vocab_size=100, embedding_dim=16, hidden_dim=16, num_heads=4).eval()


def test_article_defect_inverted_mask_gives_nan_and_attends_to_padding():
    """mask = (padded != 0) passed as key_padding_mask (True = ignore): the unpadded review has
    every key ignored (NaN); the padded one puts all of every query's weight on its padding."""
    model = article_model()
    _, padded = article_batch()
    with torch.no_grad():
        logits, weights = model(padded, mask=padded != 0)
    assert torch.isnan(logits[0]) and not torch.isnan(logits[1:]).any()
    torch.testing.assert_close(weights[1, :, 2:].sum(-1), torch.ones(4))  # review 2: 2 real, 2 padded
    assert torch.all(weights[1, :, :2] == 0)


def test_article_defect_weights_are_averaged_over_heads_and_batch_of_one_is_0d():
    model = article_model()
    _, padded = article_batch()
    with torch.no_grad():
        _, weights = model(padded, mask=padded == 0)
        single, single_weights = model(padded[:1], mask=None)
    assert weights.shape == (3, 4, 4)  # (B, T, T): no head axis, 4 heads averaged away
    assert single_weights.shape == (1, 4, 4)  # "head 1" in the article's plot does not exist
    assert single.shape == ()  # squeeze(): 0-d, while its label has shape (1,)
    with pytest.raises(ValueError):
        F.binary_cross_entropy_with_logits(single, torch.ones(1))


def test_article_defect_prediction_depends_on_the_padding():
    """Even with the mask inverted correctly, review 2 gets a different logit padded in a batch
    than alone: the mean includes padding and the backward LSTM reads it."""
    model = article_model()
    _, padded = article_batch()
    ignore = padded == 0
    with torch.no_grad():
        in_batch = model(padded, mask=ignore)[0][1]
        alone = model(padded[1:2, :2], mask=ignore[1:2, :2])[0]
    assert (in_batch - alone).abs() > 1e-3


# ---------------------------------------------------------------- the corrected model


def corrected_model(num_heads=4):
    torch.manual_seed(0)
    return BiLSTMSelfAttentionClassifier(vocab_size=100, embed_dim=16, hidden_dim=16, num_heads=num_heads).eval()


def test_corrected_model_no_nan_two_logits_and_padding_independent():
    """Logits (B, 2), also for B = 1; a review alone equals the same review in a padded batch (atol 1e-5)."""
    model = corrected_model()
    sequences, _ = article_batch()
    ids, lengths, mask = text.pad_batch(sequences)
    with torch.no_grad():
        logits = model(ids, lengths, mask)["logits"]
        assert logits.shape == (3, 2) and torch.isfinite(logits).all()
        for i, sequence in enumerate(sequences):
            alone = model(*text.pad_batch([sequence]))["logits"]
            assert alone.shape == (1, 2)
            torch.testing.assert_close(alone[0], logits[i], atol=1e-5, rtol=1e-5)


def test_corrected_model_returns_every_heads_weights_zero_on_padding():
    model = corrected_model(num_heads=4)
    sequences, _ = article_batch()
    ids, lengths, mask = text.pad_batch(sequences)
    with torch.no_grad():
        out = model(ids, lengths, mask, need_weights=True)
        assert model(ids, lengths, mask)["weights"] is None
    weights = out["weights"]
    assert weights.shape == (3, 4, 4, 4)  # (B, H, T, T)
    assert torch.all(weights[1, :, :, 2:] == 0) and torch.all(weights[2, :, :, 3:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 4))


# ---------------------------------------------------------------- long reviews


def test_windows_truncate_head_tail_and_chunks():
    seq = torch.arange(10)
    assert [w.tolist() for w in windows(seq, 4, "truncate")] == [[0, 1, 2, 3]]
    assert [w.tolist() for w in windows(seq, 4, "head_tail")] == [[0, 1, 8, 9]]
    assert [w.tolist() for w in windows(seq, 5, "head_tail")] == [[0, 1, 2, 8, 9]]  # odd: one more in the head
    chunks = windows(seq, 4, "chunks")
    assert [w.tolist() for w in chunks] == [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]  # last aligned to the end
    for n, size in ((10, 4), (8, 4), (9, 3), (11, 1), (100, 7)):
        chunks = windows(torch.arange(n), size, "chunks")
        assert all(len(c) == size for c in chunks)
        assert set(torch.cat(chunks).tolist()) == set(range(n))
        assert chunks[-1][-1] == n - 1
        assert len(chunks) == -(-n // size)  # ceil(n / size): no wasted window


@pytest.mark.parametrize("strategy", ["truncate", "head_tail", "chunks"])
def test_windows_leave_short_sequences_alone(strategy):
    for n in (3, 4):
        seq = torch.arange(n)
        out = windows(seq, 4, strategy)
        assert len(out) == 1 and torch.equal(out[0], seq)


def test_windows_rejects_unknown_strategy():
    with pytest.raises(ValueError, match="strategy must be 'truncate', 'head_tail' or 'chunks'"):
        windows(torch.arange(10), 4, "middle")
    with pytest.raises(ValueError, match="window size must be >= 1"):
        windows(torch.arange(10), 0, "chunks")


def test_predict_long_returns_mean_window_probabilities():
    """(N, C) rows summing to 1; short sequences agree across strategies; a long sequence under
    "chunks" gets the mean of its windows' probabilities (atol 1e-5)."""
    model = corrected_model(num_heads=2)
    generator = torch.Generator().manual_seed(0)
    sequences = [torch.randint(2, 100, (n,), generator=generator) for n in (3, 6, 5, 17, 11)]
    results = {s: predict_long(model, sequences, 6, s, batch_size=2) for s in ("truncate", "head_tail", "chunks")}
    for probs in results.values():
        assert probs.shape == (5, 2)
        torch.testing.assert_close(probs.sum(-1), torch.ones(5))
    for s in ("head_tail", "chunks"):
        torch.testing.assert_close(results[s][:3], results["truncate"][:3], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        parts = windows(sequences[3], 6, "chunks")
        expected = torch.stack([torch.softmax(model(*text.pad_batch([p]))["logits"][0], -1) for p in parts]).mean(0)
    torch.testing.assert_close(results["chunks"][3], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(predict_long(model, sequences, 6, "chunks", batch_size=64), results["chunks"],
                               atol=1e-5, rtol=1e-5)  # the batching does not change the answer
    model.train()
    predict_long(model, sequences, 6, "chunks")
    assert model.training  # the caller's mode is restored


# ---------------------------------------------------------------- it learns


def test_corrected_model_learns_a_toy_task():
    """Label = whether token 3 occurs anywhere (chance 50 %): validation and held-out test
    accuracy >= 0.95 (it reaches 1.0 by epoch 3 for seeds 0-5)."""
    training.seed_everything(0)
    batches = contains_token_batches(n_batches=14)
    model = BiLSTMSelfAttentionClassifier(20, 16, 16, num_heads=2, dropout=0.0, attention_dropout=0.0)
    history = training.fit(model, batches[:10], batches[10:12], epochs=8, lr=1e-2,
                           device=torch.device("cpu"), progress=False)
    assert history["best_value"] >= 0.95
    assert training.evaluate(model, batches[12:], torch.device("cpu"))["accuracy"] >= 0.95


def test_corrected_model_learns_real_reviews(data_dir):
    """2,000 IMDB training reviews (first 150 tokens), 2 epochs of a small model: accuracy on
    500 test reviews clearly above chance (>= 0.65; chance 0.5)."""
    from attn_tutorial.data import load_dataset, take_subset, train_val_split

    training.seed_everything(0)
    imdb = load_dataset("imdb", data_dir=data_dir)
    train, val = train_val_split(take_subset(imdb["train"], 2000, seed=0), 0.15, seed=0)
    test = take_subset(imdb["test"], 500, seed=0)
    vocab = text.Vocab.build((text.tokenize(t) for t in train["text"]), min_freq=2, max_size=10_000)
    make = lambda split: text.TextClassificationDataset(split["text"], split["label"], vocab, 150)  # noqa: E731
    model = BiLSTMSelfAttentionClassifier(len(vocab), 32, 32, num_heads=4)
    generator = torch.Generator().manual_seed(0)
    training.fit(model, make(train).loader(32, True, generator), make(val).loader(64, False), epochs=2,
                 lr=3e-3, device=torch.device("cpu"), progress=False)
    assert training.evaluate(model, make(test).loader(64, False), torch.device("cpu"))["accuracy"] >= 0.65
