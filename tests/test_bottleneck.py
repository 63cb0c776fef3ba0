"""Chapter 11's copy task (attn_tutorial.bottleneck): the data's layout, the scoring, and learning."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial import bottleneck
from attn_tutorial.bottleneck import BOS, EOS, SYMBOLS, copy_accuracy, copy_batch, copy_model, train_copy


def test_a_copy_batch_is_its_source_between_bos_and_eos():
    src, lengths, tgt = copy_batch(5, 7, torch.Generator().manual_seed(0))
    assert src.shape == (5, 7) and lengths.tolist() == [7] * 5 and tgt.shape == (5, 9)
    assert ((src >= 3) & (src < 3 + SYMBOLS)).all()  # never a special
    assert (tgt[:, 0] == BOS).all() and (tgt[:, -1] == EOS).all() and torch.equal(tgt[:, 1:-1], src)
    again = copy_batch(5, 7, torch.Generator().manual_seed(0))[0]
    assert torch.equal(src, again)  # the generator decides


@pytest.mark.parametrize("n, length", [(0, 5), (3, 0), (2.0, 5), (3, -1)])
def test_a_copy_batch_of_nothing_is_a_clear_error(n, length):
    with pytest.raises(ValueError, match="n and length must be ints >= 1"):
        copy_batch(n, length, torch.Generator())


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match=r"kind must be one of \('none', 'bahdanau'\), got 'luong'"):
        copy_model("luong", bottleneck.COPY_SIZES["smoke"])


def test_bad_step_and_batch_counts_are_clear_errors():
    sizes = bottleneck.COPY_SIZES["smoke"]
    model = copy_model("none", sizes)
    for steps in (0, -3, 2.5):
        with pytest.raises(ValueError, match="steps must be an int >= 1"):
            train_copy(model, sizes, steps, torch.Generator())
    with pytest.raises(ValueError, match="batch must be an int >= 1, got 0"):
        copy_accuracy(model, 4, 8, torch.Generator(), batch=0)


def test_accuracy_counts_positions_a_copy_misses_as_wrong(monkeypatch):
    """Three sequences of 4: copied whole; one symbol wrong; stopped after two symbols."""
    generator = torch.Generator().manual_seed(3)
    truth = copy_batch(3, 4, torch.Generator().manual_seed(3))[0].tolist()

    def fake_decode(model, src, lengths, bos, eos, max_len, blocked=()):
        assert max_len == 5 and bos == BOS and eos == EOS
        wrong = [3 + (truth[1][0] - 3 + 1) % SYMBOLS] + truth[1][1:]
        return [truth[0], wrong, truth[2][:2]][:len(src)]

    monkeypatch.setattr(bottleneck, "greedy_decode", fake_decode)
    model = copy_model("none", bottleneck.COPY_SIZES["smoke"])
    per_symbol, whole = copy_accuracy(model, 4, 3, generator)
    assert per_symbol == pytest.approx((4 + 3 + 2) / 12) and whole == pytest.approx(1 / 3)


def test_attention_learns_to_copy_far_above_chance():
    """Lengths up to 5, 300 steps (3 s): Bahdanau's model copies most symbols; a guess gets 1 in 16."""
    sizes = {**bottleneck.COPY_SIZES["smoke"], "longest": 5, "batch": 32, "hidden": 32}
    torch.manual_seed(0)
    model = copy_model("bahdanau", sizes)
    losses = train_copy(model, sizes, 300, torch.Generator().manual_seed(0))
    assert len(losses) == 300 and sum(losses[-10:]) < 0.25 * sum(losses[:10])
    per_symbol, _ = copy_accuracy(model, 5, 100, torch.Generator().manual_seed(1))
    assert per_symbol > 0.5
