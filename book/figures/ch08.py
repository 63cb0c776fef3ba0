"""Figures of chapter 8: bilinear attention."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import BLUE, ORANGE, PAD_COLOUR, arrow, figure, grouped_bars, heatmap, model_colour, model_label

from attn_tutorial.bilinear import BilinearAttentionMap, LowRankBilinearAttention, SparseBilinearAttention

WORDS = ["what", "colour", "is", "the", "circle", "<pad>"]  # T = 6, the last position padded
REGIONS = [f"$r_{n}$" for n in range(1, 7)]                 # N = 6 regions


@figure("ch08_bilinear_map")
def bilinear_map_figure():
    """BAN's maps over (region, word) pairs for two glimpses, and their marginals."""
    gen = torch.Generator().manual_seed(3)
    dim, rank = 8, 8
    regions = 3.0 * torch.randn(1, len(REGIONS), dim, generator=gen)  # R (1, N, D)
    words = 3.0 * torch.randn(1, len(WORDS), dim, generator=gen)      # H (1, T, D)
    word_mask = torch.ones(1, len(WORDS), dtype=torch.bool)
    word_mask[:, -1] = False
    torch.manual_seed(0)
    attention = BilinearAttentionMap(dim, dim, rank=rank, glimpses=2)  # random init, no training
    with torch.no_grad():
        maps = attention(regions, words, word_mask=word_mask)[0].numpy()  # (g, N, T)
    N, T = maps.shape[1:]
    pad = np.zeros((N, T), dtype=bool)
    pad[:, -1] = True

    fig = plt.figure(figsize=(9.0, 4.4))
    grid = fig.add_gridspec(2, 5, width_ratios=[T, 1.6, 0.7, T, 1.6], height_ratios=[N, 1.8],
                            wspace=0.06, hspace=0.1)
    top = maps.max()
    for g, col in enumerate((0, 3)):
        a = maps[g]
        ax = fig.add_subplot(grid[0, col])
        heatmap(ax, a, REGIONS if g == 0 else None, None, vmax=top, masked=pad)
        for text in ax.texts:
            text.set_fontsize(7)
        ax.tick_params(labelbottom=False)
        ax.set_title(rf"glimpse $\ell = {g + 1}$: $\mathbf{{A}}_{g + 1}$ ($N \times T$, sums to 1)", fontsize=9)
        right = fig.add_subplot(grid[0, col + 1], sharey=ax)
        region_marginal = a.sum(1)
        right.barh(range(N), region_marginal, color=ORANGE)
        right.set_xlim(0, 0.6)
        right.set_xticks([0, 0.5])
        right.tick_params(labelleft=False, length=0)
        right.set_xlabel("over words", fontsize=8)
        below = fig.add_subplot(grid[1, col], sharex=ax)
        word_marginal = a.sum(0)
        below.bar(range(T), word_marginal, color=[BLUE] * (T - 1) + [PAD_COLOUR])
        below.set_ylim(0, 0.6)
        below.set_xticks(range(T), WORDS, rotation=40, ha="right")
        below.set_ylabel("over\nregions", fontsize=8)
        assert abs(a.sum() - 1) < 1e-5 and a[:, -1].sum() == 0  # one softmax over all real pairs
    return fig


@figure("ch08_low_rank")
def low_rank_figure():
    """Low-rank bilinear pooling: two projections of rank r, a product feature by feature, a pooling vector."""
    gen = torch.Generator().manual_seed(1)
    dim, rank = 6, 8
    q = torch.randn(1, dim, generator=gen)
    k = torch.randn(1, 1, dim, generator=gen)
    torch.manual_seed(0)
    layer = LowRankBilinearAttention(dim, dim, attn_dim=rank)  # random init, no training
    with torch.no_grad():
        fq, fk = layer.query(q)[0], layer.key(k)[0, 0]  # sigma(q U_q), sigma(k U_k): (r,)
        prod = fq * fk
        pi, bias = layer.pool.weight[0], layer.pool.bias[0]
        score = float(prod @ pi)  # e = (.) pi; the layer adds a scalar bias, the same for every key
        assert abs(score + float(bias) - float(layer.scores(q, k)[0, 0])) < 1e-6  # what the layer does

    fig = plt.figure(figsize=(9.0, 3.0))

    def strip(x0, y0, values, label, cmap="Greys", width_per=0.028, signed=False, digits=1):
        v = values.detach().numpy()[None]
        ax = fig.add_axes([x0, y0, width_per * v.shape[1], 0.12])
        lim = max(abs(v).max(), 1e-6)
        ax.imshow(v, cmap="RdBu_r" if signed else cmap, vmin=-lim if signed else 0, vmax=lim, aspect="auto")
        for j in range(v.shape[1]):
            text = f"{v[0, j]:.{digits}f}".replace("0.", ".") if digits > 1 else f"{v[0, j]:.1f}"
            ax.text(j, 0, text, ha="center", va="center", fontsize=7,
                    color="white" if abs(v[0, j]) > 0.6 * lim else "black")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(label, fontsize=9)
        return ax

    strip(0.02, 0.68, q[0], r"query $\mathbf{q}$ ($D$)", signed=True)
    strip(0.02, 0.18, k[0, 0], r"key $\mathbf{k}_s$ ($D$)", signed=True)
    strip(0.30, 0.68, fq, r"$\sigma(\mathbf{q}\mathbf{U}_q)$ ($r$)", cmap="Blues")
    strip(0.30, 0.18, fk, r"$\sigma(\mathbf{k}_s\mathbf{U}_k)$ ($r$)", cmap="Oranges")
    strip(0.62, 0.43, prod, r"product $\odot$ ($r$)", cmap="Purples", digits=2)  # small values: ".04"
    strip(0.62, 0.05, pi, r"pooling vector $\boldsymbol{\pi}$ ($r$)", signed=True)
    overlay = fig.add_axes([0, 0, 1, 1])
    overlay.set_xlim(0, 1)
    overlay.set_ylim(0, 1)
    overlay.axis("off")
    arrow(overlay, (0.20, 0.74), (0.30, 0.74))
    arrow(overlay, (0.20, 0.24), (0.30, 0.24))
    overlay.text(0.25, 0.79, r"$\mathbf{U}_q$, ReLU", ha="center", fontsize=8)
    overlay.text(0.25, 0.29, r"$\mathbf{U}_k$, ReLU", ha="center", fontsize=8)
    arrow(overlay, (0.53, 0.70), (0.62, 0.53))
    arrow(overlay, (0.53, 0.28), (0.62, 0.45))
    arrow(overlay, (0.85, 0.49), (0.90, 0.49))
    arrow(overlay, (0.85, 0.11), (0.90, 0.43))
    overlay.text(0.905, 0.49, f"score\n$e = (\\cdot)\\,\\boldsymbol{{\\pi}}$\n$= {score:.2f}$", va="center", fontsize=9)
    overlay.text(0.02, 0.97, f"$D = {dim}$, rank $r = {rank}$ (untrained): the score is a sum of $r$ products of non-linear features",
                 fontsize=9, va="top")
    return fig


@figure("ch08_topk")
def topk_figure():
    """Dense weights against top-k weights: each row keeps k of its real keys, padding never counts."""
    gen = torch.Generator().manual_seed(2)
    dim, keys_n = 8, 8
    query = 3.0 * torch.randn(2, dim, generator=gen)
    keys = 3.0 * torch.randn(2, keys_n, dim, generator=gen)
    mask = torch.ones(2, keys_n, dtype=torch.bool)
    mask[1, 6:] = False  # the second row has 6 real keys
    torch.manual_seed(0)
    sparse = SparseBilinearAttention(dim, dim, attn_dim=8, sparsity=0.5)  # random init, no training
    with torch.no_grad():
        scores = sparse.attention.scores(query, keys)
        _, dense = sparse.attention(query, keys, mask)
        _, top = sparse(query, keys, mask)
    kept = (top > 0).sum(-1).tolist()
    assert kept == [4, 3]  # k = ceil(real keys x (1 - sparsity)) per row

    fig, axes = plt.subplots(1, 3, figsize=(10.0, 2.1), gridspec_kw={"width_ratios": [1.65, 1, 1]})
    rows = [f"query 1 (k={kept[0]})", f"query 2 (k={kept[1]})"]
    cols = [f"$k_{s}$" for s in range(1, keys_n + 1)]
    s = scores.numpy()
    real = s[mask.numpy()]
    shade = (s - real.min()) / max(real.max() - real.min(), 1e-9)  # darker = higher score (signed, not |s|)
    heatmap(axes[0], shade, rows, cols, annotate=False, cmap="Greys", vmax=2.5, masked=~mask)
    for i in range(2):
        for j in range(keys_n):
            if mask[i, j]:
                axes[0].text(j, i, f"{s[i, j]:.2f}", ha="center", va="center", fontsize=8)
    axes[0].set_aspect(0.6)
    axes[0].set_title("scores (all keys scored)", fontsize=9)
    heatmap(axes[1], dense, ["", ""], cols, masked=~mask, vmax=float(top.max()))
    axes[1].set_title("dense weights", fontsize=9)
    heatmap(axes[2], top, ["", ""], cols, masked=~mask, vmax=float(top.max()))
    axes[2].set_title("top-k weights (renormalised)", fontsize=9)
    for ax in axes[1:]:  # ".28" for "0.28": the cells are narrow
        for text in ax.texts:
            text.set_text(text.get_text().replace("0.", ".", 1))
    fig.tight_layout()
    return fig


TYPES = [("non_relational", "non-relational"), ("type_count", "count"), ("type_closest", "closest"),
         ("type_furthest", "furthest"), ("accuracy", "overall")]
MODELS = [("ch08_ban_features", f"{model_label('ban')}, features", model_colour("ban"), False),
          ("ch08_ban_relational", f"{model_label('ban')}, from pixels", model_colour("ban"), True),
          ("ch07_coatt_features", f"{model_label('coatt')}, features", model_colour("coatt"), False),
          ("ch07_hiecoatt_features", f"{model_label('hiecoatt')}, features", model_colour("hiecoatt"), False)]


@figure("ch08_results_accuracy")
def results_accuracy_figure():
    """Test accuracy per question type of BAN (features, pixels) beside chapter 7's models on features."""
    fig, ax = plt.subplots(figsize=(8.6, 3.4))
    grouped_bars(ax, MODELS, TYPES)
    ax.set_title("relational set: BAN beside co-attention", fontsize=10)
    fig.tight_layout()
    return fig
