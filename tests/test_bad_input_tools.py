"""Bad input to the course's build tools gets a clear error at once (issue 43): ``make book`` without
the datasets and without a network stops before executing any notebook, and ``tools/pdf.py
--from-build DIR`` without a book built in DIR stops before building anything.

Nothing here executes a notebook or runs Sphinx: the functions that would are replaced by ones that fail.
"""

from __future__ import annotations

import hashlib
import socket
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import build  # noqa: E402

from attn_tutorial import data  # noqa: E402

OFFLINE_FLAGS = ("ATTN_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "ATTN_NO_NETWORK")


def nothing_runs(*args, **kwargs):
    raise AssertionError(f"nothing may run before the data is checked: {args[:1]}")


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """An empty data directory, an empty cache, no network (a refused connection, not an offline
    flag), and nothing that could execute a notebook or copy files."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    for flag in OFFLINE_FLAGS:
        monkeypatch.delenv(flag, raising=False)

    def refused(*args, **kwargs):
        raise OSError("network unreachable (the test)")

    monkeypatch.setattr(socket, "create_connection", refused)
    for name in ("call", "run", "Popen"):
        monkeypatch.setattr(build.subprocess, name, nothing_runs)
    monkeypatch.setattr(build, "copy_mathjax", nothing_runs)
    monkeypatch.setattr(build, "write_conf", nothing_runs)
    return tmp_path / "data"


def test_the_book_needs_every_dataset_its_notebooks_load():
    assert set(build.notebook_datasets()) >= {"imdb", "polarity_v2", "tatoeba_cmn"}
    assert set(build.notebook_datasets()) <= set(data.DATASETS)


@pytest.mark.parametrize("argv", [["book", "--profile", "smoke"], ["book", "--profile", "smoke", "--student"],
                                  ["book", "--profile", "cpu", "--strict", "--language", "zh_CN"]])
def test_make_book_without_data_and_network_stops_at_once(no_data, argv):
    with pytest.raises(SystemExit) as stop:
        build.main(argv)
    message = str(stop.value.code)
    assert message.startswith("data: the notebooks need imdb, polarity_v2, tatoeba_cmn, with no local copy in "
                              f"{no_data}")
    assert "no notebook was executed" in message and "ATTN_DATA_DIR" in message
    assert "imdb/imdb_train.parquet" in message and "python -m attn_tutorial.data build tatoeba_cmn" in message


def test_an_offline_flag_stops_it_without_trying_the_network(no_data, monkeypatch):
    monkeypatch.setenv("ATTN_NO_NETWORK", "1")
    with pytest.raises(SystemExit, match=r"data: the notebooks need imdb, polarity_v2, tatoeba_cmn.*offline"):
        build.ensure_data()


def _copies(folder, names, corrupt: str = ""):
    """Stand-in local copies of ``names`` with their sums in SHA256SUMS (one of them then changed)."""
    sums = []
    for name in names:
        for rel in data.DATASETS[name].local_files.values():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rel.encode())
            sums.append(f"{hashlib.sha256(rel.encode()).hexdigest()}  {rel}")
            if name == corrupt:
                path.write_bytes(b"changed")
    (folder / "SHA256SUMS").write_text("\n".join(sums) + "\n")


def test_local_copies_are_enough_and_a_corrupt_one_stops_it(no_data, capsys):
    _copies(no_data, ["imdb", "polarity_v2", "tatoeba_cmn"])
    lines = build.ensure_data()
    assert lines == [f"{n}: local copy in {no_data}, checksums verified" for n in ("imdb", "polarity_v2", "tatoeba_cmn")]
    _copies(no_data, ["imdb", "polarity_v2"])  # Tatoeba's copy removed from the sums: its file stays
    (no_data / "tatoeba_cmn" / "cmn_eng.parquet").unlink()
    with pytest.raises(SystemExit, match=r"data: the notebooks need tatoeba_cmn, with no local copy"):
        build.ensure_data()
    _copies(no_data, ["imdb", "polarity_v2", "tatoeba_cmn"], corrupt="polarity_v2")
    with pytest.raises(SystemExit, match=r"(?s)data: .*review_polarity_v2.parquet has SHA-256 .*no notebook was executed"):
        build.ensure_data()


def test_a_missing_data_directory_is_named(no_data, monkeypatch):
    monkeypatch.setenv("ATTN_DATA_DIR", str(no_data / "nowhere"))
    with pytest.raises(SystemExit, match=r"data: data directory .*nowhere does not exist \(from \$ATTN_DATA_DIR\)"):
        build.ensure_data()


def test_pdf_from_a_folder_without_a_build_is_a_clear_error_at_once(tmp_path, monkeypatch):
    import pdf

    monkeypatch.setattr(pdf, "single_page", nothing_runs)
    monkeypatch.setattr(pdf.build, "copy_mathjax", nothing_runs)
    for argv, missing in ((["--from-build", str(tmp_path / "nothing")], "nothing/index.html"),
                          (["--from-build", str(tmp_path), "--language", "en"], f"{tmp_path.name}/index.html")):
        with pytest.raises(SystemExit, match=rf"--from-build .*: no HTML book built there \(missing .*{missing}"):
            pdf.main(argv)
    (tmp_path / "index.html").write_text("<html></html>")  # a page, but no environment beside it
    with pytest.raises(SystemExit, match=r"missing .*environment.pickle\)\. Build it first \(make book"):
        pdf.main(["--from-build", str(tmp_path), "--language", "en"])
