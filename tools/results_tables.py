"""Per-seed tables in book/results.md, written from the records (hand-written infrastructure).

    python tools/results_tables.py           # rewrite every per-seed block of book/results.md
    python tools/results_tables.py --check   # exit 1 when a block differs from the records

A block is the lines between a marker and ``<!-- end per-seed -->``::

    <!-- per-seed ch05_san_features ch07_coatt_features | non_relational type_count relational -->

One row per (experiment, seed) of the ``cpu`` records, one column per metric, in percent with one
decimal; a mean row per experiment follows its seeds (the book's rounding rule).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attn_tutorial.results import mean_std, read_record  # noqa: E402

RESULTS = ROOT / "book" / "results.md"
RECORDS = ROOT / "book" / "results"  # the committed records, whatever ATTN_RESULTS_DIR says
BLOCK = re.compile(r"^(<!-- per-seed (?P<names>[^|]+)\|(?P<metrics>[^>]+)-->\n)(?P<body>.*?)(^<!-- end per-seed -->)$",
                   re.M | re.S)
HEADERS = {"non_relational": "non-relational", "type_count": "count", "relational": "relational",
           "type_closest": "closest", "type_furthest": "furthest", "accuracy": "overall", "mass_non_relational": "mass"}


def per_seed_table(names: list[str], metrics: list[str], profile: str = "cpu") -> str:
    """A markdown table: every recorded seed of each experiment, then its mean ± std (percent)."""
    head = ["experiment", "seed", *[HEADERS.get(m, m) for m in metrics]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        path = RECORDS / name / f"{profile}.json"
        record = read_record(path) if path.is_file() else None
        if record is None:
            lines.append(f"| `{name}` | no {profile} record yet |" + " |" * len(metrics))
            continue
        runs = sorted(record["runs"], key=lambda run: run["seed"])
        for run in runs:  # "—": a metric this model does not have (no attention, no mass)
            lines.append(f"| `{name}` | {run['seed']} | " + " | ".join(
                f"{100 * run['metrics'][m]:.1f}" if m in run["metrics"] else "—" for m in metrics) + " |")
        if len(runs) > 1:
            cells = [mean_std(100 * statistics.fmean(v), 100 * statistics.stdev(v)) if None not in v else "—"
                     for v in ([run["metrics"].get(m) for run in runs] for m in metrics)]
            lines.append(f"| `{name}` | mean ± std | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(text: str) -> str:
    def block(match: re.Match) -> str:
        table = per_seed_table(match["names"].split(), match["metrics"].split())
        return match.group(1) + table + match.group(5)

    return BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a block differs from the records")
    args = parser.parse_args(argv)
    text = RESULTS.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("book/results.md: a per-seed table differs from the records; run python tools/results_tables.py")
            return 1
        return 0
    RESULTS.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
