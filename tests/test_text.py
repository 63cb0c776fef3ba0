"""Chapter 1: text pipeline (tokenizer, vocabulary, padding, masks, bucketing)."""

from __future__ import annotations

import pytest
import torch

from attn_tutorial import text


def test_tokenizer_cleans_and_splits():
    assert text.tokenize("Great<br /><br />movie, isn't it?") == ["great", "movie", ",", "isn't", "it", "?"]


def test_vocab_specials_min_freq_max_size_and_unknowns():
    docs = [["a", "b", "a"], ["a", "c", "b"], ["d"]]
    vocab = text.Vocab.build(docs, min_freq=2)
    assert vocab.itos == ["<pad>", "<unk>", "a", "b"] and vocab.pad_id == 0 and vocab.unk_id == 1
    assert vocab.encode(["a", "zzz", "b"]) == [2, 1, 3]
    assert vocab.decode([2, 1]) == ["a", "<unk>"]
    assert len(text.Vocab.build(docs, min_freq=1, max_size=3)) == 3
    with pytest.raises(ValueError, match="min_freq"):
        text.Vocab.build(docs, min_freq=0)
    with pytest.raises(ValueError, match="must start with <pad>, <unk>"):
        text.Vocab(["a", "b"])


def test_pad_batch_lengths_and_mask_convention():
    ids, lengths, mask = text.pad_batch([torch.tensor([5, 6, 7]), torch.tensor([8])])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert lengths.tolist() == [3, 1]
    assert mask.dtype == torch.bool and mask.tolist() == [[True, True, True], [True, False, False]]
    assert text.to_key_padding_mask(mask).tolist() == [[False, False, False], [False, True, True]]
    with pytest.raises(TypeError, match=r"mask must be bool of shape \(B, T\), got int32"):
        text.to_key_padding_mask(mask.int())
    with pytest.raises(ValueError, match="non-empty"):
        text.pad_batch([torch.tensor([1]), torch.tensor([], dtype=torch.long)])
    with pytest.raises(ValueError, match="positive"):
        text.lengths_to_mask(torch.tensor([2, 0]))


def test_key_padding_mask_matches_pytorch_attention():
    """With the converted mask, nn.MultiheadAttention ignores padded keys (the article's bug inverted it)."""
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    mask = text.lengths_to_mask(torch.tensor([5, 3]))
    _, weights = attention(x, x, x, key_padding_mask=text.to_key_padding_mask(mask))
    assert torch.all(weights[1, :, 3:] == 0) and torch.allclose(weights.sum(-1), torch.ones(2, 5))


def test_empty_text_becomes_unknown_and_max_len_cuts():
    vocab = text.Vocab.build([["good", "good"]])
    encoded = text.encode_texts(["", "good good good"], vocab, max_len=2)
    assert encoded[0].tolist() == [vocab.unk_id] and encoded[1].tolist() == [2, 2]


def test_bucket_sampler_covers_everything_once_and_reduces_padding():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 500, (1000,), generator=generator).tolist()
    sampler = text.BucketBatchSampler(lengths, 32, generator=torch.Generator().manual_seed(1))
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 50  # random batches of 32 from U(1, 500) spread ~470
    again = list(text.BucketBatchSampler(lengths, 32, generator=torch.Generator().manual_seed(1)))
    assert again == batches  # seeded: reproducible
    ordered = list(text.BucketBatchSampler(lengths, 32, shuffle=False))
    assert [i for b in ordered for i in b] != list(range(1000))  # sorted inside chunks


def test_dataset_collate_gives_the_training_loop_format():
    vocab = text.Vocab.build([["a", "b", "c"]] * 2)
    data = text.TextClassificationDataset(["a b c", "a"], [1, 0], vocab)
    batch = next(iter(data.loader(batch_size=2, shuffle=False)))
    assert set(batch) == {"ids", "lengths", "mask", "labels"}
    assert batch["ids"].shape == batch["mask"].shape == (2, 3)
    assert batch["mask"].sum(1).tolist() == batch["lengths"].tolist()
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        text.TextClassificationDataset(["a", "b"], [1], vocab)


def test_head_tail_truncation_keeps_both_ends():
    vocab = text.Vocab.build([[f"w{i}" for i in range(10)]], min_freq=1)
    words = " ".join(f"w{i}" for i in range(10))
    (head,) = text.encode_texts([words], vocab, max_len=5)
    (both,) = text.encode_texts([words], vocab, max_len=5, truncation="head_tail")
    assert vocab.decode(head.tolist()) == ["w0", "w1", "w2", "w3", "w4"]
    assert vocab.decode(both.tolist()) == ["w0", "w1", "w2", "w8", "w9"]  # 3 from the head, 2 from the tail
    (short,) = text.encode_texts(["w1 w2"], vocab, max_len=5, truncation="head_tail")
    assert vocab.decode(short.tolist()) == ["w1", "w2"]
    with pytest.raises(ValueError, match="truncation must be one of"):
        text.encode_texts([words], vocab, max_len=5, truncation="middle")
