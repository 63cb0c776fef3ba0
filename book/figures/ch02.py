"""Figures of chapter 2: attention pooling, additive and dot-product scores, structured self-attention."""

import math

import numpy as np
import torch
import matplotlib.pyplot as plt
from matplotlib.colors import TwoSlopeNorm

from _common import (BLUE, GREEN, GREY, ORANGE, PAD_COLOUR, RED, figure, heatmap, model_colour, record, seed_dots,
                     seeds)

from attn_tutorial.attention import ScaledDotScore, attend, masked_softmax

DIVERGING = "RdBu_r"  # signed quantities (scores, state components); weights use CMAP


def _signed_heatmap(ax, values, row_labels, col_labels, *, limit=None, padded=None, fmt="{:.1f}"):
    """Signed values on a pale diverging scale, written in every cell in a readable colour."""
    v = np.asarray(values, dtype=float)
    limit = limit or float(np.abs(v).max())
    # Stretch the scale past the data so that the darkest cell is mid-tone: black text stays readable.
    ax.imshow(v, cmap=DIVERGING, norm=TwoSlopeNorm(0.0, -1.8 * limit, 1.8 * limit), aspect="equal")
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            pad = padded is not None and padded[i][j]
            if pad:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=PAD_COLOUR, edgecolor="white",
                                           hatch="///", linewidth=0, zorder=2))
            ax.text(j, i, fmt.format(v[i, j]), ha="center", va="center", fontsize=8, zorder=3,
                    color="#555555" if pad else "black", style="italic" if pad else "normal")
    ax.set_xticks(range(v.shape[1]), col_labels)
    ax.set_yticks(range(v.shape[0]), row_labels)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


@figure("ch02_masked_softmax")
def masked_softmax_figure():
    """Scores of a padded batch, the mask, and the weights: padding (and an empty row) gets exactly zero."""
    torch.manual_seed(2)
    T, D = 6, 8
    keys, query = torch.randn(3, T, D), torch.randn(3, 1, D)
    scores = ScaledDotScore()(query, keys).squeeze(1)  # (3, T)
    lengths = torch.tensor([6, 4, 0])
    mask = torch.arange(T) < lengths[:, None]  # (3, T), True = real token
    weights = masked_softmax(scores, mask)

    rows = ["review 1 (6 tokens)", "review 2 (4 tokens)", "all padding"]
    tokens = [f"{t}" for t in range(1, T + 1)]
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 2.3), gridspec_kw={"wspace": 0.08})
    _signed_heatmap(axes[0], scores, rows, tokens, padded=(~mask).tolist())
    axes[0].set_title("scores $e_t$ (computed everywhere)", fontsize=10)

    heatmap(axes[1], mask.float(), [], tokens, fmt="{:.0f}", cmap="Greens", vmax=2.5, masked=~mask)
    for i, j in zip(*np.nonzero((~mask).numpy())):
        axes[1].text(j, i, "0", ha="center", va="center", fontsize=8, zorder=3)
    axes[1].set_title("mask $m_t$ (1 = real token)", fontsize=10)

    heatmap(axes[2], weights, [], tokens, vmax=1.0, masked=~mask)
    for i, j in zip(*np.nonzero((~mask).numpy())):
        axes[2].text(j, i, "0", ha="center", va="center", fontsize=8, zorder=3, weight="bold")
    axes[2].set_title(r"weights $\alpha_t$ (rows sum to 1 or 0)", fontsize=10)
    for ax in axes:
        ax.set_xlabel("position $t$")
    return fig


@figure("ch02_score_functions")
def score_functions_figure():
    """The two score functions side by side, as block diagrams."""
    from _common import arrow, box, diagram_axes

    fig, ax = diagram_axes(9.0, 3.0, xlim=(0, 18), ylim=(0, 6))
    # additive
    ax.text(4.3, 5.6, "additive (Bahdanau)", ha="center", fontsize=11, weight="bold")
    box(ax, (0.3, 0.5), 1.6, 0.8, r"$\mathbf{q}$", colour=ORANGE)
    box(ax, (3.0, 0.5), 1.6, 0.8, r"$\mathbf{h}_t$", colour="#9ecae1")
    box(ax, (0.0, 2.0), 2.2, 0.8, r"$\mathbf{W}_Q$", colour="white")
    box(ax, (2.7, 2.0), 2.2, 0.8, r"$\mathbf{W}_K$", colour="white")
    box(ax, (0.8, 3.3), 3.6, 0.8, r"$+\,\mathbf{b}$, then $\tanh$  ($d_a$)", colour="white")
    box(ax, (1.5, 4.5), 2.2, 0.7, r"$(\cdot)\,\mathbf{w}$", colour="white")
    box(ax, (5.6, 4.45), 1.3, 0.8, r"$e_t$", colour=GREEN)
    arrow(ax, (1.1, 1.3), (1.1, 2.0))
    arrow(ax, (3.8, 1.3), (3.8, 2.0))
    arrow(ax, (1.1, 2.8), (2.0, 3.3))
    arrow(ax, (3.8, 2.8), (3.2, 3.3))
    arrow(ax, (2.6, 4.1), (2.6, 4.5))
    arrow(ax, (3.7, 4.85), (5.6, 4.85))
    ax.text(5.1, 1.9, "$d_a$ hidden units;\nwidths of $\\mathbf{q}$, $\\mathbf{h}_t$\nmay differ;\nparameters\n$\\mathbf{W}_Q, \\mathbf{W}_K, \\mathbf{b}, \\mathbf{w}$",
            fontsize=8.5, va="center", color="#333333")
    ax.plot([9.1, 9.1], [0.3, 5.7], color=GREY, linewidth=0.8)
    # scaled dot product
    ax.text(13.6, 5.6, "scaled dot product (Transformer)", ha="center", fontsize=11, weight="bold")
    box(ax, (10.0, 0.5), 1.6, 0.8, r"$\mathbf{q}$", colour=ORANGE)
    box(ax, (12.8, 0.5), 1.6, 0.8, r"$\mathbf{h}_t$", colour="#9ecae1")
    box(ax, (10.6, 2.2), 3.2, 0.8, r"$\mathbf{q} \mathbf{h}_t^\top$", colour="white")
    box(ax, (10.6, 3.6), 3.2, 0.8, r"$\div \sqrt{D}$", colour="white")
    box(ax, (15.0, 3.6), 1.3, 0.8, r"$e_t$", colour=GREEN)
    arrow(ax, (10.8, 1.3), (11.5, 2.2))
    arrow(ax, (13.6, 1.3), (12.9, 2.2))
    arrow(ax, (12.2, 3.0), (12.2, 3.6))
    arrow(ax, (13.8, 4.0), (15.0, 4.0))
    ax.text(14.8, 1.8, "equal widths $D$;\nno parameters;\nall pairs at once:\n$\\mathbf{Q}\\mathbf{K}^\\top/\\sqrt{D}$",
            fontsize=8.5, va="center", color="#333333")
    return fig


@figure("ch02_scaling")
def scaling_figure():
    """Dot-product scores of random vectors with and without 1/sqrt(D) (each histogram on its own bins and
    axis, so that both shapes show), and the largest softmax weight they give."""
    g = torch.Generator().manual_seed(0)
    T, trials = 100, 200
    fig, axes = plt.subplots(1, 3, figsize=(10.0, 3.0), gridspec_kw={"wspace": 0.35, "width_ratios": [1, 1, 1.35]})

    D = 256
    q, k = torch.randn(trials, 1, D, generator=g), torch.randn(trials, T, D, generator=g)
    raw = (q @ k.transpose(1, 2)).flatten()
    scaled = raw / math.sqrt(D)
    for ax, scores, colour, name, spread in ((axes[0], raw, RED, r"$\mathbf{q}\mathbf{k}^\top$", math.sqrt(D)),
                                            (axes[1], scaled, BLUE, r"$\mathbf{q}\mathbf{k}^\top/\sqrt{D}$", 1.0)):
        edge = 4 * spread  # each histogram on its own 40 bins over +-4 of its expected std
        ax.hist(scores.numpy(), bins=np.linspace(-edge, edge, 41), density=True, color=colour, alpha=0.7)
        grid = np.linspace(-edge, edge, 200)
        ax.plot(grid, np.exp(-grid ** 2 / (2 * spread ** 2)) / (spread * math.sqrt(2 * math.pi)), color="black",
                linewidth=0.9)
        ax.set(xlim=(-edge, edge), xlabel="score", title=f"{name}: std {scores.std():.{1 if spread > 1 else 2}f}")
        ax.set_yticks([])
    axes[0].axvspan(-4, 4, color=BLUE, alpha=0.25, linewidth=0)
    axes[0].annotate("the whole range\nof the right panel", xy=(4, 0.6 * axes[0].get_ylim()[1]), xytext=(18, 0.75 * axes[0].get_ylim()[1]),
                     fontsize=7.5, arrowprops=dict(arrowstyle="->", linewidth=0.7), va="center")
    axes[0].set_ylabel("density")
    fig.text(0.33, 1.04, f"scores of random vectors, $D = {D}$ (line: normal density of the expected std)",
             ha="center", fontsize=10)

    widths = [4, 16, 64, 256, 1024]
    largest = {"unscaled": [], "scaled": []}
    for D in widths:
        q, k = torch.randn(trials, 1, D, generator=g), torch.randn(trials, T, D, generator=g)
        raw = (q @ k.transpose(1, 2)).squeeze(1)
        largest["unscaled"].append(torch.softmax(raw, -1).max(-1).values.mean().item())
        largest["scaled"].append(torch.softmax(raw / math.sqrt(D), -1).max(-1).values.mean().item())
    axes[2].plot(widths, largest["unscaled"], "o-", color=RED, label="unscaled")
    axes[2].plot(widths, largest["scaled"], "s-", color=BLUE, label=r"scaled by $1/\sqrt{D}$")
    axes[2].axhline(1 / T, color=GREY, linestyle=":", linewidth=1)
    axes[2].text(widths[-1], 1 / T + 0.12, f"uniform weights: 1/{T}", fontsize=8, color="#555555", ha="right")
    axes[2].set(xscale="log", ylim=(0, 1.05), xlabel="width $D$",
                ylabel="largest weight", title=f"softmax over {T} keys (mean of {trials})")
    axes[2].set_xticks(widths, [str(w) for w in widths])
    axes[2].minorticks_off()
    axes[2].legend(fontsize=8, frameon=False, loc="center right")
    return fig


@figure("ch02_pooling")
def pooling_figure():
    """Attention pooling of one padded review: states, weights and their weighted average."""
    torch.manual_seed(0)
    tokens = ["a", "truly", "wonderful", "film", "<pad>", "<pad>"]
    T, D, length = len(tokens), 4, 4
    states = torch.randn(1, T, D)  # (B, T, D)
    query = 1.5 * states[:, 2:3] + 0.3 * torch.randn(1, 1, D)  # a query close to the state of "wonderful"
    mask = (torch.arange(T) < length)[None]  # (1, T)
    context, weights = attend(ScaledDotScore()(query, states), states, mask)  # (1, 1, D), (1, 1, T)
    w, c, H = weights[0, 0].numpy(), context[0, 0].numpy(), states[0].numpy()

    fig = plt.figure(figsize=(8.5, 3.6))
    grid = fig.add_gridspec(2, 3, height_ratios=[1.0, 1.25], width_ratios=[T, 1.2, 1.0], hspace=0.08, wspace=0.05)
    bars, states_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
    context_ax = fig.add_subplot(grid[1, 2])
    colours = [BLUE if mask[0, t] else PAD_COLOUR for t in range(T)]
    bars.bar(range(T), w, color=colours, width=0.7)
    for t in range(T):
        bars.text(t, w[t] + 0.03, f"{w[t]:.2f}", ha="center", fontsize=8)
    bars.set(xlim=(-0.5, T - 0.5), ylim=(0, 1.0), ylabel=r"weight $\alpha_t$")
    bars.set_xticks([])
    bars.set_title(r"scores $e_t = \mathbf{q}\mathbf{h}_t^\top/\sqrt{D}$ $\rightarrow$ masked softmax", fontsize=10)

    limit = float(np.abs(H).max())
    padded = [[not bool(mask[0, t]) for t in range(T)] for _ in range(D)]
    _signed_heatmap(states_ax, H.T, [f"{i + 1}" for i in range(D)], tokens, limit=limit, padded=padded)
    states_ax.set_ylabel("component")
    states_ax.set_aspect("auto")
    states_ax.set_xlabel(r"states $\mathbf{h}_t$ (one column per token)")

    _signed_heatmap(context_ax, c[:, None], [], [r"$\mathbf{c}$"], limit=limit)
    context_ax.set_aspect("auto")
    context_ax.set_xlabel(r"context $\mathbf{c}$")
    context_ax.set_xticks([])
    arrow_ax = fig.add_subplot(grid[1, 1])
    arrow_ax.axis("off")
    arrow_ax.set(xlim=(0, 1), ylim=(0, 1))
    arrow_ax.annotate("", xy=(1.0, 0.5), xytext=(0.0, 0.5),
                      arrowprops=dict(arrowstyle="-|>", color="black", linewidth=1.2))
    arrow_ax.text(0.5, 0.62, r"$\sum_t \alpha_t \mathbf{h}_t$", ha="center", fontsize=11)
    return fig


def _penalty(weights: torch.Tensor) -> float:
    """||A A^T - I||_F^2 for one (hops, T) weight matrix, as in StructuredSelfAttention."""
    gram = weights @ weights.T
    return (gram - torch.eye(gram.shape[0])).square().sum().item()


@figure("ch02_hops")
def hops_figure():
    """Three hops of structured self-attention: diffuse, redundant and distinct, with their penalty."""
    torch.manual_seed(0)
    hops, T = 3, 8
    sharp = 12.0  # large enough that the focused rows are one-hot to four decimals
    cases = {
        "diffuse (as at initialisation)": 0.3 * torch.randn(hops, T),
        "focused on the same position": sharp * torch.nn.functional.one_hot(torch.full((hops,), 2), T).float(),
        "focused on different positions": sharp * torch.nn.functional.one_hot(torch.tensor([1, 4, 6]), T).float(),
    }
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 1.9), gridspec_kw={"wspace": 0.12})
    for ax, (title, scores) in zip(axes, cases.items()):
        A = masked_softmax(scores, None)
        if "focused" in title:  # the caption and alt text call these rows one-hot
            assert (A.max(-1).values > 0.9999).all()
        heatmap(ax, A, [f"hop {i + 1}" for i in range(hops)] if ax is axes[0] else [],
                [str(t) for t in range(1, T + 1)], vmax=1.0, fmt="{:.1f}")
        ax.set_title(f"{title}\n$P = {_penalty(A):.2f}$", fontsize=9.5)
        ax.set_xlabel("position $t$")
    return fig


RESULTS = [  # (record, model, label, marker): the two structured self-attention runs differ in the penalty only
    ("ch01_bilstm", "bilstm", "mean + max\n(chapter 1)", "o"),
    ("ch02_attnpool", "attnpool", "attention\npooling", "o"),
    ("ch02_selfattentive_p01", "selfattentive", "4 hops,\npenalty 0.1", "o"),
    ("ch02_selfattentive", "selfattentive", "4 hops,\npenalty 1.0", "^"),
]
BASELINES = [("ch01_nblr", "nblr", "NB-weighted logistic regression (chapter 1)"),
             ("ch00_bow", "bow", "hashed bag of n-grams (chapter 0)")]


@figure("ch02_results_imdb")
def results_figure():
    """Test accuracy of the pooling variants (same BiLSTM) against chapter 0's and chapter 1's
    baselines, a dot per seed; and their validation accuracy per epoch, a thin line per seed."""
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 3.6), gridspec_kw={"width_ratios": [1.15, 1.0], "wspace": 0.3})
    ax = axes[0]
    values = [seeds(name, "accuracy") for name, _, _, _ in RESULTS]
    baselines = [(model, label, float(np.mean(seeds(name, "accuracy")))) for name, model, label in BASELINES]
    # Dots and mean marks, no bars: a position, not a length, carries the accuracy, so an axis that
    # starts above 0 (at the lowest seed, to show the spread of penalty 1.0) exaggerates nothing.
    low = 5 * math.floor((min(map(min, values)) - 1) / 5)
    high = max(mean for _, _, mean in baselines) + 1.5
    ax.set_ylim(low, high)
    for i, ((name, model, label, marker), v) in enumerate(zip(RESULTS, values)):
        seed_dots(ax, i, v, model_colour(model), width=0.4, marker=marker, size=26)
        ax.text(i + 0.24, np.mean(v), f"{np.mean(v):.1f}", va="center", fontsize=8.5)
    for model, label, mean in baselines:
        ax.axhline(mean, color=model_colour(model), linestyle="--", linewidth=1.0, zorder=1)
        ax.text(len(RESULTS) - 0.55, mean + 0.25, f"{label}: {mean:.2f}", ha="right", va="bottom", fontsize=7.5)
    ax.set_xticks(range(len(RESULTS)), [label for _, _, label, _ in RESULTS], fontsize=8.5)
    ax.set_xlim(-0.5, len(RESULTS) - 0.5)
    ax.set(ylabel="test accuracy (%)", title="IMDB test accuracy (a dot per seed, line: mean)")

    ax = axes[1]
    curves = {}
    for name, model, label, marker in RESULTS[1:]:
        curves[name] = np.array([[100 * e["val_accuracy"] for e in r["extra"]["history"]] for r in record(name)["runs"]])
    ax.set_ylim(5 * math.floor((min(c.min() for c in curves.values()) - 1) / 5), high)
    for name, model, label, marker in RESULTS[1:]:
        epochs = np.arange(1, curves[name].shape[1] + 1)
        style = "--" if marker == "^" else "-"
        for run in curves[name]:  # every seed
            ax.plot(epochs, run, style, color=model_colour(model), linewidth=0.7, alpha=0.6)
        ax.plot(epochs, curves[name].mean(0), style, marker=marker, color=model_colour(model), linewidth=1.8,
                label=label.replace("\n", " "))
    ax.set(xlabel="epoch", ylabel="validation accuracy (%)", title="validation accuracy per epoch (thin: each seed)")
    ax.set_xticks(epochs)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig
