"""Figures of chapter 6: HAN's two levels on a tiny document, two levels of padding, results."""

import math

import numpy as np
import torch
import matplotlib.pyplot as plt

from _common import BLACK, figure, heatmap, model_colour, seed_dots, seeds

from attn_tutorial.han import ContextAttention

# A tiny review, three sentences; each word gets a hand-made 2-d vector (evaluative strength,
# a neutral "topic" feature): what a trained word encoder might give. No training anywhere.
REVIEW = [["the", "film", "follows", "a", "family"],
          ["the", "ending", "is", "wonderful"],
          ["i", "loved", "it"]]
EVALUATIVE = {"wonderful": 1.0, "loved": 0.9, "ending": 0.3}


def word_vectors(sentences, width=None):
    """``(T_s, T_w, 2)`` word states, padded with zeros, and the word mask ``(T_s, T_w)``."""
    width = width or max(len(s) for s in sentences)
    states = torch.zeros(len(sentences), width, 2)
    mask = torch.zeros(len(sentences), width, dtype=torch.bool)
    for i, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            states[i, t] = torch.tensor([EVALUATIVE.get(word, 0.0), 0.5])
            mask[i, t] = True
    return states, mask


def hand_set_attention(sharpness: float = 3.0) -> ContextAttention:
    """The package's context attention, e = w^T tanh(W h + b), with W = identity and the learned
    vector w (HAN's context vector) pointing at the evaluative feature."""
    attention = ContextAttention(2, 2, heads=1)
    with torch.no_grad():
        attention.project.weight.copy_(torch.eye(2))
        attention.project.bias.zero_()
        attention.context.copy_(torch.tensor([[sharpness, 0.0]]))
    return attention


def two_levels():
    """Word weights ``(T_s, T_w)``, sentence vectors ``(T_s, 2)``, sentence weights ``(T_s,)`` and
    the document vector ``(2,)``; the sentence level reads the sentence vectors directly (no
    encoders: attention only)."""
    states, mask = word_vectors(REVIEW)
    words, sentences = hand_set_attention(), hand_set_attention()
    with torch.no_grad():
        vectors, word_weights = words(states, mask)  # (T_s, 2), (T_s, 1, T_w)
        document, sentence_weights = sentences(vectors[None])  # (1, 2), (1, 1, T_s)
    return mask, word_weights[:, 0], vectors, sentence_weights[0, 0], document[0]


@figure("ch06_han_levels")
def han_levels():
    """Word weights per sentence, then sentence weights over the sentence vectors."""
    mask, word_weights, vectors, sentence_weights, document = two_levels()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 2.4), gridspec_kw={"width_ratios": [4.0, 1.0]})
    ax = axes[0]
    heatmap(ax, word_weights.numpy(), [f"sentence {i + 1}" for i in range(len(REVIEW))], None,
            masked=~mask.numpy(), vmax=1.0, annotate=False)
    ax.set_aspect("auto")
    for i, sentence in enumerate(REVIEW):
        for t, word in enumerate(sentence):
            w = float(word_weights[i, t])
            ax.text(t, i, f"{word}\n{w:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if w > 0.6 else "black")
    ax.set_title(r"word level: weights $\alpha_{it}$ within each sentence (grey: padding)", fontsize=9)
    ax = axes[1]
    heatmap(ax, sentence_weights[:, None].numpy(), [r"$\mathbf{s}_1$", r"$\mathbf{s}_2$", r"$\mathbf{s}_3$"],
            [r"$\alpha_i$"], vmax=1.0)
    ax.set_title("sentence level", fontsize=9)
    ax.set_xlabel("document vector\n" + r"$\mathbf{z} = \sum_i \alpha_i \mathbf{s}_i$"
                  + f" = ({document[0]:.2f}, {document[1]:.2f})", fontsize=8)
    fig.tight_layout()
    return fig


# A batch of two documents: 3 and 2 sentences, padded to T_s = 3 sentences of T_w = 5 words.
BATCH = [REVIEW, [["boring"], ["do", "not", "watch", "it"]]]


@figure("ch06_two_level_padding")
def two_level_padding():
    """The word mask of a batch (B, T_s, T_w), and the real sentences packed into (n_real, T_w)."""
    width = max(len(s) for doc in BATCH for s in doc)
    rows = max(len(doc) for doc in BATCH)
    masks = []
    for doc in BATCH:
        _, m = word_vectors(doc + [[]] * (rows - len(doc)), width)
        masks.append(m)
    word_mask = torch.stack(masks)  # (B, T_s, T_w)
    sentence_mask = word_mask.any(-1)  # (B, T_s)
    packed = word_mask[sentence_mask]  # (n_real, T_w): the real sentences only
    fig, axes = plt.subplots(1, 3, figsize=(9.0, 2.4), gridspec_kw={"width_ratios": [1, 1, 1.1]})
    for b, ax in enumerate(axes[:2]):
        heatmap(ax, word_mask[b].float().numpy(), [f"sentence {i + 1}" + ("" if sentence_mask[b, i] else " (pad)")
                                                   for i in range(rows)],
                [f"w{t + 1}" for t in range(width)], fmt="{:.0f}", cmap="Greens", vmax=2.0,
                masked=~word_mask[b].numpy())
        ax.set_title(f"document {b + 1}: word mask", fontsize=9)
    heatmap(axes[2], packed.float().numpy(), [f"real sentence {n + 1}" for n in range(len(packed))],
            [f"w{t + 1}" for t in range(width)], fmt="{:.0f}", cmap="Greens", vmax=2.0, masked=~packed.numpy())
    axes[2].set_title(f"packed: x[sentence_mask], {len(packed)} real of {word_mask.shape[0] * rows} rows",
                      fontsize=9)
    fig.tight_layout()
    return fig


IMDB = [("ch01_bilstm", "bilstm", "BiLSTM\n(ch. 1)"), ("ch02_attnpool", "attnpool", "attn. pool\n(ch. 2)"),
        ("ch03_mhsa", "mhsa", "self-attn.\n(ch. 3)"), ("ch06_han_imdb", "han", "HAN\n(ch. 6)"),
        ("ch06_han_polarity", "han", "HAN\n(polarity)")]
TIPS = [("base", "base"), ("residual", "residual"), ("multihead", "multi-head"), ("dropout", "dropout"),
        ("temperature", "temperature"), ("all", "all four")]
CLAIMS = {"residual": 2.1, "multihead": 3.7}  # article 004's claimed gains, in points


def _limits(values, pad=1.0):
    """Whole-number limits around every seed's value, ``pad`` points beyond them."""
    return math.floor(min(map(min, values)) - pad), math.ceil(max(map(max, values)) + pad)


@figure("ch06_results_han")
def results_han():
    """Left: HAN beside the flat models on IMDB, and on polarity v2.0. Right: the tips ablation.
    A dot per seed, a line at the mean (all HAN variants in HAN's colour)."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.2), gridspec_kw={"width_ratios": [1.1, 1.4]})
    ax = axes[0]
    values = [seeds(name, "accuracy") for name, _, _ in IMDB]
    ax.set_ylim(*_limits(values))  # dots, not bars: an axis above 0 exaggerates nothing
    for k, ((_, model, _), v) in enumerate(zip(IMDB, values)):
        seed_dots(ax, k, v, model_colour(model), width=0.45, size=22)
    ax.set_xticks(range(len(IMDB)), [label for _, _, label in IMDB], fontsize=7)
    ax.axvline(3.5, color="black", linewidth=0.5, linestyle=":")
    ax.set_xlim(-0.5, len(IMDB) - 0.5)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("IMDB test (25,000)  |  polarity fold 9 (200)", fontsize=9)
    ax = axes[1]
    values = [seeds(f"ch06_tips_{tip}", "accuracy") for tip, _ in TIPS]
    base = float(np.mean(values[0]))
    low, high = _limits(values)
    ax.set_ylim(low, max(high, math.ceil(base + max(CLAIMS.values()) + 1)))
    ax.axhline(base, color="black", linewidth=0.6, linestyle="--", label="base model (mean)")
    for k, v in enumerate(values):
        seed_dots(ax, k, v, model_colour("han"), width=0.45, size=22)
    for k, (tip, _) in enumerate(TIPS):
        if tip in CLAIMS:
            ax.plot(k, base + CLAIMS[tip], marker="*", markersize=10, color=BLACK, linestyle="none",
                    label="base + article 004's claim" if tip == "residual" else None)
    ax.set_xticks(range(len(TIPS)), [label for _, label in TIPS], fontsize=8)
    ax.set_xlim(-0.5, len(TIPS) - 0.5)
    ax.set_title("article 004's tips (HAN), tips subset of IMDB (4,000 test reviews)", fontsize=9)
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    fig.tight_layout()
    return fig
