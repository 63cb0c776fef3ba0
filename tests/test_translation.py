"""Chapter 11: the data split, decoder attention, the Transformer's layers, decoding, learning."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from attn_tutorial.decoding import TableModel, beam_search, greedy_decode, select_state
from attn_tutorial.seq2seq import DecoderAttention, RNNTranslator
from attn_tutorial.transformer import (TransformerBlock, TransformerDecoderLayer, TransformerTranslator)
from attn_tutorial.translation import chinese_tokens, corpus_scores, english_tokens, group_by_english, split_groups


# --- data ------------------------------------------------------------------------------------------

def test_tokenisers_split_english_into_words_and_chinese_into_characters():
    assert english_tokens("\ufeffIt's 3 o'clock, Tom!") == ["it's", "3", "o'clock", ",", "tom", "!"]
    assert chinese_tokens("我 爱你。\ufeff") == ["我", "爱", "你", "。"]
    assert chinese_tokens("ＡＢ１") == ["A", "B", "1"]  # full-width Latin becomes ASCII (NFKC)


def test_splits_are_disjoint_by_english_sentence_and_keep_every_reference(data_dir):
    from attn_tutorial.data import load_dataset

    table = load_dataset("tatoeba_cmn", "train", data_dir=data_dir)
    groups = group_by_english(table)
    assert sum(len(g.zh) for g in groups) == len(table) == 29_155
    assert len({g.en for g in groups}) == len(groups) < len(table)  # several translations share a group
    assert all(len(g.zh) == len(g.attribution) and all("tatoeba.org" in a for a in g.attribution) for g in groups)
    hi = next(g for g in groups if g.en == "Hi.")  # the file's first line starts with a byte-order mark
    assert hi.zh == ["嗨。", "你好。"]
    parts = split_groups(groups)
    english = {name: {g.en for g in part} for name, part in parts.items()}
    assert not (english["train"] & english["test"] or english["train"] & english["val"] or english["val"] & english["test"])
    assert sum(map(len, parts.values())) == len(groups) and abs(len(parts["test"]) / len(groups) - 0.1) < 0.001
    assert split_groups(groups) == parts  # the split does not depend on a run's seed


def test_bleu_counts_every_reference_and_rejects_mismatched_lists():
    refs = [["我很好。", "我挺好的。"], ["他走了。"]]
    assert corpus_scores(["我挺好的。", "他走了。"], refs)["bleu"] == 100.0  # the second reference counts
    assert corpus_scores(["我挺好的。", "他走了。"], [["我很好。"], ["他走了。"]])["bleu"] < 100.0
    with pytest.raises(ValueError, match="one list of references per hypothesis"):
        corpus_scores(["我很好。"], refs)


# --- decoder attention -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["additive", "general", "dot"])
def test_decoder_attention_gives_padding_exactly_zero_weight(kind):
    torch.manual_seed(0)
    attention = DecoderAttention(8, 8, kind)
    keys = torch.randn(3, 5, 8)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    keys = keys.masked_fill(~mask.unsqueeze(-1), 1e4)  # huge padding values must not leak in
    context, weights = attention(torch.randn(3, 8), keys, mask)
    assert (weights[~mask] == 0).all() and torch.allclose(weights.sum(-1), torch.ones(3))
    assert torch.allclose(context[2], keys[2, 0], atol=1e-5)  # one real word: its state, exactly
    assert torch.isfinite(context).all()


def test_decoder_attention_masks_safely_in_half_precision():
    torch.manual_seed(0)
    attention = DecoderAttention(8, 8, "general").to(torch.bfloat16)
    keys = (torch.randn(2, 4, 8) * 30).to(torch.bfloat16)  # scores far beyond float16's range
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    context, weights = attention(torch.randn(2, 8).to(torch.bfloat16) * 30, keys, mask)
    assert weights.dtype == torch.bfloat16 and torch.isfinite(weights.float()).all()
    assert (weights[~mask] == 0).all()


def test_decoder_attention_names_what_it_expected():
    with pytest.raises(ValueError, match="dot scores need query_dim == key_dim"):
        DecoderAttention(8, 6, "dot")
    with pytest.raises(ValueError, match="kind must be one of"):
        DecoderAttention(8, 8, "cosine")
    attention = DecoderAttention(8, 6)
    with pytest.raises(ValueError, match=r"expected keys of shape \(2, S, 6\)"):
        attention(torch.randn(2, 8), torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        attention(torch.randn(2, 8), torch.randn(2, 5, 6), torch.ones(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("attention", [None, "additive", "dot"])
def test_a_sentence_translates_the_same_alone_and_in_a_padded_batch(attention):
    torch.manual_seed(0)
    model = RNNTranslator(20, 15, 8, 12, attention=attention, dropout=0.0).eval()
    src = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    lengths, tgt = torch.tensor([3, 5]), torch.tensor([[2, 5, 6], [2, 7, 8]])
    batched = model(src, lengths, tgt)  # (2, 3, V)
    alone = model(src[:1, :3], lengths[:1], tgt[:1])
    assert torch.allclose(batched[0], alone[0], atol=1e-5)


# --- the Transformer: equal to PyTorch's layers ---------------------------------------------------------

def _copy_attention(ours, theirs: nn.MultiheadAttention):
    ours.in_proj.weight.copy_(theirs.in_proj_weight)
    ours.in_proj.bias.copy_(theirs.in_proj_bias)
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    ours.out_proj.bias.copy_(theirs.out_proj.bias)


def _copy_common(ours, theirs, norms: int):
    ours.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())
    for i in range(1, norms + 1):
        getattr(ours, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_block_equals_pytorchs_encoder_layer(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = TransformerBlock(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        for p in theirs.parameters():  # random norms too, so that a swapped norm1/norm2 would show
            p.add_(0.1 * torch.randn_like(p))
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_common(ours, theirs, 2)
    x = torch.randn(3, 6, 16)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], dtype=torch.bool)
    expected = theirs(x, src_key_padding_mask=~mask)
    got = ours(x, mask)
    assert torch.allclose(got[mask], expected[mask], atol=1e-5)  # padded rows are never read


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_equals_pytorchs_decoder_layer(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = TransformerDecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(0.1 * torch.randn_like(p))
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.multihead_attn)
        _copy_common(ours, theirs, 3)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    memory_mask = torch.tensor([[1] * 7, [1] * 3 + [0] * 4], dtype=torch.bool)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    expected = theirs(x, memory, tgt_mask=causal, memory_key_padding_mask=~memory_mask)
    got, weights = ours(x, memory, memory_mask, need_weights=True)
    assert torch.allclose(got, expected, atol=1e-5)
    assert weights.shape == (2, 4, 5, 7) and (weights[1, :, :, 3:] == 0).all()


def test_the_causal_decoder_never_reads_later_target_tokens():
    torch.manual_seed(0)
    model = TransformerTranslator(20, 15, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.0).eval()
    src, lengths = torch.randint(1, 20, (2, 6)), torch.tensor([6, 4])
    tgt = torch.randint(1, 15, (2, 7))
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(1, 15, (2, 3))
    before, after = model(src, lengths, tgt), model(src, lengths, changed)
    assert torch.allclose(before[:, :4], after[:, :4], atol=1e-6)
    assert not torch.allclose(before[:, 4:], after[:, 4:])


# --- decoding ----------------------------------------------------------------------------------------

def _tiny_models():
    torch.manual_seed(0)
    return [RNNTranslator(20, 12, 8, 12, attention="additive", dropout=0.0).eval(),
            TransformerTranslator(20, 12, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.0).eval()]


@pytest.mark.parametrize("index", [0, 1], ids=["rnn", "transformer"])
def test_step_by_step_decoding_equals_the_full_forward_pass(index):
    model = _tiny_models()[index]
    src, lengths = torch.randint(1, 20, (3, 5)), torch.tensor([5, 3, 1])
    tgt = torch.randint(1, 12, (3, 6))
    full = model(src, lengths, tgt)  # (B, T, V), every position at once
    state, steps = model.start(src, lengths), []
    for t in range(tgt.shape[1]):
        logits, state = model.step(tgt[:, t], state)
        steps.append(logits)
    assert torch.allclose(torch.stack(steps, 1), full, atol=1e-5)


@pytest.mark.parametrize("index", [0, 1], ids=["rnn", "transformer"])
def test_beam_search_of_width_one_is_greedy_decoding(index):
    model = _tiny_models()[index]
    src, lengths = torch.randint(1, 20, (4, 5)), torch.tensor([5, 4, 2, 1])
    assert beam_search(model, src, lengths, bos=2, eos=3, beam_size=1, max_len=8) == \
        greedy_decode(model, src, lengths, bos=2, eos=3, max_len=8)


def _best_by_brute_force(table, bos, eos, max_len):
    log_table = torch.tensor(table).log()
    best, best_score = None, -math.inf
    for length in range(1, max_len + 1):
        for seq in itertools.product(range(len(table)), repeat=length):
            if eos in seq[:-1] or (length < max_len and seq[-1] != eos):
                continue  # eos ends a sequence; only max_len may stop one without it
            score, prev = 0.0, bos
            for token in seq:
                score, prev = score + float(log_table[prev, token]), token
            if score > best_score:
                best, best_score = list(seq), score
    return [t for t in best if t != eos]


def test_beam_search_finds_the_sequence_greedy_misses():
    # tokens: 0 = bos, 1 = eos, 2 = "a", 3 = "b". Greedy takes "a" (0.55) and then has only bad
    # continuations; "b" (0.45) leads to a near-certain end: P(b, eos) = 0.45 > P(a, eos) = 0.11.
    table = [[1e-9, 1e-9, 0.55, 0.45],
             [1e-9, 1.0, 1e-9, 1e-9],
             [1e-9, 0.2, 0.4, 0.4],
             [1e-9, 0.999, 0.0005, 0.0005]]
    model, src, lengths = TableModel(table), torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long)
    best = _best_by_brute_force(table, 0, 1, 4)
    assert best == [3]
    assert greedy_decode(model, src, lengths, bos=0, eos=1, max_len=4) != [best]
    assert beam_search(model, src, lengths, bos=0, eos=1, beam_size=2, max_len=4, alpha=0.0) == [best]


def test_a_wide_beam_is_exhaustive_on_random_tables():
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        table = torch.rand(4, 4, generator=generator) + 0.05
        table = (table / table.sum(-1, keepdim=True)).tolist()
        src, lengths = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long)
        found = beam_search(TableModel(table), src, lengths, bos=0, eos=1, beam_size=64, max_len=3, alpha=0.0)
        assert found == [_best_by_brute_force(table, 0, 1, 3)]


def test_select_state_reorders_every_tensor_of_a_nested_state():
    state = {"a": torch.arange(3), "layers": [{"k": torch.arange(6).view(3, 2)}], "n": 7}
    picked = select_state(state, torch.tensor([2, 2, 0]))
    assert picked["a"].tolist() == [2, 2, 0] and picked["layers"][0]["k"].tolist() == [[4, 5], [4, 5], [0, 1]]
    assert picked["n"] == 7


# --- learning ------------------------------------------------------------------------------------------

def _digit_task(n: int, generator: torch.Generator):
    """English digit words -> Chinese numerals, in reverse order: a mapping that needs alignment."""
    words = torch.randint(3, 13, (n, 5), generator=generator)  # ids 3..12 = ten words
    lengths = torch.randint(2, 6, (n,), generator=generator)
    src = words.masked_fill(torch.arange(5) >= lengths.unsqueeze(1), 0)
    targets = [list(reversed(row[:k].tolist())) for row, k in zip(src, lengths)]
    return src, lengths, targets


@pytest.mark.parametrize("kind", ["bahdanau", "transformer"])
def test_a_small_translator_learns_a_task_that_needs_alignment(kind):
    """Reverse a sequence of 2-5 words: far above the 10 % a token guessed at random gets."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = (RNNTranslator(13, 15, 16, 32, attention="additive", dropout=0.0) if kind == "bahdanau" else
             TransformerTranslator(13, 15, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    bos, eos = 1, 2  # target ids: 0 pad, 1 bos, 2 eos, then the ten numerals as 3..12
    for _ in range(300):
        src, lengths, targets = _digit_task(64, generator)
        tgt = nn.utils.rnn.pad_sequence([torch.tensor([bos, *t, eos]) for t in targets], batch_first=True)
        logits = model(src, lengths, tgt[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    src, lengths, targets = _digit_task(200, generator)
    decoded = greedy_decode(model, src, lengths, bos, eos, max_len=8)
    assert sum(d == t for d, t in zip(decoded, targets)) / len(targets) > 0.9


def test_blocked_tokens_are_never_written():
    """<pad>, <unk> and <bos> are not characters of a translation, even where the model likes them best."""
    # tokens: 0 pad, 1 unk, 2 bos, 3 eos, 4 "a"; the model prefers unk, then pad, then a, then eos
    table = [[0.3, 0.4, 0.0, 0.1, 0.2]] * 5
    model = TableModel(torch.tensor(table).clamp(min=1e-9))  # bos never follows: a tiny probability, not log 0
    src, lengths = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long)
    blocked = (0, 1, 2)
    assert greedy_decode(model, src, lengths, bos=2, eos=3, max_len=3, blocked=blocked) == [[4, 4, 4]]
    found = beam_search(model, src, lengths, bos=2, eos=3, beam_size=3, max_len=3, alpha=0.0, blocked=blocked)
    assert all(t not in blocked for t in found[0])
    assert greedy_decode(model, src, lengths, bos=2, eos=3, max_len=3) == [[1, 1, 1]]  # unblocked: unk
