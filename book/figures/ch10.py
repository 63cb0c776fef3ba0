"""Figures of chapter 10: attention at scale (online softmax, sparse patterns, kernels, axial)."""

import math
import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

from _common import (BLUE, GREEN, GREY, ORANGE, PAD_COLOUR, PURPLE, RED, SKY, arrow, device_label, figure,
                     model_colour, model_label, record, seed_dots)

from attn_tutorial.long_attention import (AxialSelfAttention, causal_linear_attention,
                                          causal_linear_attention_recurrent, dilated_window_mask,
                                          global_tokens_mask, kernel_attention, online_softmax_attention,
                                          orthogonal_random_features, same_row_mask, sliding_window_mask)
from attn_tutorial.mhsa import causal_mask

ROW_COLOURS = [ORANGE, GREEN, PURPLE]


def _bare(ax):
    """No ticks, no spines."""
    ax.set_xticks([]), ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


def _cell_lines(ax, rows, cols, colour, width):
    """Lines between the cells of an imshow grid (one collection each way: cheaper than minor ticks)."""
    ax.hlines(np.arange(-0.5, rows), -0.5, cols - 0.5, color=colour, linewidth=width)
    ax.vlines(np.arange(-0.5, cols), -0.5, rows - 0.5, color=colour, linewidth=width)


def _maybe_record(name, profile="cpu"):
    """The record, or None while it is still being produced (the figure then says so)."""
    try:
        return record(name, profile)
    except LookupError:
        return None


def _no_record(ax, text):
    """An honest empty panel: the record this panel reads does not exist yet."""
    _bare(ax)
    ax.add_patch(plt.Rectangle((0.02, 0.02), 0.96, 0.96, transform=ax.transAxes, fill=False,
                               edgecolor=GREY, linestyle="--", linewidth=1.0))
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, color=GREY)


def fitted_slope(lengths, values) -> float:
    """Least-squares slope of log(value) against log(length) (as attn_tutorial.long_costs)."""
    xs, ys = [math.log(n) for n in lengths], [math.log(max(v, 1e-12)) for v in values]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)


# --- explanatory ---------------------------------------------------------------------------------

@figure("ch10_online_softmax")
def online_softmax_figure():
    """The scores visited one key block at a time; the running max, sum and (unnormalised) output of
    three query rows after each block, ending where one pass over all keys would."""
    generator = torch.Generator().manual_seed(4)
    T, c, d_h = 12, 4, 4
    q, k, v = (torch.randn(T, d_h, generator=generator) * 1.5 for _ in range(3))  # (T, d_h) each
    S = q @ k.T / math.sqrt(d_h)  # (T, T): drawn only; the loop below sees one (T, c) tile at a time
    mu = torch.full((T, 1), float("-inf"))  # running max
    rho = torch.zeros(T, 1)  # running sum of exp(e - mu)
    o = torch.zeros(T, d_h)  # unnormalised output
    mus, rhos, outs = [], [], []
    for start in range(0, T, c):
        tile = q @ k[start:start + c].T / math.sqrt(d_h)  # (T, c)
        new = torch.maximum(mu, tile.amax(1, keepdim=True))
        p = torch.exp(tile - new)
        rho = rho * torch.exp(mu - new) + p.sum(1, keepdim=True)
        o = o * torch.exp(mu - new) + p @ v[start:start + c]
        mu = new
        mus.append(mu[:, 0].clone()), rhos.append(rho[:, 0].clone()), outs.append(o.clone())
    torch.testing.assert_close(o / rho, torch.softmax(S, 1) @ v)
    torch.testing.assert_close(o / rho, online_softmax_attention(q[None, None], k[None, None], v[None, None],
                                                                 block=c)[0, 0])
    mus, rhos, outs = torch.stack(mus, 1), torch.stack(rhos, 1), torch.stack(outs, 1)  # (T, blocks[, d_h])
    blocks = mus.shape[1]
    # three rows to follow: the max rises in the last block / in block 2 only / never after block 1
    rises = mus[:, 1:] > mus[:, :-1]  # (T, blocks - 1)
    picks = []  # rows at least 3 apart, so that their outlines do not touch
    for want in (lambda r: bool(r[-1]), lambda r: bool(r[0]) and not bool(r[-1]), lambda r: not r.any()):
        far = [t for t in range(T) if all(abs(t - p) >= 3 for p in picks)]
        rest = [t for t in far if want(rises[t])]
        picks.append(rest[0] if rest else far[0])
    top = float(S.abs().max())

    fig = plt.figure(figsize=(9.6, 5.6))
    grid = fig.add_gridspec(2, blocks, height_ratios=[1.15, 1.0], hspace=0.45, wspace=0.25)
    for b in range(blocks):
        ax = fig.add_subplot(grid[0, b])
        shown = np.full((T, T), np.nan)
        shown[:, b * c:(b + 1) * c] = S[:, b * c:(b + 1) * c].numpy()
        ax.imshow(np.zeros((T, T)), cmap=ListedColormap(["white"]), aspect="equal")
        if b:  # tiles already folded into mu, rho, o: gone from memory
            ax.add_patch(plt.Rectangle((-0.5, -0.5), b * c, T, color=PAD_COLOUR, zorder=1))
            ax.text(b * c / 2 - 0.5, T / 2 - 0.5, "done", ha="center", va="center", fontsize=8, color="black",
                    rotation=90, zorder=2)
        image = ax.imshow(shown, cmap="RdBu_r", vmin=-top, vmax=top, aspect="equal", zorder=3)
        ax.add_patch(plt.Rectangle((b * c - 0.5, -0.5), c, T, fill=False, edgecolor="black", linewidth=1.8, zorder=4))
        for colour, t in zip(ROW_COLOURS, picks):
            ax.add_patch(plt.Rectangle((-0.5, t - 0.5), T, 1, fill=False, edgecolor=colour, linewidth=1.6, zorder=5))
        ax.set_xlim(-0.5, T - 0.5), ax.set_ylim(T - 0.5, -0.5)
        ax.set_xticks([b * c, (b + 1) * c - 1], [f"{b * c}", f"{(b + 1) * c - 1}"], fontsize=8)
        ax.set_yticks(picks, [f"t={t}" for t in picks], fontsize=8)
        for label, colour in zip(ax.get_yticklabels(), ROW_COLOURS):
            label.set_color(colour)
        ax.tick_params(length=0)
        ax.set_xlabel("key $s$", fontsize=9)
        ax.set_title(f"block {b + 1}: keys {b * c}–{(b + 1) * c - 1}\n"
                     f"tile of ${T} \\times {c}$ scores in memory", fontsize=9)
    bar = fig.colorbar(image, cax=ax.inset_axes([1.04, 0.0, 0.05, 1.0]))
    bar.set_label("score $S_{ts}$", fontsize=8)
    bar.ax.tick_params(labelsize=8)
    steps = range(1, blocks + 1)
    weights = torch.exp(S - S.amax(1, keepdim=True))  # (T, T): every key at once, for the stars
    panels = ((mus, S.amax(1), r"running max $\mu_t$", "score"),
              (rhos, weights.sum(1), r"running sum $\rho_t$", None),
              (outs[:, :, 0], (weights @ v)[:, 0], r"running output $o_{t,1}$" "\n"
               r"(1st of $d_h$ components; $\mathbf{c}_t = \mathbf{o}_t / \rho_t$ at the end)", None))
    for j, (values, exact, name, ylabel) in enumerate(panels):
        ax = fig.add_subplot(grid[1, j % blocks])
        for colour, t in zip(ROW_COLOURS, picks):
            ax.plot(steps, values[t], "o-", color=colour, label=f"query $t = {t}$")
            ax.plot(blocks + 0.25, exact[t], marker="*", markersize=11, color=colour, linestyle="none")
        ax.set_xticks(list(steps), [str(b) for b in steps], fontsize=8)
        ax.set_xlabel("after key block", fontsize=9)
        ax.set_xlim(0.7, blocks + 0.5)
        ax.tick_params(labelsize=8)
        ax.set_title(name, fontsize=9)
        if ylabel:
            ax.set_ylabel(ylabel, fontsize=9)
        if values is rhos:
            ax.set_ylim(bottom=0)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.plot([], [], marker="*", markersize=11, color=GREY, linestyle="none", label="over all keys at once")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


@figure("ch10_patterns")
def patterns_figure():
    """Four T x T masks: causal, sliding window, dilated window, window + global tokens."""
    T = 24
    window = sliding_window_mask(T, 3)
    glob = global_tokens_mask(T, [0, T // 2])
    masks = [(causal_mask(T).long(), r"causal ($s \leq t$)"),
             (window.long(), "sliding window, $w = 3$"),
             (dilated_window_mask(T, 2, 3).long(), "dilated window,\n$w = 2$, dilation 3"),
             ((window | glob).long() + (glob & ~window).long(), f"window $w = 3$ + global\ntokens {0} and {T // 2}")]
    fig, axes = plt.subplots(1, 4, figsize=(10.0, 3.3))
    colours = ListedColormap(["white", BLUE, ORANGE])
    for ax, (mask, name) in zip(axes, masks):
        ax.imshow(mask, cmap=colours, vmin=0, vmax=2, aspect="equal", interpolation="nearest")
        _cell_lines(ax, T, T, "#eeeeee", 0.4)
        ax.set_xticks([0, 6, 12, 18, 23]), ax.set_yticks([0, 6, 12, 18, 23])
        ax.tick_params(labelsize=8)
        for side in ax.spines.values():
            side.set_visible(True)
            side.set_color(GREY)
        pairs = int((mask > 0).sum())
        ax.set_title(f"{name}\n{pairs} of {T * T} pairs", fontsize=9)
        ax.set_xlabel("key $s$", fontsize=9)
    axes[0].set_ylabel("query $t$", fontsize=9)
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=BLUE, label="may attend"),
                        Patch(color=ORANGE, label="added by the global tokens")],
               loc="lower center", ncol=2, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.04))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def _matrix(ax, m, x, y, label, vmax, cmap="Blues", fontsize=9, below=False):
    """Draw matrix ``m`` (rows, cols) with its top-left corner at (x, y), one unit per entry."""
    rows, cols = m.shape
    ax.imshow(m, cmap=cmap, vmin=0, vmax=vmax, extent=(x, x + cols, y - rows, y), aspect="equal",
              interpolation="nearest", zorder=2)
    ax.add_patch(plt.Rectangle((x, y - rows), cols, rows, fill=False, edgecolor="black", linewidth=0.8, zorder=3))
    if below:
        ax.text(x + cols / 2, y - rows - 0.6, label, ha="center", va="top", fontsize=fontsize)
    else:
        ax.text(x + cols / 2, y + 0.6, label, ha="center", va="bottom", fontsize=fontsize)
    return x + cols


def _feature_map(projection):
    """Positive random features exp(w^T x - |x|^2 / 2) / sqrt(n_phi) (FAVOR+ without its stabiliser)."""
    return lambda x: torch.exp(x @ projection.T - x.square().sum(-1, keepdim=True) / 2) / math.sqrt(len(projection))


@figure("ch10_linear_attention")
def linear_attention_figure():
    """The two orders of phi(Q) phi(K)^T V as boxes of their sizes, and the causal recurrence."""
    generator = torch.Generator().manual_seed(2)
    T, d_h, n_phi = 10, 3, 4
    q, k = (torch.randn(T, d_h, generator=generator) * d_h ** -0.25 for _ in range(2))  # (T, d_h)
    v = torch.rand(T, d_h, generator=generator)  # (T, d_h), positive so that one colour scale shows all
    phi = _feature_map(orthogonal_random_features(n_phi, d_h, generator))
    fq, fk = phi(q), phi(k)  # (T, n_phi)
    kernel = fq @ fk.T  # (T, T): the quadratic order's intermediate
    slow = kernel @ v  # (T, d_h)
    summary = fk.T @ v  # (n_phi, d_h): the linear order's intermediate
    fast = fq @ summary  # (T, d_h)
    torch.testing.assert_close(slow, fast)
    torch.testing.assert_close(slow / kernel.sum(1, keepdim=True),
                               kernel_attention(fq[None, None], fk[None, None], v[None, None])[0, 0])
    cost_slow = T * T * n_phi + T * T * d_h  # multiply-adds of each order
    cost_fast = n_phi * T * d_h + T * n_phi * d_h
    # causal: Gamma_t = Gamma_{t-1} + phi(k_t)^T v_t, gamma_t = gamma_{t-1} + phi(k_t)
    gammas = torch.cumsum(fk[:, :, None] * v[:, None, :], dim=0)  # (T, n_phi, d_h): Gamma_1 ... Gamma_T
    outputs = causal_linear_attention_recurrent(q[None, None], k[None, None], v[None, None], phi)[0, 0]
    torch.testing.assert_close(outputs, causal_linear_attention(q[None, None], k[None, None], v[None, None], phi)[0, 0])
    torch.testing.assert_close(outputs[-1], fq[-1] @ gammas[-1] / (fq[-1] @ fk.sum(0)))

    fig, ax = plt.subplots(figsize=(9.6, 7.4))
    ax.axis("off")
    top = max(float(kernel.max()), float(slow.max()))
    feat = float(torch.cat([fq, fk]).max())

    def op(x, y, text):
        ax.text(x, y, text, ha="center", va="center", fontsize=14)
        return x + 1.4

    # row 1: (phi(Q) phi(K)^T) V
    y = 31.0
    ax.text(0, y + 4.3, r"quadratic order: $(\phi(\mathbf{Q})\,\phi(\mathbf{K})^\top)\,\mathbf{V}$"
            f"  —  {cost_slow} multiply-adds, a ${T} \\times {T}$ matrix in memory", fontsize=10, weight="bold")
    x = _matrix(ax, fq.numpy(), 0, y, rf"$\phi(\mathbf{{Q}})$" "\n" rf"${T} \times {n_phi}$", feat)
    x = op(x + 0.7, y - T / 2, r"$\cdot$")
    x = _matrix(ax, fk.T.numpy(), x, y - (T - n_phi) / 2, rf"$\phi(\mathbf{{K}})^\top$" "\n"
                rf"${n_phi} \times {T}$", feat)
    x = op(x + 0.7, y - T / 2, "=")
    x = _matrix(ax, kernel.numpy(), x, y, rf"$\phi(\mathbf{{Q}})\phi(\mathbf{{K}})^\top$: ${T} \times {T}$",
                top, cmap="Oranges")
    x = op(x + 0.7, y - T / 2, r"$\cdot$")
    x = _matrix(ax, v.numpy(), x, y, r"$\mathbf{V}$" "\n" rf"${T} \times {d_h}$", 1.0, cmap="Greens")
    x = op(x + 0.7, y - T / 2, "=")
    right = _matrix(ax, slow.numpy(), x, y, "output\n" rf"${T} \times {d_h}$", top, cmap="Purples")

    # row 2: phi(Q) (phi(K)^T V)
    y = 14.0
    ax.text(0, y + 4.3, r"linear order: $\phi(\mathbf{Q})\,(\phi(\mathbf{K})^\top \mathbf{V})$"
            f"  —  {cost_fast} multiply-adds, a ${n_phi} \\times {d_h}$ summary in memory",
            fontsize=10, weight="bold")
    x = _matrix(ax, fk.T.numpy(), 0, y - (T - n_phi) / 2, rf"$\phi(\mathbf{{K}})^\top$" "\n"
                rf"${n_phi} \times {T}$", feat)
    x = op(x + 0.7, y - T / 2, r"$\cdot$")
    x = _matrix(ax, v.numpy(), x, y, r"$\mathbf{V}$" "\n" rf"${T} \times {d_h}$", 1.0, cmap="Greens")
    x = op(x + 0.7, y - T / 2, "=")
    x = _matrix(ax, summary.numpy(), x, y - (T - n_phi) / 2, "summary\n" rf"${n_phi} \times {d_h}$",
                float(summary.max()), cmap="Oranges")
    x += 2.5
    x = _matrix(ax, fq.numpy(), x, y, rf"$\phi(\mathbf{{Q}})$" "\n" rf"${T} \times {n_phi}$", feat)
    x = op(x + 0.7, y - T / 2, r"$\cdot$")
    x = _matrix(ax, summary.numpy(), x, y - (T - n_phi) / 2, "summary", float(summary.max()), cmap="Oranges")
    x = op(x + 0.7, y - T / 2, "=")
    _matrix(ax, fast.numpy(), x, y, "output\n" rf"${T} \times {d_h}$ (the same)", top, cmap="Purples")

    # row 3: causal form as an RNN over t
    y, steps = -2.6, 4
    ax.text(0, y + 3.0, r"causal form, one token at a time: "
            r"$\boldsymbol{\Gamma}_t = \boldsymbol{\Gamma}_{t-1} + \phi(\mathbf{k}_t)^\top \mathbf{v}_t$, "
            r"$\mathbf{c}_t = \phi(\mathbf{q}_t)\,\boldsymbol{\Gamma}_t \,/\, "
            r"\phi(\mathbf{q}_t)\,\boldsymbol{\gamma}_t^\top$"
            f"  —  state ${n_phi} \\times {d_h}$ at every $t$", fontsize=10, weight="bold")
    vmax = float(gammas[steps - 1].max())
    x = 1.0
    ax.add_patch(plt.Rectangle((x, y - n_phi), d_h, n_phi, fill=False, edgecolor="black", linestyle="--", linewidth=0.8))
    ax.text(x + d_h / 2, y - n_phi / 2, "0", ha="center", va="center", fontsize=9)
    ax.text(x + d_h / 2, y - n_phi - 0.6, r"$\boldsymbol{\Gamma}_0$", ha="center", va="top", fontsize=10)
    x += d_h
    for t in range(1, steps + 1):
        nxt = x + 6.5
        arrow(ax, (x + 0.2, y - n_phi / 2), (nxt - 0.2, y - n_phi / 2))
        ax.text((x + nxt) / 2, y - n_phi / 2 - 0.5, f"$+\\phi(\\mathbf{{k}}_{t})^\\top \\mathbf{{v}}_{t}$",
                ha="center", va="top", fontsize=8)
        _matrix(ax, gammas[t - 1].numpy(), nxt, y, rf"$\boldsymbol{{\Gamma}}_{t}$", vmax, cmap="Oranges",
                below=True, fontsize=10)
        arrow(ax, (nxt + d_h / 2, y + 0.1), (nxt + d_h / 2, y + 1.6))
        ax.text(nxt + d_h / 2 + 0.3, y + 1.0, f"$\\mathbf{{c}}_{t}$", ha="left", va="center", fontsize=10)
        x = nxt + d_h
    arrow(ax, (x + 0.2, y - n_phi / 2), (x + 2.5, y - n_phi / 2))
    ax.text(x + 2.8, y - n_phi / 2, r"$\cdots$ (the same size for any $T$)", ha="left", va="center", fontsize=9)
    ax.set_xlim(-0.5, max(right, x + 12) + 0.5)
    ax.set_ylim(y - n_phi - 2.5, 36.5)
    ax.set_aspect("equal")
    return fig


@figure("ch10_axial")
def axial_figure():
    """Which cells of a 4 x 6 grid reach cell (0, 0) after the row step and after both steps."""
    torch.manual_seed(0)
    rows, cols, D = 4, 6, 8
    layer = AxialSelfAttention(D, 2, rows, cols)
    x = torch.randn(1, rows * cols, D, requires_grad=True)  # (B, N, D), row-major cells

    def reach(out):  # (N,) bool: cells whose input changes cell (0, 0)'s output
        grad, = torch.autograd.grad(out[0, 0].sum(), x)
        return (grad[0].abs().sum(-1) > 0).view(rows, cols)

    row_only = reach(layer.along_rows(x, attn_mask=same_row_mask(rows, cols))[0])  # step 1 alone
    both = reach(layer(x))
    row_pairs = int(same_row_mask(rows, cols).sum())
    col_pairs = int(same_row_mask(cols, rows).sum())  # columns of the grid are rows of its transpose
    N = rows * cols

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.4))
    for ax, reached, title in ((axes[0], row_only, "after step 1 (along rows)"),
                               (axes[1], both, "after step 2 (then along columns)")):
        codes = reached.long()
        codes[0, 0] = 2
        ax.imshow(codes, cmap=ListedColormap(["white", SKY, ORANGE]), vmin=0, vmax=2, aspect="equal")
        _cell_lines(ax, rows, cols, "black", 0.8)
        ax.set_xticks(range(cols)), ax.set_yticks(range(rows))
        ax.set_xlabel("column", fontsize=9), ax.set_ylabel("row", fontsize=9)
        ax.tick_params(labelsize=8, length=0)
        ax.set_title(f"{title}:\n{int(reached.sum())} of {N} cells reach cell (0, 0)", fontsize=10)
        ax.text(0, 0, "(0, 0)", ha="center", va="center", fontsize=8)
    # one two-step path: a cell reaches (0, 0) through the cell in its row and in column 0
    r, c = rows - 2, cols - 2
    axes[1].annotate("", xy=(0.15, r), xytext=(c - 0.15, r),
                     arrowprops=dict(arrowstyle="->", color=RED, linewidth=1.8))
    axes[1].annotate("", xy=(0, 0.25), xytext=(0, r - 0.15),
                     arrowprops=dict(arrowstyle="->", color=RED, linewidth=1.8))
    axes[1].text(c / 2, r + 0.38, "step 1", ha="center", va="center", fontsize=8, color=RED)
    axes[1].text(0.12, r / 2, "step 2", ha="left", va="center", fontsize=8, color=RED, rotation=90)
    axes[1].plot(c, r, "o", color=RED, markersize=5)
    fig.text(0.5, -0.06, f"pairs scored: {row_pairs} (rows) + {col_pairs} (columns) = {row_pairs + col_pairs}"
             f" $= N(N_r + N_c)$, against $N^2 = {N * N}$ for full attention over the $N = {N}$ cells",
             ha="center", fontsize=9)
    fig.tight_layout()
    return fig


# --- results -------------------------------------------------------------------------------------

CURVE_STYLE = {  # kind -> (label, model whose colour it takes, exact?)
    "explicit": ("explicit", "explicit", True), "sdpa": ("SDPA (fused)", "exact", True),
    "online": ("online softmax, $c$ = 256", "online", True), "chunked": ("query chunks of 256", "chunked", True),
    "window": ("window, $w$ = 128", "window", False), "linformer": ("Linformer, $r$ = 128", "linformer", False),
    "linear": (model_label("linear"), "linear", False), "performer": (r"Performer, $n_\phi$ = 128", "performer", False),
}


@figure("ch10_results_curves")
def results_curves_figure():
    """Forward+backward time and forward peak memory against T per variant (log-log), with slopes."""
    rec = _maybe_record("ch10_curves")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.4))
    if rec is None:
        for ax, title in zip(axes, ("forward + backward time against $T$", "peak memory (forward) against $T$")):
            _no_record(ax, "no record yet:\nbook/results/ch10_curves/cpu.json\nis still being measured")
            ax.set_title(title, fontsize=10)
        return fig
    run = rec["runs"][0]
    rows = run["extra"]["rows"]
    kinds = [k for k in CURVE_STYLE if any(r["kind"] == k for r in rows)]
    kinds += sorted({r["kind"] for r in rows} - set(kinds))
    lengths = sorted({r["length"] for r in rows})
    fit_from = min(1024, max(lengths))
    for ax, key, scale, unit in ((axes[0], "train_ms", 1.0, "forward + backward time (ms)"),
                                 (axes[1], "forward_bytes", 1 / 2 ** 20, "peak memory, forward (MB)")):
        for kind in kinds:
            label, model, exact = CURVE_STYLE.get(kind, (kind, None, False))
            colour = model_colour(model) if model else "black"
            mine = sorted((r for r in rows if r["kind"] == kind and r[key] > 0), key=lambda r: r["length"])
            if not mine:
                continue
            xs, ys = [r["length"] for r in mine], [r[key] * scale for r in mine]
            fit = [(n, y) for n, y in zip(xs, ys) if n >= fit_from]
            slope = f", slope {fitted_slope(*zip(*fit)):.2f}" if len(fit) >= 2 else ""
            ax.plot(xs, ys, marker="o", markersize=3.5, color=colour, linestyle="-" if exact else "--",
                    label=label + slope)
            if key == "train_ms" and not exact:  # where it first beats SDPA for good: a ring and the length
                sdpa = {r["length"]: r[key] for r in rows if r["kind"] == "sdpa" and r[key] > 0}
                faster = [n for n, y in zip(xs, ys) if n in sdpa and y < sdpa[n]]
                if faster and all(y < sdpa[n] for n, y in zip(xs, ys) if n in sdpa and n >= faster[0]):
                    first = faster[0]
                    y0 = ys[xs.index(first)]
                    ax.scatter([first], [y0], s=60, facecolors="none", edgecolors=colour, linewidths=1.2, zorder=5)
                    ax.annotate(f"{first:,}", (first, y0), xytext=(0, -11), textcoords="offset points",
                                ha="center", fontsize=7, color=colour)
        ax.set_xscale("log", base=2), ax.set_yscale("log")
        ax.set_xticks(lengths, [f"{n:,}" if n < 1000 else f"{n // 1024}K" for n in lengths])
        ax.minorticks_off()
        ax.set_xlabel("length $T$")
        ax.set_ylabel(unit)
        ax.grid(True, which="major", color="#eeeeee", linewidth=0.6)
        ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2,
                  handlelength=2.2, columnspacing=1.0)
    shape = rows[0]
    axes[0].set_title(f"time (slope fitted for $T \\geq$ {fit_from:,}; ring: faster than SDPA from here)", fontsize=10)
    axes[1].set_title(f"memory above the inputs (slope for $T \\geq$ {fit_from:,})", fontsize=10)
    fig.suptitle(f"one attention layer, batch {shape['batch']}, $h$ = {shape['heads']} heads of "
                 f"$d_h$ = {shape['head_dim']}; solid: exact, dashed: restricted or approximate  "
                 f"({rec['profile']} profile, {device_label(rec['device'])})", fontsize=9, y=0.99)
    fig.tight_layout()
    return fig


APPROX_STYLE = {  # method in the record -> (label, model whose colour it takes, marker)
    "Performer, m features": (r"Performer, $n_\phi$ features", "performer", "o"),
    "Linformer (random), rank r": (r"Linformer (random $\mathbf{E}$), rank $r$", "linformer", "s"),
    "best rank r (SVD)": (r"best rank $r$ (SVD of $\mathbf{A}$)", "svd", "^"),
    "sliding window, w": (r"sliding window, half-width $w$", "window", "D"),
    "linear (elu + 1)": ("linear (elu + 1), no budget", "linear", None),
}


@figure("ch10_results_approx")
def results_approx_figure():
    """Error of each approximation against its budget, diffuse and focused inputs: a dot per input seed,
    a line through the means; linear attention (no budget) in a slot of its own beside the plain average."""
    rec = _maybe_record("ch10_approx")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.2), sharey=True)
    if rec is None:
        for ax in axes:
            _no_record(ax, "no record yet:\nbook/results/ch10_approx/cpu.json")
        return fig
    extra = rec["runs"][0]["extra"]
    rows = extra["rows"]
    seeds = sorted({r["seed"] for r in rows})
    methods = [m for m in APPROX_STYLE if any(r["method"] == m for r in rows)]
    methods += sorted({r["method"] for r in rows} - set(methods))
    budgets = sorted({r["budget"] for r in rows if r["budget"] is not None})
    none_slot = budgets[-1] * 2.4  # where a method without a budget shows its seeds
    regimes = sorted(extra["scales"].items(), key=lambda item: item[1])
    errors = [r["error"] for r in rows if r["error"] > 0]
    axes[0].set_yscale("log")
    axes[0].set_ylim(min(errors) / 4, max(errors) * 4)  # before the dots: they spread by the axis's span
    for ax, (regime, scale) in zip(axes, regimes):
        ax.set_xscale("log", base=2)
        ax.set_xlim(budgets[0] / 1.5, none_slot * 1.6)
        mine = [r for r in rows if r["scale"] == scale]
        keys = statistics.fmean(r["effective_keys"] for r in mine if r["method"] == mine[0]["method"])
        for method in methods:
            label, model, marker = APPROX_STYLE.get(method, (method, None, "o"))
            colour = model_colour(model) if model else "black"
            if marker is None:  # no budget: its seeds and mean in a slot of their own, off the dotted line's text
                values = [r["error"] for r in mine if r["method"] == method]
                mean = statistics.fmean(values)
                seed_dots(ax, none_slot, values, colour, width=0.5 * none_slot, size=22, zorder=4, label=label)
                ax.annotate(f"{mean:.2f}", (none_slot, mean), xytext=(0, -9), textcoords="offset points",
                            ha="center", va="top", fontsize=8, color=colour)
                continue
            xs, means, per_seed = [], [], []
            for b in budgets:
                values = [r["error"] for r in mine if r["method"] == method and r["budget"] == b]
                if values:
                    xs.append(b), means.append(statistics.fmean(values)), per_seed.append(values)
            ax.plot(xs, means, marker=marker, markersize=4, color=colour, label=label, linewidth=1.3)
            for x, values in zip(xs, per_seed):
                seed_dots(ax, x, values, colour, width=0.3 * x, mean=False, size=7, zorder=2.5)
        ax.axvline(math.sqrt(budgets[-1] * none_slot), color=GREY, linewidth=0.6)
        ax.set_xticks(budgets + [none_slot], [str(b) for b in budgets] + ["no\nbudget"])
        ax.minorticks_off()
        ax.grid(True, which="major", color="#eeeeee", linewidth=0.6)
        ax.set_xlabel(r"budget: $n_\phi$, $r$ or $w$")
        ax.set_title(f"{regime} (scale {scale}): {keys:.0f} effective keys of {extra['length']:,}", fontsize=10)
    for ax in axes:  # the error of uniform weights (a plain average of the values)
        ax.axhline(1.0, color="black", linestyle=":", linewidth=1.0, zorder=1)
        ax.text(ax.get_xlim()[0] * 1.05, 1.12, "plain average of V: 1", ha="left", va="bottom", fontsize=7.5)
    axes[0].set_ylabel(r"error $\|\mathbf{O}_{\mathrm{approx}} - \mathbf{O}\|_F \,/\, "
                       r"\|\mathbf{O} - \bar{\mathbf{v}}\|_F$")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"$T$ = {extra['length']:,}, $d_h$ = {extra['head_dim']}; a dot per input seed, lines through the "
                 f"means of {len(seeds)} seeds ({rec['profile']} profile, {device_label(rec['device'])})", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


IMDB_FULL = [("ch10_imdb_exact", "exact (SDPA)", "exact"), ("ch10_imdb_window", "window, $w$ = 128", "window"),
             ("ch10_imdb_linformer", "Linformer, $r$ = 128", "linformer"),
             ("ch10_imdb_linear", "linear (elu + 1)", "linear")]
CH03_LONG = [("accuracy_truncate", "truncate"), ("accuracy_head_tail", "head + tail"),
             ("accuracy_chunks", "chunks, averaged")]


def _seeds(name, key):
    """Every seed's value of a metric in percent, or None while the record (or metric) is missing."""
    rec = _maybe_record(name)
    if rec is None or key not in rec["summary"]:
        return None
    return [100 * run["metrics"][key] for run in rec["runs"]]


@figure("ch10_results_imdb")
def results_imdb_figure():
    """IMDB accuracy without truncation per variant, on the long reviews and on the whole test set:
    a dot per seed, a line at the mean."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.8, 4.0), gridspec_kw={"width_ratios": [7, 5]})
    mhsa = model_colour("mhsa")
    long_dots = [(f"ch. 3, 400 tokens:\n{label}", _seeds("ch03_long", key), mhsa) for key, label in CH03_LONG]
    long_dots += [(f"full length:\n{label}", _seeds(name, "accuracy_long"), model_colour(model))
                  for name, label, model in IMDB_FULL]
    all_dots = [("ch. 3, 400 tokens:\ntruncate", _seeds("ch03_mhsa", "accuracy"), mhsa)]
    all_dots += [(f"full length:\n{label}", _seeds(name, "accuracy"), model_colour(model))
                 for name, label, model in IMDB_FULL]
    present = [v for _, values, _ in long_dots + all_dots if values is not None for v in values]
    # Dots, not bars: a position carries the accuracy, so an axis that does not start at 0 exaggerates nothing.
    bottom = math.floor(min(present) - 1.0) if present else 80
    top = min(100, math.ceil(max(present) + 1.5)) if present else 100
    for axis, dots, title in ((ax, long_dots, "test reviews longer than 400 tokens"),
                              (bx, all_dots, "all test reviews")):
        axis.set_ylim(bottom, top)
        for i, (label, values, colour) in enumerate(dots):
            if values is None:
                axis.text(i, bottom + 0.4, "no record\nyet", ha="center", va="bottom", fontsize=8, color=GREY,
                          rotation=90)
                continue
            seed_dots(axis, i, values, colour, width=0.5, size=20)
            axis.text(i + 0.3, np.mean(values), f"{np.mean(values):.1f}", va="center", fontsize=8)
        axis.set_xlim(-0.5, len(dots) - 0.3)
        axis.set_xticks(range(len(dots)), [label for label, _, _ in dots], fontsize=8, rotation=35, ha="right",
                        rotation_mode="anchor")
        axis.set_title(title, fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    ax.set_ylabel("IMDB test accuracy (%)")
    bx.set_ylabel("test accuracy (%)")
    long_rec = _maybe_record("ch03_long")
    n_long = long_rec["runs"][0]["extra"].get("n_long") if long_rec else None
    note = f"{n_long:,} of the test reviews are longer than 400 tokens; " if n_long else ""
    devices = sorted({device_label(rec["device"]) for rec in map(_maybe_record, ["ch03_long", "ch03_mhsa"]
                                                                 + [n for n, _, _ in IMDB_FULL]) if rec is not None})
    n_seeds = sorted({len(values) for _, values, _ in long_dots + all_dots if values is not None})
    seeds_text = "/".join(str(n) for n in n_seeds)
    fig.suptitle(f"{note}a dot per seed ({seeds_text} seeds), a line at the mean (cpu profile; {', '.join(devices)})",
                 fontsize=9)
    fig.tight_layout()
    return fig
