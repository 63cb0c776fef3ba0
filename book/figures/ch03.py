"""Figures of chapter 3: multi-head self-attention."""

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import (BLUE, GREEN, ORANGE, PURPLE, arrow, figure, heatmap, model_colour, model_label, record,
                     seed_dots, seeds)

from attn_tutorial.mhsa import (MultiHeadSelfAttention, causal_mask, explicit_attention, merge_heads,
                                sinusoidal_positions, split_heads)

HEAD_COLOURS = [BLUE, ORANGE, GREEN, PURPLE]


def _values(ax, matrix, title, blocks=0):
    """A (T, D) matrix as a diverging heatmap; ``blocks`` > 0 outlines that many column blocks."""
    m = matrix.numpy()
    top = abs(m).max()
    ax.imshow(m, cmap="RdBu_r", vmin=-top, vmax=top, aspect="equal")
    ax.set_xticks([]), ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    width = m.shape[1] // max(blocks, 1)
    for j in range(blocks):
        ax.add_patch(plt.Rectangle((j * width - 0.5, -0.5), width, m.shape[0], fill=False,
                                   edgecolor=HEAD_COLOURS[j], linewidth=2.5))
        ax.text(j * width + width / 2 - 0.5, m.shape[0] - 0.1, f"head {j + 1}", ha="center", va="top",
                fontsize=9, color=HEAD_COLOURS[j])
    ax.set_title(title, fontsize=10)


@figure("ch03_heads")
def heads_figure():
    """Q (T, D) cut into h column blocks, one attention map per head, the blocks merged again."""
    torch.manual_seed(0)
    T, D, H = 5, 8, 2
    layer = MultiHeadSelfAttention(D, num_heads=H).eval()
    x = torch.randn(1, T, D)  # (B, T, D)
    with torch.no_grad():
        q, k, v = (split_heads(t, H) for t in layer.in_proj(x).chunk(3, dim=-1))  # each (1, H, T, d_h)
        context, weights = explicit_attention(q, k, v)  # (1, H, T, d_h), (1, H, T, T)
        merged = merge_heads(context)[0]  # (T, D)
        queries = merge_heads(q)[0]  # (T, D): Q before the split
    fig = plt.figure(figsize=(9.5, 2.6))
    grid = fig.add_gridspec(1, 7, width_ratios=[1.6, 0.45, 1.0, 0.15, 1.0, 0.45, 1.6], wspace=0.12)
    _values(fig.add_subplot(grid[0]), queries, r"$\mathbf{Q}$ $(T \times D)$", blocks=H)
    for j in range(H):
        ax = fig.add_subplot(grid[2 + 2 * j])
        heatmap(ax, weights[0, j], None, None, fmt="{:.1f}")
        ax.set_title(f"$\\mathbf{{A}}^{{({j + 1})}}$ $(T \\times T)$", color=HEAD_COLOURS[j], fontsize=10)
        for side in ax.spines.values():
            side.set_visible(True)
            side.set_edgecolor(HEAD_COLOURS[j])
            side.set_linewidth(2.0)
    _values(fig.add_subplot(grid[6]), merged, r"$[\mathbf{O}_1; \mathbf{O}_2]$ $(T \times D)$", blocks=H)
    for column, text in ((1, "split"), (5, "merge")):
        ax = fig.add_subplot(grid[column])
        ax.axis("off")
        ax.set_xlim(0, 1), ax.set_ylim(0, 1)
        arrow(ax, (0.1, 0.45), (0.9, 0.45))
        ax.text(0.5, 0.6, text, ha="center", va="center", fontsize=9)
    return fig


@figure("ch03_causal_mask")
def causal_mask_figure():
    """The causal mask and the weights of one head under it: zero above the diagonal."""
    torch.manual_seed(1)
    T = 6
    layer = MultiHeadSelfAttention(8, num_heads=2).eval()
    with torch.no_grad():
        _, weights = layer(torch.randn(1, T, 8), attn_mask=causal_mask(T), need_weights=True)  # (1, H, T, T)
    mask = causal_mask(T)
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.0))
    tokens = [f"s={s}" for s in range(1, T + 1)]
    queries = [f"t={t}" for t in range(1, T + 1)]
    heatmap(axes[0], mask.float(), queries, tokens, fmt="{:.0f}", cmap="Greens", vmax=2.0)
    axes[0].set_title(r"mask $\mathbf{M}$ (1 = may attend, $s \leq t$)", fontsize=10)
    heatmap(axes[1], weights[0, 0], queries, tokens, masked=~mask)
    axes[1].set_title(r"weights $\mathbf{A}$ of one head", fontsize=10)
    for ax in axes:
        ax.set_xlabel("key $s$"), ax.set_ylabel("query $t$")
        ax.xaxis.set_label_position("top"), ax.xaxis.tick_top()
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    return fig


@figure("ch03_positions")
def positions_figure():
    """Sinusoidal positional encodings for T = 32, D = 32, and four of their columns."""
    T, D = 32, 32
    table = sinusoidal_positions(T, D)  # (T, D)
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.3), gridspec_kw={"width_ratios": [1.1, 1.2]})
    image = axes[0].imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="equal")
    axes[0].set_xlabel("feature index (even: sin, odd: cos)")
    axes[0].set_ylabel("position $t$")
    axes[0].set_title(r"$\mathbf{P}$ $(T = 32, D = 32)$", fontsize=10)
    fig.colorbar(image, ax=axes[0], shrink=0.8)
    for i, colour in zip((1, 3, 6, 10), (BLUE, ORANGE, GREEN, PURPLE)):  # pair i: column 2i is sin(w_i t)
        axes[1].plot(range(T), table[:, 2 * i], marker=".", color=colour, label=f"column {2 * i} ($i = {i}$)")
    axes[1].set_xlabel("position $t$")
    axes[1].set_ylabel(r"$P_{t,2i} = \sin(\omega_i t)$")
    axes[1].set_title("each sin/cos pair turns at its own frequency", fontsize=10)
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return fig


PART_ONE = [  # (record, model, label)
    ("ch01_nblr", "nblr", "NB-weighted logistic regression (ch. 1)"),
    ("ch00_bow", "bow", "hashed bag of n-grams (ch. 0)"),
    ("ch02_attnpool", "attnpool", "BiLSTM + attention pooling (ch. 2)"),
    ("ch03_mhsa", "mhsa", "BiLSTM + MHSA + masked mean (this chapter)"),
    ("ch02_selfattentive_p01", "selfattentive", "BiLSTM + structured self-attention (ch. 2)"),
    ("ch01_bilstm", "bilstm", "BiLSTM + masked mean and max (ch. 1)"),
]


@figure("ch03_results_accuracy")
def results_accuracy_figure():
    """Test accuracy of the Part I models (cpu profile): a dot per seed, a line at the mean."""
    fig, ax = plt.subplots(figsize=(8.0, 3.0))
    rows = PART_ONE[::-1]
    values = [seeds(name, "accuracy") for name, _, _ in rows]
    # Dots, not bars: a position carries the accuracy, so an axis that does not start at 0 exaggerates nothing.
    ax.set_xlim(math.floor(min(map(min, values)) - 0.5), math.ceil(max(map(max, values)) + 1.5))
    ax.set_ylim(-0.5, len(rows) - 0.5)
    for i, ((name, model, _), v) in enumerate(zip(rows, values)):
        seed_dots(ax, i, v, model_colour(model), width=0.45, horizontal=True, size=24)
        ax.text(max(v) + 0.12, i, f"{np.mean(v):.2f} ± {np.std(v, ddof=1):.2f} ({len(v)} seeds)", va="center",
                fontsize=8)
    ax.set_yticks(range(len(rows)), [label for _, _, label in rows], fontsize=9)
    for tick, (_, _, label) in zip(ax.get_yticklabels(), rows):
        if label.endswith("(this chapter)"):
            tick.set_fontweight("bold")
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("IMDB test accuracy (%): a dot per seed, a line at the mean")
    fig.tight_layout()
    return fig


@figure("ch03_results_memory")
def results_memory_figure():
    """Peak memory of one forward pass against the length, per attention path, and the formula."""
    runs = record("ch03_memory")["runs"][0]["extra"]["forward"]
    fig, ax = plt.subplots(figsize=(7.0, 3.3))
    paths = [("explicit", model_label("explicit"), model_colour("explicit")),
             ("chunked", "query chunks of 128", model_colour("chunked")),
             ("local", "local blocks of 128", model_colour("local")), ("sdpa", "fused (SDPA)", model_colour("exact"))]
    for kind, label, colour in paths:
        rows = sorted((r for r in runs if r["kind"] == kind), key=lambda r: r["length"])
        ax.plot([r["length"] for r in rows], [r["peak MB"] for r in rows], marker="o", color=colour, label=label)
    formula = sorted({(r["length"], r["formula MB"]) for r in runs})
    ax.plot(*zip(*formula), linestyle="--", color="black", label=r"formula $B h T^2 \cdot 4$ bytes")
    ax.set_xscale("log", base=2), ax.set_yscale("log")
    ax.set_xticks([256, 512, 1024, 2048], ["256", "512", "1,024", "2,048"])
    ax.set_xlabel("sequence length $T$")
    ax.set_ylabel("peak memory (MB)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
