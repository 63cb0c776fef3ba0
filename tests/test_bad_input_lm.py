"""Chapter 13's decoder language model: bad input gets a clear error that names what was expected and
what came, never a silent wrong result (issue 43, the part for ``decoder``, ``generation``, ``lm_data``
and ``lm_models``). One test per reported case; each failed on the code before the fix."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch

from attn_tutorial.decoder import (CausalDiffAttention, CausalSelfAttention, DecoderLM, MixtureOfHeadsAttention,
                                   alibi_slopes)
from attn_tutorial.generation import generate, pad_prompts, sample_next, top_k_filter
from attn_tutorial.lm_data import NeedleSpec, add_needles, evaluation_windows, needle_example, random_windows
from attn_tutorial.lm_models import KneserNeyTrigram, needle_accuracy, perplexity

pytestmark = pytest.mark.usefixtures("one_thread")

V = 50  # the vocabulary of every model below


def lm(d_model=32, num_heads=4, num_layers=2, **options) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(V, d_model, num_heads, num_layers, 64, 16, **options).eval()


def ids(batch=2, length=5) -> torch.Tensor:
    return torch.randint(2, V, (batch, length), generator=torch.Generator().manual_seed(1))


def cache_of(model: DecoderLM, batch=2, length=5) -> dict:
    with torch.no_grad():
        return model(ids(batch, length))[1]


# ----------------------------------------------------------------------------------------------
# Silent wrong results.

def test_1_a_cache_from_a_model_with_other_layers_is_refused():
    model, step = lm(), ids(2, 1)
    deeper = cache_of(lm(num_layers=3))  # used to be cut to the first 2 layers silently
    with pytest.raises(ValueError, match=r"^the cache does not fit this model: expected 2 layers of keys and "
                                         r"values, got 3 layers$"):
        model(step, cache=deeper)
    with pytest.raises(ValueError, match=r"expected 3 layers of keys and values, got 2 layers$"):
        lm(num_layers=3)(step, cache=cache_of(model))  # an IndexError before


@pytest.mark.parametrize("other, got, wrong", [
    ({"d_model": 64}, r"\(2, 4, 5, 16\)", r"d = 16, not 8"),  # another width
    ({"num_kv_heads": 2}, r"\(2, 2, 5, 8\)", r"H_kv = 2, not 4"),  # another number of key-value heads
    ({"attention": "diff"}, r"\(2, 2, 5, 16\)", r"H_kv = 2, not 4, d = 16, not 8"),
], ids=["width", "kv heads", "diff"])
def test_1_a_cache_from_a_model_with_other_heads_or_width_is_refused(other, got, wrong):
    with pytest.raises(ValueError, match=rf"^the cache does not fit this model: layer 0's cached keys must have "
                                         rf"shape \(B, H_kv, S, d\) = \(2, 4, 5, 8\), got float32 of shape "
                                         rf"{got} \({wrong}\)$"):
        lm()(ids(2, 1), cache=cache_of(lm(**other)))


def test_1_a_cache_from_another_batch_or_not_a_cache_is_refused():
    model = lm()
    cache = cache_of(model, batch=2)
    with pytest.raises(ValueError, match=r"^cache\['mask'\] must be bool of shape \(B, S\) = \(3, \?\), "
                                         r"got bool of shape \(2, 5\)$"):
        model(ids(3, 1), cache=cache)
    cache["layers"][1] = {"k": cache["layers"][1]["k"][:1], "v": cache["layers"][1]["v"]}  # one row short
    with pytest.raises(ValueError, match=r"layer 1's cached keys .* got float32 of shape \(1, 4, 5, 8\) "
                                         r"\(B = 1, not 2\)$"):
        model(ids(2, 1), cache=cache)
    with pytest.raises(ValueError, match=r"^expected cache as None or the dict this model's forward returned "
                                         r"\(keys 'layers', 'mask', 'positions'\), got a dict with keys \['k', 'v'\]$"):
        model(ids(2, 1), cache=cache["layers"][0])
    with pytest.raises(ValueError, match=r"got dict|got a dict with keys \[\]"):
        model(ids(2, 1), cache={})  # an empty dict used to mean "no cache"
    step, grown, _ = model(ids(2, 1), cache=cache_of(model))  # the model's own cache still works
    assert step.shape == (2, 1, V) and grown["mask"].shape == (2, 6)


@pytest.mark.parametrize("build, message", [
    (lambda: lm(num_kv_heads=0), r"^num_kv_heads must be an int >= 1, got 0$"),  # was: num_heads key-value heads
    (lambda: CausalSelfAttention(32, 4, 0), r"^num_kv_heads must be an int >= 1, got 0$"),
    (lambda: lm(attention="moh", active=0), r"^active must be an int >= 1, got 0$"),  # was: num_heads // 2 active
    (lambda: MixtureOfHeadsAttention(32, 4, 0), r"^active must be an int >= 1, got 0$"),
    (lambda: lm(head_dim=0), r"^head_dim must be an int >= 1, got 0$"),  # was: d_model / num_heads
    (lambda: lm(max_len=0), r"^max_len must be an int >= 1, got 0$"),  # was: 8 x context
    (lambda: lm(num_heads=-2), r"^num_heads must be an int >= 1, got -2$"),  # was built, negative head width
    (lambda: lm(attention="diff", num_heads=3), r"num_heads must be even, got 3$"),  # was one DIFF head
    (lambda: lm(attention="diff", num_kv_heads=1), r"^num_kv_heads is for attention='standard'"),  # was ignored
    (lambda: lm(num_layers=1.5), r"^num_layers must be an int >= 1, got 1.5$"),
])
def test_2_a_zero_head_count_is_an_error_not_the_default(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def trigram_without_singletons():
    """A stream where every trigram, every bigram continuation and every token continuation occurs at
    least twice: n1 = 0 at every order, so ``n1 / (n1 + 2 n2)`` is 0."""
    cycle = [0, 1, 2, 3, 4, 0, 2, 4, 1, 3]
    return KneserNeyTrigram(torch.tensor(cycle * 3), 8)  # tokens 5, 6, 7 never occur


def test_3_kneser_ney_gives_every_token_mass_even_without_singletons():
    model = trigram_without_singletons()
    assert 0 < model.D1 <= 1 and 0 < model.D2 <= 1 and 0 < model.D3 <= 1  # was 0 where n1 = 0
    every = np.arange(8)
    for a in range(8):
        for b in range(8):  # seen and unseen contexts
            p = model.probability(np.full(8, a), np.full(8, b), every)
            assert abs(p.sum() - 1) < 1e-9 and (p > 0).all(), (a, b, p)
    windows = torch.tensor([[0, 1, 2, 5, 6], [6, 7, 0, 3, 3]])  # unseen tokens and trigrams
    assert np.isfinite(model.perplexity(windows))  # was inf


def test_3_kneser_ney_discounts_of_the_normal_case_are_unchanged():
    rng = np.random.default_rng(0)
    stream = torch.tensor(rng.integers(0, 30, 4000))
    model = KneserNeyTrigram(stream, 30)
    counts = np.unique(np.lib.stride_tricks.sliding_window_view(stream.numpy(), 3), axis=0, return_counts=True)[1]
    n1, n2 = (counts == 1).sum(), (counts == 2).sum()
    assert n1 > 0 and model.D3 == n1 / (n1 + 2 * n2)  # the formula wherever some trigram occurs once
    for a, b in ((0, 1), (29, 29)):
        assert abs(model.probability(np.full(30, a), np.full(30, b), np.arange(30)).sum() - 1) < 1e-9


def test_3_kneser_ney_refuses_float_ids_and_a_2d_batch():
    with pytest.raises(ValueError, match=r"^tokens must be integer token ids, got float32 of shape \(6,\)$"):
        KneserNeyTrigram(torch.tensor([0.0, 1.7, 2.2, 1.0, 0.4, 2.9]), 5)  # was truncated to 0, 1, 2, 1, 0, 2
    with pytest.raises(ValueError, match=r"^tokens must be one stream of token ids of shape \(N,\), "
                                         r"got shape \(4, 5\) \(join the rows of a batch first\)$"):
        KneserNeyTrigram(torch.arange(20).view(4, 5) % 5, 5)  # was counted down the columns
    model = KneserNeyTrigram(torch.tensor([0, 1, 2, 1, 0, 2]), 5)
    with pytest.raises(ValueError, match=r"^c must be integer token ids, got float64 of shape \(1,\)$"):
        model.probability([0], [1], [1.5])
    with pytest.raises(ValueError, match=r"^tokens must be integer token ids, got bool"):
        KneserNeyTrigram(torch.tensor([True, False, True]), 5)


# ----------------------------------------------------------------------------------------------
# Cryptic errors made clear.

@pytest.mark.parametrize("bad, low, high", [(V, 2, V), (-1, -1, 49)], ids=["too large", "negative"])
def test_4_decoder_ids_outside_the_vocabulary(bad, low, high):
    x = ids()
    x[0, 0], x[1, 1] = bad, 49
    x[1, 0] = 2
    with pytest.raises(ValueError, match=rf"^ids must be token ids in \[0, 50\) \(the vocabulary\), "
                                         rf"got values from {low} to {high}$"):  # an IndexError before
        lm()(x)


def test_4_decoder_refuses_an_empty_batch():
    with pytest.raises(ValueError, match=r"^expected ids as int64 of shape \(B, T\) with B >= 1 and T >= 1, "
                                         r"got int64 of shape \(0, 3\)$"):  # max() of an empty tensor before
        lm()(torch.zeros(0, 3, dtype=torch.long))


@pytest.mark.parametrize("call, message", [
    (lambda m: generate(m, [[3, 60]], 2), r"^prompts must be token ids in \[0, 50\) \(the model's vocabulary\), "
                                          r"got values from 3 to 60$"),
    (lambda m: generate(m, [[3], [-1, 4]], 2), r"got values from -1 to 4$"),
    (lambda m: generate(m, [[3], [4, 5]], 2, pad_id=-1), r"^pad_id must be a token id in \[0, 50\) "
                                                         r"\(the model's vocabulary\), got -1$"),
    (lambda m: generate(m, [[3], [4, 5]], 2, pad_id=V), r"^pad_id must be a token id in \[0, 50\)"),
    (lambda m: generate(m, [[3]], 2, stop_id=V), r"^stop_id must be a token id in \[0, 50\)"),  # never stopped
    (lambda m: generate(m, [[3.7, 4]], 2), r"^expected every prompt as a list of int token ids, "
                                           r"got prompt 0 as float32 of shape \(2,\)$"),  # was truncated to 3
    (lambda m: generate(m, [[3], "abc"], 2), r"got prompt 1 as str$"),
    (lambda m: generate(m, [[3]], 0), r"^max_new_tokens must be an int >= 1, got 0$"),
    (lambda m: generate(m, [[3]], 2, top_k=2.5), r"^top_k must be between 1 and the vocabulary size 50 "
                                                 r"\(an int\), got 2.5$"),
])
def test_4_generate_names_the_bad_token_id(call, message):
    with pytest.raises(ValueError, match=message):
        call(lm())


def test_4_pad_prompts_wants_int_ids():
    with pytest.raises(ValueError, match=r"^pad_id must be an int token id, got 0.5$"):
        pad_prompts([[3]], pad_id=0.5)
    with pytest.raises(ValueError, match=r"^expected prompts as a non-empty list of token-id lists, "
                                         r"got int64 of shape \(2, 3\)$"):
        pad_prompts(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"at least one token"):
        pad_prompts([[3], []])


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -0.5, True])
def test_5_temperature_must_be_a_finite_number_at_least_0(temperature):
    message = rf"^temperature must be >= 0 and finite \(0: greedy\), got {re.escape(repr(temperature))}$"
    with pytest.raises(ValueError, match=message):  # NaN: a multinomial error; inf: uniform draws
        sample_next(torch.randn(2, 10), temperature=temperature)
    with pytest.raises(ValueError, match=message):
        generate(lm(), [[3]], 2, temperature=temperature)


def test_5_a_tiny_temperature_is_greedy_not_nan():
    logits = torch.randn(8, 20, generator=torch.Generator().manual_seed(0))
    for scale, temperature in ((1.0, 1e-40), (1.0, 1e-300), (1e3, 1e-36), (1.0, 1e-30)):
        chosen = sample_next(logits * scale, temperature=temperature, generator=torch.Generator().manual_seed(1))
        assert torch.equal(chosen, logits.argmax(-1)), (scale, temperature)  # was NaN probabilities
    assert generate(lm(), [[3, 4]], 3, temperature=1e-40) == generate(lm(), [[3, 4]], 3, temperature=0.0)


def test_5_an_ordinary_temperature_samples_exactly_as_before():
    logits = torch.randn(4, 20, generator=torch.Generator().manual_seed(0))
    for temperature, top_k in ((0.7, None), (1.3, 5)):
        ours = sample_next(logits, temperature=temperature, top_k=top_k, generator=torch.Generator().manual_seed(2))
        scaled = logits / temperature
        if top_k is not None:
            scaled = top_k_filter(scaled, top_k)
        before = torch.multinomial(torch.softmax(scaled, -1), 1, generator=torch.Generator().manual_seed(2))
        assert torch.equal(ours, before.squeeze(-1))


@pytest.mark.parametrize("build, message", [
    (lambda: lm(num_heads=0), r"^num_heads must be an int >= 1, got 0$"),  # ZeroDivisionError before
    (lambda: lm(num_heads=0, positions="alibi"), r"^num_heads must be an int >= 1, got 0$"),
    (lambda: alibi_slopes(0), r"^num_heads must be an int >= 1, got 0$"),
    (lambda: alibi_slopes(-4), r"^num_heads must be an int >= 1, got -4$"),
    (lambda: alibi_slopes(2.5), r"^num_heads must be an int >= 1, got 2.5$"),  # a slicing TypeError before
    (lambda: lm(num_heads=1, attention="diff"), r"^attention='diff' pairs the heads \(num_heads / 2 DIFF heads, "
                                                r"each twice as wide\): num_heads must be even, got 1$"),
    (lambda: CausalDiffAttention(32, 0), r"^num_heads must be an int >= 1, got 0$"),
    (lambda: CausalSelfAttention(32, 0), r"^num_heads must be an int >= 1, got 0$"),
])
def test_6_head_counts_of_0_or_less(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_7_perplexity_of_no_windows():
    trigram = KneserNeyTrigram(torch.tensor([0, 1, 2, 1, 0, 2]), 5)
    for windows in (torch.zeros(0, 5, dtype=torch.long), torch.zeros(3, 1, dtype=torch.long),
                    torch.zeros(5, dtype=torch.long), torch.zeros(2, 5)):
        message = (r"^expected windows as integer token ids of shape \(N, L \+ 1\) with N >= 1 and L >= 1, "
                   rf"got {re.escape(str(windows.dtype).removeprefix('torch.'))} of shape")
        with pytest.raises(ValueError, match=message):  # IndexError, NaN or ZeroDivisionError before
            trigram.perplexity(windows)
        with pytest.raises(ValueError, match=message):
            perplexity(lm(), windows)
    with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1, got 0$"):
        perplexity(lm(), torch.zeros(2, 5, dtype=torch.long), batch_size=0)


@pytest.mark.parametrize("call, message", [
    (lambda s: evaluation_windows(s, 0, 10), r"^length must be an int >= 1, got 0$"),  # ZeroDivisionError before
    (lambda s: evaluation_windows(s, -5, 10), r"^length must be an int >= 1, got -5$"),
    (lambda s: evaluation_windows(s, 5, 0), r"^n_tokens must be an int >= 1, got 0$"),
    (lambda s: evaluation_windows(s.float(), 5, 10), r"^expected stream as integer token ids of shape \(N,\), "
                                                     r"got float32 of shape \(100,\)$"),
    (lambda s: random_windows(s, 0, 8, torch.Generator()), r"^batch must be an int >= 1, got 0$"),
    (lambda s: random_windows(s, 2, 0, torch.Generator()), r"^length must be an int >= 1, got 0$"),  # was (2, 1)
    (lambda s: random_windows(s, 2, -3, torch.Generator()), r"^length must be an int >= 1, got -3$"),  # was (2, 0)
    (lambda s: random_windows(s.view(10, 10), 2, 3, torch.Generator()), r"^expected stream as integer token ids"),
])
def test_8_window_sizes_of_0_or_less(call, message):
    with pytest.raises(ValueError, match=message):
        call(torch.arange(100))


def test_9_needles_need_at_least_one_needle():
    spec = NeedleSpec([1, 2], [3], [4], keys=[[10], [11, 12], [13]], values=[[20], [21], [22, 23]])
    text = torch.arange(100, 200)
    message = r"^n_needles must be an int between 1 and the number of keys \(3\), got {}$"
    with pytest.raises(ValueError, match=message.format(0)):  # keys[0] of an empty list before
        needle_example(text, 40, spec, 0.5, 0, random.Random(0))
    with pytest.raises(ValueError, match=message.format(4)):
        needle_example(text, 40, spec, 0.5, 4, random.Random(0))
    with pytest.raises(ValueError, match=message.format(0)):  # checked even if no row becomes a needle
        add_needles(torch.arange(100, 182).view(2, 41), spec, 0.0, 0, random.Random(0))
    with pytest.raises(ValueError, match=r"^fraction must be in \[0, 1\], got 1.5$"):
        add_needles(torch.arange(100, 182).view(2, 41), spec, 1.5, 2, random.Random(0))
    with pytest.raises(ValueError, match=r"^n_per_depth must be an int >= 1, got 0$"):  # ZeroDivisionError before
        needle_accuracy(lm(), None, spec, n_per_depth=0)


def test_10_the_mixture_of_heads_says_it_has_no_shared_heads():
    assert "none is shared" in " ".join(MixtureOfHeadsAttention.__doc__.split())
