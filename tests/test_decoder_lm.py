"""Chapter 13: the decoder language model, its cache, grouped-query heads, positions, sampling,
differential attention, the mixture of heads and the count-based baseline."""

import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attn_tutorial.decoder import (CausalSelfAttention, DecoderBlock, DecoderLM, MixtureOfHeadsAttention,
                                   alibi_bias, alibi_slopes, apply_rope, attend, cache_bytes, measured_cache_bytes)
from attn_tutorial.generation import generate, pad_prompts, sample_next, top_k_filter, top_p_filter
from attn_tutorial.lm_data import NeedleSpec, add_needles, evaluation_windows, needle_example, train_tokenizer
from attn_tutorial.lm_models import KneserNeyTrigram
from attn_tutorial.mhsa import MultiHeadSelfAttention, causal_mask
from attn_tutorial.transformer import TransformerBlock

VARIANTS = {"mhsa": {}, "gqa": {"num_kv_heads": 2}, "mqa": {"num_kv_heads": 1}, "alibi": {"positions": "alibi"},
            "sinusoidal": {"positions": "sinusoidal"}, "learned": {"positions": "learned"},
            "diff": {"attention": "diff"}, "moh": {"attention": "moh", "active": 2, "head_dim": 8}}


def tiny(seed=0, **options) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(50, 32, 4, 2, 64, 16, **options).eval()


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_decoding_equals_full_recomputation(variant, side):
    model = tiny(**VARIANTS[variant])
    prompts = [[3, 4, 5, 6, 7], [8, 9], [10, 11, 12]]
    ids, mask = pad_prompts(prompts, side=side)
    with torch.no_grad():
        prefill, cache, _ = model(ids, mask)  # (B, T, V)
        steps = []
        for j in range(3):  # one new token per row and step, against the cache
            logits, cache, _ = model(torch.tensor([[13 + j], [20 + j], [30 + j]]), None, cache)
            steps.append(logits[:, 0])
        for row, prompt in enumerate(prompts):
            alone = torch.tensor([prompt + [(13, 20, 30)[row] + j for j in range(3)]])
            reference, _, _ = model(alone)  # no padding, no cache
            torch.testing.assert_close(prefill[row][mask[row]], reference[0, :len(prompt)], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(torch.stack([s[row] for s in steps]), reference[0, len(prompt):],
                                       atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["mhsa", "gqa", "mqa"])
def test_generation_with_and_without_cache_writes_the_same_tokens(variant):
    model = tiny(**VARIANTS[variant])
    prompts = [[3, 4, 5], [6]]
    for side in ("left", "right"):
        cached = generate(model, prompts, 6, temperature=0.0, side=side)
        again = generate(model, prompts, 6, temperature=0.0, side=side, use_cache=False)
        alone = [generate(model, [p], 6, temperature=0.0)[0] for p in prompts]
        assert cached == again == alone


def test_grouped_query_attention_equals_pytorch_enable_gqa():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 8, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
    ours, _ = attend(q, k, v, allowed)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    torch.testing.assert_close(ours, theirs)
    explicit, weights = attend(q, k, v, allowed, need_weights=True)
    torch.testing.assert_close(explicit, theirs, atol=1e-5, rtol=1e-5)
    assert torch.all(weights.triu(1) == 0)


def test_one_group_per_head_is_the_course_mhsa_and_the_block_is_chapter_11s():
    torch.manual_seed(0)
    d, heads, length = 16, 4, 6
    reference = TransformerBlock(d, heads, 32, dropout=0.0).eval()
    attention = CausalSelfAttention(d, heads, heads, positions="none")
    block = DecoderBlock(attention, 32).eval()
    block.load_state_dict({k: v for k, v in reference.state_dict().items() if not k.startswith("self_attn.")},
                          strict=False)
    mhsa = reference.self_attn
    with torch.no_grad():  # the course's in_proj rows: queries, keys, values
        attention.q_proj.weight.copy_(mhsa.in_proj.weight[:d]), attention.q_proj.bias.copy_(mhsa.in_proj.bias[:d])
        attention.kv_proj.weight.copy_(mhsa.in_proj.weight[d:]), attention.kv_proj.bias.copy_(mhsa.in_proj.bias[d:])
        attention.out_proj.load_state_dict(mhsa.out_proj.state_dict())
    x = torch.randn(2, length, d)
    allowed = causal_mask(length)[None, None]
    positions = torch.arange(length).expand(2, -1)
    with torch.no_grad():
        ours, _, _ = attention(x, allowed, positions)
        theirs, _ = mhsa(x, attn_mask=causal_mask(length))
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(block(x, allowed, positions)[0], reference(x, attn_mask=causal_mask(length)),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["mhsa", "alibi", "diff", "moh"])
def test_the_output_at_t_never_depends_on_later_tokens(variant):
    model = tiny(**VARIANTS[variant])
    ids = torch.randint(2, 50, (1, 10))
    changed = ids.clone()
    changed[0, 6:] = torch.randint(2, 50, (4,))
    with torch.no_grad():
        a, b = model(ids)[0], model(changed)[0]
    torch.testing.assert_close(a[0, :6], b[0, :6])
    assert not torch.allclose(a[0, 6:], b[0, 6:])


def test_the_gradient_reaches_only_earlier_tokens():
    model = tiny()
    embedded = model.embed.weight
    ids = torch.randint(2, 50, (1, 8))
    logits, _, _ = model(ids)
    logits[0, 3].sum().backward()
    used = embedded.grad.abs().sum(-1) > 0
    assert set(ids[0, :4].tolist()) <= set(used.nonzero().flatten().tolist())


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8)
    scores = []
    for shift in (0, 5, 37):
        qr = apply_rope(q, torch.tensor([3 + shift]))
        kr = apply_rope(k, torch.tensor([1 + shift]))
        scores.append((qr * kr).sum(-1))
    torch.testing.assert_close(scores[0], scores[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scores[0], scores[2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(apply_rope(q, torch.tensor([0])), q)  # position 0: no rotation
    assert torch.allclose(apply_rope(q, torch.tensor([4])).norm(dim=-1), q.norm(dim=-1))  # rotations keep lengths


def test_alibi_slopes_and_bias_matrix():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -i for i in range(1, 9)]))
    torch.testing.assert_close(alibi_slopes(6), torch.tensor([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8,
                                                              2.0 ** -1, 2.0 ** -3]))
    bias = alibi_bias(alibi_slopes(2), torch.arange(3), torch.arange(3))  # (H, T, S)
    expected = -torch.tensor([[0.0, 0, 0], [1, 0, 0], [2, 1, 0]])  # only i >= j is ever used (causal)
    torch.testing.assert_close(bias[0].tril(), expected.tril() * 2.0 ** -4)
    torch.testing.assert_close(bias[1].tril(), expected.tril() * 2.0 ** -8)


def test_learned_positions_stop_at_the_table_and_others_go_further():
    with pytest.raises(ValueError, match="learned positions stop at the training context"):
        tiny(positions="learned")(torch.zeros(1, 17, dtype=torch.long))
    for positions in ("rope", "alibi", "sinusoidal"):
        logits, _, _ = tiny(positions=positions)(torch.zeros(1, 40, dtype=torch.long))
        assert torch.isfinite(logits).all()


def test_top_k_never_samples_outside_the_k_best():
    torch.manual_seed(0)
    logits = torch.randn(4, 30)
    best = logits.topk(5, -1).indices
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        token = sample_next(logits, top_k=5, generator=generator)
        assert (best == token[:, None]).any(-1).all()
    tied = torch.zeros(1, 10)
    assert torch.isfinite(top_k_filter(tied, 3)).sum() == 3  # exactly k, even among ties


def test_top_p_keeps_at_least_p_and_no_more_than_needed():
    torch.manual_seed(0)
    logits = torch.randn(6, 50) * 2
    for p in (0.1, 0.5, 0.9, 1.0):
        kept = torch.isfinite(top_p_filter(logits, p))
        probs = torch.softmax(logits, -1)
        mass = (probs * kept).sum(-1)
        assert (mass >= p - 1e-6).all()
        smallest_kept = probs.masked_fill(~kept, 2).min(-1).values
        assert (mass - smallest_kept < p + 1e-6).all()  # dropping the weakest kept token falls below p


def test_temperature_towards_zero_is_greedy():
    torch.manual_seed(0)
    logits = torch.randn(8, 20)
    assert torch.equal(sample_next(logits, temperature=0.0), logits.argmax(-1))
    cold = sample_next(logits, temperature=1e-4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(cold, logits.argmax(-1))


def test_mixture_of_heads_keeps_exactly_k_heads_and_balances():
    torch.manual_seed(0)
    layer = MixtureOfHeadsAttention(16, 8, active=3, head_dim=4)
    x = torch.randn(2, 5, 16)
    gates = layer.gates(x)  # (B, T, H)
    assert ((gates > 0).sum(-1) == 3).all()
    torch.testing.assert_close(gates.sum(-1), torch.full((2, 5), 3.0))
    with torch.no_grad():
        layer.router.weight.zero_()  # a uniform router
    layer.gates(x)
    assert abs(layer.aux_loss.item()) < 1e-6
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.weight[0] = 10.0  # every token prefers head 0
    layer.gates(torch.ones(2, 5, 16))
    assert layer.aux_loss.item() > 0.5


def test_cache_bytes_formula_and_a_quarter_for_a_quarter_of_the_heads():
    for variant, kv in (("mhsa", 4), ("gqa", 2), ("mqa", 1)):
        model = tiny(**VARIANTS[variant])
        _, cache, _ = model(torch.zeros(3, 7, dtype=torch.long))
        assert measured_cache_bytes(cache) == cache_bytes(model, 3, 7) == 2 * 2 * kv * 8 * 7 * 3 * 4
    torch.manual_seed(0)
    full = DecoderLM(50, 32, 8, 2, 64, 16)
    quarter = DecoderLM(50, 32, 8, 2, 64, 16, num_kv_heads=2)
    assert cache_bytes(quarter, 1, 100) * 4 == cache_bytes(full, 1, 100)


@pytest.fixture(scope="module")
def tokenizer():
    from attn_tutorial.data import load_dataset
    from attn_tutorial.lm_data import clean_review

    texts = [clean_review(t) for t in load_dataset("imdb", "train")["text"][:1000]]
    return train_tokenizer(texts, 512)


def test_bpe_round_trips_every_test_review_byte_for_byte(tokenizer):
    from attn_tutorial.data import load_dataset

    reviews = load_dataset("imdb", "test")["text"]  # raw, <br /> tags and all
    encoded = tokenizer.encode_batch(reviews)
    decoded = tokenizer.decode_batch([e.ids for e in encoded], skip_special_tokens=False)
    mismatched = [i for i, (a, b) in enumerate(zip(reviews, decoded)) if a.encode() != b.encode()]
    assert len(decoded) == 25_000 and not mismatched
    assert tokenizer.decode(tokenizer.encode("naïve — ok 🙂").ids) == "naïve — ok 🙂"


def test_needles_sit_at_their_depth_and_fit_the_window():
    spec = NeedleSpec([1, 2], [3], [4], keys=[[10], [11, 12], [13]], values=[[20], [21], [22, 23]])
    text = torch.arange(100, 200)
    for depth in (0.0, 0.5, 1.0):
        ids, n_answer = needle_example(text, 40, spec, depth, 2, random.Random(0))
        ids = ids.tolist()
        assert len(ids) == 40 and ids[-n_answer:] in spec.values
        starts = [i for i in range(39) if ids[i:i + 2] == [1, 2]]  # two needles and the question
        assert len(starts) == 3 and (depth > 0 or starts[0] == 0)
    windows = torch.arange(100, 100 + 4 * 41).view(4, 41)
    assert add_needles(windows, spec, 1.0, 2, random.Random(0)).shape == (4, 41)


def test_kneser_ney_is_a_distribution_and_beats_a_unigram():
    rng = np.random.default_rng(0)
    words = torch.tensor(rng.integers(0, 5, 3000))
    stream = torch.stack([words, (words + 1) % 7]).T.flatten()  # every even token predicts the next
    model = KneserNeyTrigram(stream[:5000], 7)
    for a, b in ((0, 1), (3, 4), (6, 6)):  # seen and unseen contexts
        total = model.probability(np.full(7, a), np.full(7, b), np.arange(7)).sum()
        assert abs(total - 1) < 1e-9
    windows = evaluation_windows(stream[5000:], 10, 900)
    counts = torch.bincount(stream[:5000], minlength=7).float()
    unigram = math.exp(-(counts / counts.sum() * (counts / counts.sum()).clamp(min=1e-9).log()).sum())
    assert model.perplexity(windows) < unigram * 0.7
    with pytest.raises(ValueError, match=r"token ids in \[0, 7\)"):
        model.probability([0], [1], [7])
    with pytest.raises(ValueError, match=r"token ids in \[0, 3\)"):
        KneserNeyTrigram(stream[:50], 3)


@pytest.mark.parametrize("call, message", [
    (lambda m: generate(m, [list(range(2, 40))], 200), "longer than the model's context"),
    (lambda m: generate(m, [[]], 3), "at least one token"),
    (lambda m: generate(m, [[3]], 3, top_k=51), "top_k must be between 1 and the vocabulary size"),
    (lambda m: generate(m, [[3]], 3, top_p=0.0), r"top_p must be in \(0, 1\]"),
    (lambda m: generate(m, [[3]], 3, top_p=1.5), r"top_p must be in \(0, 1\]"),
    (lambda m: generate(m, [[3]], 3, temperature=-1), "temperature must be >= 0"),
    (lambda m: m(torch.zeros(1, 0, dtype=torch.long)), "T >= 1"),
    (lambda m: m(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3)), "mask must be bool"),
])
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(tiny())
