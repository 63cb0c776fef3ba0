"""Figures of chapter 13: a decoder language model, its cache, shared key-value heads and positions."""

import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch

from _common import (BLUE, GREEN, GREY, ORANGE, SKY, box, device_label, figure, model_colour, model_label,
                     record)

from attn_tutorial.decoder import alibi_bias, alibi_slopes, apply_rope
from attn_tutorial.mhsa import causal_mask

# Each record's model: its colour and label come from _common.MODELS, the same in every figure.
RECORD_MODEL = {"ch13_rope": "rope", "ch13_sinusoidal": "sinusoidal", "ch13_alibi": "alibi", "ch13_gqa": "gqa",
                "ch13_mqa": "mqa", "ch13_diff": "lm_diff", "ch13_moh": "moh"}
COLOUR = {name: model_colour(model) for name, model in RECORD_MODEL.items()}
LABEL = {name: model_label(model) for name, model in RECORD_MODEL.items()}


def _runs(name):
    return record(name)["runs"]


@figure("ch12_cache")
def cache():
    """Step t without and with the cache: the query-key pairs computed."""
    t = 6
    allowed = causal_mask(t).numpy()  # (T, T): True where query i may see key j
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6))
    for ax, cached in zip(axes, (False, True)):
        colours = np.ones((t, t, 3))
        for i in range(t):
            for j in range(t):
                if not allowed[i, j]:
                    continue
                if not cached or i == t - 1:
                    colours[i, j] = (0.0, 0.447, 0.698) if (i == t - 1 or not cached) else colours[i, j]
                if cached and i == t - 1 and j < t - 1:
                    colours[i, j] = (0.6, 0.6, 0.6)  # a cached key: read, not computed
        ax.imshow(colours, aspect="equal")
        for i in range(t):
            for j in range(t):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=1.5))
        ax.set_xticks(range(t), [f"$\\mathbf{{k}}_{j + 1}$" for j in range(t)])
        ax.set_yticks(range(t), [f"$\\mathbf{{q}}_{i + 1}$" for i in range(t)])
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        computed = int(allowed.sum()) if not cached else t
        ax.set_title(("(a) without a cache: step 6 computes\n"
                      f"all {computed} query-key pairs of the prefix again") if not cached else
                     ("(b) with a cache: step 6 computes one row,\n"
                      "$\\mathbf{q}_6$ against 5 kept keys (grey) and $\\mathbf{k}_6$"), fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_gqa")
def gqa():
    """Eight query heads and the key-value heads they read, for 8, 2 and 1 key-value heads."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    for ax, (kv, title) in zip(axes, ((8, "multi-head: 8 kv heads"), (2, "grouped-query: 2 kv heads"),
                                      (1, "multi-query: 1 kv head"))):
        ax.set_xlim(-0.2, 8.2), ax.set_ylim(-0.3, 3.0), ax.axis("off")
        group = 8 // kv
        width = 8 / kv
        for k in range(kv):
            box(ax, (k * width + 0.1, 0.0), width - 0.2, 0.7, "K, V" if kv < 8 else f"{k + 1}", colour=ORANGE, fontsize=8)
        for j in range(8):
            box(ax, (j + 0.1, 2.0), 0.8, 0.7, f"Q{j + 1}", colour=SKY, fontsize=8)
            k = j // group  # query head j reads key-value head j // (h / h_kv)
            ax.plot([j + 0.5, k * width + width / 2], [2.0, 0.7], color=GREY, linewidth=0.8)
        ax.set_title(f"{title}\ncache: {kv}/8 of multi-head's", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_positions")
def positions():
    """RoPE's scores depend on the offset only; ALiBi's penalties grow with the distance."""
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    ax = axes[0]
    for shift, colour in ((0, BLUE), (20, ORANGE), (200, GREEN)):
        offsets = np.arange(0, 40)
        scores = [float((apply_rope(q, torch.tensor([shift + 40])) *
                         apply_rope(k, torch.tensor([shift + 40 - o]))).sum()) for o in offsets]
        ax.plot(offsets, scores, color=colour, linewidth=2.5 if shift == 0 else 1.2,
                linestyle="-" if shift == 0 else "--", label=f"query at {shift + 40}")
    ax.set_xlabel("offset m - n (query minus key position)")
    ax.set_ylabel("score q . k after rotation")
    ax.set_title("RoPE: the same curve wherever the pair sits", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    slopes = alibi_slopes(8)
    t = 6
    for ax, head in zip(axes[1:], (0, 3)):
        bias = alibi_bias(slopes, torch.arange(t), torch.arange(t))[head].numpy()  # (T, S)
        shown = np.where(causal_mask(t).numpy(), bias, np.nan)  # the causal mask hides s > t
        ax.imshow(shown, cmap="Oranges_r", aspect="equal", vmin=bias.min(), vmax=0)
        for i in range(t):
            for j in range(i + 1):
                ax.text(j, i, f"{abs(bias[i, j]):.2f}" if i == j else f"-{abs(bias[i, j]):.2f}", ha="center",
                        va="center", fontsize=7, color="white" if bias[i, j] < 0.6 * bias.min() else "black")
        ax.set_xticks(range(t), range(1, t + 1), fontsize=7)
        ax.set_yticks(range(t), range(1, t + 1), fontsize=7)
        ax.set_xlabel("key position s"), ax.set_ylabel("query position t")
        ax.set_title(f"ALiBi, head {head + 1} of 8: bias $-\\beta_{{{head + 1}}} (t - s)$, $\\beta_{{{head + 1}}}$ = "
                     f"{float(slopes[head]):g}", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_results_extrapolation")
def results_extrapolation():
    """Perplexity at 1, 2 and 4 times the training context, every seed."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    factors = (1, 2, 4)
    for name in ("ch13_rope", "ch13_sinusoidal", "ch13_alibi"):
        for k, run in enumerate(_runs(name)):
            ax.plot(factors, [run["metrics"][f"ppl_{f}x"] for f in factors], color=COLOUR[name], marker="o",
                    linewidth=1.2, alpha=0.85, label=LABEL[name] if k == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_yticks([14, 20, 30, 40], ["14", "20", "30", "40"])
    ax.minorticks_off()
    ax.set_xticks(factors, ["128\n(trained)", "256", "512"])
    ax.set_xlabel("evaluation window, tokens")
    ax.set_ylabel("test perplexity (log scale)")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("Length extrapolation: one line per seed (cpu profile)", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_results_needle")
def results_needle():
    """Needle accuracy by depth for the base, differential and mixture-of-heads models, every seed."""
    depths = (0, 25, 50, 75, 100)
    fig, ax = plt.subplots(figsize=(6.8, 3.6))
    for name in ("ch13_rope", "ch13_sinusoidal", "ch13_diff", "ch13_moh"):
        for k, run in enumerate(_runs(name)):
            ax.plot(depths, [100 * run["metrics"][f"needle_{d}"] for d in depths], color=COLOUR[name], marker="o",
                    linewidth=1.2, alpha=0.85, label=LABEL[name] if k == 0 else None)
    chance = 100 * _runs("ch13_rope")[0]["extra"]["needle_chance"]
    ax.axhline(chance, color="black", linestyle=":", linewidth=1)
    ax.text(100, chance, "one value in 20 ", ha="right", va="bottom", fontsize=8)
    ax.set_xticks(depths, ["0\n(start)", "25", "50", "75", "100\n(just before\nthe question)"], fontsize=8)
    ax.set_xlabel("depth of the asked fact in the 128-token window (%)")
    ax.set_ylabel("questions answered (%)")
    ax.set_ylim(0, 30)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("Needle retrieval, one line per seed (cpu profile; the same 500 questions for every model)", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_results_cache")
def results_cache():
    """Seconds to write N tokens with and without the cache, and the cache's bytes per kv-head count."""
    run = record("ch13_generation")["runs"][0]
    lengths, seconds, cached = run["extra"]["lengths"], run["extra"]["seconds"], run["extra"]["cache_bytes"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    ax = axes[0]
    ax.plot(lengths, seconds["without_cache"], color=GREY, marker="o", label="without the cache")
    ax.plot(lengths, seconds["with_cache"], color=BLUE, marker="o", label="with the cache")
    for n, a, b in zip(lengths, seconds["with_cache"], seconds["without_cache"]):
        ax.text(n, b, f" {b / a:.1f}x", fontsize=8, va="bottom")
    ax.set_xlabel("tokens generated (batch 1, greedy)")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"Time to write N tokens ({device_label(record('ch13_generation')['device'])})", fontsize=9)
    ax = axes[1]
    for variant, label in (("rope", "8 kv heads (MHSA)"), ("gqa", "2 kv heads (GQA)"), ("mqa", "1 kv head (MQA)")):
        ax.plot(lengths, [b / 1024 for b in cached[variant]], color=model_colour(variant), marker="o", label=label)
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("cache, KiB (float32, measured)")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("Cache of the cpu model: 4 layers, 8 query heads of width 16", fontsize=9)
    fig.tight_layout()
    return fig


@figure("ch12_results_bpb")
def results_bpb():
    """Test bits per byte against tokens seen, every seed, at 384 and 2,048 symbols, with the trigram's line
    (both on the first quarter of the test windows, where the curves are scored)."""
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.4), sharey=True)
    for ax, vocab in zip(axes, (384, 2048)):
        for k, run in enumerate(_runs(f"ch13_lm_v{vocab}")):
            steps, tokens, bpb = zip(*run["extra"]["eval_curve"])
            ax.plot([t / 1e6 for t in tokens], bpb, color=COLOUR["ch13_rope"], linewidth=1.2, alpha=0.85,
                    label="decoder, one line per seed" if k == 0 else None)
        trigram = _runs(f"ch13_trigram_v{vocab}")[0]["metrics"]["bpb_curve"]  # on the curve's test windows
        ax.axhline(trigram, color=GREY, linestyle="--", linewidth=1.2, label="Kneser-Ney trigram")
        ax.set_title(f"{vocab:,} symbols", fontsize=9)
        ax.set_xlabel("training tokens seen (millions)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test bits per byte")
    axes[0].legend(fontsize=8, frameon=False)
    fig.suptitle(f"Clean reviews, cpu profile ({device_label(record('ch13_lm_v384')['device'])})", fontsize=9)
    fig.tight_layout()
    return fig
