"""Bad input gets a clear error that names what was expected and what came, never a silent wrong value.

One test per reported bad input, and, for masks, one parametrised test over every layer and
function of the package that takes a mask: each must reject a ``(B, 1)`` / ``(1, T)`` mask and a
float mask with the message of the one shared helper, ``attn_tutorial.text.check_mask``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest
import torch
from torch import nn

import attn_tutorial
from attn_tutorial import attention, bilinear, coattention, decoder, diff_models, differential, han, mhsa, mhsa_costs
from attn_tutorial import long_attention, long_models, mhsa_models, pooling, relations, rnn, seq2seq, text, transformer
from attn_tutorial import vqa_models

pytestmark = pytest.mark.usefixtures("one_thread")

B, T, D = 2, 5, 8  # batch, length, width of every example below


def states(batch=B, length=T, width=D):
    return torch.randn(batch, length, width, generator=torch.Generator().manual_seed(0))


def ids_and_lengths():
    return torch.randint(1, 10, (B, T), generator=torch.Generator().manual_seed(1)), torch.tensor([T, 3])


def images():
    return torch.rand(B, 3, 16, 16, generator=torch.Generator().manual_seed(2))  # one image per question


# ----------------------------------------------------------------------------------------------
# Every layer / function with a mask argument: (qualified name, mask argument, shape it expects,
# a builder returning call(mask)). Builders run inside the test so that a failure names the case.

def _text_model(model):
    ids, lengths = ids_and_lengths()
    return lambda mask: model(ids, lengths, mask)


def _vqa_model(model):
    ids, lengths = ids_and_lengths()
    pictures = images()
    return lambda mask: model(pictures, ids, lengths, mask)


def _feature_model(model):
    ids, lengths = ids_and_lengths()
    regions = torch.rand(B, 16, 3 + D, generator=torch.Generator().manual_seed(3))  # cached region vectors
    return lambda mask: model(regions, ids, lengths, mask)


MASKED = [
    ("rnn.masked_mean", "mask", (B, T), lambda: lambda m: rnn.masked_mean(states(), m)),
    ("rnn.masked_max", "mask", (B, T), lambda: lambda m: rnn.masked_max(states(), m)),
    ("rnn.BiLSTMClassifier", "mask", (B, T), lambda: _text_model(rnn.BiLSTMClassifier(10, 4, 3))),
    ("attention.attend", "mask", (B, T),
     lambda: lambda m: attention.attend(torch.randn(B, 3, T), states(), m)),
    ("attention.AttentionPooling", "mask", (B, T), lambda: lambda m: attention.AttentionPooling(D, 4)(states(), m)),
    ("attention.StructuredSelfAttention", "mask", (B, T),
     lambda: lambda m: attention.StructuredSelfAttention(D, 4, 2)(states(), m)),
    ("pooling.AttentionPoolingClassifier", "mask", (B, T),
     lambda: _text_model(pooling.AttentionPoolingClassifier(10, 4, 3, attention_dim=4))),
    ("pooling.AttentionPoolingClassifier[hops]", "mask", (B, T),
     lambda: _text_model(pooling.AttentionPoolingClassifier(10, 4, 3, attention_dim=4, hops=2))),
    ("mhsa.combine_masks", "mask", (B, T), lambda: lambda m: mhsa.combine_masks(m, None, B, T)),
    ("mhsa.combine_masks[attn_mask]", "attn_mask", (T, T), lambda: lambda m: mhsa.combine_masks(None, m, B, T)),
    ("mhsa.MultiHeadSelfAttention", "mask", (B, T), lambda: lambda m: mhsa.MultiHeadSelfAttention(D, 2)(states(), m)),
    ("mhsa.MultiHeadSelfAttention[explicit]", "mask", (B, T),
     lambda: lambda m: mhsa.MultiHeadSelfAttention(D, 2)(states(), m, implementation="explicit")),
    ("mhsa.MultiHeadSelfAttention[attn_mask]", "attn_mask", (T, T),
     lambda: lambda m: mhsa.MultiHeadSelfAttention(D, 2)(states(), attn_mask=m)),
    ("mhsa_costs.block_local_attention", "key_mask", (B, T),
     lambda: lambda m: mhsa_costs.block_local_attention(*torch.randn(3, B, 2, T, 4).unbind(0), m, 2)),
    ("mhsa_models.BiLSTMSelfAttentionClassifier", "mask", (B, T),
     lambda: _text_model(mhsa_models.BiLSTMSelfAttentionClassifier(10, 4, 4, num_heads=2))),
    ("differential.first_difference", "mask", (B, T), lambda: lambda m: differential.first_difference(states(), m)),
    ("differential.DifferenceSequenceAttention", "mask", (B, T),
     lambda: lambda m: differential.DifferenceSequenceAttention(D, 2)(states(), m)),
    ("differential.MultiHeadDiffAttention", "mask", (B, T),
     lambda: lambda m: differential.MultiHeadDiffAttention(D, 2)(states(), m)),
    ("differential.MultiHeadDiffAttention[explicit]", "mask", (B, T),
     lambda: lambda m: differential.MultiHeadDiffAttention(D, 2)(states(), m, implementation="explicit")),
    ("differential.MultiHeadDiffAttention[attn_mask]", "attn_mask", (T, T),
     lambda: lambda m: differential.MultiHeadDiffAttention(D, 2)(states(), attn_mask=m)),
    *[(f"diff_models.BiLSTMAttentionClassifier[{kind}]", "mask", (B, T),
       lambda kind=kind: _text_model(diff_models.BiLSTMAttentionClassifier(10, 4, 4, kind)))
      for kind in diff_models.BiLSTMAttentionClassifier.KINDS],
    ("han.ContextAttention", "mask", (B, T), lambda: lambda m: han.ContextAttention(D, heads=2)(states(), m)),
    ("han.HierarchicalAttentionNetwork", "word_mask", (B, 3, 4),
     lambda: lambda m: han.HierarchicalAttentionNetwork(10, embed_dim=4, hidden_dim=3)(
         torch.randint(1, 10, (B, 3, 4)), m)),
    ("vqa_models.QuestionEncoder", "mask", (B, T), lambda: _text_model(vqa_models.QuestionEncoder(10, dim=8))),
    ("vqa_models.NoAttentionVQA", "mask", (B, T), lambda: _vqa_model(vqa_models.NoAttentionVQA(10, 3, dim=8))),
    ("vqa_models.StackedAttention", "mask", (B, T),
     lambda: lambda m: vqa_models.StackedAttention(D)(torch.randn(B, D), states(), m)),
    ("vqa_models.StackedAttentionVQA", "mask", (B, T),
     lambda: _vqa_model(vqa_models.StackedAttentionVQA(10, 3, dim=8))),
    ("coattention.ParallelCoAttention", "word_mask", (B, T),
     lambda: lambda m: coattention.ParallelCoAttention(D, D, 4)(states(B, 4), states(), m)),
    ("coattention.AlternatingCoAttention", "word_mask", (B, T),
     lambda: lambda m: coattention.AlternatingCoAttention(D, 4)(states(B, 4), states(), m)),
    ("coattention.PhraseFeatures", "mask", (B, T), lambda: lambda m: coattention.PhraseFeatures(D)(states(), m)),
    *[(f"coattention.{model.__name__}[{kind}]", "mask", (B, T),
       lambda model=model, kind=kind: _vqa_model(model(10, 3, dim=8, co_attention=kind)))
      for model in (coattention.CoAttentionVQA, coattention.HierarchicalCoAttentionVQA)
      for kind in ("parallel", "alternating")],
    ("bilinear.LowRankBilinearAttention", "mask", (B, T),
     lambda: lambda m: bilinear.LowRankBilinearAttention(6, D, 4)(torch.randn(B, 6), states(), m)),
    ("bilinear.MultiHeadBilinearAttention", "mask", (B, T),
     lambda: lambda m: bilinear.MultiHeadBilinearAttention(6, D, 4, num_heads=2)(torch.randn(B, 6), states(), m)),
    ("bilinear.SparseBilinearAttention", "mask", (B, T),
     lambda: lambda m: bilinear.SparseBilinearAttention(6, D, 4)(torch.randn(B, 6), states(), m)),
    ("bilinear.pair_mask[region_mask]", "region_mask", (B, T),
     lambda: lambda m: bilinear.pair_mask(m, torch.ones(B, 3, dtype=torch.bool), T, 3)),
    ("bilinear.pair_mask[word_mask]", "word_mask", (B, T),
     lambda: lambda m: bilinear.pair_mask(torch.ones(B, 4, dtype=torch.bool), m, 4, T)),
    ("bilinear.BilinearAttentionMap[region_mask]", "region_mask", (B, 4),
     lambda: lambda m: bilinear.BilinearAttentionMap(D, D, 4)(states(B, 4), states(), region_mask=m)),
    ("bilinear.BilinearAttentionMap[word_mask]", "word_mask", (B, T),
     lambda: lambda m: bilinear.BilinearAttentionMap(D, D, 4)(states(B, 4), states(), word_mask=m)),
    ("bilinear.BilinearAttentionNetwork[word_mask]", "word_mask", (B, T),
     lambda: lambda m: bilinear.BilinearAttentionNetwork(D)(states(B, 4), states(), m)),
    ("bilinear.BilinearAttentionNetwork[region_mask]", "region_mask", (B, 4),
     lambda: lambda m: bilinear.BilinearAttentionNetwork(D)(states(B, 4), states(), torch.ones(B, T, dtype=torch.bool), m)),
    ("bilinear.BANVQA", "mask", (B, T), lambda: _vqa_model(bilinear.BANVQA(10, 3, dim=8))),
    ("relations.BiasedSelfAttention", "mask", (B, T),
     lambda: lambda m: relations.BiasedSelfAttention(D, 2)(states(), torch.zeros(B, 2, T, T), m)),
    *[(f"relations.{model.__name__}", "mask", (B, T), lambda model=model: _feature_model(model(10, 3, dim=8, feature_dim=3 + D, k=4)))
      for model in (relations.RegionTransformerVQA, relations.RelationNetworkVQA)],
    ("long_attention.sliding_window_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.sliding_window_attention(*torch.randn(3, B, 2, T, 4).unbind(0), m, 2)),
    ("long_attention.flex_sliding_window_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.flex_sliding_window_attention(*torch.randn(3, B, 2, T, 4).unbind(0), m, 2)),
    ("long_attention.LinformerProjection", "key_mask", (B, T),
     lambda: lambda m: long_attention.LinformerProjection(8, 4)(*torch.randn(2, B, 2, T, 4).unbind(0), m)),
    ("long_attention.linformer_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.linformer_attention(*torch.randn(3, B, 2, T, 4).unbind(0),
                                                          long_attention.LinformerProjection(8, 4), m)),
    ("long_attention.kernel_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.kernel_attention(*torch.rand(3, B, 2, T, 4).unbind(0), m)),
    ("long_attention.linear_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.linear_attention(*torch.randn(3, B, 2, T, 4).unbind(0), m)),
    ("long_attention.performer_attention", "key_mask", (B, T),
     lambda: lambda m: long_attention.performer_attention(*torch.randn(3, B, 2, T, 4).unbind(0), torch.randn(6, 4), m)),
    *[(f"long_attention.ScalableSelfAttention[{kind}]", "mask", (B, T),
       lambda kind=kind: lambda m: long_attention.ScalableSelfAttention(
           D, 2, kind, window=2, chunk=2, rank=4, max_len=8, n_features=4)(states(), m))
      for kind in long_attention.SCALABLE_KINDS],
    ("long_models.LongReviewClassifier", "mask", (B, T),
     lambda: _text_model(long_models.LongReviewClassifier(10, 4, 4, "window", num_heads=2, window=2))),
    *[(f"seq2seq.DecoderAttention[{kind}]", "mask", (B, T),
       lambda kind=kind: lambda m: seq2seq.DecoderAttention(D, D, kind)(torch.randn(B, D), states(), m))
      for kind in seq2seq.SCORES],
    ("transformer.MultiHeadAttention", "mask", (B, T), lambda: lambda m: transformer.MultiHeadAttention(D, 2)(states(), m)),
    ("transformer.MultiHeadAttention[cross]", "memory_mask", (B, T),
     lambda: lambda m: transformer.MultiHeadAttention(D, 2).cross(states(length=3), states(), m)),
    ("transformer.TransformerBlock", "mask", (B, T), lambda: lambda m: transformer.TransformerBlock(D, 2, 16)(states(), m)),
    ("transformer.TransformerEncoder", "mask", (B, T),
     lambda: lambda m: transformer.TransformerEncoder(2, D, 2, 16)(states(), m)),
    ("transformer.TransformerDecoderLayer", "memory_mask", (B, T),
     lambda: lambda m: transformer.TransformerDecoderLayer(D, 2, 16)(states(length=3), states(), m)),
    ("transformer.TransformerDecoder", "memory_mask", (B, T),
     lambda: lambda m: transformer.TransformerDecoder(2, D, 2, 16)(states(length=3), states(), m)),
    *[(f"decoder.DecoderLM[{attention}]", "mask", (B, T),
       lambda attention=attention: lambda m: decoder.DecoderLM(10, D, 2, 1, 8, T, attention=attention,
                                                                active=1)(torch.randint(0, 10, (B, T)), m))
      for attention in decoder.ATTENTIONS],
]

# Functions whose mask only has to broadcast (documented and tested that way): scores / (B, H, Tq, Tk).
q, k, v = torch.randn(3, B, 2, T, 4).unbind(0)
BROADCAST = [
    ("attention.masked_softmax", lambda m: attention.masked_softmax(torch.randn(B, T), m)),
    ("mhsa.check_qkv", lambda m: mhsa.check_qkv(q, k, v, m)),
    ("mhsa.explicit_attention", lambda m: mhsa.explicit_attention(q, k, v, m)),
    ("mhsa.sdpa_attention", lambda m: mhsa.sdpa_attention(q, k, v, m)),
    ("mhsa_costs.chunked_attention", lambda m: mhsa_costs.chunked_attention(q, k, v, m, 2)),
    ("long_attention.online_softmax_attention", lambda m: long_attention.online_softmax_attention(q, k, v, m, 2)),
    ("long_attention.chunked_exact_attention", lambda m: long_attention.chunked_exact_attention(q, k, v, m, 2)),
    ("differential.diff_attention_explicit",
     lambda m: differential.diff_attention_explicit(q, k, q, k, torch.randn(B, 2, T, 8), torch.tensor(0.5), m)),
    ("differential.diff_attention_sdpa",
     lambda m: differential.diff_attention_sdpa(q, k, q, k, torch.randn(B, 2, T, 8), torch.tensor(0.5), m)),
]


def _shape(shape) -> str:
    return re.escape("(" + ", ".join(map(str, shape)) + ")")


@pytest.mark.parametrize("target, name, shape, build", MASKED, ids=[m[0] for m in MASKED])
def test_every_masked_layer_rejects_broadcast_and_non_bool_masks_with_the_shared_message(target, name, shape, build):
    call = build()
    expected = rf"{name} must be bool of shape \([A-Za-z, ]+\)( or \([A-Za-z, ]+\))? = {_shape(shape)}"
    for bad in (shape[:-1] + (1,), (1,) + shape[1:]):  # (B, 1) and (1, T): both used to broadcast silently
        with pytest.raises(ValueError, match=rf"{expected}.*, got bool of shape {_shape(bad)}$"):
            call(torch.ones(bad, dtype=torch.bool))
    with pytest.raises(TypeError, match=rf"{expected}.*, got float32 of shape {_shape(shape)}$"):
        call(torch.ones(shape))


@pytest.mark.parametrize("target, call", BROADCAST, ids=[b[0] for b in BROADCAST])
def test_broadcast_masks_must_still_broadcast_and_be_bool(target, call):
    with pytest.raises(ValueError, match=r"mask must be bool of shape .* or broadcast to it, "
                                         r"got bool of shape \(2, 1, 1, 4\)$"):
        call(torch.ones(B, 1, 1, T - 1, dtype=torch.bool))  # one key short
    with pytest.raises(TypeError, match=r"mask must be bool of shape .* or broadcast to it, got int64"):
        call(torch.ones(T, dtype=torch.long))


def test_every_function_and_layer_with_a_mask_argument_is_checked_here():
    """A new layer with a mask argument must join MASKED or BROADCAST (the published ``Article*``
    code is kept as it was, and check_mask is the helper itself)."""
    covered = {m[0].split("[")[0] for m in MASKED} | {b[0] for b in BROADCAST}
    found = set()
    for info in pkgutil.iter_modules(attn_tutorial.__path__):
        if info.name == "export":
            continue
        module = importlib.import_module(f"attn_tutorial.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith(("_", "Article", "article_")) or getattr(obj, "__module__", None) != module.__name__:
                continue
            function = obj.forward if inspect.isclass(obj) and issubclass(obj, nn.Module) else obj
            if inspect.isfunction(function) and any("mask" in p for p in inspect.signature(function).parameters):
                found.add(f"{info.name}.{name}")
    assert found - {"text.check_mask", "text.to_key_padding_mask"} == covered


def test_mask_checks_live_in_the_shared_helper_only():
    root = inspect.getfile(attn_tutorial).rsplit("/", 1)[0]
    for info in pkgutil.iter_modules(attn_tutorial.__path__):
        source = open(f"{root}/{info.name}.py", encoding="utf-8").read()
        if info.name != "text":
            assert "!= torch.bool" not in source and "must be bool" not in source, info.name


def test_to_key_padding_mask_wants_a_2d_bool_mask():
    with pytest.raises(TypeError, match=r"mask must be bool of shape \(B, T\), got float32 of shape \(2, 5\)"):
        text.to_key_padding_mask(torch.ones(B, T))
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(B, T\), got bool of shape \(2, 5, 1\)"):
        text.to_key_padding_mask(torch.ones(B, T, 1, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be bool of shape \(B, T\), got list"):
        text.to_key_padding_mask([[True, False]])


# ----------------------------------------------------------------------------------------------
# The reported bad inputs, one test each.

def test_1_masked_mean_with_a_b1_mask_no_longer_divides_by_one():
    x = torch.ones(B, T, D)
    with pytest.raises(ValueError, match=r"mask must be bool of shape \(B, T\) = \(2, 5\), got bool of shape \(2, 1\)"):
        rnn.masked_mean(x, torch.ones(B, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"expected x of shape \(B, T, D\), got float32 of shape \(2, 5\)"):
        rnn.masked_mean(x[..., 0], torch.ones(B, T, dtype=torch.bool))


@pytest.mark.parametrize("bad, error, got", [
    (torch.ones(1, T, dtype=torch.bool), ValueError, r"bool of shape \(1, 5\)"),
    (torch.ones(B, 1, dtype=torch.bool), ValueError, r"bool of shape \(2, 1\)"),
    (torch.ones(B, T), TypeError, r"float32 of shape \(2, 5\)"),
    (torch.ones(B, T, dtype=torch.long), TypeError, r"int64 of shape \(2, 5\)"),
])
def test_2_attend_rejects_broadcast_and_non_bool_key_masks(bad, error, got):
    with pytest.raises(error, match=rf"mask must be bool of shape \(B, Tk\) = \(2, 5\), got {got}"):
        attention.attend(torch.randn(B, 1, T), states(), bad)


def test_3_masked_softmax_with_a_mask_that_does_not_broadcast():
    with pytest.raises(ValueError, match=r"mask must be bool of shape scores.shape = \(2, 5\) or broadcast to it, "
                                         r"got bool of shape \(3,\)"):
        attention.masked_softmax(torch.randn(B, T), torch.ones(3, dtype=torch.bool))
    weights = attention.masked_softmax(torch.randn(B, T, T), torch.ones(B, 1, T, dtype=torch.bool))
    assert weights.shape == (B, T, T)  # a key mask that broadcasts over the queries stays allowed


def test_4_an_empty_batch_is_refused_clearly():
    for mode in rnn.BiLSTMEncoder.MODES:
        with pytest.raises(ValueError, match=r"expected x \(B, T, D\) and lengths \(B,\) with B >= 1, "
                                             r"got \(0, 5, 4\) and \(0,\)"):
            rnn.BiLSTMEncoder(4, 3, mode=mode)(torch.randn(0, T, 4), torch.zeros(0, dtype=torch.long))
    model = han.HierarchicalAttentionNetwork(10, embed_dim=4, hidden_dim=3)
    with pytest.raises(ValueError, match=r"expected ids \(B, S, W\) long with B >= 1, got torch.int64 \(0, 3, 4\)"):
        model(torch.zeros(0, 3, 4, dtype=torch.long), torch.zeros(0, 3, 4, dtype=torch.bool))
    layer = differential.MultiHeadDiffAttention(D, 2)
    for implementation in ("auto", "sdpa", "explicit"):  # the fused path failed; both paths now agree
        with pytest.raises(ValueError, match=r"expected x of shape \(B, T, 8\) with B >= 1, got \(0, 5, 8\)"):
            layer(torch.randn(0, T, D), implementation=implementation)
    q0 = torch.randn(0, 2, T, 4)
    with pytest.raises(ValueError, match=r"expected q1 of shape \(B, H, Tq, d\) with B >= 1, got \(0, 2, 5, 4\)"):
        differential.diff_attention_sdpa(q0, q0, q0, q0, torch.randn(0, 2, T, 8), torch.tensor(0.5))


WIDTH = [  # (layer call with inputs one feature too narrow, name and axes in the message)
    ("AdditiveScore", lambda: attention.AdditiveScore(D, D, 4)(torch.randn(B, 1, D), states(width=D - 1)),
     r"keys of shape \(B, Tk, Dk\) with Dk = 8"),
    ("AttentionPooling", lambda: attention.AttentionPooling(D, 4)(states(width=D - 1), torch.ones(B, T, dtype=torch.bool)),
     r"states of shape \(B, T, D\) with D = 8"),
    ("StructuredSelfAttention",
     lambda: attention.StructuredSelfAttention(D, 4, 2)(states(width=D - 1), torch.ones(B, T, dtype=torch.bool)),
     r"states of shape \(B, T, D\) with D = 8"),
    ("ContextAttention", lambda: han.ContextAttention(D)(states(width=D - 1)), r"states of shape \(N, T, D\) with D = 8"),
    ("StackedAttention", lambda: vqa_models.StackedAttention(D)(torch.randn(B, D - 1), states(width=D - 1)),
     r"regions of shape \(B, R, D\) with D = 8"),
    ("ParallelCoAttention[regions]", lambda: coattention.ParallelCoAttention(D, D, 4)(states(width=D - 1), states()),
     r"regions of shape \(B, R, Dv\) with Dv = 8"),
    ("ParallelCoAttention[words]", lambda: coattention.ParallelCoAttention(D, D, 4)(states(), states(width=D - 1)),
     r"words of shape \(B, L, Dq\) with Dq = 8"),
    ("AlternatingCoAttention", lambda: coattention.AlternatingCoAttention(D, 4)(states(width=D - 1), states(width=D - 1)),
     r"regions of shape \(B, R, Dv\) with Dv = 8"),
    ("PhraseFeatures", lambda: coattention.PhraseFeatures(D)(states(width=D - 1), torch.ones(B, T, dtype=torch.bool)),
     r"words of shape \(B, L, D\) with D = 8"),
    ("LowRankBilinearAttention[query]", lambda: bilinear.LowRankBilinearAttention(6, D, 4)(torch.randn(B, 5), states()),
     r"query of shape \(B, Dq\) with Dq = 6"),
    ("LowRankBilinearAttention[keys]",
     lambda: bilinear.LowRankBilinearAttention(6, D, 4)(torch.randn(B, 6), states(width=D - 1)),
     r"keys of shape \(B, S, Dk\) with Dk = 8"),
    ("MultiHeadBilinearAttention",
     lambda: bilinear.MultiHeadBilinearAttention(6, D, 4, num_heads=2)(torch.randn(B, 6), states(width=D - 2)),
     r"keys of shape \(B, S, Dk\) with Dk = 8"),
    ("SparseBilinearAttention", lambda: bilinear.SparseBilinearAttention(6, D, 4)(torch.randn(B, 6), states(width=D - 1)),
     r"keys of shape \(B, S, Dk\) with Dk = 8"),
    ("BilinearAttentionMap", lambda: bilinear.BilinearAttentionMap(D, D, 4)(states(B, 4, D - 1), states()),
     r"regions of shape \(B, R, Dx\) with Dx = 8"),
    ("BilinearPooling", lambda: bilinear.BilinearPooling(D, D, 4)(states(B, 4), states(width=D - 1), torch.rand(B, 4, T)),
     r"words of shape \(B, L, Dy\) with Dy = 8"),
    ("BilinearAttentionNetwork",
     lambda: bilinear.BilinearAttentionNetwork(D)(states(B, 4), states(width=D - 1), torch.ones(B, T, dtype=torch.bool)),
     r"words of shape \(B, L, Dy\) with Dy = 8"),
]


@pytest.mark.parametrize("layer, call, expected", WIDTH, ids=[w[0] for w in WIDTH])
def test_5_a_wrong_feature_width_names_the_expected_width(layer, call, expected):
    with pytest.raises(ValueError, match=rf"^expected {expected}, got float32 of shape \(2(, \d)+\)$"):
        call()


def test_6_load_dataset_rejects_a_parquet_file_without_text_and_label(tmp_path):
    import datasets

    from attn_tutorial import data

    folder = tmp_path / "data"
    (folder / "imdb").mkdir(parents=True)
    sums = []
    for split in ("train", "test"):
        path = folder / "imdb" / f"imdb_{split}.parquet"
        datasets.Dataset.from_dict({"review": ["good", "bad"], "sentiment": [1, 0]}).to_parquet(str(path))
        sums.append(f"{data.sha256_of(path)}  ./imdb/imdb_{split}.parquet")
    (folder / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    expected = (r"imdb_test.parquet \(dataset 'imdb', split 'test'\) has columns \['review', 'sentiment'\]: "
                r"expected at least \['text', 'label'\], missing \['text', 'label'\]")
    with pytest.raises(ValueError, match=expected):
        data.load_dataset("imdb", split="test", data_dir=folder)
    with pytest.raises(ValueError, match=r"split 'train'\) has columns \['review', 'sentiment'\]"):
        data.load_dataset("imdb", data_dir=folder)


@pytest.mark.parametrize("max_len", [-1, 0, 2.5, True])
def test_7_encode_texts_rejects_a_max_len_that_is_not_a_positive_int(max_len):
    vocab = text.Vocab(["<pad>", "<unk>", "a", "b", "c"])
    with pytest.raises(ValueError, match=rf"max_len must be a positive int or None, got {re.escape(repr(max_len))}"):
        text.encode_texts(["a b c"], vocab, max_len=max_len)
    assert text.encode_texts(["a b c"], vocab, max_len=2)[0].tolist() == [2, 3]


def test_8_structured_self_attention_refuses_an_empty_batch():
    layer = attention.StructuredSelfAttention(D, 4, 2)  # its penalty, a mean over the batch, was NaN
    with pytest.raises(ValueError, match=r"^expected states of shape \(B, T, D\) with B >= 1, "
                                         r"got float32 of shape \(0, 5, 8\)$"):
        layer(states(batch=0), torch.ones(0, T, dtype=torch.bool))


def test_9_phrase_features_refuses_a_question_without_words():
    layer = coattention.PhraseFeatures(D)  # the convolutions failed on "padded input size per channel"
    with pytest.raises(ValueError, match=r"^expected words of shape \(B, L, D\) with L >= 1, "
                                         r"got float32 of shape \(2, 0, 8\)$"):
        layer(states(length=0), torch.ones(B, 0, dtype=torch.bool))


@pytest.mark.parametrize("mask", [None, torch.ones(B, T, dtype=torch.bool)], ids=["no mask", "mask"])
def test_10_masked_softmax_wants_floating_point_scores(mask):
    scores = torch.arange(B * T).view(B, T)  # integer scores gave integer zeros
    with pytest.raises(TypeError, match=r"^masked_softmax expects floating-point scores, got int64 of shape \(2, 5\)$"):
        attention.masked_softmax(scores, mask)
    assert attention.masked_softmax(scores.half(), mask).dtype == torch.float16  # any float dtype stays allowed


def test_11_attend_wants_one_value_per_key():
    scores = torch.randn(B, 3, T)
    with pytest.raises(ValueError, match=r"^expected values of shape \(B, Tk, Dv\) with Tk = 5, the keys of "
                                         r"scores \(B, Tq, Tk\) = \(2, 3, 5\), got float32 of shape \(2, 4, 8\)$"):
        attention.attend(scores, states(length=T - 1))  # a bare bmm size error before
    context, _ = attention.attend(scores, states())
    assert context.shape == (B, 3, D)


@pytest.mark.parametrize("mode", rnn.BiLSTMEncoder.MODES)
def test_12_bilstm_encoder_wants_integer_lengths_and_its_input_width(mode):
    encoder = rnn.BiLSTMEncoder(D, 3, mode=mode)
    _, lengths = ids_and_lengths()
    with pytest.raises(TypeError, match=r"^lengths must be an integer tensor of shape \(B,\), "
                                        r"got float32 of shape \(2,\)$"):
        encoder(states(), lengths.float())  # gather() dtype errors ("reverse"), silent truncation ("packed")
    with pytest.raises(ValueError, match=r"^expected x of shape \(B, T, D\) with D = 8, got float32 of shape \(2, 5, 7\)$"):
        encoder(states(width=D - 1), lengths)  # a bare matmul / LSTM size error before
    assert torch.equal(encoder(states(), lengths.int()), encoder(states(), lengths))  # any integer dtype stays allowed
