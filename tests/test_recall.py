"""Chapter 14: the MQAR generator's layout, causal linear attention in both forms, causality of every
mixer, induction scores on heads whose patterns are known, head ablation, learning above chance, and
clear errors for bad input."""

from __future__ import annotations

import math

import pytest
import torch

from attn_tutorial import recall
from attn_tutorial.recall import (FILLER, IGNORE, MIXERS, N_NOISE, RecallLM, ablated, causal_linear_attention,
                                  causal_linear_attention_recurrent, evaluate_noisy, evaluate_recall, halves_loss,
                                  head_scores, mqar_batch, noisy_mqar_batch, repeated_batch, state_numbers,
                                  train_recall)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_mqar_rows_follow_the_zoology_layout():
    n_pairs, length, n_keys, n_values = 5, 24, 12, 7
    ids, targets = mqar_batch(64, n_pairs, length, n_keys, n_values, generator())
    assert ids.shape == targets.shape == (64, length) and ids.dtype == targets.dtype == torch.long
    for row, target in zip(ids.tolist(), targets.tolist()):
        keys, values = row[0:2 * n_pairs:2], row[1:2 * n_pairs:2]
        assert len(set(keys)) == n_pairs and all(1 <= k <= n_keys for k in keys)  # distinct keys
        assert all(n_keys < v <= n_keys + n_values for v in values)
        assert all(t == IGNORE for t in target[:2 * n_pairs])  # nothing asked among the pairs
        asked = [t for t in range(2 * n_pairs, length) if target[t] != IGNORE]
        assert sorted(row[t] for t in asked) == sorted(keys)  # each key asked exactly once
        for t in asked:
            assert target[t] == values[keys.index(row[t])]  # the value that followed that key
        assert all(row[t] == FILLER for t in range(2 * n_pairs, length) if t not in asked)


def test_mqar_is_reproducible_and_varies_with_the_seed():
    first, second = mqar_batch(4, 3, 12, 8, 8, generator(1)), mqar_batch(4, 3, 12, 8, 8, generator(1))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0], mqar_batch(4, 3, 12, 8, 8, generator(2))[0])


@pytest.mark.parametrize("kwargs, message", [
    ({"n_pairs": 9, "n_keys": 8}, "distinct keys"),
    ({"length": 8}, "cannot hold"),
    ({"n_pairs": 0}, "n_pairs must be an int >= 1"),
    ({"batch": 2.5}, "batch must be an int"),
    ({"n_values": True}, "n_values must be an int"),
])
def test_mqar_refuses_impossible_sizes(kwargs, message):
    sizes = {"batch": 2, "n_pairs": 3, "length": 12, "n_keys": 8, "n_values": 8} | kwargs
    with pytest.raises(ValueError, match=message):
        mqar_batch(**sizes, generator=generator())


@pytest.mark.parametrize("noise", [0.0, 0.4, 0.7])
def test_noisy_rows_keep_each_value_after_its_key_among_the_noise(noise):
    n_pairs, length, n_keys, n_values = 6, 64, 10, 10
    ids, targets, answer = noisy_mqar_batch(32, n_pairs, length, n_keys, n_values, noise, generator())
    n_noise = round(2 * n_pairs * noise / (1 - noise))
    context = 2 * n_pairs + n_noise
    first_noise = 1 + n_keys + n_values
    is_noise = (ids >= first_noise) & (ids < first_noise + N_NOISE)
    assert (is_noise[:, :context].sum(1) == n_noise).all() and not is_noise[:, context:].any()
    asked = targets != IGNORE
    assert (asked.sum(1) == n_pairs).all() and not asked[:, :context].any()
    assert ((answer >= 0) == asked).all()
    rows = torch.arange(32)[:, None].expand_as(answer)[asked]
    assert torch.equal(ids[rows, answer[asked]], targets[asked])  # the answer position holds the value
    assert torch.equal(ids[rows, answer[asked] - 1], ids[asked])  # right after the asked key


def test_noisy_recall_refuses_bad_noise_and_short_rows():
    with pytest.raises(ValueError, match="noise must be a fraction in \\[0, 1\\)"):
        noisy_mqar_batch(2, 3, 30, 8, 8, 1.0, generator())
    with pytest.raises(ValueError, match="noise must be a fraction"):
        noisy_mqar_batch(2, 3, 30, 8, 8, "0.5", generator())
    with pytest.raises(ValueError, match="cannot hold 3 pairs, 24 noise tokens"):
        noisy_mqar_batch(2, 3, 30, 8, 8, 0.8, generator())


def test_noisy_evaluation_measures_the_share_on_the_answer():
    for mixer in ("softmax", "diff"):
        torch.manual_seed(0)
        model = RecallLM(mixer, 1 + 8 + 8 + N_NOISE, dim=16, heads=2)
        scores = evaluate_noisy(model, 3, 24, 0.4, size=16, n_keys=8, n_values=8)
        assert 0.0 <= scores["accuracy"] <= 1.0 and 0.0 < scores["answer_mass"] < 1.0


def test_linear_attention_masked_form_equals_the_running_state():
    q, k, v = torch.randn(3, 2, 3, 9, 4, generator=generator()).unbind(0)  # (B, H, T, d)
    assert torch.allclose(causal_linear_attention(q, k, v), causal_linear_attention_recurrent(q, k, v), atol=1e-5)


def test_linear_attention_first_position_reads_its_own_value():
    q, k, v = torch.randn(3, 1, 1, 5, 4, generator=generator()).unbind(0)
    assert torch.allclose(causal_linear_attention(q, k, v)[:, :, 0], v[:, :, 0], atol=1e-5)


@pytest.mark.parametrize("mixer", MIXERS + recall.BASELINE_MIXERS)
def test_every_mixer_is_causal(mixer):
    torch.manual_seed(0)
    model = RecallLM(mixer, vocab_size=20, dim=16, heads=2, layers=2).eval()
    ids = torch.randint(20, (2, 10), generator=generator())
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 20  # the future of position 5
    with torch.no_grad():
        before, after = model(ids)[0], model(changed)[0]
    assert before.shape == (2, 10, 20)
    assert torch.allclose(before[:, :6], after[:, :6], atol=1e-5)
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_every_mixer_gets_gradients_everywhere():
    for mixer in MIXERS + recall.BASELINE_MIXERS:
        model = RecallLM(mixer, vocab_size=12, dim=16, heads=2)
        ids, targets = mqar_batch(3, 2, 8, 5, 6, generator())
        loss = torch.nn.functional.cross_entropy(model(ids)[0].flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        loss.backward()
        assert math.isfinite(loss.item())
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters()), mixer


def test_state_numbers_count_the_cache_and_the_state():
    assert state_numbers("softmax", 64, 2, 100, 2) == 2 * 2 * 64 * 100
    assert state_numbers("linear", 64, 2, 100, 2) == 2 * 2 * (32 * 32 + 32)
    assert state_numbers("linear", 64, 2, 10, 2) == state_numbers("linear", 64, 2, 10_000, 2)  # fixed size
    assert state_numbers("window", 64, 2, 100, 2) == 2 * 2 * 64 * recall.WINDOW  # the last WINDOW positions
    assert state_numbers("window", 64, 2, 8, 2) == 2 * 2 * 64 * 8
    assert state_numbers("lstm", 64, 2, 100, 2) == 2 * 2 * 64  # state and cell


def test_the_sliding_window_sees_the_last_window_tokens_only():
    torch.manual_seed(0)
    window = recall.SlidingWindowAttention(16, 2, window=4).eval()
    x, length = torch.randn(2, 12, 16), 12
    allowed = torch.ones(length, length, dtype=torch.bool).tril()[None, None]
    positions = torch.arange(length).expand(2, length)
    with torch.no_grad():
        out, _, weights = window(x, allowed, positions, need_weights=True)
        changed = x.clone()
        changed[:, :4] += 1.0  # positions 0..3: outside the window of queries 7 and later
        out2 = window(changed, allowed, positions)[0]
    assert weights.shape == (2, 2, 12, 12)
    rows, cols = torch.meshgrid(torch.arange(12), torch.arange(12), indexing="ij")
    assert (weights[..., (rows - cols >= 4) | (cols > rows)] == 0).all()  # nothing 4 or more back, no future
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 12))
    assert torch.allclose(out[:, 7:], out2[:, 7:], atol=1e-6) and not torch.allclose(out[:, 4:7], out2[:, 4:7])
    with pytest.raises(ValueError, match="window must be"):
        recall.SlidingWindowAttention(16, 2, window=0)


class KnownHeads(torch.nn.Module):
    """A stand-in model whose attention maps are given: layer 1 = previous token (head 0) or uniform
    (head 1), layer 2 = induction (head 1) or attention to the first token (head 0)."""

    heads = 2

    def __init__(self, n: torch.Tensor, length: int):
        super().__init__()
        causal = torch.ones(length, length).tril()
        uniform = causal / causal.sum(-1, keepdim=True)
        previous = torch.zeros(length, length)
        previous[torch.arange(length), (torch.arange(length) - 1).clamp(min=0)] = 1.0
        first = torch.zeros(length, length)
        first[:, 0] = 1.0
        self.maps = []
        layer1 = torch.stack([previous, uniform])[None].repeat(len(n), 1, 1, 1)  # (B, 2, T, T)
        layer2 = torch.zeros(len(n), 2, length, length)
        layer2[:, 0] = first
        for b, nb in enumerate(n.tolist()):
            for t in range(length):
                layer2[b, 1, t, t - nb + 1 if nb <= t < 2 * nb else 0] = 1.0
        self.maps = [layer1, layer2]

    def forward(self, ids, need_weights=False):
        return None, self.maps


def test_head_scores_find_the_heads_a_model_is_built_with():
    ids, n = repeated_batch(4, 16, 10, generator())
    scores = head_scores(KnownHeads(n, 16), ids, n)
    assert scores["previous_token"].shape == scores["induction"].shape == (2, 2)
    assert scores["previous_token"][0, 0] == pytest.approx(1.0)
    assert scores["previous_token"][0, 1] < 0.3
    assert scores["induction"][1, 1] == pytest.approx(1.0)
    assert scores["induction"][1, 0] < 0.2
    assert scores["induction"].argmax().item() == 3  # layer 2, head 1


def test_repeated_batch_repeats_a_segment_of_random_length():
    ids, n = repeated_batch(32, 20, 50, generator(), shortest=3)
    assert ids.shape == (32, 20) and n.min() >= 3 and n.max() <= 10 and len(set(n.tolist())) > 1
    for row, nb in zip(ids, n.tolist()):
        assert torch.equal(row[nb:2 * nb], row[:nb])
    with pytest.raises(ValueError, match="shortest"):
        repeated_batch(2, 20, 50, generator(), shortest=11)


def test_halves_loss_is_ln_v_for_uniform_predictions():
    ids, n = repeated_batch(4, 16, 10, generator())
    first, repeat = halves_loss(torch.zeros(4, 16, 10), ids, n)
    assert first.item() == pytest.approx(math.log(10)) and repeat.item() == pytest.approx(math.log(10))


def check_ablation(model, ids: torch.Tensor, layer: int, head: int) -> None:
    """Switching ``head`` of ``layer`` off changes the logits; leaving the block restores them; a head
    the layer does not have is refused."""
    with torch.no_grad():
        before = model(ids)[0]
        with ablated(model, layer, head):
            during = model(ids)[0]
        after = model(ids)[0]
    assert not torch.allclose(before, during) and torch.equal(before, after)
    with pytest.raises(ValueError, match=r"head must lie in \[0, 2\)"):
        with ablated(model, 0, 2):
            pass


def test_ablating_a_head_changes_the_output_and_is_undone():
    torch.manual_seed(0)
    model = RecallLM("softmax", 12, dim=16, heads=2, layers=2, mlp=False, conv=False).eval()
    check_ablation(model, torch.randint(12, (2, 8), generator=generator()), 1, 0)


def test_scores_and_ablation_work_on_chapter_13s_decoder():
    """ch14_lm_heads applies the same instruments to chapter 13's DecoderLM (its forward returns
    logits, cache and maps): one score per layer and head, and switching a head off changes only
    that head's layer output, and is undone."""
    from attn_tutorial.decoder import DecoderLM

    torch.manual_seed(0)
    model = DecoderLM(20, 16, 2, 3, 32, 16).eval()
    ids, n = repeated_batch(3, 16, 20, generator())
    scores = head_scores(model, ids, n)
    assert scores["previous_token"].shape == scores["induction"].shape == (3, 2)
    assert ((scores["induction"] >= 0) & (scores["induction"] <= 1)).all()
    check_ablation(model, ids, 2, 1)


class ConstantGuess(torch.nn.Module):
    """A stand-in language model of context 24 over 40 tokens whose next-token guess is always ``token``."""

    def __init__(self, token: int):
        super().__init__()
        self.context, self.token, self.weight = 24, token, torch.nn.Parameter(torch.zeros(()))

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, 40)
        logits[..., self.token] = 1.0
        return logits, None, None


def test_needle_answers_sort_the_first_answer_token():
    """Chapter 13's needle test, its greedy answers sorted: the right value, another planted value, another
    value, no value. Three values of one token each (10, 11, 12), three facts per question."""
    from types import SimpleNamespace

    from attn_tutorial.lm_data import NeedleSpec
    from attn_tutorial.recall import needle_answers

    spec = NeedleSpec(prefix=[1, 2], middle=[3], end=[4], keys=[[5], [6], [7]], values=[[10], [11], [12]])
    corpus = SimpleNamespace(test=torch.arange(13, 40).repeat(20))  # a haystack without needle tokens
    never = needle_answers(ConstantGuess(30), corpus, spec, 60)
    assert never["not_value"] == 1.0 and never["same_answer"] == 1.0
    shares = needle_answers(ConstantGuess(10), corpus, spec, 600)
    assert sum(shares[k] for k in ("right", "in_context", "other_value", "not_value")) == pytest.approx(1.0)
    assert shares["not_value"] == 0.0
    # value 10 asked: 1/3; asked another but planted: 2/3 * (1 - (2/3)^2) = 10/27; else 8/27
    assert shares["right"] == pytest.approx(1 / 3, abs=0.07)
    assert shares["in_context"] == pytest.approx(10 / 27, abs=0.07)
    assert shares["other_value"] == pytest.approx(8 / 27, abs=0.07)
    with pytest.raises(ValueError, match="n_examples"):
        needle_answers(ConstantGuess(10), corpus, spec, 0)


def test_bad_input_to_the_model_is_a_clear_error():
    model = RecallLM("softmax", 12, dim=16, heads=2)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 12\)"):
        model(torch.tensor([[0, 12]]))
    with pytest.raises(ValueError, match="shape \\(B, T\\) with B, T >= 1 and dtype torch.long"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="B, T >= 1"):
        model(torch.zeros(0, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="mixer must be one of"):
        RecallLM("rnn", 12)
    with pytest.raises(ValueError, match="heads must be >= 2"):
        RecallLM("diff", 12, dim=16, heads=1)
    with pytest.raises(ValueError, match="no weights"):
        RecallLM("linear", 12, dim=16, heads=2)(torch.tensor([[1, 2]]), need_weights=True)
    with pytest.raises(ValueError, match="an LSTM forms no attention weights"):
        RecallLM("lstm", 12, dim=16, heads=2)(torch.tensor([[1, 2]]), need_weights=True)
    with pytest.raises(ValueError, match=r"mixer must be one of \('softmax', 'linear', 'diff', 'window', 'lstm'\)"):
        RecallLM("gru", 12)


def test_softmax_attention_learns_recall_above_chance():
    model, _ = train_recall("softmax", 32, 4, 16, 150, seed=0, batch=32, n_keys=16, n_values=16)
    scores = evaluate_recall(model, 4, 16, size=512, n_keys=16, n_values=16)
    assert scores["accuracy"] > 4 / 16  # chance is 1/16
    assert scores["in_context"] >= scores["accuracy"]


def test_the_experiments_are_registered():
    from attn_tutorial import results

    assert {"ch14_mqar", "ch14_mqar_baselines", "ch14_induction", "ch04_lambda"} <= set(results.EXPERIMENTS)
    assert recall.MQAR_SIZES.keys() == recall.INDUCTION_SIZES.keys() == {"smoke", "cpu", "full"}
