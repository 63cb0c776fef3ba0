"""Figures of chapter 9: comparing the attentions, and choosing."""

import functools
import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import BLUE, GREY, ORANGE, PALETTE, RED, figure, heatmap, record

from attn_tutorial.attention import masked_softmax

TYPES = ["shape", "horizontal", "vertical", "closest", "furthest", "count"]
TYPE_LABELS = ["shape", "left/right", "top/bottom", "closest", "furthest", "count"]
FEATURE_MODELS = [  # (record, label), all on the frozen pretrained region features, cpu profile
    ("ch05_none_features", "no attention"),
    ("ch05_san_features", "stacked (SAN)"),
    ("ch07_coatt_features", "co-attention"),
    ("ch07_hiecoatt_features", "hier. co-attention"),
    ("ch08_ban_features", "bilinear (BAN)"),
    ("ch09_transformer_features", "self-attn. between regions"),
    ("ch09_relnet_features", "relation network"),
]
PIXEL_MODELS = [("ch05_none", "no attention"), ("ch05_san", "stacked (SAN)"), ("ch07_coatt", "co-attention"),
                ("ch07_hiecoatt", "hier. co-attention"), ("ch08_ban", "bilinear (BAN)")]


def _pct(name, key):
    s = record(name)["summary"][key]
    return 100 * s["mean"], 100 * s["std"]


def median_seconds(name):
    """Median seconds per epoch over the recorded seeds."""
    return statistics.median(r["time_per_epoch_s"] for r in record(name)["runs"])


# --- explanatory ---------------------------------------------------------------------------------

def _scene(n=6, seed=3):
    """A tiny scene: n objects at random positions in the unit square, object 0 is the named one."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 2, generator=g)


@figure("ch09_query_vs_pairs")
def query_vs_pairs():
    """One question query gives one row of weights; self-attention between regions scores every pair."""
    positions = _scene()
    n = len(positions)
    colours = torch.eye(n)  # region features: a one-hot colour each (object 0 is "red")
    query = 5.0 * colours[0]  # the question "... the red object ...": a query for the colour red
    row = masked_softmax((query @ colours.T).unsqueeze(0), None)  # (1, n): one query, one row
    sq = (positions ** 2).sum(-1)
    scores = 2 * positions @ positions.T - sq[:, None] - sq[None, :]  # -||p_i - p_j||^2, (n, n)
    itself = torch.eye(n, dtype=torch.bool)
    pairs = masked_softmax(scores / 0.02, ~itself)  # each region over the *other* regions
    closest = int(pairs[0].argmax())

    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.2), gridspec_kw={"width_ratios": [1.0, 1.25, 1.25]})
    ax = axes[0]
    ax.scatter(positions[:, 0], positions[:, 1], s=160, c=[RED] + [GREY] * (n - 1), edgecolor="black")
    for i, (x, y) in enumerate(positions.tolist()):
        ax.text(x, y + 0.07, str(i), ha="center", fontsize=9)
    ax.annotate("", xy=positions[closest].tolist(), xytext=positions[0].tolist(),
                arrowprops=dict(arrowstyle="->", color=BLUE, linewidth=1.5, shrinkA=7, shrinkB=7))
    ax.set(xlim=(-0.1, 1.1), ylim=(-0.1, 1.15), xticks=[], yticks=[], aspect="equal",
           title="scene: 0 is red;\narrow: its closest object")
    labels = [str(i) for i in range(n)]
    heatmap(axes[1], row, ["question"], labels, vmax=1.0, fmt="{:.2f}")
    axes[1].set_title("(a) one query per hop:\nweights over regions", fontsize=10)
    axes[1].set_xlabel("region $j$")
    heatmap(axes[2], pairs, labels, labels, vmax=1.0, fmt="{:.2f}", masked=itself)
    axes[2].add_patch(plt.Rectangle((closest - 0.5, -0.5), 1, 1, fill=False, edgecolor=ORANGE, linewidth=2.0))
    axes[2].set_title("(b) between regions: softmax of\n$-\\|p_i - p_j\\|^2$ over $j \\neq i$", fontsize=10)
    axes[2].set_xlabel("region $j$")
    axes[2].set_ylabel("region $i$")
    fig.tight_layout()
    return fig


@figure("ch09_softmax_count")
def softmax_count():
    """With a finite score gap delta, the mass on the mu matching cells grows with mu: the pooled vector
    tells mu apart, though each matching cell's weight shrinks."""
    cells = 64
    ms = np.arange(1, 7)
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.0))
    for gap, colour in zip((2.0, 4.0, 6.0), PALETTE):
        mass, per_cell = [], []
        for m in ms:
            scores = torch.zeros(1, cells)
            scores[0, :m] = gap  # the m cells sharing the named object's shape score higher
            weights = masked_softmax(scores, None)[0]
            mass.append(100 * float(weights[:m].sum()))
            per_cell.append(100 * float(weights[0]))
        axes[0].plot(ms, mass, "o-", color=colour, label=f"score gap $\\delta = {gap:g}$")
        axes[1].plot(ms, per_cell, "o-", color=colour, label=f"score gap $\\delta = {gap:g}$")
    axes[0].set(xlabel=r"matching cells $n_\mathrm{m}$ (of $N = 64$)", ylabel="weight on the matches (%)", ylim=(0, 100),
                title=r"mass on the $n_\mathrm{m}$ matches: grows with $n_\mathrm{m}$")
    axes[1].set(xlabel=r"matching cells $n_\mathrm{m}$ (of $N = 64$)", ylabel="weight per matching cell (%)", ylim=(0, 100),
                title=r"weight per match: about $1/n_\mathrm{m}$ of the mass")
    axes[0].legend(fontsize=8, frameon=False, loc="lower right")
    for ax in axes:
        ax.set_xticks(ms)
    fig.tight_layout()
    return fig


# --- results -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _floors():
    """Object-blind and majority floors per question type on the cpu test scenes (as the notebook)."""
    import collections

    from attn_tutorial.vqa_data import object_blind_accuracy, relational_split

    test = relational_split("cpu", "test")
    blind = object_blind_accuracy(test)
    answers = collections.defaultdict(collections.Counter)
    for q, t in enumerate(test.question_types):
        answers[t][test.answer_text(q)] += 1
    majority = {t: max(c.values()) / sum(c.values()) for t, c in answers.items()}
    return blind, majority


@figure("ch09_results_per_type")
def results_per_type():
    """Accuracy per question type of the seven models on features, against the two floors."""
    blind, majority = _floors()
    fig, ax = plt.subplots(figsize=(9.6, 3.8))
    width = 0.8 / len(FEATURE_MODELS)
    x = np.arange(len(TYPES))
    for i, ((name, label), colour) in enumerate(zip(FEATURE_MODELS, PALETTE[:6] + ["#444444"])):
        stats = [_pct(name, f"type_{t}") for t in TYPES]
        ax.bar(x + (i - len(FEATURE_MODELS) / 2 + 0.5) * width, [m for m, _ in stats], width,
               yerr=[s for _, s in stats], color=colour, label=label, capsize=1.5, error_kw={"linewidth": 0.8})
    for j, t in enumerate(TYPES):
        ax.hlines(100 * blind[t], j - 0.45, j + 0.45, color="black", linewidth=1.8,
                  label="object-blind floor" if j == 0 else None)
        ax.hlines(100 * majority[t], j - 0.45, j + 0.45, color="black", linewidth=1.0, linestyles=":",
                  label="majority answer" if j == 0 else None)
    ax.set_xticks(x, TYPE_LABELS)
    ax.set(ylabel="test accuracy (%)", ylim=(0, 105))
    ax.legend(fontsize=7.5, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.tight_layout()
    return fig


@figure("ch09_results_mass")
def results_mass():
    """Share of the attention weight on the named object's cell, first step and best step."""
    models = FEATURE_MODELS[1:6]
    fig, ax = plt.subplots(figsize=(8.4, 3.0))
    x = np.arange(len(models))
    for offset, key, label, colour in ((-0.2, "mass_non_relational", "first step", BLUE),
                                       (0.2, "mass_best_non_relational", "best step", ORANGE)):
        for i, (name, _) in enumerate(models):
            if key not in record(name)["summary"]:
                continue  # self-attention between regions returns one map
            mean, std = _pct(name, key)
            ax.bar(x[i] + offset, mean, 0.38, yerr=std, color=colour, capsize=3,
                   label=label if i == 0 else None)
            ax.text(x[i] + offset, min(mean + std, 100) + 2, f"{mean:.0f}", ha="center", fontsize=8)
    ax.axhline(100 / 64, color="black", linestyle=":", linewidth=1.0, label="uniform over 64 cells (1.6 %)")
    ax.set_xticks(x, [label for _, label in models], fontsize=8.5)
    ax.set(ylabel="weight on the named\nobject's cell (%)", ylim=(0, 115))
    ax.legend(fontsize=8, frameon=False, ncol=3, loc="upper left")
    fig.tight_layout()
    return fig


@figure("ch09_results_pixels")
def results_pixels():
    """The five question-guided models trained from pixels and on frozen pretrained features."""
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 3.1), sharey=True)
    x = np.arange(len(PIXEL_MODELS))
    for ax, key, title in ((axes[0], "non_relational", "non-relational questions"),
                           (axes[1], "relational", "relational questions")):
        for offset, suffix, label, colour in ((-0.2, "relational", "from pixels (30 epochs)", GREY),
                                              (0.2, "features", "pretrained features (20 epochs)", BLUE)):
            stats = [_pct(f"{prefix}_{suffix}", key) for prefix, _ in PIXEL_MODELS]
            ax.bar(x + offset, [m for m, _ in stats], 0.38, yerr=[s for _, s in stats], color=colour,
                   capsize=3, label=label)
        ax.set_xticks(x, [label for _, label in PIXEL_MODELS], fontsize=8, rotation=20, ha="right")
        ax.set(title=title, ylim=(0, 105))
    axes[0].set_ylabel("test accuracy (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8.5, frameon=False, ncol=2, loc="lower center", bbox_to_anchor=(0.5, 0.98))
    fig.tight_layout()
    return fig
