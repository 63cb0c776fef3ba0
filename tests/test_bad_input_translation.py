"""Chapter 11's translation modules: bad input gets a clear error that names what was expected and
what came, never a silent wrong result (issue 43). One test per reported bad input."""

from __future__ import annotations

import re

import pytest
import torch

from attn_tutorial.decoding import TableModel, beam_search, greedy_decode
from attn_tutorial.seq2seq import RNNTranslator
from attn_tutorial.transformer import MultiHeadAttention, TransformerDecoderLayer, TransformerTranslator
from attn_tutorial.translation import (BOS, EOS, SentenceGroup, TranslationDataset, build_vocab, corpus_scores,
                                       scores_by_length)

pytestmark = pytest.mark.usefixtures("one_thread")

SRC_V, TGT_V = 20, 12  # vocabulary sizes of the tiny translators below
BOS_ID, EOS_ID = 2, 3


def translators():
    torch.manual_seed(0)
    return {"rnn": RNNTranslator(SRC_V, TGT_V, 8, 12, dropout=0.0).eval(),
            "transformer": TransformerTranslator(SRC_V, TGT_V, d_model=16, num_heads=4, num_layers=1, d_ff=32,
                                                 dropout=0.0).eval()}


KINDS = ["rnn", "transformer"]


def batch():
    src = torch.randint(1, SRC_V, (2, 5), generator=torch.Generator().manual_seed(1))
    return src, torch.tensor([5, 3]), torch.randint(1, TGT_V, (2, 4), generator=torch.Generator().manual_seed(2))


# --- scores --------------------------------------------------------------------------------------

def test_corpus_scores_refuses_a_bare_string_as_a_sentences_references():
    # sacrebleu read each character as one reference: an exact translation scored BLEU 22.59
    with pytest.raises(TypeError, match=re.escape("expected references[0] as a list of reference strings (the "
                                                  "translations of sentence 0), got the str '我很好。': write "
                                                  "['我很好。'] for a single reference")):
        corpus_scores(["我很好。"], ["我很好。"])
    with pytest.raises(TypeError, match=re.escape("expected groups[0].zh as a list of reference strings")):
        scores_by_length([SentenceGroup("I am fine.", "我很好。", ["x"])], ["我很好。"])
    with pytest.raises(TypeError, match=r"^expected references\[1\] as a list of reference strings, got a list "
                                        r"holding NoneType$"):
        corpus_scores(["我很好。", "他走了。"], [["我很好。"], [None]])
    with pytest.raises(TypeError, match=r"^expected hypotheses as a list, got str$"):
        corpus_scores("我很好。", [["我很好。"]])
    assert corpus_scores(["我很好。"], [["我很好。"]])["bleu"] == 100.0


def test_corpus_scores_refuses_an_empty_reference_list():
    with pytest.raises(ValueError, match=r"^references\[0\] is empty: every sentence needs at least one reference$"):
        corpus_scores(["我很好。", "他走了。"], [[], ["他走了。"]])  # a bare TypeError inside sacrebleu before
    with pytest.raises(ValueError, match=r"^references\[0\] is empty"):
        corpus_scores(["我很好。"], [[]])  # an IndexError before


def test_scores_by_length_wants_one_hypothesis_per_sentence_group():
    groups = [SentenceGroup("I am fine.", ["我很好。"], ["x"]), SentenceGroup("He left.", ["他走了。"], ["x"])]
    with pytest.raises(ValueError, match=r"^expected one hypothesis per sentence group, got 2 groups and 1 hypotheses$"):
        scores_by_length(groups, ["我很好。"])  # zip dropped the second group: BLEU 100
    with pytest.raises(ValueError, match=r"got 2 groups and 3 hypotheses$"):
        scores_by_length(groups, ["我很好。", "他走了。", "多余。"])
    assert scores_by_length(groups, ["我很好。", "他走了。"])["1-4"]["n"] == 2


def test_corpus_scores_still_refuses_mismatched_counts():
    with pytest.raises(ValueError, match=r"^need one list of references per hypothesis, got 2 hypotheses and 1 "
                                         r"reference lists$"):
        corpus_scores(["我很好。", "他走了。"], [["我很好。"]])


# --- the dataset ---------------------------------------------------------------------------------

def _vocabularies():
    src_vocab = build_vocab([["i", "am", "fine"]] * 2)
    tgt_vocab = build_vocab([list("我很好")] * 2, specials=(BOS, EOS))
    return src_vocab, tgt_vocab


@pytest.mark.parametrize("max_len", [0, 1, -1, 2.5, True])
def test_translation_dataset_wants_max_len_of_at_least_two(max_len):
    # max_len=0 cut every target's last character ([:max_len - 1] = [:-1]); 1 left every target empty
    src_vocab, tgt_vocab = _vocabularies()
    groups = [SentenceGroup("i am fine", ["我很好"], ["x"])]
    with pytest.raises(ValueError, match=rf"^max_len must be an int >= 2 \(a target keeps max_len - 1 characters "
                                         rf"besides <bos> / <eos>\), got {re.escape(repr(max_len))}$"):
        TranslationDataset(groups, src_vocab, tgt_vocab, max_len=max_len)
    kept = TranslationDataset(groups, src_vocab, tgt_vocab, max_len=2)
    assert tgt_vocab.decode(kept.tgt[0].tolist()) == [BOS, "我", EOS] and len(kept.src[0]) == 2


def test_translation_dataset_wants_bos_and_eos_in_the_target_vocabulary():
    src_vocab, _ = _vocabularies()
    with pytest.raises(ValueError, match=r"^tgt_vocab has no <bos> / <eos>: build it with specials=\(BOS, EOS\)$"):
        TranslationDataset([SentenceGroup("i am fine", ["我很好"], ["x"])], src_vocab, build_vocab([list("我很好")] * 2))


# --- the translators -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_translators_refuse_lengths_outside_the_source(kind):
    model = translators()[kind]
    src, lengths, tgt = batch()
    for bad, got in (([7, 3], "from 3 to 7"), ([0, 3], "from 0 to 3")):  # 7 > S: the Transformer read it as 5
        with pytest.raises(ValueError, match=rf"^expected src_lengths in \[1, S\] = \[1, 5\], got lengths {got}$"):
            model(src, torch.tensor(bad), tgt)
        with pytest.raises(ValueError, match=r"^expected src_lengths in \[1, S\]"):
            model.start(src, torch.tensor(bad))
    with pytest.raises(TypeError, match=r"^src_lengths must be an integer tensor of shape \(B,\), "
                                        r"got float32 of shape \(2,\)$"):
        model(src, lengths.float(), tgt)


@pytest.mark.parametrize("kind", KINDS)
def test_translators_refuse_a_batch_of_the_wrong_shape(kind):
    model = translators()[kind]
    src, lengths, tgt = batch()
    with pytest.raises(ValueError, match=r"^expected src \(B, S\) and src_lengths \(B,\) with B, S >= 1, "
                                         r"got \(2, 5\) and \(3,\)$"):
        model(src, torch.tensor([5, 3, 2]), tgt)
    with pytest.raises(ValueError, match=r"got \(0, 5\) and \(0,\)$"):  # an empty batch
        model(src[:0], lengths[:0], tgt[:0])
    with pytest.raises(ValueError, match=r"got \(2, 0\) and \(2,\)$"):
        model.start(src[:, :0], lengths)
    for bad in (tgt[:1], torch.cat([tgt, tgt[:1]]), tgt[:, :0]):
        with pytest.raises(ValueError, match=rf"^expected tgt_in \(B, T\) with B = 2 \(the batch of src\) and T >= 1, "
                                             rf"got {re.escape(str(tuple(bad.shape)))}$"):
            model(src, lengths, bad)
    with pytest.raises(TypeError, match=r"^src must hold int64 or int32 token ids, got float32 of shape \(2, 5\)$"):
        model(src.float(), lengths, tgt)


@pytest.mark.parametrize("kind", KINDS)
def test_translators_refuse_ids_outside_the_vocabulary(kind):
    model = translators()[kind]
    src, lengths, tgt = batch()
    bad = src.clone()
    bad[0, 0] = SRC_V
    with pytest.raises(ValueError, match=r"^expected src ids in \[0, 20\) \(the source vocabulary\), got ids from 1 to 20$"):
        model(bad, lengths, tgt)
    bad[0, 0] = -1
    with pytest.raises(ValueError, match=r"got ids from -1 to "):
        model.start(bad, lengths)
    wrong = tgt.clone()
    wrong[1, 2] = TGT_V + 3
    with pytest.raises(ValueError, match=r"^expected tgt_in ids in \[0, 12\) \(the target vocabulary\), got ids from "
                                         r"\d+ to 15$"):
        model(src, lengths, wrong)
    assert model(src.int(), lengths.int(), tgt.int()).shape == (2, 4, TGT_V)  # int32 ids stay allowed


@pytest.mark.parametrize("kind", KINDS)
def test_a_step_wants_one_previous_token_per_sentence(kind):
    model = translators()[kind]
    src, lengths, _ = batch()
    state = model.start(src, lengths)
    with pytest.raises(ValueError, match=r"^expected prev \(B,\) with B = 2 \(the batch of state\), got \(3,\)$"):
        model.step(torch.full((3,), BOS_ID), state)


def test_transformer_decoder_layer_refuses_a_memory_of_another_batch_or_width():
    layer = TransformerDecoderLayer(8, 2, 16)
    x = torch.randn(2, 3, 8)
    expected = r"^expected memory of shape \(B, S, D\) with B = 2 and D = 8 \(the batch of x and the model's width\) " \
               r"and S >= 1, got float32 of shape "
    with pytest.raises(ValueError, match=expected + r"\(1, 5, 8\)$"):
        layer(x, torch.randn(1, 5, 8))  # broadcast silently over the batch before
    with pytest.raises(ValueError, match=expected + r"\(2, 5, 6\)$"):
        layer(x, torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"^expected x of shape \(B, T, D\) with D = 8, got float32 of shape \(2, 3, 6\)$"):
        layer(torch.randn(2, 3, 6), torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"with B = 2 and D = 8 \(the batch of query"):
        MultiHeadAttention(8, 2).cross(x, torch.randn(1, 5, 8))


def test_multi_head_attention_step_refuses_a_cache_of_another_batch():
    layer = MultiHeadAttention(8, 2)
    _, cache = layer.step(torch.randn(3, 1, 8), None)
    with pytest.raises(ValueError, match=re.escape("expected cache['k'] of shape (B, H, t, D/H) = (2, 2, t, 4) (the batch "
                                                   "of x (B, 1, D) = (2, 1, 8)), got float32 of shape (3, 2, 1, 4)")):
        layer.step(torch.randn(2, 1, 8), cache)
    with pytest.raises(ValueError, match=re.escape("expected x of shape (B, 1, 8) (the newest position only), got "
                                                   "float32 of shape (3, 2, 8)")):
        layer.step(torch.randn(3, 2, 8), cache)  # two positions would have attended to each other's future


# --- decoding ------------------------------------------------------------------------------------

def _one_source():
    return torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long)


def _search(name):
    if name == "greedy":
        return lambda model, src, lengths, **kw: greedy_decode(model, src, lengths, max_len=3, **kw)
    return lambda model, src, lengths, **kw: beam_search(model, src, lengths, beam_size=2, max_len=3, **kw)


SEARCHES = ["greedy", "beam"]


@pytest.mark.parametrize("search", SEARCHES)
def test_decoding_refuses_to_block_every_token_or_eos(search):
    table = torch.full((4, 4), 0.25)
    src, lengths = _one_source()
    decode = _search(search)
    with pytest.raises(ValueError, match=r"^blocked holds all 4 tokens of the vocabulary: no token could be written$"):
        decode(TableModel(table), src, lengths, bos=0, eos=1, blocked=(0, 1, 2, 3))  # wrote token 0 before
    with pytest.raises(ValueError, match=r"^eos \(1\) is in blocked: no sentence could end before max_len$"):
        decode(TableModel(table), src, lengths, bos=0, eos=1, blocked=(0, 1))


@pytest.mark.parametrize("search", SEARCHES)
def test_decoding_refuses_a_model_that_leaves_only_blocked_tokens(search):
    # tokens 0 <bos>, 1 <eos>, 2 "a", 3 <unk>: after <bos> only <bos> and <unk> have any probability
    table = [[0.5, 0.0, 0.0, 0.5]] + [[0.0, 0.5, 0.5, 0.0]] * 3
    src, lengths = _one_source()
    expected = {"greedy": r"^at step 1 the model gave every token outside blocked a score of -inf: "
                          r"greedy_decode would write a blocked token$",
                "beam": r"^sentences \[0\]: no hypothesis has a finite score \(the model gave every token outside "
                        r"blocked probability 0\): beam_search would write a blocked token$"}[search]
    with pytest.raises(ValueError, match=expected):
        _search(search)(TableModel(table), src, lengths, bos=0, eos=1, blocked=(0, 3))


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("kind", KINDS)
def test_decoding_refuses_token_ids_outside_the_vocabulary(kind, search):
    model = translators()[kind]
    src, lengths, _ = batch()
    decode = _search(search)
    for name, kwargs, got in (("eos", {"bos": BOS_ID, "eos": TGT_V}, TGT_V),  # greedy never stopped, silently
                              ("eos", {"bos": BOS_ID, "eos": -1}, -1),
                              ("bos", {"bos": TGT_V + 5, "eos": EOS_ID}, TGT_V + 5),
                              ("bos", {"bos": -2, "eos": EOS_ID}, -2)):
        with pytest.raises(ValueError, match=rf"^expected {name} in \[0, 12\) \(the model's target vocabulary\), "
                                             rf"got {got}$"):
            decode(model, src, lengths, **kwargs)
    with pytest.raises(ValueError, match=r"^expected blocked ids in \[0, 12\) \(the model's target vocabulary\), "
                                         r"got \[-1, 40\]$"):
        decode(model, src, lengths, bos=BOS_ID, eos=EOS_ID, blocked=(0, 40, -1))
    with pytest.raises(TypeError, match=r"^eos must be an int token id, got float 3.0$"):
        decode(model, src, lengths, bos=BOS_ID, eos=3.0)
    assert len(decode(model, src, lengths, bos=BOS_ID, eos=EOS_ID, blocked=(0, 1, BOS_ID))) == 2


@pytest.mark.parametrize("search", SEARCHES)
def test_decoding_checks_token_ids_after_the_first_step_for_a_model_without_tgt_vocab_size(search):
    class Anonymous(TableModel):
        tgt_vocab_size = None  # only the logits tell the vocabulary

    src, lengths = _one_source()
    with pytest.raises(ValueError, match=r"^expected eos in \[0, 4\) \(the model's target vocabulary\), got 9$"):
        _search(search)(Anonymous(torch.full((4, 4), 0.25)), src, lengths, bos=0, eos=9)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("kind", KINDS)
def test_decoding_refuses_an_empty_batch(kind, search):
    src, lengths, _ = batch()
    with pytest.raises(ValueError, match=r"^expected src \(B, S\) and src_lengths \(B,\) with B, S >= 1, "
                                         r"got \(0, 5\) and \(0,\)$"):
        _search(search)(translators()[kind], src[:0], lengths[:0], bos=BOS_ID, eos=EOS_ID)


def test_greedy_attention_needs_a_model_with_attention():
    torch.manual_seed(0)
    model = RNNTranslator(SRC_V, TGT_V, 8, 12, attention=None).eval()
    src, lengths, _ = batch()
    with pytest.raises(ValueError, match=re.escape("return_attention=True needs a model whose step leaves its attention "
                                                   "weights in state['attention'], and RNNTranslator left none (a model "
                                                   "without attention)")):
        greedy_decode(model, src, lengths, BOS_ID, EOS_ID, max_len=3, return_attention=True)
    tokens, weights = greedy_decode(translators()["rnn"], src, lengths, BOS_ID, EOS_ID, max_len=3,
                                    return_attention=True)
    assert weights.shape[0] == 2 and weights.shape[-1] == 5


@pytest.mark.parametrize("max_len", [0, 2.5, True])
def test_decoding_wants_an_int_max_len(max_len):
    src, lengths = _one_source()
    with pytest.raises(ValueError, match=rf"^max_len must be an int >= 1, got {re.escape(repr(max_len))}$"):
        greedy_decode(TableModel(torch.full((4, 4), 0.25)), src, lengths, 0, 1, max_len=max_len)
