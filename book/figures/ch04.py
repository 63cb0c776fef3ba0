"""Figures of chapter 4: difference-sequence attention and differential attention."""

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import BLUE, GREY, ORANGE, PAD_COLOUR, RED, figure, heatmap, model_colour, record, seed_dots, seeds

from attn_tutorial.attention import masked_softmax
from attn_tutorial.differential import first_difference, lambda_init


def signed_heatmap(ax, weights, row_labels, col_labels, vmax):
    """A heatmap for weights of either sign (red negative, blue positive), values written in."""
    w = np.asarray(weights, dtype=float)
    ax.imshow(w, cmap="RdBu", vmin=-vmax, vmax=vmax, aspect="equal")
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            ax.text(j, i, f"{w[i, j]:.2f}".replace("-0.00", "0.00"), ha="center", va="center", fontsize=8,
                    color="white" if abs(w[i, j]) > 0.6 * vmax else "black")
    ax.set_xticks(range(w.shape[1]), col_labels)
    ax.set_yticks(range(w.shape[0]), row_labels)
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


def distractor_share(weights, targets):
    """Share of each row's total |weight| that falls outside the target key, averaged over rows."""
    w = weights.abs()
    on_target = w[torch.arange(len(targets)), targets]
    return (1 - on_target / w.sum(-1)).mean().item()


@figure("ch04_two_maps")
def two_maps_figure():
    """A1, A2 and A1 - lambda A2 for four queries over six keys: the common-mode part cancels."""
    generator = torch.Generator().manual_seed(1)
    targets = torch.tensor([1, 4, 0, 3])  # the relevant key of each query
    target = torch.nn.functional.one_hot(targets, 6)  # (T_q, T_k)
    common = 0.3 * torch.randn(4, 6, generator=generator)  # scores both maps share: attention noise
    s1 = common + 0.4 * target  # map 1 prefers the target, but only slightly
    s2 = common - 6.0 * target  # map 2 sees the same noise and avoids the target
    a1, a2 = masked_softmax(s1, None), masked_softmax(s2, None)  # (T_q, T_k) each
    lam = lambda_init(12)  # a deep layer's starting lambda, about 0.78
    diff = a1 - lam * a2
    keys = [f"$k_{j}$" for j in range(1, 7)]
    queries = [f"$q_{i}$" for i in range(1, 5)]
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 2.5))
    heatmap(axes[0], a1, queries, keys, vmax=1.0)
    heatmap(axes[1], a2, [""] * 4, keys, vmax=1.0)
    signed_heatmap(axes[2], diff, [""] * 4, keys, vmax=1.0)
    for ax, t in zip(axes, range(3)):
        for i, j in enumerate(targets.tolist()):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=ORANGE, linewidth=2))
    axes[0].set_title(f"$\\mathbf{{A}}_1$: off-target share {distractor_share(a1, targets):.0%}", fontsize=10)
    axes[1].set_title(f"$\\mathbf{{A}}_2$: off-target share {distractor_share(a2, targets):.0%}", fontsize=10)
    axes[2].set_title(f"$\\mathbf{{A}}_1 - {lam:.2f}\\,\\mathbf{{A}}_2$: off-target share "
                      f"{distractor_share(diff, targets):.0%}", fontsize=10)
    fig.tight_layout()
    return fig


@figure("ch04_difference_sequence")
def difference_sequence_figure():
    """What article 000's layer reads: x_t, its differences, and the key mask with the fake key."""
    tokens = ["it", "was", "good", "good", "good", "fun", "pad", "pad"]
    lengths = torch.tensor([6])
    mask = torch.arange(8)[None, :] < lengths[:, None]  # (1, T)
    feature = torch.tensor([0.2, -0.4, 1.0, 1.1, 1.15, 0.6, 0.0, 0.0])  # one feature of x_t
    x = feature[None, :, None] * mask[..., None]  # (1, T, 1); padded states are zero
    dx, key_mask = first_difference(x, mask)  # (1, T-1, 1), (1, T-1)
    wrong = mask[:, :-1]  # checks only position t: admits the step into the padding
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.4, 2.7), gridspec_kw={"width_ratios": [1.6, 1]})
    ax.plot(range(8), x[0, :, 0], "o-", color=BLUE, label="state $x_t$ (one feature)")
    for t in range(7):
        colour = BLUE if key_mask[0, t] else (RED if wrong[0, t] else PAD_COLOUR)
        ax.bar(t + 0.5, dx[0, t, 0], width=0.35, color=colour, alpha=0.8 if key_mask[0, t] else 1.0)
    from matplotlib.patches import Patch

    handles = [ax.lines[0], Patch(color=BLUE, alpha=0.8, label=r"key $\Delta x_t = x_{t+1} - x_t$"),
               Patch(color=RED, label="fake key (step into padding)")]
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(8), tokens)
    ax.set_ylim(-1.0, 1.6)
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False, ncol=3)
    ax.set_title("a review of 6 tokens padded to 8", fontsize=10)
    ax.axvspan(5.5, 7.5, color=PAD_COLOUR, alpha=0.4, zorder=0)
    batch = torch.tensor([4, 2, 1])
    m = torch.arange(4)[None, :] < batch[:, None]  # (B, T)
    good = m[:, 1:] & m[:, :-1]
    fake = m[:, :-1] & ~good
    codes = good.float() + 2 * fake.float()  # 1 real key, 2 fake key, 0 no key
    from matplotlib.colors import ListedColormap

    bx.imshow(codes, cmap=ListedColormap([PAD_COLOUR, BLUE, RED]), vmin=0, vmax=2, aspect="equal")
    for i in range(3):
        for j in range(3):
            label = {0: "none", 1: "real", 2: "fake"}[int(codes[i, j])]
            bx.text(j, i, label, ha="center", va="center", fontsize=8, color="white" if codes[i, j] else "black")
    bx.set_xticks(range(3), [r"$\Delta x_1$", r"$\Delta x_2$", r"$\Delta x_3$"])
    bx.set_yticks(range(3), [f"length {n}" for n in batch.tolist()])
    bx.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        bx.spines[side].set_visible(False)
    bx.set_title("keys of a batch padded to $T = 4$", fontsize=10)
    fig.tight_layout()
    return fig


@figure("ch04_lambda_init")
def lambda_init_figure():
    """The starting value of lambda against the depth of the layer."""
    layers = np.arange(1, 25)
    values = [lambda_init(int(l)) for l in layers]
    fig, ax = plt.subplots(figsize=(6.0, 2.3))
    ax.plot(layers, values, "o-", color=BLUE, markersize=3)
    ax.axhline(0.8, color=GREY, linestyle="--", linewidth=0.8)
    ax.text(24, 0.83, "limit 0.8", ha="right", va="bottom", fontsize=8, color=GREY)
    ax.annotate(f"layer 1: {lambda_init(1):.1f} (this course)", (1, lambda_init(1)), (4, 0.22), fontsize=8,
                arrowprops=dict(arrowstyle="->", linewidth=0.6))
    ax.set_xlabel(r"layer $\ell$")
    ax.set_ylabel(r"$\lambda_{\mathrm{init}}(\ell)$")
    ax.set_ylim(0, 0.9)
    fig.tight_layout()
    return fig


@figure("ch04_results_imdb")
def results_imdb_figure():
    """IMDB test accuracy of the three classifiers (a dot per seed), and the time of DIFF relative to MHSA."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.4, 2.9), gridspec_kw={"width_ratios": [1, 1.35]})
    names = [("ch03_mhsa", "mhsa", "MHSA\n(4 heads)"), ("ch04_difference", "difference", "difference-\nsequence"),
             ("ch04_diff", "diff", "DIFF\n(2 heads)")]
    values = [seeds(name, "accuracy") for name, _, _ in names]
    # Dots, not bars: a position carries the accuracy, so an axis that does not start at 0 exaggerates nothing.
    ax.set_ylim(math.floor(2 * min(map(min, values)) - 0.5) / 2, math.ceil(2 * max(map(max, values)) + 0.5) / 2)
    for i, ((name, model, _), v) in enumerate(zip(names, values)):
        seed_dots(ax, i, v, model_colour(model), width=0.4, size=24)
        ax.text(i + 0.24, np.mean(v), f"{np.mean(v):.2f}", va="center", fontsize=8)
    ax.set_xticks(range(3), [label for _, _, label in names])
    ax.set_xlim(-0.5, 2.6)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("IMDB, BiLSTM + ... (a dot per seed, line: mean)", fontsize=10)
    cost = record("ch04_cost")["summary"]
    step = record("ch04_step_time")["summary"]
    diff, difference = model_colour("diff"), model_colour("difference")
    bars = [("DIFF layer, fused path", cost["ratio_diff_sdpa"]["mean"], diff),
            ("DIFF layer, explicit path", cost["ratio_diff_explicit"]["mean"], diff),
            ("DIFF classifier, one step", step["ratio_diff"]["mean"], diff),
            ("difference-seq. classifier, one step", step["ratio_difference"]["mean"], difference)]
    for i, (label, ratio, colour) in enumerate(bars):
        bx.barh(i, ratio, color=colour, height=0.6, alpha=1.0 if "classifier" in label else 0.6)
        bx.text(ratio + 0.03, i, f"{ratio:.2f}×", va="center", fontsize=8)
    bx.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    bx.set_yticks(range(len(bars)), [label for label, _, _ in bars], fontsize=8)
    bx.invert_yaxis()
    bx.set_xlim(0, 2.1)
    bx.set_xlabel("forward + backward time / MHSA's")
    bx.set_title("cost relative to MHSA (equal parameters)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("ch04_results_retrieval")
def results_retrieval_figure():
    """Retrieval among distractors: accuracy and target share of |weight| against length, a dot per seed."""
    rec = record("ch04_retrieval")
    lengths = rec["runs"][0]["extra"]["lengths"]
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 2.8))
    kinds = (("mhsa", "mhsa", "MHSA (4 heads)", 0.95), ("diff", "diff", "DIFF (2 heads)", 1.05))
    for ax, key, percent in ((axes[0], "accuracy", True), (axes[1], "target_mass", False)):
        values = {kind: [seeds("ch04_retrieval", f"{key}_{kind}_T{t}", percent=percent) for t in lengths]
                  for kind, *_ in kinds}
        ax.set_xscale("log", base=2)
        top = 100 if percent else 1
        low = min(min(map(min, v)) for v in values.values())
        ax.set_ylim(max(0, low - 0.08 * top), top * 1.02 if percent else 0.8)
        for kind, model, label, shift in kinds:
            colour = model_colour(model)
            xs = [t * shift for t in lengths]
            ax.plot(xs, [np.mean(v) for v in values[kind]], color=colour, linewidth=1.2, marker="_", markersize=12,
                    markeredgewidth=2.0, label=label)  # the line joins the means
            for x, v in zip(xs, values[kind]):
                seed_dots(ax, x, v, colour, width=0.12 * x, mean=False, size=14)
    for ax in axes:
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.minorticks_off()
        ax.set_xlabel("pairs $T$")
    axes[0].set_ylabel("accuracy (%)")
    axes[1].set_ylabel("target mass (share of |weight|)")
    axes[0].legend(fontsize=8, frameon=False, loc="lower left")
    axes[0].set_title(f"retrieval accuracy (a dot per seed, {len(rec['seeds'])} seeds)", fontsize=10)
    axes[1].set_title("attention on the correct pair", fontsize=10)
    fig.tight_layout()
    return fig
