"""Chapter 6's documents: sentence splitting, the token budget, the loaders and the batches."""

from __future__ import annotations

import re

import pytest
import torch

from attn_tutorial.documents import (DocumentDataset, Documents, document_vocab, fit_document, sentences_of,
                                     split_sentences, to_documents)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_split_sentences_keeps_every_character_and_knows_abbreviations():
    text = "Mr. Park's film, e.g. the long takes, is superb! Is it? Yes...<br /><br />8/10 from me"
    sentences = split_sentences(text)
    assert sentences == ["Mr. Park's film, e.g. the long takes, is superb!", "Is it?", "Yes...", "8/10 from me"]
    assert re.sub(r"\s", "", text.replace("<br />", "")) == re.sub(r"\s", "", "".join(sentences))
    assert split_sentences("") == [] and split_sentences("no full stop") == ["no full stop"]


def test_fit_document_cuts_long_sentences_and_keeps_the_head():
    words = [list("abcdefg"), list("hij"), list("klmn")]
    assert fit_document(words, max_words=5) == [list("abcde"), list("fg"), list("hij"), list("klmn")]
    assert fit_document(words, max_words=5, max_tokens=9) == [list("abcde"), list("fg"), list("hi")]
    flat = [w for s in fit_document(words, 3, 10) for w in s]
    assert flat == list("abcdefghij")  # the first 10 tokens, as Part I's head truncation keeps
    with pytest.raises(ValueError, match="max_words and max_tokens must be >= 1"):
        fit_document(words, 0)


def test_documents_reject_empty_documents_and_label_mismatch():
    with pytest.raises(ValueError, match="document 1 has no sentence"):
        Documents([[["a"]], []], [0, 1])
    with pytest.raises(ValueError, match="empty sentence"):
        Documents([[["a"], []]], [0])
    with pytest.raises(ValueError, match="one label per document"):
        Documents([[["a"]]], [0, 1])
    with pytest.raises(ValueError, match=r"texts \[1\] have no token"):
        to_documents(["fine text.", "   "], [0, 1])


def test_sentence_splits_are_cached_by_text():
    texts = ["One. Two.", "Three!"]
    first = sentences_of(texts)
    assert first == [["One.", "Two."], ["Three!"]] and sentences_of(texts) == first
    assert sentences_of(["Other."]) == [["Other."]]  # a different key, not the old file


def test_batches_pad_words_and_sentences_with_masks():
    docs = to_documents(["A good film. I liked it a lot.", "Bad.", "Fine. Not great. Not bad."], [1, 0, 1])
    vocab = document_vocab(docs, min_freq=1)
    data = DocumentDataset(docs, vocab)
    batch = data.collate([0, 1, 2])
    assert batch["ids"].shape == (3, 3, 6) and batch["word_mask"].shape == (3, 3, 6)
    assert batch["word_mask"].any(-1).sum(-1).tolist() == [2, 1, 3]  # real sentences per document
    assert batch["word_mask"].sum(-1).tolist() == [[4, 6, 0], [2, 0, 0], [2, 3, 3]]  # words (with ".")
    assert (batch["ids"][~batch["word_mask"]] == vocab.pad_id).all()
    assert vocab.decode(batch["ids"][0, 1, :6].tolist()) == ["i", "liked", "it", "a", "lot", "."]
    torch.testing.assert_close(batch["labels"], torch.tensor([1, 0, 1]))
    order = [i for b in data.loader(2, shuffle=True, generator=torch.Generator().manual_seed(0))
             for i in b["labels"].tolist()]
    assert sorted(order) == [0, 1, 1]


def test_polarity_uses_the_authors_folds(data_dir):
    from attn_tutorial.documents import polarity_splits

    train, val, test = polarity_splits(max_words=50)
    assert (len(train), len(val), len(test)) == (1600, 200, 200)
    assert int(test.labels.sum()) == 100 and int(val.labels.sum()) == 100
    assert max(len(s) for doc in train.sentences for s in doc) <= 50


def test_polarity_without_data_says_where_to_put_it(tmp_path, monkeypatch):
    from attn_tutorial.data import DataNotFoundError
    from attn_tutorial.documents import polarity_splits

    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError) as error:
        polarity_splits()
    assert "polarity_v2/review_polarity_v2.parquet" in str(error.value) and "ATTN_DATA_DIR" in str(error.value)
