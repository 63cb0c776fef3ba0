"""Draw the book's figures from code (hand-written infrastructure; called by the build and the tests).

    python tools/figures.py            # (re)draw every figure into book/figures/*.svg
    python tools/figures.py --check    # exit 1 when a committed SVG differs from what the code draws
    python tools/figures.py ch03 ch04  # only the figures of these chapters
    python tools/figures.py ch03 --preview /tmp/fig   # also PNG previews to look at
    python tools/figures.py --labels   # add the texts of new figures to the Chinese label table

Each ``book/figures/chNN.py`` registers its figures with ``_common.figure``. Explanatory figures
compute their tiny examples with torch and the package; results figures read ``book/results``,
so a changed record shows up as drift here until the figure is redrawn.

``--check`` compares drawings, not bytes: every number in the SVG (coordinates, sizes) may differ
from the committed one by up to ``TOLERANCE`` points, everything else must be identical. The
last bits of a float32 computation depend on the CPU's kernels (AVX-512 or not), and one figure
drawn on two machines differed by 0.00001 pt in a few coordinates; a real change moves a point
by far more, or changes a label's glyphs.

Every figure is drawn twice: ``<name>.svg`` in English and ``<name>.zh_CN.svg`` for the Chinese
edition, whose texts come from the label table ``book/figures/labels_zh.json`` (English text ->
Chinese) and whose Chinese characters are drawn in a Chinese font (embedded as paths). A text with
no entry stays English; ``tools/translations.py check`` fails while one has none.

A figure module whose inputs did not change is not drawn again: ``book/figures/inputs.json``
(written when the figures are drawn, committed with them) holds, per module, a digest of everything
its figures are computed from (the module, ``_common.py``, the ``attn_tutorial`` package, the records
in ``book/results`` and the versions of matplotlib, numpy and torch) and the SHA-256 of each SVG it
drew. When both still match, the SVGs are what the code draws; anything else (an edited layer, a
new record, a hand-edited SVG, a missing manifest) draws the module again. ``--force`` draws all.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "book" / "figures"
TOLERANCE = 0.01  # points (1/72 inch): far below what a reader can see
_NUMBER = re.compile(rb"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


def same_drawing(old: bytes, new: bytes, tolerance: float = TOLERANCE) -> bool:
    """Whether two SVGs draw the same figure: equal except for numbers within ``tolerance``."""
    if old == new:
        return True
    a, b = _NUMBER.split(old), _NUMBER.split(new)
    if len(a) != len(b):
        return False
    # re.split with a group alternates text (even positions) and numbers (odd positions)
    return all(x == y or (i % 2 == 1 and abs(float(x) - float(y)) <= tolerance)  # (ids like "6e433": inf)
               for i, (x, y) in enumerate(zip(a, b)))


MANIFEST = FIGURES / "inputs.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shared_inputs_digest() -> str:
    """A digest of what every figure module may read: the shared helpers, the package, the records
    and the versions of the libraries that compute and draw."""
    digest = hashlib.sha256()
    files = [("_common.py", FIGURES / "_common.py"), ("labels_zh.json", FIGURES / "labels_zh.json")]
    files += [(path.relative_to(ROOT).as_posix(), path) for path in [*sorted((ROOT / "attn_tutorial").glob("*.py")),
                                                                     *sorted((ROOT / "book" / "results").rglob("*.json"))]]
    for label, path in files:
        if not path.is_file():
            continue
        digest.update(f"{label}\n".encode() + path.read_bytes())
    for package in ("matplotlib", "numpy", "torch"):
        digest.update(f"{package}=={importlib.metadata.version(package)}\n".encode())
    return digest.hexdigest()


def module_inputs(path: Path, shared: str) -> str:
    """The digest of one figure module's inputs."""
    return _sha(shared.encode() + path.read_bytes())


def up_to_date(path: Path, shared: str, manifest: dict) -> bool:
    """Whether the SVGs of figure module ``path`` were drawn from the inputs it has now and are unchanged."""
    entry = manifest.get(path.stem)
    if not entry or entry.get("inputs") != module_inputs(path, shared):
        return False
    return all((FIGURES / f"{name}.svg").is_file() and _sha((FIGURES / f"{name}.svg").read_bytes()) == sha
               for name, sha in entry.get("svgs", {}).items())


def module_paths(chapters: list[str] | None = None) -> list[Path]:
    """The figure modules (``book/figures/chNN.py``), or those of ``chapters``."""
    return [path for path in sorted(FIGURES.glob("ch*.py"))
            if not chapters or any(path.stem.startswith(c) for c in chapters)]


def load_modules(chapters: list[str] | None = None, paths: list[Path] | None = None) -> dict:
    """Import every figure module (or those of ``chapters``, or ``paths``); return the registry."""
    sys.path.insert(0, str(FIGURES))
    sys.path.insert(0, str(ROOT))
    import _common

    for path in paths if paths is not None else module_paths(chapters):
        spec = importlib.util.spec_from_file_location(f"_figures_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return _common.REGISTRY


LANGUAGES = ("en", "zh_CN")


def svg_name(name: str, language: str) -> str:
    """The file stem of a figure in a language (Sphinx's figure_language_filename: ``{root}.{language}``)."""
    return name if language == "en" else f"{name}.{language}"


def load_labels() -> dict[str, str]:
    if str(FIGURES) not in sys.path:
        sys.path.insert(0, str(FIGURES))
    import _common

    return json.loads(_common.LABELS_ZH.read_text(encoding="utf-8")) if _common.LABELS_ZH.is_file() else {}


@contextlib.contextmanager
def drawn(draw, language: str = "en", labels: dict | None = None):
    """Draw one figure in the book's style, seeded as always (the same numbers in SVG and preview);
    in Chinese (``zh_CN``), its texts translated from ``labels`` and drawn with a Chinese font.
    Yields the figure inside the style (saving needs it too), then closes it."""
    import matplotlib.pyplot as plt
    import _common

    style = dict(_common.STYLE)
    if language != "en":
        style["font.family"] = [_common.STYLE["font.family"], _common.chinese_font()]
    with plt.rc_context(style):
        import torch

        torch.manual_seed(0)
        fig = draw()
        if language != "en":
            _common.translate_figure(fig, labels if labels is not None else load_labels())
        try:
            yield fig
        finally:
            plt.close(fig)


def render(draw, language: str = "en", labels: dict | None = None) -> bytes:
    """One figure as SVG bytes, without the date and tool stamps (so the bytes are reproducible)."""
    buffer = io.BytesIO()
    with drawn(draw, language, labels) as fig:
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return buffer.getvalue()


def preview(draw, path: Path, language: str = "en", labels: dict | None = None) -> None:
    """A PNG of one figure, for looking at it where no SVG viewer is at hand."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with drawn(draw, language, labels) as fig:
        fig.savefig(path, format="png", bbox_inches="tight", dpi=80)


def update_labels() -> tuple[int, int]:
    """Put every text of every figure into the Chinese label table (keeping the translations made,
    dropping texts no figure has any more); return (texts, texts without a translation)."""
    import matplotlib.pyplot as plt
    import _common

    registry = load_modules()
    texts: set[str] = set()
    for name, draw in sorted(registry.items()):
        with plt.rc_context(_common.STYLE):
            import torch

            torch.manual_seed(0)
            fig = draw()
            texts.update(_common.figure_texts(fig))
            plt.close(fig)
    old = load_labels()
    table = {text: old.get(text, "") for text in sorted(texts)}
    _common.LABELS_ZH.write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(table), sum(1 for v in table.values() if not v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter prefixes such as ch03 (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the committed SVGs, write nothing")
    parser.add_argument("--force", action="store_true", help="draw every module, even those whose inputs did not change")
    parser.add_argument("--preview", metavar="DIR", help="also write a PNG of each figure into DIR (to look at)")
    parser.add_argument("--labels", action="store_true", help="update the Chinese label table (book/figures/labels_zh.json)")
    args = parser.parse_args(argv)
    if args.labels:
        sys.path.insert(0, str(FIGURES))
        texts, missing = update_labels()
        print(f"book/figures/labels_zh.json: {texts} texts, {missing} without a translation")
        return 0
    shared = shared_inputs_digest()
    try:
        manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    except ValueError:
        manifest = {}
    paths = module_paths(args.chapters)
    stale_modules = [p for p in paths if args.force or args.preview or not up_to_date(p, shared, manifest)]
    registry = load_modules(paths=stale_modules) if stale_modules else {}
    stale, drawn = [], {}
    labels = load_labels()
    for name, draw in sorted(registry.items()):
        for language in LANGUAGES:
            if args.preview:
                preview(draw, Path(args.preview) / f"{svg_name(name, language)}.png", language, labels)
            stem = svg_name(name, language)
            path = FIGURES / f"{stem}.svg"
            svg = render(draw, language, labels)
            if args.check:
                if not path.is_file() or not same_drawing(path.read_bytes(), svg):
                    stale.append(stem)
                continue
            if not path.is_file() or not same_drawing(path.read_bytes(), svg):
                path.write_bytes(svg)
                print(f"drew {path.relative_to(ROOT)}")
            drawn.setdefault(name.split("_")[0], {})[stem] = _sha(path.read_bytes())
    known = {svg_name(n, lang) for n in registry for lang in LANGUAGES} | {name for p in paths if p not in stale_modules
                             for name in manifest.get(p.stem, {}).get("svgs", {})}
    orphans = sorted(p.stem for p in FIGURES.glob("*.svg") if p.stem not in known) if not args.chapters else []
    if args.check and (stale or orphans):
        for name in stale:
            print(f"book/figures/{name}.svg differs from what its code draws")
        for name in orphans:
            print(f"book/figures/{name}.svg has no code that draws it")
        print("redraw with: python tools/figures.py (and commit the SVGs and book/figures/inputs.json)")
        return 1
    if not args.check and stale_modules:
        for path in stale_modules:  # what these SVGs were drawn from, for the next check
            manifest[path.stem] = {"inputs": module_inputs(path, shared), "svgs": drawn.get(path.stem, {})}
        MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    checked = len(registry) * len(LANGUAGES)
    skipped = sum(len(manifest.get(p.stem, {}).get("svgs", {})) for p in paths if p not in stale_modules)
    if args.check:
        print(f"{checked} figure drawings (English and Chinese) match their code" + (f"; {skipped} more unchanged since drawn (their inputs "
                                                         "and SVGs match book/figures/inputs.json)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
