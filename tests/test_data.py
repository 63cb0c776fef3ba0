from __future__ import annotations

import shutil

import pytest

from attn_tutorial import data


def test_loads_imdb_from_the_local_copy(data_dir):
    imdb = data.load_dataset("imdb", data_dir=data_dir)
    assert set(imdb) == {"train", "test"}
    assert len(imdb["train"]) == 25_000 and len(imdb["test"]) == 25_000
    assert {"text", "label"} <= set(imdb["train"].column_names)
    assert set(imdb["test"].unique("label")) == {0, 1}


def test_environment_variable_selects_the_data_dir(data_dir, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(data_dir))
    test = data.load_dataset("imdb", split="test")
    assert len(test) == 25_000


def test_corrupt_file_is_rejected(data_dir, tmp_path):
    copy = tmp_path / "data"
    (copy / "imdb").mkdir(parents=True)
    shutil.copy(data_dir / "imdb" / "imdb_train.parquet", copy / "imdb" / "imdb_train.parquet")
    (copy / "imdb" / "imdb_test.parquet").write_bytes(b"not the real file")
    with pytest.raises(data.ChecksumError, match="imdb_test.parquet has SHA-256 .* expected 3e3636"):
        data.load_dataset("imdb", data_dir=copy)


def test_directory_sums_file_takes_precedence(tmp_path):
    folder = tmp_path / "data"
    (folder / "imdb").mkdir(parents=True)
    (folder / "imdb" / "imdb_test.parquet").write_bytes(b"abc")
    digest = data.sha256_of(folder / "imdb" / "imdb_test.parquet")
    (folder / "SHA256SUMS").write_text(f"{digest}  ./imdb/imdb_test.parquet\n")
    spec = data.DATASETS["imdb"]
    assert data.expected_sha256(folder, "imdb/imdb_test.parquet", spec) == digest
    assert data.expected_sha256(folder, "imdb/imdb_train.parquet", spec) == spec.sha256["imdb/imdb_train.parquet"]
    data.verify_checksum(folder / "imdb" / "imdb_test.parquet", digest)


def test_missing_data_gives_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataNotFoundError) as error:
        data.load_dataset("imdb")
    message = str(error.value)
    assert "missing" in message and str(tmp_path / "imdb" / "imdb_train.parquet") in message
    assert "running offline" in message  # the hub was not tried: tests make no network calls
    assert "ATTN_DATA_DIR" in message and "stanfordnlp/imdb" in message


def test_nonexistent_data_dir_is_an_error(tmp_path):
    with pytest.raises(data.DataNotFoundError, match="does not exist"):
        data.load_dataset("imdb", data_dir=tmp_path / "nope")


def test_unknown_dataset_and_split(data_dir):
    with pytest.raises(ValueError, match=r"unknown dataset 'imbd': expected one of \['imdb', 'mr', 'polarity_v2', 'tatoeba_cmn'\]"):
        data.load_dataset("imbd")
    with pytest.raises(ValueError, match="has no split 'validation'"):
        data.load_dataset("imdb", split="validation")


def test_subsets_and_validation_split_are_reproducible_and_disjoint(data_dir):
    train = data.load_dataset("imdb", split="train", data_dir=data_dir)
    sub_a = data.take_subset(train, 500, seed=3)
    sub_b = data.take_subset(train, 500, seed=3)
    assert sub_a["text"] == sub_b["text"] and len(sub_a) == 500
    fit_part, val_part = data.train_val_split(sub_a, 0.2, seed=0)
    assert len(fit_part) == 400 and len(val_part) == 100
    key = lambda split: set(zip(split["id"], split["label"]))  # ids repeat across the two labels
    assert not key(fit_part) & key(val_part)
    with pytest.raises(ValueError, match="val_fraction"):
        data.train_val_split(sub_a, 1.5)
    with pytest.raises(ValueError, match="positive"):
        data.take_subset(train, 0)


def test_fetch_writes_the_local_layout(tmp_path, monkeypatch):
    import datasets

    fake = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"text": ["good", "bad"], "label": [1, 0]}),
        "test": datasets.Dataset.from_dict({"text": ["fine"], "label": [1]}),
    })
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: fake)
    written = data.fetch("imdb", tmp_path / "data")
    assert [p.name for p in written] == ["imdb_train.parquet", "imdb_test.parquet"]
    sums = data.read_sums(tmp_path / "data" / "SHA256SUMS")
    assert set(sums) == {"imdb/imdb_train.parquet", "imdb/imdb_test.parquet"}
    with pytest.raises(ValueError, match="cannot fetch 'mr'"):
        data.fetch("mr", tmp_path / "data")


def test_hub_is_used_without_a_local_copy(monkeypatch, tmp_path):
    """Online and without a data directory, the loader asks the hub for the dataset's hub id."""
    import datasets

    for flag in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "ATTN_OFFLINE", "ATTN_NO_NETWORK", "ATTN_DATA_DIR"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setattr(data, "resolve_data_dir", lambda data_dir=None: None)
    asked = []
    fake = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["x"], "label": [1]}),
                                 "test": datasets.Dataset.from_dict({"text": ["y"], "label": [0]})})

    def fake_load(name, **kwargs):
        asked.append(name)
        return fake

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    assert data.load_dataset("imdb", split="test")["text"] == ["y"]
    assert asked == ["stanfordnlp/imdb"]

    def failing_load(name, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(datasets, "load_dataset", failing_load)
    with pytest.raises(data.DataNotFoundError, match="stanfordnlp/imdb failed \\(ConnectionError: no route to host\\)"):
        data.load_dataset("imdb")


def _polarity_archive(path, documents):
    """A review_polarity.tar.gz in the authors' layout: {(label, doc_id): [sentence, ...]}."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for (label, doc_id), sentences in documents.items():
            body = ("\n".join(sentences) + "\n").encode()
            info = tarfile.TarInfo(f"txt_sentoken/{'pos' if label else 'neg'}/{doc_id}.txt")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
        readme = tarfile.TarInfo("poldata.README.2.0")
        archive.addfile(readme, io.BytesIO(b""))
    return path


def test_polarity_is_built_from_the_authors_archive(tmp_path, monkeypatch):
    import pandas as pd

    docs = {(0, "cv100_111"): ["a bad film .", "", "dull ."], (1, "cv000_222"): ["great fun !"],
            (1, "cv999_333"): ["loved it .", "see it ."], (0, "cv050_444"): ["meh ."]}
    archive = _polarity_archive(tmp_path / "review_polarity.tar.gz", docs)
    with pytest.raises(data.ChecksumError, match="differ from polarity dataset v2.0"):
        data.build_polarity_v2(tmp_path / "data", archive)  # four made-up reviews are not the dataset
    path = data.build_polarity_v2(tmp_path / "data", archive, check_content=False)
    table = pd.read_parquet(path)
    assert table["doc_id"].tolist() == ["cv000_222", "cv999_333", "cv050_444", "cv100_111"]  # pos, then neg
    assert table["label"].tolist() == [1, 1, 0, 0] and table["fold"].tolist() == [0, 9, 0, 1]
    assert list(table["sentences"].iloc[3]) == ["a bad film .", "dull ."]  # empty lines dropped
    # the directory's SHA256SUMS lists the new file, so the loader accepts it
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    loaded = data.load_dataset("polarity_v2", "train")
    assert len(loaded) == 4 and {"sentences", "label"} <= set(loaded.column_names)


def test_polarity_built_from_the_archive_is_the_reference_copy(data_dir, tmp_path):
    """Written back into the authors' layout, the reference copy rebuilds to the same content."""
    import pandas as pd

    reference = pd.read_parquet(data_dir / "polarity_v2" / "review_polarity_v2.parquet")
    assert data.polarity_content_sha256(reference) == data.POLARITY_CONTENT_SHA256
    docs = {(int(r.label), r.doc_id): list(r.sentences) for r in reference.sample(frac=1.0, random_state=0).itertuples()}
    path = data.build_polarity_v2(tmp_path / "data", _polarity_archive(tmp_path / "p.tar.gz", docs))
    assert data.polarity_content_sha256(pd.read_parquet(path)) == data.POLARITY_CONTENT_SHA256


def test_polarity_build_explains_a_wrong_archive(tmp_path, monkeypatch):
    archive = _polarity_archive(tmp_path / "other.tar.gz", {})
    with pytest.raises(data.DataNotFoundError, match="no txt_sentoken"):
        data.build_polarity_v2(tmp_path / "data", archive)
    (tmp_path / "notes.txt").write_text("not an archive")
    for wrong in (tmp_path / "notes.txt", tmp_path / "missing.tar.gz"):
        with pytest.raises(data.DataNotFoundError, match="cannot read .* as a tar archive"):
            data.build_polarity_v2(tmp_path / "data", wrong)
    import io
    import tarfile

    latin = tmp_path / "latin.tar.gz"
    with tarfile.open(latin, "w:gz") as archive_file:  # one review with a latin-1 byte
        body = b"caf\xe9 .\n"
        info = tarfile.TarInfo("txt_sentoken/pos/cv000_1.txt")
        info.size = len(body)
        archive_file.addfile(info, io.BytesIO(body))
    with pytest.raises(data.ChecksumError, match="not UTF-8"):
        data.build_polarity_v2(tmp_path / "data", latin)
    import urllib.error
    import urllib.request

    def no_network(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    for flag in ("ATTN_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "ATTN_NO_NETWORK"):
        monkeypatch.delenv(flag, raising=False)  # online, but the network fails
    with pytest.raises(data.DataNotFoundError, match="could not download .* --source"):
        data.build_polarity_v2(tmp_path / "data")
    monkeypatch.setenv("ATTN_OFFLINE", "1")
    with pytest.raises(data.DataNotFoundError, match="offline"):
        data.build_polarity_v2(tmp_path / "data")  # would download


def test_missing_polarity_names_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataNotFoundError, match="python -m attn_tutorial.data build polarity_v2"):
        data.load_dataset("polarity_v2", "train")
    monkeypatch.setenv("ATTN_OFFLINE", "1")
    assert "offline" in data.ensure_local_copies()[0]


# --- the test command's data step (tools/run_tests.py) ------------------------------------------

def test_the_test_command_checks_the_copies_it_finds(data_dir, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(data_dir))
    directory, lines = data.prepare_test_data()
    assert directory == data_dir
    assert [line.split(":")[0] for line in lines] == ["imdb", "polarity_v2", "tatoeba_cmn"]
    assert all("checksums verified" in line for line in lines)


def test_the_test_command_stops_offline_without_data_and_says_how_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(data, "online", lambda *args, **kwargs: False)
    with pytest.raises(data.DataNotFoundError, match=r"need a local copy of imdb, polarity_v2, tatoeba_cmn .* once with internet"):
        data.prepare_test_data()


def test_the_test_command_makes_missing_copies_when_online(tmp_path, monkeypatch):
    """Online, a missing copy is fetched (IMDB) or built (polarity v2.0) and summed; the copies
    already there are only checked."""
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(data, "online", lambda *args, **kwargs: True)
    made = []

    def fake_fetch(name, target):
        made.append(name)
        for rel in data.DATASETS[name].local_files.values():
            data.atomic_write_text(target / rel, f"{name} {rel}")
        data.record_sums(target, list(data.DATASETS[name].local_files.values()))

    monkeypatch.setattr(data, "fetch", fake_fetch)
    monkeypatch.setattr(data, "build_polarity_v2", lambda target, source: fake_fetch("polarity_v2", target))
    monkeypatch.setattr(data, "build_tatoeba_cmn", lambda target, source: fake_fetch("tatoeba_cmn", target))
    directory, lines = data.prepare_test_data()
    everything = ["imdb", "polarity_v2", "tatoeba_cmn"]
    assert made == everything and all("made in" in line for line in lines)
    assert "./imdb/imdb_train.parquet" in (tmp_path / "SHA256SUMS").read_text()
    _, again = data.prepare_test_data()  # the second time: checked against the sums, nothing made
    assert made == everything and all("checksums verified" in line for line in again)


# --- the Tatoeba English-Mandarin pairs (chapter 11) ---------------------------------------------

def _cmn_zip(path, lines: list[str]):
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("cmn.txt", "\n".join(lines) + "\n")
        archive.writestr("_about.txt", "not part of the data")
    return path


def test_tatoeba_pairs_are_built_from_the_published_archive_with_their_attribution(tmp_path, monkeypatch):
    lines = ["Hi.\t你好。\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)",
             "Run!\t跑！\tCC-BY 2.0 (France) Attribution: tatoeba.org #3 (c) & #4 (d)"]
    with pytest.warns(UserWarning, match="another release"):  # not the course's cmn.txt
        path = data.build_tatoeba_cmn(tmp_path / "data", _cmn_zip(tmp_path / "cmn-eng.zip", lines))
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))  # its SHA256SUMS now lists the file
    table = data.load_dataset("tatoeba_cmn", "train")
    assert path.is_file() and table["en"] == ["Hi.", "Run!"] and table["zh"] == ["你好。", "跑！"]
    assert table["line"] == [0, 1] and all("tatoeba.org" in a for a in table["attribution"])
    broken = _cmn_zip(tmp_path / "broken.zip", ["Hi.\t你好。"])  # no attribution: not the published file
    with pytest.raises(data.ChecksumError, match="2 tab-separated fields, expected 3"), pytest.warns(UserWarning):
        data.build_tatoeba_cmn(tmp_path / "other", broken)
    with pytest.raises(data.DataNotFoundError, match="cmn-eng.zip"):
        data.build_tatoeba_cmn(tmp_path / "other", tmp_path / "missing.zip")


def test_the_local_tatoeba_copy_is_the_courses(data_dir):
    table = data.load_dataset("tatoeba_cmn", "train", data_dir=data_dir)
    assert len(table) == 29_155 and set(table.column_names) == {"line", "en", "zh", "attribution"}
