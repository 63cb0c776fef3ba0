# Hand-written course infrastructure (not generated from a notebook).
"""Load the course's datasets through Hugging Face ``datasets``.

Where the data comes from, in order:

1. a **data directory** with local Parquet copies: the ``data_dir`` argument, else
   ``$ATTN_DATA_DIR``, else ``data/`` at the repository root. Layout:
   ``<data_dir>/imdb/imdb_train.parquet`` and so on. Each file is checked against its SHA-256
   sum before use: from the directory's ``SHA256SUMS`` file when it lists the file, else from
   the sums of the course's reference copies below.
2. the **Hugging Face hub** (e.g. ``stanfordnlp/imdb``), unless offline (``ATTN_OFFLINE=1``,
   ``HF_DATASETS_OFFLINE=1`` or ``HF_HUB_OFFLINE=1``).

When neither works, :class:`DataNotFoundError` says where it looked and how to provide the data.
Every split has at least the columns ``text`` (str) and ``label`` (int).

To make a local copy once, with internet (the test suite runs offline and needs one)::

    python -m attn_tutorial.data fetch imdb --to data
    python -m attn_tutorial.data build polarity_v2 --to data   # no hub copy: the authors' archive
    python -m attn_tutorial.data build tatoeba_cmn --to data   # no hub copy: manythings.org's cmn-eng.zip

``make book`` builds polarity v2.0 into the data directory (``$ATTN_DATA_DIR``, else ``data/`` in the
repository) by itself when it is missing there and the machine is online.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from attn_tutorial.paths import cache_dir, repo_root
from attn_tutorial.runs import atomic_write, atomic_write_text, exclusive

DATA_DIR_ENV = "ATTN_DATA_DIR"


@dataclass(frozen=True)
class DatasetSpec:
    """Where one dataset lives locally and on the hub."""

    name: str
    local_files: dict  # split -> path relative to the data directory
    sha256: dict  # relative path -> expected SHA-256
    hub_id: str | None
    citation: str
    note: str = ""
    fetchable: bool = False  # the hub copy has the same splits and columns as the local layout


DATASETS: dict[str, DatasetSpec] = {
    "imdb": DatasetSpec(
        name="imdb",
        local_files={"train": "imdb/imdb_train.parquet", "test": "imdb/imdb_test.parquet"},
        sha256={
            "imdb/imdb_train.parquet": "483e280d393290bdcc5306b6a19c9d87be5e35695f116e07986b1a8d850a6ca3",
            "imdb/imdb_test.parquet": "3e3636235b8bebfde8545789dbf8517e6d9de7b696f9ddb8e1bf5272409aae66",
        },
        hub_id="stanfordnlp/imdb",
        citation="maas2011imdb",
        note="Large Movie Review Dataset: 25,000 train / 25,000 test reviews, label 1 = positive.",
        fetchable=True,
    ),
    "mr": DatasetSpec(
        name="mr",
        local_files={"train": "mr/rt_polarity.parquet"},
        sha256={"mr/rt_polarity.parquet": "a0c3469023b6c7c3cee3688432d08a067849da486ce7008261dbe87dc700ffec"},
        hub_id="cornell-movie-review-data/rotten_tomatoes",
        citation="pang2005seeing",
        note="Sentence polarity v1.0; the local copy has a `fold` column for 10-fold CV, "
        "the hub copy has its own train/validation/test split instead.",
    ),
    "polarity_v2": DatasetSpec(
        name="polarity_v2",
        local_files={"train": "polarity_v2/review_polarity_v2.parquet"},
        sha256={"polarity_v2/review_polarity_v2.parquet":
                "350b002253c51bea9d780792c30b82ad5cd8ae3d9da3af329b6b0ca5e6b92e7b"},
        hub_id=None,
        citation="pang2004sentimental",
        note="Polarity dataset v2.0: 2,000 movie reviews (1,000 / 1,000), columns doc_id, label, fold "
        "(the authors' 10 folds) and sentences (lower-cased, tokenised); local copy only.",
    ),
    "tatoeba_cmn": DatasetSpec(
        name="tatoeba_cmn",
        local_files={"train": "tatoeba_cmn/cmn_eng.parquet"},
        sha256={"tatoeba_cmn/cmn_eng.parquet": "50655b55ae0356bb45ce282999b5ad639e496ad77f3f9e402773f8f5eede8e59"},
        hub_id=None,
        citation="tatoeba",
        note="English-Mandarin sentence pairs from the Tatoeba Project (29,155 pairs; manythings.org's "
        "cmn-eng.zip): columns line, en, zh (simplified, unsegmented) and attribution (CC BY 2.0 FR: keep "
        "it with any copy); one split, which chapter 11 divides by distinct English sentence.",
    ),
}


class DataNotFoundError(FileNotFoundError):
    """Neither a local copy nor the hub could provide a dataset."""


class ChecksumError(ValueError):
    """A local data file does not match its expected SHA-256."""


_verified: dict[tuple, str] = {}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_checksum(path: Path, expected: str) -> None:
    """Raise :class:`ChecksumError` unless ``path`` hashes to ``expected`` (memoised per file state)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if _verified.get(key) == expected:
        return
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(
            f"{path} has SHA-256 {actual}, expected {expected}: the file is corrupt or a different "
            "version. Replace it with the original copy (see the data README)."
        )
    _verified[key] = expected


def read_sums(path: Path) -> dict[str, str]:
    """Parse a ``sha256sum``-style file into {relative path: hex digest}."""
    sums = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.strip().split(maxsplit=1)
            if len(parts) == 2:
                sums[parts[1].lstrip("*").removeprefix("./")] = parts[0].lower()
    return sums


def expected_sha256(directory: Path, relative: str, spec: DatasetSpec) -> str:
    """The SHA-256 a local file must have: the directory's SHA256SUMS first, else the reference sum."""
    listed = read_sums(directory / "SHA256SUMS").get(relative)
    if listed:
        return listed
    if relative in spec.sha256:
        return spec.sha256[relative]
    raise ChecksumError(f"no SHA-256 known for {directory / relative}: list it in {directory / 'SHA256SUMS'}")


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The data directory to use: argument, else ``$ATTN_DATA_DIR``, else ``<repo>/data``, else None."""
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise DataNotFoundError(f"data directory {path} does not exist (passed as data_dir)")
        return path
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise DataNotFoundError(f"data directory {path} does not exist (from ${DATA_DIR_ENV})")
        return path
    root = repo_root()
    if root is not None and (root / "data").is_dir():
        return root / "data"
    return None


def _offline() -> bool:
    flags = ("ATTN_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "ATTN_NO_NETWORK")
    return any(os.environ.get(f, "").strip().lower() in ("1", "true", "yes") for f in flags)


def load_dataset(name: str, split: str | None = None, data_dir=None):
    """Load dataset ``name`` (``"imdb"``, ``"mr"``) as a ``datasets.DatasetDict`` or one split.

    Args:
        name: key of :data:`DATASETS`.
        split: ``"train"``/``"test"``/...; ``None`` returns every split.
        data_dir: directory with local Parquet copies (overrides ``$ATTN_DATA_DIR``).

    Raises ``ValueError`` when a split lacks a column the course reads (``text`` and ``label``;
    ``sentences`` and ``label`` for ``polarity_v2``; ``en``, ``zh`` and ``attribution`` for
    ``tatoeba_cmn``).
    """
    import datasets

    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: expected one of {sorted(DATASETS)}")
    spec = DATASETS[name]
    if split is not None and split not in spec.local_files:
        raise ValueError(f"dataset {name!r} has no split {split!r}: expected one of {sorted(spec.local_files)}")
    required = {"polarity_v2": ["sentences", "label"],
                "tatoeba_cmn": ["en", "zh", "attribution"]}.get(name, ["text", "label"])

    def checked(loaded, sources: dict):
        """``loaded`` (one split or all of them), once every split has the required columns."""
        for part, table in ({split: loaded} if split else loaded).items():
            missing = [column for column in required if column not in table.column_names]
            if missing:
                raise ValueError(f"{sources[part]} (dataset {name!r}, split {part!r}) has columns "
                                 f"{table.column_names}: expected at least {required}, missing {missing}")
        return loaded

    looked = []
    directory = resolve_data_dir(data_dir)
    if directory is not None:
        files = {s: directory / rel for s, rel in spec.local_files.items()}
        missing = [str(p) for p in files.values() if not p.is_file()]
        if not missing:
            for rel in spec.local_files.values():
                verify_checksum(directory / rel, expected_sha256(directory, rel, spec))
            wanted = {split: str(files[split])} if split else {s: str(p) for s, p in files.items()}
            loaded = datasets.load_dataset(
                "parquet", data_files=wanted, cache_dir=str(cache_dir() / "hf_datasets")
            )
            return checked(loaded[split] if split else loaded, {s: str(p) for s, p in files.items()})
        looked.append(f"local copy: missing {', '.join(missing)}")
    else:
        looked.append(f"local copy: no data directory (argument, ${DATA_DIR_ENV} or <repo>/data)")

    if spec.hub_id is None:
        looked.append("hub: this dataset has no hub copy in the course's layout")
    elif _offline():
        looked.append(f"hub: {spec.hub_id} not tried, running offline (ATTN_OFFLINE/HF_*_OFFLINE/ATTN_NO_NETWORK)")
    else:
        try:
            loaded = datasets.load_dataset(spec.hub_id, cache_dir=str(cache_dir() / "hf_datasets"))
        except Exception as error:  # network, auth or hub errors all mean "not available here"
            looked.append(f"hub: {spec.hub_id} failed ({type(error).__name__}: {str(error)[:200]})")
        else:
            return checked(loaded[split] if split else loaded, {s: f"hub copy {spec.hub_id}" for s in loaded})

    raise DataNotFoundError(
        f"could not load dataset {name!r}. Looked at:\n  - " + "\n  - ".join(looked) + "\n"
        f"Provide it by either setting {DATA_DIR_ENV} to a folder holding "
        + ", ".join(spec.local_files.values())
        + (f", or connecting to the internet so `datasets` can download {spec.hub_id}." if spec.hub_id else
           f", or building it from its authors' archive: python -m attn_tutorial.data build {name}"
           " (downloads it; --source for a copy you downloaded).")
    )


def take_subset(dataset, size: int | None, seed: int = 0):
    """A reproducible random subset of ``size`` rows (all rows, shuffled, when ``size`` is None).

    During a dry run (:mod:`attn_tutorial.runs`) the subset is cut to the dry run's slice."""
    from attn_tutorial import runs

    if size is not None and size <= 0:
        raise ValueError(f"subset size must be positive or None, got {size}")
    size = runs.cap(size, len(dataset), "rows")
    shuffled = dataset.shuffle(seed=seed)
    if size is None or size >= len(shuffled):
        return shuffled
    return shuffled.select(range(size))


def train_val_split(dataset, val_fraction: float, seed: int = 0):
    """Carve a validation split out of a training split; the test split is never used for selection.

    Returns ``(train, validation)``.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    parts = dataset.train_test_split(test_size=val_fraction, seed=seed)
    return parts["train"], parts["test"]


def fetch(name: str, target: str | os.PathLike) -> list[Path]:
    """Download dataset ``name`` from the hub into ``target`` in the local layout; update SHA256SUMS."""
    import datasets

    spec = DATASETS.get(name)
    if spec is None or not spec.fetchable:
        fetchable = sorted(n for n, s in DATASETS.items() if s.fetchable)
        raise ValueError(f"cannot fetch {name!r}: the datasets with a hub copy in the local layout are {fetchable}")
    target = Path(target)
    loaded = datasets.load_dataset(spec.hub_id)
    written = []
    for split, rel in spec.local_files.items():
        if split not in loaded:
            raise DataNotFoundError(f"hub copy {spec.hub_id} has no split {split!r}")
        path = target / rel
        table = loaded[split]
        atomic_write(path, lambda temporary: table.to_parquet(str(temporary)))  # never half a file
        written.append(path)
    record_sums(target, [str(path.relative_to(target)) for path in written])
    return written


def record_sums(target: Path, relative_paths: list[str]) -> None:
    """Add (or update) the SHA-256 of each file in ``target``'s ``SHA256SUMS``, so the loader accepts it."""
    with exclusive(target / "SHA256SUMS", doing="updating"):  # two builders at once: neither sum is lost
        sums = read_sums(target / "SHA256SUMS")
        for rel in relative_paths:
            sums[rel] = sha256_of(target / rel)
        lines = [f"{digest}  ./{rel}" for rel, digest in sorted(sums.items())]
        atomic_write_text(target / "SHA256SUMS", "\n".join(lines) + "\n")


# Polarity v2.0 has no hub copy: it is built from the authors' archive, whose txt_sentoken/pos and
# txt_sentoken/neg folders hold one review per file (cv000_29590.txt ... cv999_*.txt), one tokenised,
# lower-cased sentence per line. The file number's hundreds are the authors' ten folds.
POLARITY_URL = "https://www.cs.cornell.edu/people/pabo/movie-review-data/review_polarity.tar.gz"
# SHA-256 of the table's content (see polarity_content_sha256), the same for every Parquet writer.
POLARITY_CONTENT_SHA256 = "753b33628054b70a97982055e9a47a4c6bb3277d62232a411c4bb45c9893824b"


def polarity_content_sha256(table) -> str:
    """A digest of polarity v2.0's content (doc_id, label, fold, sentences, in row order), which does
    not depend on how the Parquet file was written."""
    digest = hashlib.sha256()
    for doc_id, label, fold, sentences in zip(table["doc_id"], table["label"], table["fold"], table["sentences"]):
        digest.update(f"{doc_id}\t{int(label)}\t{int(fold)}\n".encode())
        digest.update(("\n".join(sentences) + "\n\n").encode())
    return digest.hexdigest()


def _read_with_progress(response, what: str) -> bytes:
    """The body of an HTTP response, read in blocks under a progress bar."""
    from tqdm.auto import tqdm

    total = int(response.headers.get("Content-Length") or 0) or None
    blocks = []
    with tqdm(total=total, unit="B", unit_scale=True, desc=what) as bar:
        for block in iter(lambda: response.read(1 << 16), b""):
            blocks.append(block)
            bar.update(len(block))
    return b"".join(blocks)


def _download(url: str, what: str, dataset: str) -> bytes:
    """The file at ``url``, with a progress bar; a :class:`DataNotFoundError` saying how to provide it
    (``--source``) when offline or when the download fails."""
    import urllib.request

    if _offline():
        raise DataNotFoundError(f"{dataset} must be downloaded, but this session is offline: download "
                                f"{url} elsewhere and pass it with --source")
    request = urllib.request.Request(url, headers={"User-Agent": "attn-tutorial"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return _read_with_progress(response, what)
    except OSError as error:  # URLError, timeouts, refused connections
        raise DataNotFoundError(f"could not download {url} ({error}); download it where the "
                                "network allows and pass the file with --source") from None


def _save_table(table, name: str, target: str | os.PathLike) -> Path:
    """Write dataset ``name``'s one table into ``target`` in the local layout (atomically) and sum it."""
    rel = DATASETS[name].local_files["train"]
    path = Path(target) / rel
    atomic_write(path, lambda temporary: table.to_parquet(temporary, index=False))
    record_sums(Path(target), [rel])
    return path


def build_polarity_v2(target: str | os.PathLike = "data", source: str | os.PathLike | None = None,
                      *, check_content: bool = True) -> Path:
    """Write ``<target>/polarity_v2/review_polarity_v2.parquet`` from the authors' archive.

    ``source`` is a downloaded ``review_polarity.tar.gz``; without it the archive is downloaded
    from :data:`POLARITY_URL` (unless offline). Rows: the positive reviews, then the negative ones,
    each by file name; columns ``doc_id``, ``label`` (1 = positive), ``fold`` and ``sentences``.
    With ``check_content`` the result must match the course's reference copy
    (:data:`POLARITY_CONTENT_SHA256`). The directory's ``SHA256SUMS`` gets the new file's sum.
    """
    import io
    import re
    import tarfile

    import pandas as pd

    if source is None:
        payload = _download(POLARITY_URL, "review_polarity.tar.gz", "polarity v2.0")  # about 3 MB
    try:
        archive = (tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") if source is None
                   else tarfile.open(Path(source), mode="r:*"))
    except (OSError, tarfile.TarError) as error:  # missing file, not a tar archive
        raise DataNotFoundError(f"cannot read {source or POLARITY_URL} as a tar archive ({error}): expected "
                                "the authors' review_polarity.tar.gz (polarity dataset v2.0)") from None
    name_re = re.compile(r"(?:^|/)txt_sentoken/(pos|neg)/(cv(\d{3})_\d+)\.txt$")
    rows = []
    with archive:
        for member in archive.getmembers():
            found = name_re.search(member.name)
            if not (found and member.isfile()):
                continue
            try:
                text = archive.extractfile(member).read().decode("utf-8")
            except UnicodeDecodeError:
                raise ChecksumError(f"{member.name} in {source or POLARITY_URL} is not UTF-8 text: expected "
                                    "the authors' review_polarity.tar.gz") from None
            sentences = [line.strip() for line in text.splitlines() if line.strip()]
            rows.append({"doc_id": found.group(2), "label": int(found.group(1) == "pos"),
                         "fold": int(found.group(3)) // 100, "sentences": sentences})
    if not rows:
        raise DataNotFoundError(f"{source or POLARITY_URL} holds no txt_sentoken/pos|neg/cv*.txt reviews: "
                                "expected the authors' review_polarity.tar.gz (polarity dataset v2.0)")
    table = pd.DataFrame(rows).sort_values(["label", "doc_id"], ascending=[False, True], kind="stable")
    table = table.reset_index(drop=True).astype({"label": "int8", "fold": "int8"})
    if check_content and polarity_content_sha256(table) != POLARITY_CONTENT_SHA256:
        raise ChecksumError(f"the reviews read from {source or POLARITY_URL} ({len(table)} documents) differ from "
                            "polarity dataset v2.0 as the course uses it; pass the authors' review_polarity.tar.gz")
    return _save_table(table, "polarity_v2", target)


# The Tatoeba English-Mandarin pairs have no hub copy in this layout: manythings.org packages them
# as cmn-eng.zip, whose cmn.txt holds one pair per line, "English<TAB>Chinese<TAB>attribution",
# shortest English first. The course's copy was made from the release with this cmn.txt:
TATOEBA_URL = "https://www.manythings.org/anki/cmn-eng.zip"
TATOEBA_SOURCE_SHA256 = "aa264a2447b26ab7c9d413f8321f9e2a779fd134b5118306b6e26a3499b3926e"


def build_tatoeba_cmn(target: str | os.PathLike = "data", source: str | os.PathLike | None = None) -> Path:
    """Write ``<target>/tatoeba_cmn/cmn_eng.parquet`` from manythings.org's ``cmn-eng.zip``.

    ``source`` is a downloaded ``cmn-eng.zip`` (or its ``cmn.txt``); without it the archive is
    downloaded from :data:`TATOEBA_URL` (unless offline). Columns: ``line`` (the file's order),
    ``en``, ``zh`` and ``attribution``, which must stay with any copy (CC BY 2.0 FR). A release other
    than the course's (:data:`TATOEBA_SOURCE_SHA256`) is built with a warning: its numbers will differ
    from the book's. The directory's ``SHA256SUMS`` gets the new file's sum.
    """
    import io
    import warnings
    import zipfile

    import pandas as pd

    where = source or TATOEBA_URL
    if source is None:
        payload = _download(TATOEBA_URL, "cmn-eng.zip", "the Tatoeba pairs")  # about 1.5 MB
    else:
        try:
            payload = Path(source).read_bytes()
        except OSError as error:
            raise DataNotFoundError(f"cannot read {source} ({error}): expected manythings.org's cmn-eng.zip") from None
    if payload[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(payload)) as archive:
                payload = archive.read("cmn.txt")
        except (zipfile.BadZipFile, KeyError) as error:
            raise DataNotFoundError(f"{where} is not cmn-eng.zip with a cmn.txt inside ({error})") from None
    if hashlib.sha256(payload).hexdigest() != TATOEBA_SOURCE_SHA256:
        warnings.warn(f"{where} is another release of cmn.txt than the course's: the table is built, but "
                      "splits and BLEU scores will differ from the book's", stacklevel=2)
    try:
        lines = payload.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise ChecksumError(f"{where} is not UTF-8 text: expected manythings.org's cmn-eng.zip") from None
    rows = []
    for number, line in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != 3:
            raise ChecksumError(f"line {number + 1} of {where} has {len(fields)} tab-separated fields, expected 3 "
                                "(English, Chinese, attribution)")
        rows.append({"line": len(rows), "en": fields[0], "zh": fields[1], "attribution": fields[2]})
    if not rows:
        raise DataNotFoundError(f"{where} holds no sentence pairs")
    table = pd.DataFrame(rows)
    return _save_table(table, "tatoeba_cmn", target)


#: Datasets built from a published archive rather than fetched from the hub: name -> its archive.
SOURCES = {"polarity_v2": POLARITY_URL, "tatoeba_cmn": TATOEBA_URL}


def build(name: str, target: str | os.PathLike = "data", source: str | os.PathLike | None = None) -> Path:
    """Build dataset ``name`` (a key of :data:`SOURCES`) into ``target`` from its published archive."""
    builders = {"polarity_v2": build_polarity_v2, "tatoeba_cmn": build_tatoeba_cmn}  # looked up per call
    if name not in builders:
        raise ValueError(f"cannot build {name!r}: the datasets built from an archive are {sorted(builders)}")
    return builders[name](target, source)


def data_target() -> Path:
    """Where local copies are made: the data directory in use, else ``data/`` in the repository."""
    directory = resolve_data_dir()
    return directory if directory is not None else (repo_root() or Path.cwd()) / "data"


#: What the test command needs locally: the tests and notebooks run with the network cut.
TEST_DATASETS = ("imdb", "polarity_v2", "tatoeba_cmn")
HUB_HOST = ("huggingface.co", 443)


def online(host: tuple[str, int] = HUB_HOST, timeout: float = 5.0) -> bool:
    """Whether ``host`` answers a TCP connection within ``timeout`` seconds (and offline flags are unset)."""
    import socket

    if _offline():
        return False
    try:
        socket.create_connection(host, timeout=timeout).close()
    except OSError:
        return False
    return True


def prepare_test_data(names: tuple[str, ...] = TEST_DATASETS) -> tuple[Path, list[str]]:
    """The data directory the tests will read, with a local copy of every dataset in ``names``.

    A copy already there is checked against its SHA-256. A missing one is made when the machine is
    online: fetched from the hub (IMDB) or built from its authors' archive (polarity v2.0), with
    progress bars, and summed into ``SHA256SUMS``. Offline with a copy missing:
    :class:`DataNotFoundError` saying how to provide it. Returns the directory (``$ATTN_DATA_DIR``,
    else ``data/`` in the repository) and one line per dataset.
    """
    target = data_target()
    missing = [n for n in names if not all((target / rel).is_file() for rel in DATASETS[n].local_files.values())]
    lines = []
    for name in names:
        spec = DATASETS[name]
        if name in missing:
            continue
        for rel in spec.local_files.values():
            verify_checksum(target / rel, expected_sha256(target, rel, spec))
        lines.append(f"{name}: local copy in {target}, checksums verified")
    if missing and not online():
        raise DataNotFoundError(
            f"the tests run offline and need a local copy of {', '.join(missing)} in {target}, which is missing, "
            f"and {HUB_HOST[0]} cannot be reached to make one. Either run the test command once with internet "
            f"(it fetches them), or copy the datasets there (or set {DATA_DIR_ENV} to a folder holding "
            + ", ".join(rel for n in missing for rel in DATASETS[n].local_files.values())
            + "; see the data README), or make them elsewhere with `python -m attn_tutorial.data fetch imdb "
            "--to DIR`, `python -m attn_tutorial.data build polarity_v2 --to DIR` and `python -m "
            "attn_tutorial.data build tatoeba_cmn --to DIR` and copy DIR.")
    for name in missing:
        if DATASETS[name].fetchable:
            print(f"{name}: downloading {DATASETS[name].hub_id} into {target} ...", flush=True)
            fetch(name, target)
        elif name in SOURCES:
            print(f"{name}: building from {SOURCES[name]} into {target} ...", flush=True)
            build(name, target)
        else:
            raise DataNotFoundError(f"{name}: no local copy in {target}, and no way to make one here")
        lines.append(f"{name}: made in {target}, summed into {target / 'SHA256SUMS'}")
    return target, lines


def ensure_local_copies() -> list[str]:
    """Build what the hub cannot give (polarity v2.0) into the data directory (``data/`` at the
    repository root when none is set) when it is missing there and the network may be used; returns
    what happened, one line per dataset."""
    target = data_target()
    report = []
    for name, spec in DATASETS.items():
        if spec.hub_id is not None:
            continue
        if all((target / rel).is_file() for rel in spec.local_files.values()):
            report.append(f"{name}: local copy in {target}")
        elif _offline():
            report.append(f"{name}: no local copy in {target}, and offline: the notebooks that need it "
                          f"will say how to provide it")
        elif name in SOURCES:
            report.append(f"{name}: built {build(name, target)} from {SOURCES[name]}")
        else:
            report.append(f"{name}: no local copy in {target}, and no way to build one")
    return report


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m attn_tutorial.data", description="Course datasets.")
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("fetch", help="download a dataset from the hub into a local data directory")
    get.add_argument("name", choices=sorted(n for n, s in DATASETS.items() if s.fetchable))
    get.add_argument("--to", default="data", help="data directory (default: ./data)")
    builder = sub.add_parser("build", help="build a dataset that has no hub copy (polarity_v2, tatoeba_cmn) "
                                         "from its published archive")
    builder.add_argument("name", choices=sorted(SOURCES))
    builder.add_argument("--source", help="the downloaded archive: review_polarity.tar.gz or cmn-eng.zip "
                                        "(default: download it)")
    builder.add_argument("--to", default="data", help="data directory (default: ./data)")
    sub.add_parser("ensure", help="build what the hub cannot give into the data directory ($ATTN_DATA_DIR, else data/ in the repository) when it is missing there")
    sub.add_parser("where", help="show which data directory would be used")
    sub.add_parser("prepare-tests", help="check, or fetch and build when online, the local copies the "
                                         f"offline tests need ({', '.join(TEST_DATASETS)})")
    args = parser.parse_args(argv)
    if args.command == "where":
        print(resolve_data_dir() or "no data directory: datasets come from the hub")
        return 0
    try:
        if args.command == "prepare-tests":
            directory, lines = prepare_test_data()
            for line in lines:
                print(line)
            print(f"data directory for the tests: {directory}")
            return 0
        if args.command == "ensure":
            for line in ensure_local_copies():
                print(line)
            return 0
        if args.command == "build":
            path = build(args.name, args.to, args.source)
    except (DataNotFoundError, ChecksumError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.command == "build":
        print(f"wrote {path}")
        print(f"Use it with: export {DATA_DIR_ENV}={Path(args.to).resolve()} (or keep it in ./data)")
        return 0
    for path in fetch(args.name, args.to):
        print(f"wrote {path}")
    print(f"Use it with: export {DATA_DIR_ENV}={Path(args.to).resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
