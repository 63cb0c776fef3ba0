"""The ``{rec}`` role: a number on a page read from its record in ``book/results/`` at build time
(hand-written infrastructure), so that a page cannot drift from the runs behind it.

    {rec}`ch11_bahdanau bleu`                      24.22 ± 0.25   mean ± std over seeds (the book's rounding)
    {rec}`ch11_bahdanau bleu mean`                 24.22          the mean alone, at the same decimals
    {rec}`ch13_rope needle_mean %`                 5.00 ± 0.35 %  a fraction shown in percent
    {rec}`ch11_bahdanau bleu - ch11_none bleu`     3.8            the difference of two means, one decimal
    {rec}`ch11_bahdanau bleu / ch11_none bleu`     19 %           how much larger the first mean is than the
                                                                  second (one decimal below 10 %)
    {rec}`ch11_bahdanau parameters`                1,951,780      the model's parameters
    {rec}`ch11_bahdanau s_per_epoch`               45             seconds per epoch, median over seeds

Records are the ``cpu`` profile's (``<experiment>@full`` names another). The Chinese edition keeps
the role unchanged in its translation (tools/translations.py checks it), so both editions print
the same number. An unknown experiment, profile or metric is a build error that names what exists.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "book" / "results"
sys.path.insert(0, str(ROOT))

from attn_tutorial.results import RecordError as MalformedRecord  # noqa: E402
from attn_tutorial.results import decimals_for, mean_std, read_record  # noqa: E402

SPECIAL = ("parameters", "s_per_epoch")


class RecordError(ValueError):
    """A ``{rec}`` text that names no recorded number."""


def _record(name: str, used: list[Path] | None = None) -> dict:
    experiment, _, profile = name.partition("@")
    path = RECORDS / experiment / f"{profile or 'cpu'}.json"
    if used is not None:
        used.append(path)
    if not path.is_file():
        known = sorted(p.name for p in RECORDS.iterdir() if p.is_dir()) if RECORDS.is_dir() else []
        if experiment not in known:
            raise RecordError(f"no record of experiment {experiment!r} in book/results "
                              f"(expected one of: {', '.join(known)})")
        profiles = sorted(p.stem for p in (RECORDS / experiment).glob("*.json"))
        raise RecordError(f"experiment {experiment!r} has no {profile or 'cpu'!r} record (it has: {', '.join(profiles)})")
    try:
        return read_record(path)  # the project's checked reader: a malformed record names its file
    except MalformedRecord as error:
        raise RecordError(str(error)) from error


def _stats(name: str, metric: str, used: list[Path] | None = None) -> tuple[float, float | None, int]:
    """Mean, standard deviation (None for one run) and number of runs of ``metric`` in ``name``'s record."""
    record = _record(name, used)
    runs = record["runs"]
    if metric == "parameters":
        counts = {run.get("n_params") for run in runs}
        if None in counts or len(counts) != 1:
            raise RecordError(f"{name}: the runs record no single parameter count (got {sorted(map(str, counts))})")
        return float(counts.pop()), None, 1
    if metric == "s_per_epoch":
        times = [run["time_per_epoch_s"] for run in runs if run.get("time_per_epoch_s") is not None]
        if not times:
            raise RecordError(f"{name}: no run records its seconds per epoch")
        return float(statistics.median(times)), None, 1
    summary = record.get("summary", {})
    if metric not in summary:
        raise RecordError(f"{name} records no metric {metric!r} (expected one of: "
                          f"{', '.join([*summary, *SPECIAL])})")
    s = summary[metric]
    return float(s["mean"]), s.get("std"), int(s.get("n", 1))


def render(text: str, used: list[Path] | None = None) -> str:
    """The number a ``{rec}`` role's ``text`` names, formatted as the book prints it; the record files
    read are appended to ``used``."""
    words = text.split()
    for sign in ("-", "/"):  # a difference of two means, or how much larger the first is
        if sign in words:
            at = words.index(sign)
            left, right = words[:at], words[at + 1:]
            if len(left) != 2 or len(right) != 2:
                raise RecordError(f"expected '<experiment> <metric> {sign} <experiment> <metric>', got {text!r}")
            a, b = _stats(*left, used)[0], _stats(*right, used)[0]
            if sign == "-":  # one decimal for BLEU-sized numbers, two for bits per byte, a loss or a
                return f"{a - b:.{2 if max(abs(a), abs(b)) < 10 or abs(a - b) < 0.1 else 1}f}"  # tiny gap
            if b == 0:
                raise RecordError(f"{text!r}: the second mean is 0, no ratio")
            gain = 100 * (a / b - 1)
            return f"{gain:.{1 if abs(gain) < 10 else 0}f} %"
    percent = words[-1:] == ["%"]
    words = words[:-1] if percent else words
    if len(words) not in (2, 3) or (len(words) == 3 and words[2] != "mean"):
        raise RecordError(f"expected '<experiment> <metric> [mean] [%]', got {text!r}")
    mean, std, n = _stats(words[0], words[1], used)
    if words[1] == "parameters":
        return f"{mean:,.0f}"
    if words[1] == "s_per_epoch":
        return f"{mean:.0f}"
    scale = 100.0 if percent else 1.0
    mean, std = mean * scale, None if std is None else std * scale
    if len(words) == 3:
        value = f"{mean:.{decimals_for(std) if std is not None and n > 1 else 2}f}"
    else:
        value = mean_std(mean, std, n)
    return value + (" %" if percent else "")


def rec_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    used: list[Path] = []
    try:
        value = render(text, used)
    except RecordError as error:
        message = inliner.reporter.error(f"{{rec}}`{text}`: {error}", line=lineno)
        problem = inliner.problematic(rawtext, rawtext, message)
        return [problem], [message]
    finally:
        env = getattr(inliner.document.settings, "env", None)
        for path in used if env is not None else ():
            env.note_dependency(str(path))  # a changed record re-reads the page
    return [nodes.Text(value)], []


def setup(app) -> None:
    app.add_role("rec", rec_role)
