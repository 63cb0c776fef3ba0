"""Figures of chapter 1: padding and masks, the BiLSTM unrolled, masked pooling, recorded results."""

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import Normalize
from torch import nn

from _common import (BLUE, DOT_COLOUR, ORANGE, PAD_COLOUR, PALETTE, arrow, diagram_axes, figure, model_colour,
                     record, seed_dots, seeds)

from attn_tutorial.rnn import BiLSTMEncoder, masked_max, masked_mean
from attn_tutorial.text import Vocab, encode_texts, pad_batch, tokenize

TEXTS = ["A fine film.", "Dull.", "Not bad at all, really."]


def _grid(ax, cells, mask, title, colour=None):
    """A table of strings, one row per review, padded cells grey."""
    rows, cols = len(cells), len(cells[0])
    for i in range(rows):
        for j in range(cols):
            face = (colour or "white") if mask[i][j] else PAD_COLOUR
            ax.add_patch(plt.Rectangle((j, rows - 1 - i), 1, 1, facecolor=face, edgecolor="white", lw=1.5))
            ax.text(j + 0.5, rows - 0.5 - i, cells[i][j], ha="center", va="center", fontsize=8.5)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(cols) + 0.5, [str(t) for t in range(1, cols + 1)])
    ax.set_yticks([])
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("position $t$", fontsize=9)


@figure("ch01_padding_mask")
def padding_mask():
    """Three reviews as tokens, as padded ids, and as the mask, with their lengths."""
    vocab = Vocab.build((tokenize(t) for t in TEXTS), min_freq=1)
    ids, lengths, mask = pad_batch(encode_texts(TEXTS, vocab), vocab.pad_id)
    tokens = [vocab.decode(row.tolist()) for row in ids]
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 1.9), gridspec_kw={"width_ratios": [1.25, 1, 1]})
    words = [[tok if m else "<pad>" for tok, m in zip(row, mrow)] for row, mrow in zip(tokens, mask.tolist())]
    _grid(axes[0], words, mask.tolist(), "tokens")
    _grid(axes[1], [[str(i) for i in row] for row in ids.tolist()], mask.tolist(), "ids $(B, T)$, pad id 0")
    _grid(axes[2], [[str(int(m)) for m in row] for row in mask.tolist()], mask.tolist(),
          r"mask $\mathbf{M}$: $m_{b,t} = \mathbb{1}[t \leq T_b]$", colour="#cdeccd")
    for b, length in enumerate(lengths.tolist()):
        axes[2].text(ids.shape[1] + 0.3, len(TEXTS) - 0.5 - b, rf"$T_{b + 1} = {length}$", va="center", fontsize=9)
        axes[0].text(-0.2, len(TEXTS) - 0.5 - b, f"review {b + 1}", ha="right", va="center", fontsize=9)
    fig.tight_layout(w_pad=1.5)
    return fig


def _state(ax, x, y, values, norm, width=0.62, height=0.36, pad=False):
    """A state vector drawn as a column of coloured cells (values written in them)."""
    cmap = plt.get_cmap("RdBu_r")
    for k, v in enumerate(values):
        face = PAD_COLOUR if pad else cmap(norm(v))
        ax.add_patch(plt.Rectangle((x - width / 2, y + (len(values) - 1 - k) * height), width, height,
                                   facecolor=face, edgecolor="black", lw=0.5))
        ax.text(x, y + (len(values) - 0.5 - k) * height, "0" if pad else f"{v + 0.0:.2f}", ha="center", va="center",
                fontsize=8, color="white" if abs(norm(v) - 0.5) > 0.35 and not pad else "black")


@figure("ch01_bilstm_unrolled")
def bilstm_unrolled():
    """A BiLSTM over "a fine film ." plus one padding position: two chains, concatenated states."""
    tokens = tokenize("A fine film.") + ["<pad>"]
    steps, length, hidden = len(tokens), len(tokens) - 1, 3
    torch.manual_seed(0)
    encoder = BiLSTMEncoder(4, hidden).eval()
    x = torch.randn(1, steps, 4)
    with torch.no_grad():
        states = encoder(x, torch.tensor([length]))[0]  # (T, 2H); zero at the padding
    forward, backward = states[:, :hidden], states[:, hidden:]
    norm = Normalize(-float(states.abs().max()), float(states.abs().max()))
    fig, ax = diagram_axes(9.0, 5.4, xlim=(-1.6, 2.0 * steps - 0.2), ylim=(-0.5, 7.0))
    xs = [2.0 * t + 0.6 for t in range(steps)]
    y_fwd, y_bwd, y_out = 0.9, 2.6, 4.6
    for t, (xt, tok) in enumerate(zip(xs, tokens)):
        pad = t >= length
        ax.text(xt, 0.15, tok, ha="center", va="center", fontsize=10, color="grey" if pad else "black",
                bbox=dict(boxstyle="round", facecolor=PAD_COLOUR if pad else "white", edgecolor="black", lw=0.6))
        ax.text(xt, -0.35, f"$t = {t + 1}$", ha="center", fontsize=8)
        _state(ax, xt, y_fwd, forward[t].tolist(), norm, pad=pad)
        _state(ax, xt, y_bwd, backward[t].tolist(), norm, pad=pad)
        _state(ax, xt, y_out, states[t].tolist(), norm, pad=pad)
        if not pad:
            arrow(ax, (xt, 0.4), (xt, y_fwd - 0.02), colour="grey")
            arrow(ax, (xt + 0.42, 0.4), (xt + 0.42, y_bwd - 0.02), colour="grey")
            arrow(ax, (xt, y_bwd + 1.1), (xt, y_out - 0.02), colour="grey")
        if t + 1 < length:
            arrow(ax, (xt + 0.33, y_fwd + 0.54), (xs[t + 1] - 0.33, y_fwd + 0.54), colour=BLUE)
            arrow(ax, (xs[t + 1] - 0.33, y_bwd + 0.54), (xt + 0.33, y_bwd + 0.54), colour=ORANGE)
    ax.text(xs[length - 1] + 0.5, y_bwd + 1.2, "backward chain starts at\nthe last real token", fontsize=8,
            color=ORANGE, ha="left", va="bottom")
    ax.text(-1.5, y_fwd + 0.54, r"forward $\overrightarrow{\mathbf{h}}_t$", fontsize=9.5, color=BLUE, va="center")
    ax.text(-1.5, y_bwd + 0.54, r"backward $\overleftarrow{\mathbf{h}}_t$", fontsize=9.5, color=ORANGE, va="center")
    ax.text(-1.5, y_out + 1.08, "output\n" + r"$\mathbf{h}_t = [\overrightarrow{\mathbf{h}}_t ; \overleftarrow{\mathbf{h}}_t]$",
            fontsize=9.5, va="center")
    ax.text(-1.5, 0.15, r"input $\mathbf{x}_t$", fontsize=9.5, va="center")
    return fig


@figure("ch01_pooling")
def pooling():
    """The states of a padded review, and its pooled vectors with and without the mask."""
    torch.manual_seed(0)  # the figure draws the same numbers in the SVG and in a preview
    encoder = BiLSTMEncoder(3, 2).eval()
    lengths = torch.tensor([5, 3])
    x = torch.randn(2, 5, 3)
    mask = torch.arange(5) < lengths.unsqueeze(1)
    with torch.no_grad():
        states = encoder(x, lengths)  # (B, T, D), zero at padding
    rows = {
        "masked mean": masked_mean(states, mask)[1],
        "mean over all $T$": states.mean(dim=1)[1],
        "masked max": masked_max(states, mask)[1],
        "max over all $T$": states.amax(dim=1)[1],
    }
    pooled = torch.stack(list(rows.values()))  # (4, D)
    # the caption's reading: the padding's zeros win the unmasked max in feature 2 only
    assert (rows["masked max"] < 0).tolist() == [False, True, False, False]
    h = states[1]  # the short review, (T, D)
    lim = float(torch.cat([h, pooled]).abs().max())
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 2.7), gridspec_kw={"width_ratios": [1, 1.05]})
    for ax, data, labels, title in ((axes[0], h, [f"t = {t}" for t in range(1, 6)], r"states $\mathbf{H}$ of review 2 ($T_2 = 3$)"),
                                     (axes[1], pooled, list(rows), r"pooled: one vector for review 2")):
        ax.imshow(data.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="equal")
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                padded = data is h and not mask[1, i]
                if padded:
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=PAD_COLOUR))
                ax.text(j, i, "0" if padded else f"{float(data[i, j]) + 0.0:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(data[i, j]) > 0.6 * lim else "black")
        ax.set_yticks(range(data.shape[0]), labels)
        ax.set_xticks(range(data.shape[1]), [str(d) for d in range(1, data.shape[1] + 1)])
        ax.set_xlabel("feature $i$")
        ax.tick_params(length=0)
        ax.set_title(title, fontsize=10)
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
    for i in (1, 3):  # the wrong rows
        axes[1].get_yticklabels()[i].set_color(PALETTE[3])
    fig.tight_layout(w_pad=2.0)
    return fig


@figure("ch01_results_imdb")
def results_imdb():
    """Test accuracy and F1 of the chapter's models and of chapter 0's tiny model: a dot per seed, a
    line at the mean."""
    from matplotlib.lines import Line2D

    models = [("ch01_nblr", "nblr", "NB-weighted logistic regression"),
              ("ch00_bow", "bow", "hashed bag of n-grams (ch. 0)"),
              ("ch01_bilstm", "bilstm", "BiLSTM + masked mean/max pooling")]
    metrics = (("accuracy", "o", "accuracy"), ("f1", "s", "F1"))
    values = {(name, key): seeds(name, key) for name, _, _ in models for key, _, _ in metrics}
    fig, ax = plt.subplots(figsize=(7.5, 2.4))
    low, high = min(map(min, values.values())), max(map(max, values.values()))
    ax.set_xlim(low - 0.6, high + 1.4)  # a dot plot: positions, not lengths, so the axis need not start at 0
    ax.set_ylim(-0.5, len(models) - 0.5)
    for k, (name, model, _) in enumerate(models):
        for j, (key, marker, _) in enumerate(metrics):
            v = values[name, key]
            y = len(models) - 1 - k + (0.15 if j == 0 else -0.15)
            seed_dots(ax, y, v, model_colour(model), width=0.22, horizontal=True, marker=marker, size=22)
            ax.text(max(v) + 0.12, y, f"{np.mean(v):.2f} ± {np.std(v, ddof=1):.2f}", va="center", fontsize=8)
    ax.set_yticks(range(len(models)), [label for _, _, label in reversed(models)])
    ax.set_xlabel("IMDB test split (%): a dot per seed, a line at the mean; mean ± sample std written")
    rec = record("ch01_bilstm")
    device = rec["device"].split(" (")[0].upper()  # the kind of device; threads and CPU model are in the record
    ax.set_title(f"{rec['profile']} profile, {device}, {len(rec['seeds'])} seeds each", fontsize=10)
    ax.legend(handles=[Line2D([], [], linestyle="none", marker=marker, color=DOT_COLOUR, label=label)
                       for _, marker, label in metrics], frameon=False, fontsize=8.5, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return fig
