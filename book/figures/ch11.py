"""Figures of chapter 11: translation with an encoder-decoder, Bahdanau attention and the Transformer."""

import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import (BLUE, DOT_COLOUR, GREEN, GREY, ORANGE, PURPLE, SKY, YELLOW, arrow, bar_style, box, chinese_font,
                     device_label, diagram_axes, figure, model_colour, record, seed_dots)

from attn_tutorial.decoding import TableModel, beam_search, greedy_decode

MODELS = (("ch11_none_init", "no attention,\nfirst state only", model_colour("mt_none_init")),
          ("ch11_none", "no attention,\nevery step", model_colour("mt_none")),
          ("ch11_bahdanau", "Bahdanau\nattention", model_colour("bahdanau")),
          ("ch12_transformer", "Transformer", model_colour("mt_transformer")))


def _with_chinese(draw):
    """Draw with DejaVu Sans, falling back to a Chinese font for the characters it lacks."""
    def wrapped():
        with plt.rc_context({"font.family": ["DejaVu Sans", chinese_font()]}):
            return draw()

    wrapped.__doc__ = draw.__doc__
    return wrapped


def _runs(name):
    return record(name)["runs"]


def _seed0(name):
    return next(run for run in _runs(name) if run["seed"] == 0)


@figure("ch11_bottleneck")
@_with_chinese
def bottleneck():
    """Without attention the decoder sees one vector; with it, every step weighs every encoder state."""
    words, chars = ["Tom", "is", "reading", "a", "book", "."], ["汤", "姆", "在", "看", "书", "。"]
    # an illustration: a near-diagonal alignment, as trained models often learn for such a sentence
    scores = -((torch.arange(6.0)[None, :] - torch.tensor([0.3, 0.7, 1.6, 2.2, 4.0, 5.0])[:, None]) ** 2) / 0.3
    weights = torch.softmax(scores, -1)  # (characters, words)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, attention in zip(axes, (False, True)):
        ax.set_xlim(-0.6, 7.2), ax.set_ylim(-0.4, 3.6), ax.axis("off")
        for j, word in enumerate(words):
            box(ax, (j - 0.42, 0.0), 0.84, 0.45, word, colour="white", fontsize=7)
            box(ax, (j - 0.3, 0.85), 0.6, 0.4, f"$\\mathbf{{h}}_{j + 1}$", colour=SKY, fontsize=8)
            arrow(ax, (j, 0.45), (j, 0.85))
        for i, char in enumerate(chars):
            x = 0.4 + i * 1.05
            box(ax, (x - 0.3, 2.35), 0.6, 0.4, f"$\\mathbf{{d}}_{i + 1}$", colour=YELLOW, fontsize=8)
            ax.text(x, 3.2, char, ha="center", va="center", fontsize=11)
            arrow(ax, (x, 2.75), (x, 3.02))
            if i:
                arrow(ax, (x - 0.75, 2.55), (x - 0.3, 2.55))
            if attention:
                for j in range(6):
                    w = float(weights[i, j])
                    if w > 0.03:
                        ax.plot([j, x], [1.25, 2.35], color=BLUE, linewidth=0.4 + 3.5 * w, alpha=0.25 + 0.75 * w)
        if attention:
            ax.set_title("(b) with attention: step $t$ reads $\\mathbf{c}_t = \\sum_s \\alpha_{ts} \\mathbf{h}_s$\n"
                         "(line width: an illustrative $\\alpha_{ts}$)", fontsize=10)
        else:
            box(ax, (6.1, 1.55), 0.6, 0.4, "$\\mathbf{c}$", colour=ORANGE, fontsize=9)
            arrow(ax, (5.3, 1.05), (6.1, 1.7))  # the forward GRU's last state
            ax.annotate("", xy=(6.1, 1.62), xytext=(0.0, 1.25),  # the backward GRU's final state (position 1)
                        arrowprops=dict(arrowstyle="->", color="black", linewidth=0.8, shrinkA=2, shrinkB=2,
                                        connectionstyle="arc3,rad=-0.12"))
            for i in range(6):
                ax.plot([6.4, 0.4 + i * 1.05], [1.95, 2.35], color=ORANGE, linewidth=0.8, alpha=0.7)
            ax.set_title("(a) no attention: every step reads the same vector $\\mathbf{c}$\n"
                         "(the two GRU directions' final states: the whole sentence)", fontsize=10)
        ax.text(-0.55, 0.22, "English", fontsize=8, ha="right", va="center", color=GREY)
        ax.text(-0.55, 3.2, "Chinese", fontsize=8, ha="right", va="center", color=GREY)
    fig.tight_layout()
    return fig


@figure("ch11_blocks")
def blocks():
    """Post-norm and pre-norm encoder blocks, and the decoder layer with cross-attention."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 4.4))
    for ax in axes:
        ax.set_xlim(0, 4), ax.set_ylim(0, 8.4), ax.axis("off")

    def plus(ax, y):
        ax.add_patch(plt.Circle((2, y), 0.18, facecolor="white", edgecolor="black", linewidth=0.8))
        ax.text(2, y, "+", ha="center", va="center", fontsize=10)

    def residual(ax, y0, y1):
        ax.plot([2, 3.3, 3.3, 2.18], [y0, y0, y1, y1], color=GREY, linewidth=1.0)

    # (a) post-norm: LN(x + f(x))
    ax = axes[0]
    y = 0.4
    ax.text(2, y, "$x$", ha="center")
    for name, colour in (("self-attention", SKY), ("feed-forward", GREEN)):
        arrow(ax, (2, y + 0.25), (2, y + 0.9))
        box(ax, (1.1, y + 0.9), 1.8, 0.7, name, colour=colour)
        arrow(ax, (2, y + 1.6), (2, y + 2.07))
        plus(ax, y + 2.25)
        residual(ax, y + 0.55, y + 2.25)
        box(ax, (1.3, y + 2.8), 1.4, 0.55, "LayerNorm", colour=YELLOW, fontsize=8)
        arrow(ax, (2, y + 2.43), (2, y + 2.8))
        y += 3.35
    arrow(ax, (2, y - 0.0), (2, y + 0.4))
    ax.set_title("(a) post-norm (2017):\n$\\mathrm{LN}(x + f(x))$", fontsize=10)

    # (b) pre-norm: x + f(LN(x))
    ax = axes[1]
    y = 0.4
    ax.text(2, y, "$x$", ha="center")
    for name, colour in (("self-attention", SKY), ("feed-forward", GREEN)):
        box(ax, (1.3, y + 0.75), 1.4, 0.55, "LayerNorm", colour=YELLOW, fontsize=8)
        arrow(ax, (2, y + 0.25), (2, y + 0.75))
        box(ax, (1.1, y + 1.6), 1.8, 0.7, name, colour=colour)
        arrow(ax, (2, y + 1.3), (2, y + 1.6))
        plus(ax, y + 2.75)
        arrow(ax, (2, y + 2.3), (2, y + 2.57))
        residual(ax, y + 0.5, y + 2.75)
        y += 3.2
    arrow(ax, (2, y - 0.27), (2, y + 0.1))
    box(ax, (1.3, y + 0.1), 1.4, 0.5, "final LayerNorm", colour=YELLOW, fontsize=7)
    ax.set_title("(b) pre-norm:\n$x + f(\\mathrm{LN}(x))$, an identity path", fontsize=10)

    # (c) the decoder layer (pre-norm)
    ax = axes[2]
    y = 0.3
    ax.text(2, y, "target so far", ha="center", fontsize=8)
    for name, colour in (("causal\nself-attention", SKY), ("cross-attention", PURPLE), ("feed-forward", GREEN)):
        arrow(ax, (2, y + 0.25), (2, y + 0.6))
        box(ax, (1.1, y + 0.6), 1.8, 0.8, name, colour=colour, fontsize=8)
        plus(ax, y + 1.85)
        arrow(ax, (2, y + 1.4), (2, y + 1.67))
        residual(ax, y + 0.4, y + 1.85)
        y += 2.2
    ax.text(0.15, 3.3, "memory\n(encoder\noutput)", fontsize=8, ha="left", va="center", color=PURPLE)
    arrow(ax, (0.75, 3.1), (1.1, 3.1), colour=PURPLE)
    ax.text(2, y + 0.35, "next-character scores", ha="center", fontsize=8)
    arrow(ax, (2, y - 0.17), (2, y + 0.2))
    ax.set_title("(c) decoder layer (LayerNorms\nbefore each sub-layer not drawn)", fontsize=10)
    fig.tight_layout()
    return fig


BEAM_TABLE = [[1e-9, 1e-9, 0.55, 0.45], [1e-9, 1.0, 1e-9, 1e-9], [1e-9, 0.2, 0.4, 0.4], [1e-9, 0.999, 5e-4, 5e-4]]


@figure("ch11_beam")
def beam():
    """Greedy decoding and a beam of two on next-token probabilities that depend on the previous token."""
    model, src, lengths = TableModel(BEAM_TABLE), torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long)
    greedy = greedy_decode(model, src, lengths, 0, 1, max_len=3)[0]
    found = beam_search(model, src, lengths, 0, 1, beam_size=2, max_len=3, alpha=0.0)[0]
    names = {1: "<eos>", 2: "a", 3: "b"}
    p = torch.tensor(BEAM_TABLE)
    fig, ax = diagram_axes(8.6, 3.6, xlim=(-0.3, 3.6), ylim=(-0.2, 4.2))
    nodes = {(): (0, 2.0)}
    ax.text(0, 2.0, "<bos>", ha="center", va="center", fontsize=9,
            bbox=dict(boxstyle="round", facecolor="white", edgecolor="black", linewidth=0.8))
    prefixes = [()]
    for depth in (1, 2):
        grown = []
        for prefix in prefixes:
            if prefix and prefix[-1] == 1:
                continue
            for token in (1, 2, 3):
                if float(torch.tensor(BEAM_TABLE)[prefix[-1] if prefix else 0, token]) > 1e-6:
                    grown.append(prefix + (token,))
        ys = np.linspace(3.9, 0.1, len(grown))
        for prefix, yy in zip(grown, ys):
            prob = float(torch.prod(torch.tensor([p[a, b] for a, b in zip((0,) + prefix[:-1], prefix)])))
            x0, y0 = nodes[prefix[:-1]]
            nodes[prefix] = (depth * 1.5, yy)
            on_greedy = list(prefix) == greedy[:len(prefix)] or list(prefix) == greedy + [1]
            on_beam = list(prefix) == (found + [1])[:len(prefix)]
            colour = BLUE if on_beam else ORANGE if on_greedy else GREY
            ax.plot([x0 + (0.3 if depth == 1 else 0.75), depth * 1.5 - 0.05], [y0, yy], color=colour,
                    linewidth=2.2 if colour != GREY else 0.6)
            ax.text(depth * 1.5, yy, f"{names[prefix[-1]]}  P={prob:.3g}", ha="left", va="center", fontsize=8,
                    color="black" if colour != GREY else GREY)
        prefixes = grown
    ax.plot([], [], color=ORANGE, linewidth=2.2,
            label=f"greedy: {' '.join(names[t] for t in greedy)} ... (never writes <eos>; cut at the length limit)")
    ax.plot([], [], color=BLUE, linewidth=2.2, label=f"beam of 2: {' '.join(names[t] for t in found)} <eos>")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    ax.set_title("Greedy decoding takes 'a' (0.55) and is stuck with poor continuations; a beam of two keeps\n"
                 "'b' (0.45), whose sentence 'b <eos>' is the most probable (P = 0.45 x 0.999 = 0.44955)", fontsize=9)
    return fig


@figure("ch11_results_bleu")
def results_bleu():
    """Test BLEU of the four models, greedy and beam 5: a dot per seed on a bar at their mean."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, (key, label) in zip(axes, (("bleu", "BLEU"), ("chrf", "chrF"))):
        values = {(name, suffix): [run["metrics"][key + suffix] for run in _runs(name)]
                  for name, _, _ in MODELS for suffix in ("", "_beam")}
        ax.set_ylim(0, 1.12 * max(map(max, values.values())))  # before the dots: they spread by the axis's span
        for i, (name, model, colour) in enumerate(MODELS):
            for k, (suffix, marker) in enumerate((("", "o"), ("_beam", "s"))):
                v = values[name, suffix]
                x = i + (k - 0.5) * 0.3
                ax.bar(x, statistics.mean(v), 0.28, **bar_style(colour, variant=k == 0))
                seed_dots(ax, x, v, DOT_COLOUR, width=0.22, marker=marker, mean=False, size=14,
                          label=("greedy (hatched), each seed" if k == 0 else "beam 5, each seed") if i == 0 else None)
        ax.set_xticks(range(len(MODELS)), [m for _, m, _ in MODELS], fontsize=8)
        ax.set_ylabel(f"test {label}")
        ax.legend(fontsize=8, frameon=False, loc="upper left")
    device = device_label(record("ch11_bahdanau")["device"])
    fig.suptitle(f"English -> Chinese, Tatoeba test sentences (cpu profile, {device}); bars: mean over seeds",
                 fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch11_results_length")
def results_length():
    """Test BLEU per English sentence length: the single vector loses most on long sentences. A dot
    per seed, a line through the means."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    buckets = list(record("ch11_bahdanau")["runs"][0]["extra"]["by_length"])
    values = {name: [[r["extra"]["by_length"][b]["bleu"] for r in _runs(name)] for b in buckets]
              for name, _, _ in MODELS}
    ax.set_ylim(0, 1.4 * max(max(map(max, v)) for v in values.values()))  # room for the legend above the lines
    for k, (name, model, colour) in enumerate(MODELS):
        xs = np.arange(len(buckets)) + (k - (len(MODELS) - 1) / 2) * 0.12  # side by side within a bucket
        ax.plot(xs, [statistics.mean(v) for v in values[name]], color=colour, marker="_", markersize=10,
                markeredgewidth=2.0, label=f"{model} ({len(_runs(name))} seeds)".replace("\n", " "))
        for x, v in zip(xs, values[name]):
            seed_dots(ax, x, v, colour, width=0.1, mean=False, size=10)
    sizes = [record("ch11_bahdanau")["runs"][0]["extra"]["by_length"][b]["n"] for b in buckets]
    names = [b.replace("-99", "+") for b in buckets]
    ax.set_xticks(range(len(buckets)), [f"{b} tokens\n({n} sentences)" for b, n in zip(names, sizes)], fontsize=8)
    ax.set_ylabel("test BLEU (greedy)")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    ax.set_title("BLEU by English length in tokens (cpu profile; a dot per seed, line: mean)", fontsize=10)
    fig.tight_layout()
    return fig


def _attention_map(ax, weights, words, output, title, cmap="Blues"):
    w = np.asarray(weights, dtype=float)
    ax.imshow(w, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(words)), words, rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(len(output)), output, fontsize=9)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9)


# Which of the six recorded test sentences (the first six of 5-10 English words) the maps show:
# two that the model translates well and one it gets wrong.
ALIGNMENT_EXAMPLES = (1, 3, 0)
HEADS_EXAMPLE = 3


@figure("ch11_results_alignment")
@_with_chinese
def results_alignment():
    """Bahdanau attention of three test sentences: each output character's weights over the English words."""
    recorded = _seed0("ch11_bahdanau")["extra"]["attention"]
    examples = [recorded[i] for i in ALIGNMENT_EXAMPLES]
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.8))
    for ax, ex in zip(axes, examples):
        _attention_map(ax, ex["weights"], ex["words"], ex["output"], f"{ex['en']}\nreference: {ex['zh'][0]}")
    fig.suptitle("Bahdanau attention (ch11_bahdanau, cpu profile, seed 0, greedy output; rows: characters "
                 "written, columns: English words)", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch11_results_heads")
@_with_chinese
def results_heads():
    """One test sentence: Bahdanau's single map beside the Transformer's cross-attention heads."""
    bahdanau = _seed0("ch11_bahdanau")["extra"]["attention"][HEADS_EXAMPLE]
    transformer = _seed0("ch12_transformer")["extra"]["attention"][HEADS_EXAMPLE]
    layers = len(transformer["weights"][0])
    heads = len(transformer["weights"][0][0])
    fig, axes = plt.subplots(layers, heads + 1, figsize=(13, 2.7 * layers))
    for row in range(layers):
        if row == 0:
            _attention_map(axes[row, 0], bahdanau["weights"], bahdanau["words"], bahdanau["output"], "Bahdanau")
        else:
            axes[row, 0].axis("off")
        for h in range(heads):
            w = [step[row][h] for step in transformer["weights"]]
            _attention_map(axes[row, h + 1], w, transformer["words"], transformer["output"],
                           f"Transformer layer {row + 1}, head {h + 1}", cmap="Oranges")
    fig.suptitle(f"{bahdanau['en']}  (cpu profile, seed 0; each model's own greedy output)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("ch11_results_curves")
def results_curves():
    """Training loss and validation BLEU per epoch of the four translators, one line per seed."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for name, label, colour in MODELS:
        for k, run in enumerate(_runs(name)):
            history = run["extra"]["history"]
            epochs = [e["epoch"] for e in history]
            for ax, key in zip(axes, ("train_loss", "val_bleu")):
                ax.plot(epochs, [e[key] for e in history], color=colour, linewidth=1.2, alpha=0.85, marker="o",
                        markersize=2.5, label=label.replace("\n", " ") if k == 0 else None)
    axes[0].set_ylabel("training loss (nats per character)")
    axes[1].set_ylabel("validation BLEU (greedy)")
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, frameon=False, loc="lower right")
    device = device_label(record("ch11_bahdanau")["device"])
    fig.suptitle(f"English -> Chinese, one line per seed (cpu profile, {device}); the Transformer's loss "
                 "includes label smoothing", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch11_encoder_decoder")
@_with_chinese
def encoder_decoder():
    """The whole Transformer translator: the encoder stack, the decoder stack reading its memory, shifted targets."""
    fig, ax = diagram_axes(width=9.4, height=5.0, xlim=(0, 11), ylim=(0, 6.2))
    # the encoder: source words -> embeddings + positions -> L blocks -> memory
    ax.text(2.4, 0.2, "English words:  I  have  a  bike  .", ha="center", fontsize=8)
    arrow(ax, (2.4, 0.45), (2.4, 0.8))
    box(ax, (1.0, 0.8), 2.8, 0.6, "embedding + positions", colour=YELLOW, fontsize=8)
    ax.add_patch(plt.Rectangle((0.7, 1.75), 3.4, 2.3, fill=False, linestyle="--", edgecolor=GREY))
    ax.text(0.75, 3.85, "encoder block\n× $L$", fontsize=8, va="top", color=GREY)
    arrow(ax, (2.4, 1.4), (2.4, 2.0))
    box(ax, (1.3, 2.0), 2.2, 0.6, "self-attention", colour=SKY, fontsize=8)
    arrow(ax, (2.4, 2.6), (2.4, 3.0))
    box(ax, (1.3, 3.0), 2.2, 0.6, "feed-forward", colour=GREEN, fontsize=8)
    arrow(ax, (2.4, 3.6), (2.4, 4.45))
    box(ax, (1.3, 4.45), 2.2, 0.6, "memory: one vector\nper English word", colour=PURPLE, fontsize=8)
    # the decoder: shifted targets -> embeddings + positions -> L layers -> scores
    ax.text(8.0, 0.2, "input:  <bos>  我  有  一  辆  自  行  车  。", ha="center", fontsize=8)
    arrow(ax, (8.0, 0.45), (8.0, 0.8))
    box(ax, (6.6, 0.8), 2.8, 0.6, "embedding + positions", colour=YELLOW, fontsize=8)
    ax.add_patch(plt.Rectangle((6.3, 1.75), 3.4, 3.1, fill=False, linestyle="--", edgecolor=GREY))
    ax.text(9.75, 4.8, "decoder layer\n× $L$", fontsize=8, va="top", ha="left", color=GREY)
    arrow(ax, (8.0, 1.4), (8.0, 2.0))
    box(ax, (6.9, 2.0), 2.2, 0.6, "causal self-attention", colour=SKY, fontsize=8)
    arrow(ax, (8.0, 2.6), (8.0, 2.9))
    box(ax, (6.9, 2.9), 2.2, 0.6, "cross-attention", colour=PURPLE, fontsize=8)
    arrow(ax, (8.0, 3.5), (8.0, 3.8))
    box(ax, (6.9, 3.8), 2.2, 0.6, "feed-forward", colour=GREEN, fontsize=8)
    arrow(ax, (8.0, 4.4), (8.0, 5.0))
    box(ax, (6.9, 5.0), 2.2, 0.55, "linear (tied) + softmax", colour=YELLOW, fontsize=8)
    ax.text(8.0, 5.85, "target:  我  有  一  辆  自  行  车  。  <eos>", ha="center", fontsize=8)
    arrow(ax, (8.0, 5.55), (8.0, 5.75))
    # the memory feeds every decoder layer's cross-attention, as keys and values
    ax.annotate("", xy=(6.9, 3.2), xytext=(3.5, 4.75),
                arrowprops=dict(arrowstyle="->", color=PURPLE, linewidth=1.2, connectionstyle="arc3,rad=-0.15"))
    ax.text(5.2, 4.55, "keys and values\nof every layer's\ncross-attention", ha="center", fontsize=7.5, color=PURPLE)
    ax.text(2.4, 5.6, "training: the input is the target shifted right\nby one, every position at once (causal mask);\n"
            "writing: one character at a time", ha="center", va="center", fontsize=7.5, color=GREY)
    return fig
