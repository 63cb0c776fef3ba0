"""Figures of chapter 9: comparing the attentions, and choosing."""

import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import (BLACK, BLUE, DOT_COLOUR, GREY, ORANGE, PALETTE, RED, bar_style, draw_floors, figure, grouped_bars, heatmap,
                     model_colour, model_label, record, seed_dots, seeds)

from attn_tutorial.attention import masked_softmax

TYPES = ["shape", "horizontal", "vertical", "closest", "furthest", "count"]
TYPE_LABELS = ["shape", "left/right", "top/bottom", "closest", "furthest", "count"]
FEATURE_MODELS = [  # (record, model), all on the frozen pretrained region features, cpu profile
    ("ch05_none_features", "none"),
    ("ch05_san_features", "san"),
    ("ch07_coatt_features", "coatt"),
    ("ch07_hiecoatt_features", "hiecoatt"),
    ("ch08_ban_features", "ban"),
    ("ch09_transformer_features", "transformer"),
    ("ch09_relnet_features", "relnet"),
]
PIXEL_MODELS = [("ch05_none", "none"), ("ch05_san", "san"), ("ch07_coatt", "coatt"), ("ch07_hiecoatt", "hiecoatt"),
                ("ch08_ban", "ban")]
SHORT = {"none": "no attention", "san": "stacked (SAN)", "coatt": "co-attention", "hiecoatt": "hier. co-attention",
         "ban": "bilinear (BAN)", "transformer": "self-attn. between regions", "relnet": "relation network"}


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

def _epochs(names) -> str:
    """The epochs the runs of ``names`` trained for, as a legend says it: "30 epochs" or "20-30 epochs"."""
    epochs = sorted({run["epochs_run"] for name in names for run in record(name)["runs"]})
    return f"{epochs[0]} epochs" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]} epochs"


@figure("ch09_results_per_type")
def results_per_type():
    """Accuracy per question type of the seven models on features, every seed, against the two floors."""
    fig, ax = plt.subplots(figsize=(9.6, 3.9))
    grouped_bars(ax, [(name, model_label(key), model_colour(key), False) for name, key in FEATURE_MODELS],
                 [(f"type_{t}", label) for t, label in zip(TYPES, TYPE_LABELS)])
    ax.legend(fontsize=7.5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.tight_layout()
    return fig


def _style_legend(ax, styles, **kw):
    """A legend of bar styles (in black: every model's colour takes them), then what ``ax`` labelled."""
    from matplotlib.patches import Patch

    handles = [Patch(label=label, **bar_style(BLACK, variant)) for label, variant in styles]
    extra, labels = ax.get_legend_handles_labels()
    return handles + extra, [h.get_label() for h in handles] + labels


@figure("ch09_results_mass")
def results_mass():
    """Share of the attention weight on the named object's cell, first step and best step, every seed."""
    models = [(name, key) for name, key in FEATURE_MODELS[1:6]]
    fig, ax = plt.subplots(figsize=(8.4, 3.2))
    ax.set_ylim(0, 115)
    x = np.arange(len(models))
    for offset, key, variant in ((-0.2, "mass_non_relational", True), (0.2, "mass_best_non_relational", False)):
        for i, (name, model) in enumerate(models):
            if key not in record(name)["summary"]:
                continue  # self-attention between regions returns one map
            values = seeds(name, key)
            mean = float(np.mean(values))
            ax.bar(x[i] + offset, mean, 0.38, **bar_style(model_colour(model), variant))
            seed_dots(ax, x[i] + offset, values, DOT_COLOUR, width=0.3, mean=False, size=14)
            ax.text(x[i] + offset, max(values) + 2, f"{mean:.0f}", ha="center", fontsize=8)
    ax.axhline(100 / 64, color="black", linestyle=":", linewidth=1.0, label="uniform over 64 cells (1.6 %)")
    ax.set_xticks(x, [SHORT[key] for _, key in models], fontsize=8.5)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("weight on the named\nobject's cell (%)")
    handles, labels = _style_legend(ax, (("first step", True), ("best step", False)))
    ax.legend(handles, labels, fontsize=8, frameon=False, ncol=3, loc="upper left")
    fig.tight_layout()
    return fig


@figure("ch09_results_pixels")
def results_pixels():
    """The five question-guided models trained from pixels and on frozen pretrained features, every seed,
    against the floors of each group of questions."""
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 3.4), sharey=True)
    x = np.arange(len(PIXEL_MODELS))
    conditions = ((-0.2, "relational", f"from pixels ({_epochs(f'{p}_relational' for p, _ in PIXEL_MODELS)})", True),
                  (0.2, "features", f"pretrained features ({_epochs(f'{p}_features' for p, _ in PIXEL_MODELS)})",
                   False))
    for ax, key, title in ((axes[0], "non_relational", "non-relational questions"),
                           (axes[1], "relational", "relational questions")):
        ax.set_ylim(0, 105)
        for offset, suffix, _, variant in conditions:
            for i, (prefix, model) in enumerate(PIXEL_MODELS):
                values = seeds(f"{prefix}_{suffix}", key)
                ax.bar(x[i] + offset, float(np.mean(values)), 0.38, **bar_style(model_colour(model), variant))
                seed_dots(ax, x[i] + offset, values, DOT_COLOUR, width=0.3, mean=False, size=14)
        draw_floors(ax, [(key, (len(PIXEL_MODELS) - 1) / 2, len(PIXEL_MODELS) / 2)])
        ax.set_xticks(x, [SHORT[model] for _, model in PIXEL_MODELS], fontsize=8, rotation=20, ha="right")
        ax.set(title=title)
        ax.set_yticks(range(0, 101, 20))
    axes[0].set_ylabel("test accuracy (%)")
    handles, labels = _style_legend(axes[0], [(label, variant) for _, _, label, variant in conditions])
    fig.legend(handles, labels, fontsize=8.5, frameon=False, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 0.98))
    fig.tight_layout()
    return fig


def _mean(name: str, key: str, percent: bool = True) -> float:
    return statistics.fmean(seeds(name, key, percent=percent))


def _runs(name: str) -> int:
    return len(record(name)["runs"])


@figure("ch09_results_guide")
def results_guide():
    """Chapter 9's guide as a decision procedure: what the task needs -> which attention, each leaf
    with the recorded evidence behind it (means over the recorded seeds, cpu profile)."""
    from _common import box, arrow

    fig, ax = plt.subplots(figsize=(9.6, 5.6))
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 7.2)
    ax.axis("off")
    pale = {"question": "#eeeeee", "leaf": "#ffffff"}

    def question(x, y, w, text):
        box(ax, (x, y), w, 0.62, text, colour=pale["question"], fontsize=8.5)

    def leaf(x, y, w, h, title, evidence, model=None):
        edge = model_colour(model) if model else BLACK
        from matplotlib.patches import FancyBboxPatch

        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", facecolor="white",
                                    edgecolor=edge, linewidth=1.8))
        ax.text(x + 0.1, y + h - 0.12, title, ha="left", va="top", fontsize=8.5, fontweight="bold")
        ax.text(x + 0.1, y + h - 0.42, evidence, ha="left", va="top", fontsize=7.5, linespacing=1.25)

    question(3.6, 6.45, 4.8, "What must the model do with its input?")
    # three branches
    for x_end in (2.0, 6.0, 10.0):
        arrow(ax, (6.0, 6.45), (x_end, 5.78))
    question(0.1, 5.15, 3.8, "classify a text")
    question(4.1, 5.15, 3.8, "answer a question about an image")
    question(8.1, 5.15, 3.8, "write a sequence")

    # text
    nblr, mhsa, pool = _mean("ch01_nblr", "accuracy"), _mean("ch03_mhsa", "accuracy"), _mean("ch02_attnpool", "accuracy")
    han, linear_long = _mean("ch06_han_imdb", "accuracy"), _mean("ch10_imdb_linear", "accuracy_long")
    leaf(0.1, 3.05, 3.8, 1.85, "first a linear model (ch. 1)",
         f"NB-weighted logistic regression\n{nblr:.1f} % on IMDB, seconds to fit;\n"
         f"attention pooling {pool:.1f} %, MHSA {mhsa:.1f} %\n(ch. 2, 3): attention shows what\nit weighs, not more accuracy here")
    recall_linear = _mean("ch14_mqar_pairs32", "accuracy_linear_d32")
    recall_softmax = _mean("ch14_mqar_pairs32", "accuracy_softmax_d32")
    leaf(0.1, 0.6, 3.8, 2.2, "long or nested input",
         f"sentences in documents: HAN (ch. 6),\n{han:.1f} % on IMDB;\nwhole reviews past the window:\n"
         f"linear attention (ch. 10), {linear_long:.1f} %\non the long ones, where nothing must be\n"
         f"looked up exactly (recall: {recall_linear:.0f} % vs\nsoftmax's {recall_softmax:.0f} %, ch. 14); "
         "exact attention\nwith a fused kernel first (ch. 3, 10)")
    arrow(ax, (2.0, 5.15), (2.0, 4.92))
    arrow(ax, (2.0, 3.05), (2.0, 2.82))
    ax.text(2.1, 2.93, "then, if it is long", fontsize=7, style="italic", va="center")

    # VQA
    def good(name):  # seeds answering >= 98 % of the non-relational and of the counting questions
        runs = record(name)["runs"]
        ok = sum(r["metrics"]["non_relational"] >= 0.98 and r["metrics"]["type_count"] >= 0.98 for r in runs)
        return f"{ok}/{len(runs)} seeds"

    rel, closest = _mean("ch09_transformer_features", "relational"), _mean("ch09_transformer_features", "type_closest")
    relnet = _mean("ch09_relnet_features", "relational")
    easy = _mean("ch05_none_easy", "accuracy")
    leaf(4.1, 3.55, 3.8, 1.35, "find one named object: question-guided",
         f"found and counted on BAN (ch. 8) {good('ch08_ban_features')},\nhierarchical co-attention (ch. 7) "
         f"{good('ch07_hiecoatt_features')},\nSAN (ch. 5) {good('ch05_san_features')}, parallel co-attention "
         f"{good('ch07_coatt_features')};\nreport every seed", model="ban")
    leaf(4.1, 2.05, 3.8, 1.3, "compare two objects: between regions",
         f"self-attention over proposals (ch. 9)\n{rel:.1f} % relational ({good('ch09_transformer_features')}), "
         f"relation\nnetwork {relnet:.1f} %; needs proposals, and\nfinds and counts too, at 2x parameters",
         model="transformer")
    leaf(4.1, 0.75, 3.8, 1.1, "nothing to locate: no attention",
         f"easy-VQA {easy:.2f} % (ch. 5);\nand first: a pretrained image encoder", model="none")
    arrow(ax, (6.0, 5.15), (6.0, 4.92))

    # sequences
    bahdanau, transformer = _mean("ch11_bahdanau", "bleu", False), _mean("ch12_transformer", "bleu", False)
    none = _mean("ch11_none", "bleu", False)
    rope, trigram = _mean("ch13_rope", "ppl_1x", False), _mean("ch13_trigram", "ppl_1x", False)
    speedup = _mean("ch13_generation", "speedup_longest", False)
    leaf(8.1, 3.05, 3.8, 1.85, "translate: encoder-decoder (ch. 11)",
         f"BLEU, EN→ZH: no attention {none:.1f},\nBahdanau {bahdanau:.1f}, Transformer {transformer:.1f};\n"
         "attention removes the bottleneck\nof one vector", model="mt_transformer")
    leaf(8.1, 0.75, 3.8, 2.05, "write text: causal decoder (ch. 13)",
         f"perplexity {rope:.2f} against a\ntrigram's {trigram:.2f} on IMDB;\na key-value cache writes "
         f"{speedup:.1f}× faster\n(512 tokens), grouped-query\nheads shrink it", model="rope")
    arrow(ax, (10.0, 5.15), (10.0, 4.92))
    fig.text(0.5, 0.005, "Means over the recorded seeds, cpu profile, CPU (book/results). Box edges: the model's colour "
             "in the book's other figures.", ha="center", fontsize=7.5)
    fig.tight_layout()
    return fig
