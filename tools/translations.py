"""The Chinese edition's message catalogues (hand-written infrastructure; `make translations`).

The book is written in English; its Chinese edition is made by Sphinx's gettext workflow. Every
paragraph, heading, table cell, caption and alt text of every page (notebooks' markdown cells
included) is one message; ``locales/zh_CN/LC_MESSAGES/<page>.po`` holds each message's
translation. Code cells are single-source and stay as they are.

    python tools/translations.py update          # extract the English, merge it into the catalogues
    python tools/translations.py check           # what the test command asserts (exit 1 on a problem)
    python tools/translations.py stats           # messages and words per page, translated or not
    python tools/translations.py todo PAGE       # the messages of a page still to translate, as JSON
    python tools/translations.py dump PAGE       # every message of a page and its translation (review)
    python tools/translations.py fill PAGE FILE  # take translations from a JSON file {key: msgstr}

``update`` extracts the messages (``sphinx-build -b gettext``, notebooks not executed) and merges
them into the catalogues with Babel: a new message is untranslated; a changed one keeps its old
translation but is marked fuzzy, with the English it was made for (``#| msgid``), until someone
checks it; messages that no longer exist are dropped. Messages with nothing to translate (numbers,
math, code, the Chinese column of the term table) are filled with themselves.

``check`` fails when a message is untranslated or fuzzy, when a catalogue is out of date with the
English, or when a translation breaks fidelity: every number, math span, inline code span, role or
link target and footnote of the English must appear unchanged in the translation (and no number
may appear that the English does not have), and the course's strict terms (``book/terms_zh.csv``)
must be translated as the term table says (a number keeps its sign: −3.5 is not 3.5; U+2212 and
the hyphen-minus are one sign). A catalogue is read strictly: one that is not UTF-8, or has a malformed
line (an unquoted line, a string without its closing quote), fails ``check`` and is never rewritten by
``fill`` or ``update``, and a write whose text would not read back as the same messages is refused;
each such error names the file and the line. A change to the English therefore fails the test
command until its translation follows: run ``make translations``, translate what ``todo`` lists,
``fill`` it, and run ``check``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from io import BytesIO
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import PoFileError, read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE = "zh_CN"
LOCALES = ROOT / "locales" / LANGUAGE / "LC_MESSAGES"
POT_DIR = ROOT / "_build" / "gettext"
TERMS = ROOT / "book" / "terms_zh.csv"
LABELS = ROOT / "book" / "figures" / "labels_zh.json"  # the figures' texts (tools/figures.py --labels)
TERM_PAGE = "book/glossary"  # the page that shows the term table: its English column stays English
WIDTH = 76  # Babel's line width; one width keeps the catalogues' diffs small

ROLE = re.compile(r"\{([\w:.+-]+)\}`([^`]*)`")
CODE = re.compile(r"``(.+?)``|`([^`]+)`")
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>|(?<![(<])(https?://[^\s)>\]]+)")
FOOTNOTE = re.compile(r"\[\^[\w-]+\]")
HTML_TAG = re.compile(r"<[a-zA-Z]+\s[^<>]*>|</[a-zA-Z]+>")  # raw HTML with attributes, and closing tags
SUBSTITUTION = re.compile(r"\{\{[^}]*\}\}")
# A number with its sign: a minus (hyphen-minus, U+2212 or full-width) or plus right before the
# digits and after no letter, digit or point (so not the hyphen of GPT-2 or of a range 1-2).
NUMBER = re.compile(r"(?:(?<![A-Za-z0-9_.])[-\u2212\uff0d+\uff0b](?=\d))?(?<![\w.])\d+(?:[.,]\d+)*")
SIGNS = str.maketrans({"\u2212": "-", "\uff0d": "-", "\uff0b": "+"})
CJK = re.compile(r"[\u3400-\u9fff]")
LETTERS = re.compile(r"[A-Za-z]{2,}")


# ---------------------------------------------------------------------------------- fidelity
def role_target(name: str, content: str) -> str:
    """What a role points at: ``<target>`` when it has a title, else its whole content (a
    citation key, a label, a page, a glossary term, a math span)."""
    explicit = re.search(r"<([^<>]+)>\s*$", content)
    if explicit and name not in ("math",):
        return explicit.group(1).strip()
    return content.strip()


# One left-to-right scan, so that a role inside a code span (`{exercise}`) is code, and backticks
# inside a role are the role's.
SPANS = re.compile(rf"(?P<role>{ROLE.pattern})|(?P<code>{CODE.pattern})|(?P<math>{MATH.pattern})", re.S)


def _spans(text: str):
    """(kind, match) for each role, code and math span of ``text``, left to right."""
    for match in SPANS.finditer(text):
        yield match.lastgroup if match.lastgroup in ("role", "code", "math") else next(
            k for k in ("role", "code", "math") if match.group(k) is not None), match


def tokens(text: str) -> dict[str, Counter]:
    """The parts of a message that a translation must keep unchanged, by kind."""
    found = {kind: Counter() for kind in ("role", "code", "math", "link", "html", "footnote", "number")}
    for kind, match in _spans(text):
        span = match.group(kind)
        if kind == "role":
            name, content = ROLE.fullmatch(span).groups()
            found["role"][f"{{{name}}}{role_target(name, content)}"] += 1
        elif kind == "code":
            inner = CODE.fullmatch(span)
            found["code"][inner.group(1) or inner.group(2)] += 1
        else:
            inner = MATH.fullmatch(span)
            found["math"][(inner.group(1) or inner.group(2)).strip()] += 1
    rest = SPANS.sub(" ", text)
    for pattern in (LINK, AUTOLINK):
        for match in pattern.finditer(rest):
            found["link"][next(g for g in match.groups() if g)] += 1
        rest = pattern.sub(" ", rest)
    for match in HTML_TAG.finditer(rest):
        found["html"][match.group(0)] += 1
    rest = HTML_TAG.sub(" ", rest)
    for match in FOOTNOTE.finditer(rest):
        found["footnote"][match.group(0)] += 1
    rest = FOOTNOTE.sub(" ", SUBSTITUTION.sub(" ", rest))
    for match in NUMBER.finditer(rest):
        found["number"][match.group(0).translate(SIGNS)] += 1  # −3.5 and -3.5 are one number
    return found


def prose(text: str) -> str:
    """A message without its roles' targets, code, math, links and numbers: what is translated."""
    def keep_title(match):
        if match.lastgroup != "role" and match.group("role") is None:
            return " "
        content = ROLE.fullmatch(match.group(0)).group(2)
        return " " + (re.sub(r"<[^<>]+>\s*$", "", content) if "<" in content else "") + " "

    rest = SPANS.sub(keep_title, text)
    for pattern in (LINK, AUTOLINK, HTML_TAG, FOOTNOTE, SUBSTITUTION, NUMBER):
        rest = pattern.sub(" ", rest)
    return rest


TEXT_IN_MATH = re.compile(r"\\(?:text|mbox)\{[^{}]*\}")
LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
WORDS = re.compile(r"[A-Za-z]{2,}[ ,.;:]+[A-Za-z]{2,}[ ,.;:]+[A-Za-z]{2,}")


def is_display_math(msgid: str) -> bool:
    """A display-math block's message: raw LaTeX, no ``$`` and no English sentence outside ``\\text``."""
    return "$" not in msgid and bool(LATEX_COMMAND.search(msgid)) and not WORDS.search(TEXT_IN_MATH.sub(" ", msgid))


def _math_skeleton(latex: str) -> str:
    return re.sub(r"\s+", "", TEXT_IN_MATH.sub(r"\\text{}", latex))


_MARKDOWN = None


def stray_stars(text: str) -> int:
    """Stars that CommonMark leaves as text: markup that does not render. In Chinese,
    ``**做法。**对`` is no bold: a closing ``**`` after punctuation must be followed by a space or
    punctuation."""
    global _MARKDOWN
    if _MARKDOWN is None:
        from markdown_it import MarkdownIt

        _MARKDOWN = MarkdownIt("commonmark")
    # stars inside math, code or roles are not markup; each such span becomes one punctuation
    # character, as its delimiters are for the flanking rules
    text = SPANS.sub("%", text)
    return sum(t.content.count("*") for block in _MARKDOWN.parse(text) if block.children
               for t in block.children if t.type == "text")


LIST_START = re.compile(r"^(\d+)([.)])(\s)")


def escape_list_start(msgstr: str) -> str:
    """``0. 手算三条评论`` is parsed as a list item, and Sphinx drops a translated heading that does
    not parse as text: ``0\\. 手算三条评论`` renders as ``0. ...``."""
    return LIST_START.sub(r"\1\\\2\3", msgstr)


def fidelity_problems(msgid: str, msgstr: str, markdown: bool = True) -> list[str]:
    """What a translation changed that it must keep: [] when it is faithful. A display-math block
    may translate only the words inside its ``\\text{...}``."""
    if is_display_math(msgid):
        if _math_skeleton(msgid) != _math_skeleton(msgstr):
            return ["display math changed outside \\text{...}"]
        return []
    problems = []
    if markdown and LIST_START.match(msgstr):
        problems.append("starts like a numbered list item, which Sphinx does not use: write `N\\. ` (fill does)")
    source, target = tokens(msgid), tokens(msgstr)
    for kind in source:
        missing = source[kind] - target[kind]
        extra = target[kind] - source[kind]
        if missing:
            problems.append(f"{kind} missing or changed: {', '.join(map(repr, missing.elements()))}")
        if extra and kind in ("number", "math", "role", "footnote"):
            problems.append(f"{kind} not in the English: {', '.join(map(repr, extra.elements()))}")
    if "*" in msgstr and stray_stars(msgstr) > stray_stars(msgid):
        problems.append("markup: bold or italics that do not render (stars left as text): put Chinese "
                        "punctuation outside the stars, **做法**。")
    return problems


# ---------------------------------------------------------------------------------- terms
def load_terms() -> list[dict]:
    """The term table: English, Chinese, whether the check enforces it, a note."""
    with open(TERMS, encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, fieldnames=["english", "chinese", "strict", "note"])
        next(rows)  # the header the glossary shows
        return [{**row, "strict": "yes" if row["strict"].strip().lower() in ("yes", "是") else "no"} for row in rows]


def term_pattern(english: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", english)]
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + r"(?:s|es)?(?![\w-])", re.I)


def term_problems(msgid: str, msgstr: str, terms: list[dict]) -> list[str]:
    """Strict terms of the English prose that the translation renders otherwise."""
    text = prose(msgid)
    problems = []
    for term in terms:
        if term["strict"] != "yes" or not term_pattern(term["english"]).search(text):
            continue
        if term["chinese"] in msgstr or term_pattern(term["english"]).search(msgstr):
            continue  # the term's Chinese, or the English kept as a name
        problems.append(f"term {term['english']!r} should be {term['chinese']!r}")
    return problems


# ---------------------------------------------------------------------------------- catalogues
def key(msgid: str) -> str:
    """A short, stable name for a message (for ``todo`` and ``fill``)."""
    return hashlib.sha1(msgid.encode("utf-8")).hexdigest()[:10]


def nothing_to_translate(msgid: str, terms: list[dict], page: str = "") -> bool:
    """Numbers, math, code, links only (Chinese words alone count as nothing to translate); or, on
    the glossary, a cell of the term table's English column."""
    if page == TERM_PAGE and msgid in {t["english"] for t in terms}:
        return True
    if is_display_math(msgid) and not TEXT_IN_MATH.search(msgid):
        return True
    return not LETTERS.search(prose(msgid))  # Chinese words quoted in English prose still need translating


def page_of(path: Path, base: Path) -> str:
    return path.relative_to(base).with_suffix("").as_posix()


class CatalogueError(ValueError):
    """A catalogue that cannot be read, or written back, without losing or changing text."""


# What a line of a catalogue may be (gettext's PO format, as Babel reads it): a comment, a keyword
# with one quoted string, or a quoted string continuing the one before. Babel itself reads a string
# without its closing quote by dropping its last character, and an unquoted line only with a warning.
_PO_STRING = r'"(?:[^"\\]|\\[\\"abfnrtv])*"'
_PO_LINE = re.compile(rf'(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)[ \t]+)?{_PO_STRING}')


def parse_catalogue(data: bytes, path: Path, locale: str | None = LANGUAGE) -> Catalog:
    """A catalogue read strictly: UTF-8 text, every line well formed (Babel's ``abort_invalid`` as
    well), a UTF-8 charset in its header; else :class:`CatalogueError` naming the file and line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        guess = next((name for name in ("gb18030", "big5", "cp1252") if _decodes(data, name)), None)
        raise CatalogueError(
            f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x})"
            + (f"; it reads as {guess.upper()}{' (GBK)' if guess == 'gb18030' else ''}" if guess else "")
            + f": the catalogues are UTF-8; convert it, e.g. iconv -f {(guess or 'GB18030').upper()} -t UTF-8") from None
    lines = text.split("\n")  # only "\n" ends a line: U+2028 and the like are text
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#~"):
            stripped = stripped[2:].strip()
        elif stripped.startswith("#") or not stripped:
            continue
        if stripped and not _PO_LINE.fullmatch(stripped):
            problem = ("a string without its closing quote, or an unknown escape" if '"' in stripped
                       else "a line that is neither a comment, a keyword with a quoted string, nor a quoted string")
            raise CatalogueError(f"{path}:{number}: malformed: {problem}: {stripped[:80]!r}")
    try:
        catalog = read_po(lines, locale=locale, abort_invalid=True)
    except PoFileError as error:
        raise CatalogueError(f"{path}:{error.lineno + 1}: malformed: {error}: {error.line[:80]!r}") from None
    if catalog.charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise CatalogueError(f"{path}: its header declares charset={catalog.charset}: the catalogues are UTF-8 "
                             "(write Content-Type: text/plain; charset=utf-8)")
    return catalog


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def read(path: Path, template: bool = False) -> Catalog:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CatalogueError(f"cannot read {path}: {error.strerror}") from None
    return parse_catalogue(data, path, None if template else LANGUAGE)


def _content(catalog: Catalog) -> dict:
    return {(m.id, m.context): (m.string, m.fuzzy) for m in catalog if m.id}


def write(catalog: Catalog, path: Path) -> None:
    """Write ``catalog`` to ``path`` only if the written text reads back, strictly, as the same
    messages, translations and fuzzy flags; else :class:`CatalogueError` (the file is unchanged)."""
    buffer = BytesIO()
    write_po(buffer, catalog, width=WIDTH, ignore_obsolete=True, include_previous=True, sort_output=False)
    data = buffer.getvalue()
    try:
        written = parse_catalogue(data, path, catalog.locale_identifier)
    except CatalogueError as error:
        raise CatalogueError(f"refusing to write {path}: the text would not read back ({error}); the file is "
                             "unchanged") from None
    intended, back = _content(catalog), _content(written)
    lines = {(m.id, m.context): m.lineno for m in written if m.id}
    for k, value in intended.items():
        if back.get(k) != value:
            where = f"{path}:{lines[k]}" if k in lines else str(path)
            part = "is missing" if k not in back else ("translation changes" if back[k][0] != value[0] else
                                                       "fuzzy flag changes")
            raise CatalogueError(f"refusing to write {where}: the message {k[0][:60]!r} would not read back as "
                                 f"written (its {part}); the file is unchanged")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def extract() -> list[Path]:
    """Write the English messages to ``_build/gettext/<page>.pot`` (no notebook is executed)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from build import write_conf  # noqa: PLC0415

    write_conf()
    shutil.rmtree(POT_DIR, ignore_errors=True)
    cmd = [sys.executable, "-m", "sphinx", "-b", "gettext", str(ROOT), str(POT_DIR), "-c", str(ROOT), "-q",
           "-d", str(ROOT / "_build" / ".doctrees" / "gettext"), "-D", "nb_execution_mode=off", "-E"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"extracting the messages failed:\n{out.stdout}\n{out.stderr}")
    return sorted(p for p in POT_DIR.rglob("*.pot") if not p.relative_to(POT_DIR).parts[0].startswith("_"))


def update(only: set[str] | None = None) -> list[str]:
    """Merge the English into the catalogues (of the pages ``only``, else all); return what changed."""
    terms = load_terms()
    for po_path in sorted(LOCALES.rglob("*.po")):  # a malformed catalogue stops it before anything is written
        if not only or page_of(po_path, LOCALES) in only:
            read(po_path)
    report = []
    pages = set()
    for pot_path in extract():
        page = page_of(pot_path, POT_DIR)
        pages.add(page)
        if only and page not in only:
            continue
        template = read(pot_path, template=True)
        po_path = LOCALES / f"{page}.po"
        if po_path.is_file():
            catalog = read(po_path)
            catalog.update(template, update_header_comment=False, update_creation_date=False)
        else:
            catalog = Catalog(locale=LANGUAGE, project="Attention, step by step", fuzzy=False)
            catalog.update(template, update_creation_date=False)
        catalog.project, catalog.fuzzy = "Attention, step by step", False
        filled = 0
        for message in catalog:
            if message.id and (not message.string or message.fuzzy) and nothing_to_translate(message.id, terms, page):
                message.string, filled = message.id, filled + 1
                message.flags.discard("fuzzy")
                message.previous_id = []
        catalog.obsolete.clear()
        write(catalog, po_path)
        todo = sum(1 for m in catalog if m.id and (not m.string or m.fuzzy))
        report.append(f"{page}: {len(template)} messages, {todo} to translate" + (f", {filled} filled with themselves" if filled else ""))
    for po_path in sorted(LOCALES.rglob("*.po")):
        if page_of(po_path, LOCALES) not in pages and not only:
            po_path.unlink()
            report.append(f"{page_of(po_path, LOCALES)}: removed (the page no longer exists)")
    return report


def check(extract_first: bool = True, only: set[str] | None = None) -> list[str]:
    """Every problem of the catalogues (of the pages ``only``, else all) against the English, as
    lines (empty: all is well)."""
    terms = load_terms()
    pots = extract() if extract_first else sorted(p for p in POT_DIR.rglob("*.pot") if not p.relative_to(POT_DIR).parts[0].startswith("_"))
    if not pots:
        return [f"no message templates in {POT_DIR}: nothing was checked; run the check "
                "without --no-extract (or make translations) first"]
    problems = []
    pages = set()
    for pot_path in pots:
        page = page_of(pot_path, POT_DIR)
        pages.add(page)
        if only and page not in only:
            continue
        po_path = LOCALES / f"{page}.po"
        if not po_path.is_file():
            problems.append(f"{page}: no catalogue ({po_path.relative_to(ROOT)}); run make translations")
            continue
        try:
            english = {m.id for m in read(pot_path, template=True) if m.id}
            catalog = read(po_path)
        except CatalogueError as error:
            problems.append(f"{page}: {error}")
            continue
        have = {m.id: m for m in catalog if m.id}
        for msgid in english - set(have):
            problems.append(f"{page} [{key(msgid)}]: not in the catalogue (the English changed; run make translations): {msgid[:70]!r}")
        for msgid in set(have) - english:
            problems.append(f"{page} [{key(msgid)}]: out of date (no longer in the English; run make translations): {msgid[:70]!r}")
        if catalog.obsolete:
            problems.append(f"{page}: {len(catalog.obsolete)} obsolete messages; run make translations")
        for msgid in english & set(have):
            message = have[msgid]
            where = f"{page} [{key(msgid)}]"
            if not message.string:
                problems.append(f"{where}: untranslated: {msgid[:70]!r}")
            elif message.fuzzy:
                problems.append(f"{where}: fuzzy (the English changed; check the translation): {msgid[:70]!r}")
            else:
                problems += [f"{where}: {p}" for p in fidelity_problems(msgid, message.string) + term_problems(msgid, message.string, terms)]
    for po_path in sorted(LOCALES.rglob("*.po")):
        if page_of(po_path, LOCALES) not in pages and not only:
            problems.append(f"{page_of(po_path, LOCALES)}: a catalogue for a page that does not exist; run make translations")
    unknown = sorted((only or set()) - pages - {"figures"})
    if unknown:
        problems.append(f"no such page: {', '.join(unknown)} (the pages are {', '.join(sorted(pages))} and 'figures')")
    if not only or "figures" in only:
        problems += label_problems()
    return problems


def label_problems() -> list[str]:
    """The figures' label table: every text with words translated, faithfully."""
    if not LABELS.is_file():
        return [f"{LABELS.relative_to(ROOT)} is missing; run python tools/figures.py --labels"]
    problems = []
    for english, chinese in json.loads(LABELS.read_text(encoding="utf-8")).items():
        where = f"figures [{key(english)}]"
        if not chinese:
            problems.append(f"{where}: untranslated figure text: {english[:70]!r}")
        else:
            problems += [f"{where}: {p}" for p in fidelity_problems(english, chinese, markdown=False)]
    return problems


def stats(skip_unreadable: bool = False) -> list[tuple[str, int, int, int, int]]:
    """(page, messages, translated, English words, words translated) per catalogue (one that cannot
    be read: an error, or left out with ``skip_unreadable``)."""
    rows = []
    for po_path in sorted(LOCALES.rglob("*.po")):
        try:
            catalog = read(po_path)
        except CatalogueError:
            if skip_unreadable:
                continue
            raise
        messages = [m for m in catalog if m.id]
        done = [m for m in messages if m.string and not m.fuzzy]
        rows.append((page_of(po_path, LOCALES), len(messages), len(done),
                     sum(len(m.id.split()) for m in messages), sum(len(m.id.split()) for m in done)))
    return rows


def todo(page: str) -> dict:
    """The messages of ``page`` still to translate: {key: {"english", "previous english"?, "old translation"?}}.
    The page ``figures`` is the figures' label table."""
    if page == "figures":
        table = json.loads(LABELS.read_text(encoding="utf-8"))
        return {key(english): {"english": english} for english, chinese in table.items() if not chinese}
    catalog = read(LOCALES / f"{page}.po")
    out = {}
    for message in catalog:
        if message.id and (not message.string or message.fuzzy):
            entry = {"english": message.id}
            if message.fuzzy and message.string:
                entry["old translation"] = message.string
                if message.previous_id:
                    entry["previous english"] = message.previous_id[0] if isinstance(message.previous_id, list) else message.previous_id
            out[key(message.id)] = entry
    return out


def fill(page: str, translations: dict[str, str]) -> list[str]:
    """Set the translations of ``page`` from {key: msgstr}; return the fidelity problems of those set."""
    terms = load_terms()
    if page == "figures":
        table = json.loads(LABELS.read_text(encoding="utf-8"))
        by_key = {key(english): english for english in table}
        problems = []
        for k, text in translations.items():
            if k not in by_key:
                problems.append(f"[{k}]: no such figure text (is the key from an older `todo`?)")
                continue
            table[by_key[k]] = text
            problems += [f"[{k}]: {p}" for p in fidelity_problems(by_key[k], text, markdown=False)]
        LABELS.write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return problems
    path = LOCALES / f"{page}.po"
    catalog = read(path)
    by_key = {key(m.id): m for m in catalog if m.id}
    problems = []
    for k, text in translations.items():
        message = by_key.get(k)
        if message is None:
            problems.append(f"[{k}]: no such message in {page} (is the key from an older `todo`?)")
            continue
        message.string = text = escape_list_start(text)
        message.flags.discard("fuzzy")
        message.previous_id = []
        problems += [f"[{k}]: {p}" for p in fidelity_problems(message.id, text) + term_problems(message.id, text, terms)]
    write(catalog, path)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    upd = sub.add_parser("update", help="extract the English and merge it into the catalogues")
    upd.add_argument("--page", action="append", help="only this page's catalogue (repeatable)")
    chk = sub.add_parser("check", help="coverage, fuzzy, out of date, fidelity and terms (exit 1 on a problem)")
    chk.add_argument("--no-extract", action="store_true", help="use the .pot files already in _build/gettext")
    chk.add_argument("--page", action="append", help="only this page (repeatable), e.g. chapters/03_multihead_self_attention")
    sub.add_parser("stats", help="messages and words per page")
    dp = sub.add_parser("dump", help="every message of a page with its translation, as JSON (to review one)")
    dp.add_argument("page")
    td = sub.add_parser("todo", help="the messages of a page still to translate, as JSON")
    td.add_argument("page", help="e.g. chapters/03_multihead_self_attention")
    fl = sub.add_parser("fill", help="set translations from a JSON file {key: msgstr}")
    fl.add_argument("page")
    fl.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    page = getattr(args, "page", None)
    if args.command in ("todo", "fill", "dump") and page != "figures" and not (LOCALES / f"{page}.po").is_file():
        known = sorted(page_of(p, LOCALES) for p in LOCALES.rglob("*.po"))
        raise SystemExit(f"no catalogue for page {page!r}: expected one of {', '.join(known)} or 'figures'")
    if args.command in ("check", "update") and args.page:  # at once, not after extracting every page
        unknown = [p for p in args.page if p != "figures" and not (LOCALES / f"{p}.po").is_file()
                   and not any((ROOT / f"{p}{suffix}").is_file() for suffix in (".md", ".ipynb"))]
        if unknown:
            known = sorted(page_of(p, LOCALES) for p in LOCALES.rglob("*.po"))
            raise SystemExit(f"no such page: {', '.join(map(repr, unknown))}: expected one of {', '.join(known)}, "
                             "'figures', or a new page's source path without .md")
    if args.command == "fill":
        try:
            translations = json.loads(args.file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise SystemExit(f"{args.file}: expected a JSON object {{key: Chinese}} ({error})")
        if not isinstance(translations, dict) or not all(isinstance(v, str) for v in translations.values()):
            raise SystemExit(f"{args.file}: expected a JSON object mapping message keys to Chinese strings")
        args.translations = translations
    try:
        return _run(args)
    except CatalogueError as error:
        raise SystemExit(f"error: {error}") from None


def _run(args: argparse.Namespace) -> int:
    if args.command == "update":
        print("\n".join(update(set(args.page) if args.page else None)))
    elif args.command == "check":
        problems = check(extract_first=not args.no_extract, only=set(args.page) if args.page else None)
        rows = stats(skip_unreadable=True)
        messages, done = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"Chinese edition: {done} of {messages} messages translated, {len(problems)} problems")
        print("\n".join(problems[:200]) + (f"\n... and {len(problems) - 200} more" if len(problems) > 200 else ""))
        return 1 if problems else 0
    elif args.command == "stats":
        rows = stats()
        for page, n, d, w, wd in rows:
            print(f"{page:45s} {d:5d}/{n:<5d} messages {wd:6d}/{w:<6d} words")
        print(f"{'all':45s} {sum(r[2] for r in rows):5d}/{sum(r[1] for r in rows):<5d} messages "
              f"{sum(r[4] for r in rows):6d}/{sum(r[3] for r in rows):<6d} words")
    elif args.command == "dump":
        catalog = read(LOCALES / f"{args.page}.po")
        print(json.dumps({key(m.id): {"english": m.id, "chinese": m.string} for m in catalog if m.id},
                         ensure_ascii=False, indent=1))
    elif args.command == "todo":
        print(json.dumps(todo(args.page), ensure_ascii=False, indent=1))
    elif args.command == "fill":
        problems = fill(args.page, args.translations)
        print("\n".join(problems) if problems else "filled; no fidelity or term problems")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
