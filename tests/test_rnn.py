"""Chapter 1: the BiLSTM encoder never reads padding; masked pooling; the classifier learns."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_tutorial import rnn, text, training
from conftest import contains_token_batches


def batch(seed=0, B=6, T=12, D=5):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=generator)
    lengths = torch.randint(1, T + 1, (B,), generator=generator)
    lengths[0], lengths[1] = T, 1  # a full-length and a length-1 sequence
    return x, lengths


def test_reverse_padded():
    x = torch.arange(1.0, 6.0).view(1, 5).repeat(2, 1)
    out = rnn.reverse_padded(x, torch.tensor([5, 3]))
    assert out.tolist() == [[5, 4, 3, 2, 1], [3, 2, 1, 4, 5]]
    assert torch.equal(rnn.reverse_padded(out, torch.tensor([5, 3])), x)  # an involution


@pytest.mark.parametrize("num_layers", [1, 2])
def test_reverse_mode_equals_packing_outputs_and_gradients(num_layers):
    torch.manual_seed(0)
    encoder = rnn.BiLSTMEncoder(5, 7, num_layers=num_layers).eval()
    x, lengths = batch()
    grads, outputs = {}, {}
    for mode in encoder.MODES:
        encoder.mode = mode
        out = encoder(x, lengths)
        outputs[mode] = out
        grads[mode] = torch.autograd.grad(out.square().sum(), list(encoder.parameters()))
    torch.testing.assert_close(outputs["reverse"], outputs["packed"], atol=1e-6, rtol=1e-5)
    for g_reverse, g_packed in zip(grads["reverse"], grads["packed"]):
        torch.testing.assert_close(g_reverse, g_packed, atol=1e-5, rtol=1e-4)


def test_padded_sequence_equals_the_unpadded_one():
    torch.manual_seed(0)
    encoder = rnn.BiLSTMEncoder(5, 7, num_layers=2).eval()
    x, lengths = batch()
    padded = encoder(x, lengths)
    for i, length in enumerate(lengths.tolist()):
        alone = encoder(x[i:i + 1, :length], lengths[i:i + 1])
        torch.testing.assert_close(padded[i, :length], alone[0], atol=1e-6, rtol=1e-5)
        assert torch.all(padded[i, length:] == 0)


def test_article_recipe_reads_padding():
    """nn.LSTM(bidirectional=True) on a right-padded batch: the backward half changes with padding."""
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 7, bidirectional=True, batch_first=True)
    x, lengths = batch()
    i = int(torch.argmin(lengths[2:])) + 2
    length = int(lengths[i])
    padded, _ = lstm(x)
    alone, _ = lstm(x[i:i + 1, :length])
    assert not torch.allclose(padded[i, :length, 7:], alone[0, :, 7:], atol=1e-4)


def test_encoder_bad_input():
    encoder = rnn.BiLSTMEncoder(5, 7)
    x, lengths = batch()
    with pytest.raises(ValueError, match="lengths must lie in"):
        encoder(x, lengths.clone().fill_(0))
    with pytest.raises(ValueError, match=r"expected x \(B, T, D\)"):
        encoder(x[0], lengths)
    with pytest.raises(ValueError, match="mode must be one of"):
        rnn.BiLSTMEncoder(5, 7, mode="fast")


def test_masked_pooling_ignores_padding():
    x = torch.tensor([[[1.0], [3.0], [100.0]], [[-5.0], [-7.0], [-9.0]]])  # (2, 3, 1)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert rnn.masked_mean(x, mask).squeeze(-1).tolist() == [2.0, -5.0]
    assert rnn.masked_max(x, mask).squeeze(-1).tolist() == [3.0, -5.0]
    empty = torch.tensor([[True, False, False], [False, False, False]])
    for pool in (rnn.masked_mean, rnn.masked_max):
        with pytest.raises(ValueError, match="no real tokens"):
            pool(x, empty)


def test_masked_pooling_in_bfloat16():
    x = torch.randn(2, 4, 3, dtype=torch.bfloat16)
    mask = text.lengths_to_mask(torch.tensor([4, 2]))
    assert torch.isfinite(rnn.masked_max(x, mask)).all() and torch.isfinite(rnn.masked_mean(x, mask)).all()


def test_classifier_learns_a_toy_task():
    """Label = whether token 3 occurs: needs the sequence, not its length; must reach > 90 %."""
    training.seed_everything(0)
    batches = contains_token_batches()
    model = rnn.BiLSTMClassifier(20, 16, 16, dropout=0.0)
    history = training.fit(model, batches[:10], batches[10:], epochs=12, lr=1e-2, device=torch.device("cpu"),
                           progress=False)
    assert history["best_value"] > 0.9
