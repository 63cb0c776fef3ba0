"""Figures of chapter 14: associative recall and induction heads."""

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import BLUE, GREY, ORANGE, SKY, figure, heatmap, model_colour, record, seed_dots, seeds

from attn_tutorial.recall import FILLER, IGNORE, MIXERS, mqar_batch

MIXER_MODELS = {"softmax": ("mhsa", "softmax attention"), "linear": ("linear", "linear attention"),
                "diff": ("diff", "differential attention")}


@figure("ch14_mqar_layout")
def mqar_layout_figure():
    """One generated MQAR row of 16 tokens, coloured by role, with the lookup drawn as arrows."""
    n_keys = 8
    ids, targets = mqar_batch(1, 4, 16, n_keys, 8, torch.Generator().manual_seed(3))
    ids, targets = ids[0].tolist(), targets[0].tolist()

    def label(token):
        if token == FILLER:
            return "·"
        return "abcdefgh"[token - 1] if token <= n_keys else str(token - n_keys)

    fig, ax = plt.subplots(figsize=(8.4, 2.8))
    for t, token in enumerate(ids):
        pair = t < 8
        colour = (SKY if t % 2 == 0 else ORANGE) if pair else (BLUE if targets[t] != IGNORE else "#eeeeee")
        ax.add_patch(plt.Rectangle((t, 0), 0.9, 0.9, color=colour, alpha=0.85 if token != FILLER else 1.0))
        ax.text(t + 0.45, 0.45, label(token), ha="center", va="center", fontsize=11,
                color="white" if colour == BLUE else "black")
        ax.text(t + 0.45, -0.35, str(t), ha="center", va="center", fontsize=8, color=GREY)
        if targets[t] != IGNORE:
            source = next(j for j in range(1, 8, 2) if ids[j - 1] == token)  # the value after the key
            ax.annotate("", xy=(source + 0.45, 0.95), xytext=(t + 0.45, 0.95),
                        arrowprops={"arrowstyle": "->", "color": BLUE, "linewidth": 1.0,
                                    "connectionstyle": "arc3,rad=0.3"})
            ax.text(t + 0.45, -0.7, f"→ {label(targets[t])}", ha="center", va="center", fontsize=9, color=BLUE)
    ax.text(3.95, -1.15, "pairs: key, value", ha="center", fontsize=9)
    ax.text(11.95, -1.15, "queries among filler (blue: asked; below: the answer)", ha="center", fontsize=9)
    ax.set_xlim(-0.2, 16)
    ax.set_ylim(-1.4, 3.4)
    ax.axis("off")
    fig.tight_layout()
    return fig


@figure("ch14_induction_patterns")
def induction_patterns_figure():
    """The ideal previous-token and induction patterns on a 12-token sequence repeating n = 6 tokens."""
    length, n = 12, 6
    previous = np.zeros((length, length))
    induction = np.zeros((length, length))
    for t in range(length):
        previous[t, max(t - 1, 0)] = 1.0
        if n <= t < 2 * n:
            induction[t, t - n + 1] = 1.0
        else:
            induction[t, 0] = 1.0  # nothing to copy: rest on the first token
    tokens = list("ABCDEF") * 2
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.8))
    for ax, weights, title in ((axes[0], previous, "previous-token head (layer 1): $t \\to t-1$"),
                               (axes[1], induction, "induction head (layer 2): $t \\to t-n+1$")):
        heatmap(ax, weights, tokens, tokens, vmax=1.0, annotate=False)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key (attended token)")
    axes[0].set_ylabel("query (current token)")
    fig.tight_layout()
    return fig


@figure("ch14_results_mqar")
def results_mqar_figure():
    """MQAR accuracy against width per mixer (a dot per seed, a line through the means), and the state."""
    rec = record("ch14_mqar")
    extra = rec["runs"][0]["extra"]
    widths = list(extra["widths"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 3.0), gridspec_kw={"width_ratios": [1.4, 1]})
    ax.set_ylim(0, 102)
    for shift, mixer in zip((0.93, 1.0, 1.07), MIXERS):
        model, label = MIXER_MODELS[mixer]
        colour = model_colour(model)
        values = [seeds("ch14_mqar", f"accuracy_{mixer}_d{d}") for d in widths]
        xs = [d * shift for d in widths]
        ax.plot(xs, [np.mean(v) for v in values], color=colour, linewidth=1.2, label=label)
        for x, v in zip(xs, values):
            seed_dots(ax, x, v, colour, width=0.06 * x, mean=True, size=14)
        state = [rec["summary"][f"state_{mixer}_d{d}"]["mean"] for d in widths]
        bx.plot(widths, state, color=colour, marker="o", markersize=4, label=label)
    base = record("ch14_mqar_baselines")  # chapter 10's sliding window and chapter 1's LSTM, dashed
    for shift, mixer, colour, label in ((0.86, "window", BLUE, f"sliding window ({base['runs'][0]['extra']['window']} tokens)"),
                                        (1.14, "lstm", GREY, "LSTM (one direction)")):
        values = [seeds("ch14_mqar_baselines", f"accuracy_{mixer}_d{d}") for d in widths]
        xs = [d * shift for d in widths]
        ax.plot(xs, [np.mean(v) for v in values], color=colour, linewidth=1.2, linestyle="--", label=label)
        for x, v in zip(xs, values):
            seed_dots(ax, x, v, colour, width=0.06 * x, mean=True, size=14)
        state = [base["summary"][f"state_{mixer}_d{d}"]["mean"] for d in widths]
        bx.plot(widths, state, color=colour, marker="o", markersize=4, linestyle="--", label=label)
    long = record("ch14_mqar_long")  # the narrowest width, three times the steps: hollow markers to its left
    x_long = widths[0] * 0.72
    for shift, mixer in zip((0.96, 1.04), long["runs"][0]["extra"]["mixers"]):
        colour = model_colour(MIXER_MODELS[mixer][0])
        for value in seeds("ch14_mqar_long", f"accuracy_{mixer}_d{widths[0]}"):
            ax.scatter([x_long * shift], [value], s=22, facecolors="none", edgecolors=colour, zorder=4)
    ax.text(x_long, 80, f"{long['runs'][0]['extra']['steps']:,}\nsteps", fontsize=8, color=GREY, ha="center", va="top")
    ax.axhline(100 / extra["n_values"], color=GREY, linestyle=":", linewidth=1)
    ax.text(widths[-1] * 0.9, 100 / extra["n_values"] + 2, "chance", fontsize=8, color=GREY, ha="right")
    for axis in (ax, bx):
        axis.set_xscale("log", base=2)
        axis.set_xticks(widths, [str(d) for d in widths])
        axis.minorticks_off()
        axis.set_xlabel("model width $D$")
    ax.set_xlim(widths[0] * 0.6, widths[-1] * 1.25)
    ax.set_ylabel("queries answered (%)")
    ax.set_title(f"MQAR, {extra['n_pairs']} pairs in {extra['length']} tokens ({len(rec['seeds'])} seeds)", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="lower right", bbox_to_anchor=(1.0, 0.12))
    bx.set_yscale("log")
    bx.set_ylabel("numbers carried (both layers)")
    bx.set_title(f"state at the last position ($t = {extra['length']}$; softmax = DIFF)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("ch14_results_induction")
def results_induction_figure():
    """The repeat's loss against training step, a line per seed, one and two layers."""
    rec = record("ch14_induction")
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    for layers, colour in (("L1", GREY), ("L2", BLUE)):
        for i, run in enumerate(rec["runs"]):
            curve = np.array(run["extra"]["curves"][layers])
            label = (f"{layers[1]} layer" + ("s" if layers == "L2" else "")) if i == 0 else None
            ax.plot(curve[:, 0], curve[:, 2], color=colour, linewidth=1.0, alpha=0.9, label=label)
    ax.axhline(math.log(64), color="black", linestyle=":", linewidth=1)
    ax.text(0, math.log(64) + 0.1, "$\\ln V$", fontsize=9)
    ax.set_ylim(0, 4.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss on the repeat (nats)")
    ax.set_title(f"repeated random tokens, attention only ({len(rec['seeds'])} seeds)", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    fig.tight_layout()
    return fig


@figure("ch14_results_noisy")
def results_noisy_figure():
    """Noisy recall: accuracy against the noise fraction (a dot per seed), and the learning curves at
    the middle noise level (a line per seed), softmax (two heads, one head) and differential attention."""
    rec = record("ch14_noisy_recall")
    extra = rec["runs"][0]["extra"]
    levels = list(extra["noise"])
    middle = levels[len(levels) // 2]
    models = (("softmax2", "mhsa", "softmax, 2 heads", -0.025, "-"), ("softmax1", "mhsa", "softmax, 1 head", 0.0, "--"),
              ("diff", "diff", "DIFF, 1 head (2 maps)", 0.025, "-"))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 3.0))
    ax.set_ylim(0, 102)
    bx.set_ylim(0, 102)
    for name, model, label, shift, style in models:
        colour = model_colour(model)
        values = [seeds("ch14_noisy_recall", f"accuracy_{name}_p{round(100 * p)}") for p in levels]
        xs = [p + shift for p in levels]
        ax.plot(xs, [np.mean(v) for v in values], color=colour, linewidth=1.2, linestyle=style, label=label)
        for x, v in zip(xs, values):
            seed_dots(ax, x, v, colour, width=0.018, mean=False, size=12, marker="s" if name == "softmax1" else "o")
        for i, run in enumerate(rec["runs"]):
            curve = np.array(run["extra"]["curves"][f"{name}_p{round(100 * middle)}"])
            bx.plot(curve[:, 0], 100 * curve[:, 1], color=colour, linestyle=style, linewidth=0.9, alpha=0.8,
                    label=label if i == 0 else None)
    ax.set_xticks(levels, [f"{p:g}" for p in levels])
    ax.set_xlabel("noise fraction $p$ of the context")
    ax.set_ylabel("queries answered (%)")
    ax.set_title(f"noisy recall ({len(rec['seeds'])} seeds, lr {extra['lr']:g})", fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, frameon=False, loc="upper center", ncol=3)
    bx.set_xlabel("training step")
    bx.set_ylabel("held-out accuracy (%)")
    bx.set_title(f"learning at $p = {middle:g}$, a line per seed", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig
