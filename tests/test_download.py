"""Downloads against a local HTTP server on 127.0.0.1: verified, resumed, cached, offline, and a download
dataset materialised exactly like an embedded one. No test touches the network beyond 127.0.0.1."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import logging
import os
import re
import shutil
import stat
import tarfile
import threading
from pathlib import Path

import pytest

from nmtrepro import cli
from nmtrepro.core.files import InputError, read_json, read_lines
from nmtrepro.data import datasets, download
from nmtrepro.data.recipes import clean_corpus

EN = ["A man is riding a bike.", "Two dogs play in the snow!", "The girl's hat is red."]
DE = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee!", "Der Hut des Mädchens ist rot."]


def tgz(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


CORPUS = tgz({"corpus/train.en": "".join(line + "\n" for line in EN),
              "corpus/train.de": "".join(line + "\n" for line in DE)})


class Server(http.server.ThreadingHTTPServer):
    """Serves `files` by path; a path in `cut` gets half its bytes once, then the connection drops; a path
    in `unavailable` gets one HTTP 503."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files, self.cut, self.unavailable, self.requests = {}, set(), set(), []

    def url(self, path):
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append((self.path, self.headers.get("Range")))
        if self.path not in self.server.files:
            self.send_error(404)
            return
        if self.path in self.server.unavailable:
            self.server.unavailable.discard(self.path)
            self.send_error(503)
            return
        data = self.server.files[self.path]
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if self.path in self.server.cut:
            self.server.cut.discard(self.path)
            self.wfile.write(data[start:start + (len(data) - start) // 2])
            return  # HTTP/1.0: the connection closes short of Content-Length
        self.wfile.write(data[start:])

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(download, "TIMEOUT_S", 5)
    monkeypatch.setattr(download, "BACKOFF_S", 0)
    monkeypatch.delenv("NMTREPRO_OFFLINE", raising=False)
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def resource(server, path, data, **checksum):
    server.files[path] = data
    if not checksum:
        checksum = {"sha256": hashlib.sha256(data).hexdigest()}
    return download.Resource(name=path.strip("/").replace(".", "_"), url=server.url(path), size=len(data), **checksum)


def test_download_is_verified_extracted_and_served_from_the_cache(server, tmp_path):
    res = resource(server, "/corpus.tgz", CORPUS, md5=hashlib.md5(CORPUS).hexdigest())
    folder = download.ensure(res, tmp_path / "cache")
    assert read_lines(folder / "corpus/train.de") == DE
    assert download.ensure(res, tmp_path / "cache") == folder
    assert len(server.requests) == 1  # the second call is a cache hit
    assert not list((tmp_path / "cache").rglob("*.part"))


def test_corrupt_download_is_refused_and_nothing_is_left(server, tmp_path):
    res = resource(server, "/corrupt.tgz", CORPUS, sha256=hashlib.sha256(b"something else").hexdigest())
    with pytest.raises(InputError, match=r"checksum mismatch for http://127.0.0.1:\d+/corrupt.tgz.*removed"):
        download.ensure(res, tmp_path / "cache")
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_truncated_download_resumes_with_a_range_request(server, tmp_path):
    res = resource(server, "/cut.tgz", CORPUS)
    server.cut.add("/cut.tgz")
    folder = download.ensure(res, tmp_path / "cache", attempts=2)
    assert read_lines(folder / "corpus/train.en") == EN
    assert server.requests == [("/cut.tgz", None), ("/cut.tgz", f"bytes={len(CORPUS) // 2}-")]


def test_truncated_download_keeps_its_part_for_the_next_run(server, tmp_path):
    res = resource(server, "/cut.tgz", CORPUS)
    server.cut.add("/cut.tgz")
    with pytest.raises(InputError, match="interrupted 1 times.*next run resumes"):
        download.fetch(res, tmp_path / "cache", attempts=1)
    part = download.archive_path(res, tmp_path / "cache").with_suffix(".tgz.part")
    assert part.stat().st_size == len(CORPUS) // 2
    assert download.fetch(res, tmp_path / "cache", attempts=1).read_bytes() == CORPUS  # as a Snakemake retry
    assert not part.exists()


def test_server_error_is_retried(server, tmp_path):
    res = resource(server, "/busy.tgz", CORPUS)
    server.unavailable.add("/busy.tgz")
    assert download.fetch(res, tmp_path / "cache", attempts=2).read_bytes() == CORPUS
    assert len(server.requests) == 2


def test_missing_file_is_a_clear_error_naming_the_url(server, tmp_path):
    res = download.Resource(name="gone", url=server.url("/gone.tgz"), sha256="0" * 64)
    with pytest.raises(InputError, match=r"HTTP 404 .* for http://127.0.0.1:\d+/gone.tgz"):
        download.ensure(res, tmp_path / "cache")
    assert not (tmp_path / "cache/gone").exists() or not any((tmp_path / "cache/gone").iterdir())


def test_a_local_mirror_is_verified_and_a_missing_file_in_it_is_not_retried(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror/task.txt").write_bytes(b"test content\n")
    blob = "d670460b4b4aece5915caf5c68d12f560a9fe3e4"  # `echo 'test content' | git hash-object --stdin`
    res = download.Resource("task", (tmp_path / "mirror/task.txt").as_uri(), git_blob=blob)
    assert download.fetch(res, tmp_path / "cache").read_bytes() == b"test content\n"
    gone = download.Resource("gone", (tmp_path / "mirror/gone.txt").as_uri(), git_blob=blob)
    with pytest.raises(InputError, match=r"download of gone failed: .*No such file.* for file:///"):
        download.fetch(gone, tmp_path / "cache", attempts=3)  # retried, it would end 'interrupted 3 times'


def test_a_relative_file_url_is_relative_to_the_manifest_and_its_first_use_record_survives_a_move(
        tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "mirror").mkdir(parents=True)
    (checkout / "mirror/de-en.tgz").write_bytes(CORPUS)
    (checkout / "workflow").mkdir()
    (checkout / "workflow/downloads.yaml").write_text(
        "iwslt:\n  url: file:../mirror/de-en.tgz\n  trust_on_first_use: true\n")
    monkeypatch.chdir(tmp_path)  # where ../mirror/de-en.tgz does not exist
    res = download.load_manifest(checkout / "workflow/downloads.yaml")["iwslt"]
    assert (download.ensure(res, tmp_path / "cache") / "corpus/train.en").is_file()
    moved = checkout.rename(tmp_path / "moved")
    shutil.rmtree(tmp_path / "cache/iwslt")
    res = download.load_manifest(moved / "workflow/downloads.yaml")["iwslt"]
    assert (download.ensure(res, tmp_path / "cache") / "corpus/train.en").is_file()  # checked, not refused
    assert read_json(tmp_path / "cache/first-use/iwslt.json")["url"] == "file:../mirror/de-en.tgz"


def test_offline_fails_fast_naming_every_missing_file(server, tmp_path, monkeypatch):
    manifest = {r.name: r for r in (resource(server, "/a.tgz", CORPUS), resource(server, "/b.tgz", CORPUS))}
    download.ensure(manifest["a_tgz"], tmp_path / "cache")
    server.requests.clear()
    monkeypatch.setenv("NMTREPRO_OFFLINE", "1")
    offline = download.is_offline()
    with pytest.raises(InputError, match=r"offline.*\n  b_tgz \(http://127.0.0.1:\d+/b.tgz") as err:
        download.ensure_all(["a_tgz", "b_tgz"], manifest, tmp_path / "cache", offline=offline)
    assert "a_tgz" not in str(err.value)  # cached files are not reported missing
    assert download.ensure_all(["a_tgz"], manifest, tmp_path / "cache", offline=offline)
    assert server.requests == []


def test_file_without_a_published_checksum_needs_allow_unverified(server, tmp_path):
    res = resource(server, "/unknown.tgz", CORPUS, sha256=None)
    with pytest.raises(InputError, match="no published checksum.*allow_unverified"):
        download.ensure(res, tmp_path / "cache")
    assert server.requests == []  # refused before any byte is fetched
    assert (download.ensure(res, tmp_path / "cache", allow_unverified=True) / "corpus/train.en").is_file()


def test_every_manifest_entry_has_a_checksum_or_records_one_at_first_use():
    manifest = download.load_manifest("workflow/downloads.yaml")
    unchecked = [name for name, r in manifest.items() if r.checksum is None and not r.trust_on_first_use]
    assert unchecked == []
    for name, r in manifest.items():  # a blob id holds only for the bytes at one commit, not a branch
        if r.git_blob:
            assert re.match(r"https://raw.githubusercontent.com/[^/]+/[^/]+/[0-9a-f]{40}/", r.url), name


def test_git_blob_id_verifies_the_file_and_refuses_a_tampered_one(server, tmp_path):
    # `echo 'test content' | git hash-object --stdin` (Pro Git, 10.2 Git Objects)
    res = resource(server, "/task.txt", b"test content\n", git_blob="d670460b4b4aece5915caf5c68d12f560a9fe3e4")
    assert download.fetch(res, tmp_path / "cache").read_bytes() == b"test content\n"
    tampered = resource(server, "/tampered.txt", b"test content!\n", git_blob=res.git_blob)
    with pytest.raises(InputError, match=r"checksum mismatch .*/tampered.txt: git_blob [0-9a-f]{40}, manifest says "
                                         r"d670460b.*removed"):
        download.fetch(tampered, tmp_path / "cache")


def download_cli(tmp_path, name, url) -> int:
    """`nmtrepro download` of one trust-on-first-use entry into tmp_path/<name>.json; its exit status."""
    (tmp_path / "downloads.yaml").write_text(json.dumps({name: {"url": url, "trust_on_first_use": True}}))
    return cli.main(["download", "--name", name, "--out", str(tmp_path / f"{name}.json"),
                     "--manifest", str(tmp_path / "downloads.yaml"), "--cache", str(tmp_path / "cache")])


def test_trust_on_first_use_records_the_first_download_and_refuses_changed_bytes(server, tmp_path, capsys, caplog):
    server.files["/de-en.tgz"] = CORPUS
    assert download_cli(tmp_path, "iwslt", server.url("/de-en.tgz")) == 0
    first, ledger = read_json(tmp_path / "iwslt.json"), read_json(tmp_path / "cache/first-use/iwslt.json")
    assert ledger["sha256"] == hashlib.sha256(CORPUS).hexdigest() and first["checksum"] == ["sha256", ledger["sha256"]]
    assert first["checksum_source"] == ("no published checksum; SHA-256 recorded at first download on "
                                        + ledger["recorded"])

    shutil.rmtree(tmp_path / "cache/iwslt")  # a fresh download of the same bytes is checked, not recorded again
    assert download_cli(tmp_path, "iwslt", server.url("/de-en.tgz")) == 0
    assert read_json(tmp_path / "iwslt.json") == first and len(server.requests) == 2
    caplog.set_level(logging.INFO, logger=download.log.name)  # a cache hit logs where its checksum came from too
    assert download_cli(tmp_path, "iwslt", server.url("/de-en.tgz")) == 0 and len(server.requests) == 2
    assert f"iwslt: checksum: {first['checksum_source']}" in caplog.text

    shutil.rmtree(tmp_path / "cache/iwslt")
    server.files["/de-en.tgz"] = tgz({"corpus/train.en": "changed upstream\n"})
    capsys.readouterr()
    assert download_cli(tmp_path, "iwslt", server.url("/de-en.tgz")) == 2
    assert re.search(rf"checksum mismatch .*/de-en.tgz: sha256 [0-9a-f]{{64}}, the first download's record "
                     rf".*iwslt.json says {ledger['sha256']}", capsys.readouterr().err)
    assert read_json(tmp_path / "cache/first-use/iwslt.json") == ledger
    assert not (tmp_path / "cache/iwslt/de-en.tgz").exists()


def test_a_first_use_record_of_another_url_is_refused(server, tmp_path, capsys):
    server.files["/a.tgz"] = server.files["/b.tgz"] = CORPUS
    assert download_cli(tmp_path, "iwslt", server.url("/a.tgz")) == 0
    shutil.rmtree(tmp_path / "cache/iwslt")
    assert download_cli(tmp_path, "iwslt", server.url("/b.tgz")) == 2
    assert re.search(r"recorded for http://127.0.0.1:\d+/a.tgz, but the manifest now names", capsys.readouterr().err)


def test_licensed_corpus_without_a_local_path_is_a_clear_error(tmp_path):
    spec = {"kind": "download", "src": "zh", "tgt": "en", "local": ["ldc_zh_en"],
            "splits": {"train": {"src": "ldc_zh_en:train.zh", "tgt": "ldc_zh_en:train.en"}}}
    with pytest.raises(InputError, match="needs the licensed corpus 'ldc_zh_en'.*local_data"):
        datasets.fetch_download("nist", spec, tmp_path / "out", None, {}, tmp_path / "cache")


def test_fetch_of_a_download_dataset_matches_an_embedded_one(server, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for lang, lines in (("en", EN), ("de", DE)):
        with gzip.open(data / f"train.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
    (data / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256((data / f'train.{lang}.gz').read_bytes()).hexdigest()}  ./train.{lang}.gz\n"
        for lang in ("en", "de")))
    embedded = {"kind": "embedded", "src": "en", "tgt": "de",
                "splits": {"train": {"src": str(data / "train.en.gz"), "tgt": str(data / "train.de.gz")}}}
    datasets.fetch_embedded("toy", embedded, tmp_path / "embedded", max_lines=None)

    res = resource(server, "/corpus.tgz", CORPUS)
    (tmp_path / "downloads.yaml").write_text(json.dumps({res.name: {"url": res.url, "sha256": res.sha256}}))
    spec = {"kind": "download", "src": "en", "tgt": "de", "downloads": [res.name],
            "splits": {"train": {"src": f"{res.name}:corpus/train.en", "tgt": f"{res.name}:corpus/train.de"}}}
    assert cli.main(["fetch", "--name", "toy", "--spec", json.dumps(spec), "--out-dir", str(tmp_path / "fetched"),
                     "--manifest", str(tmp_path / "downloads.yaml"), "--cache", str(tmp_path / "cache")]) == 0
    for name in ("train.src", "train.tgt"):
        assert (tmp_path / "fetched" / name).read_bytes() == (tmp_path / "embedded" / name).read_bytes()
    assert read_json(tmp_path / "fetched/manifest.json")["splits"]["train"]["lines"] == 3


def test_clean_corpus_drops_what_clean_corpus_n_drops():
    src = ["a  b ", "", "a", "a b c d", "x " * 3]
    tgt = ["c d", "e", "b", "e", "y " * 3]
    assert clean_corpus(src, tgt, ratio=1.5, min_len=1, max_len=2) == (["a b", "a"], ["c d", "b"])


IWSLT14_SETS = ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
                "IWSLT14.TED.tst2012")


def fetch_iwslt14(server, tmp_path, train: dict[str, list[str]]) -> Path:
    """The iwslt14 recipe run by `fetch` on a de-en.tgz holding `train` (language -> talk lines, after a
    <url> and a <title> line) and one segment per dev/test set; returns the fetched folder."""
    files = {}
    for lang, word in (("de", "Hallo"), ("en", "Hello")):
        lines = ["<url>http://ted.com/x</url>", f"<title>{word} Title</title>"] + train[lang]
        files[f"de-en/train.tags.de-en.{lang}"] = "\n".join(lines) + "\n"
        for name in IWSLT14_SETS:
            files[f"de-en/{name}.de-en.{lang}.xml"] = f'<doc>\n<seg id="1"> {name} It\u2019s {word}. </seg>\n</doc>\n'
    res = resource(server, "/de-en.tgz", tgz(files), sha256=None)
    manifest = {"iwslt14_de_en": download.Resource("iwslt14_de_en", res.url)}
    spec = {"kind": "download", "src": "de", "tgt": "en", "downloads": ["iwslt14_de_en"], "recipe": "iwslt14",
            "splits": {split: {"src": f"recipe:{split}.de", "tgt": f"recipe:{split}.en"}
                       for split in ("train", "valid", "test")}}
    datasets.fetch_download("iwslt", spec, tmp_path / "out", None, manifest, tmp_path / "cache", allow_unverified=True)
    return tmp_path / "out"


def test_iwslt14_recipe_strips_tags_tokenizes_lowercases_and_holds_out_every_23rd_pair(server, tmp_path):
    out = fetch_iwslt14(server, tmp_path, {lang: [f"{word}, World {i}!" for i in range(45)]
                                           for lang, word in (("de", "Hallo"), ("en", "Hello"))})
    train, valid = read_lines(out / "train.tgt"), read_lines(out / "valid.tgt")
    assert (len(train), len(valid)) == (44, 2)
    assert train[0] == "hello title" and valid[0] == "hello , world 21 !"  # pairs 23 and 46 of 46
    test = read_lines(out / "test.tgt")
    assert test[0] == "iwslt14.ted.dev2010 it &apos;s hello ." and test[1].startswith("iwslt14.tedx.dev2012")
    assert read_json(out / "manifest.json")["tokenized"] is True
    assert {p.name for p in out.iterdir()} == {  # the recipe's scratch folder is gone
        "manifest.json", *(f"{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt"))}


def test_iwslt14_recipe_cleans_to_50_tokens_before_taking_every_23rd_pair(server, tmp_path):
    """Ranzato et al.'s split, as paper C's authors' prepare-iwslt14.sh: clean-corpus-n with 1-50 tokens,
    then every 23rd pair to validation (6,969 on the real archive; cleaning to 175 first gave 7,283)."""
    train = {lang: [f"{word} {i}" if i % 3 else " ".join([word] * 51) for i in range(68)]
             for lang, word in (("de", "hallo"), ("en", "hello"))}
    out = fetch_iwslt14(server, tmp_path, train)
    kept = ["hello title"] + [f"hello {i}" for i in range(68) if i % 3]     # 46 pairs of at most 50 tokens
    assert read_lines(out / "valid.tgt") == [kept[22], kept[45]]
    assert read_lines(out / "train.tgt") == [line for i, line in enumerate(kept, 1) if i % 23]


def test_iwslt14_is_moses_tokenized_once_by_recipe_and_prepare(server, tmp_path):
    """The recipe escapes as tokenizer.perl does; `prepare` and `prepare-test` must keep its tokens, not
    tokenize them again (`it &apos;s` -> `it & apos ; s`)."""
    line = {"de": 'Es ist "Tom & Jerry\'s" Haus.', "en": 'It\'s "Tom & Jerry\'s" house.'}
    out = fetch_iwslt14(server, tmp_path, {lang: [text] * 3 for lang, text in line.items()})
    expected = "it &apos;s &quot; tom &amp; jerry &apos;s &quot; house ."
    assert read_lines(out / "train.tgt")[1] == expected
    prep = tmp_path / "prep"
    assert cli.main(["prepare", "--data-dir", str(out), "--out-dir", str(prep), "--src-lang", "de", "--tgt-lang",
                     "en", "--bpe-merges", "0", "--max-len", "50", "--max-ratio", "1.5", "--lowercase"]) == 0
    assert read_json(prep / "stats.json")["tokenized"] is True
    words = {line.split()[0] for line in read_lines(prep / "dict.tgt.txt")}
    assert {"&apos;s", "&quot;", "&amp;"} <= words and not {"apos", "&", ";"} & words
    assert cli.main(["prepare-test", "--prepared", str(prep), "--data-dir", str(out), "--split", "test",
                     "--src-lang", "de", "--tgt-lang", "en", "--out-prefix", str(tmp_path / "test")]) == 0
    assert read_lines(tmp_path / "test.ref.tok")[0] == "iwslt14.ted.dev2010 it &apos;s hello ."


def test_sgml_split_files_are_read_as_their_segments(server, tmp_path):
    sgm = '<refset>\n<doc docid="1">\n<seg id="1">{}</seg>\n<seg id="2">{}</seg>\n</doc>\n</refset>\n'
    res = resource(server, "/test.tgz", tgz({"test/t-src.en.sgm": sgm.format(*EN[:2]),
                                               "test/t-ref.de.sgm": sgm.format(*DE[:2])}))
    spec = {"kind": "download", "src": "en", "tgt": "de", "downloads": [res.name],
            "splits": {"test": {"src": f"{res.name}:test/t-src.en.sgm", "tgt": f"{res.name}:test/t-ref.de.sgm"}}}
    datasets.fetch_download("toy", spec, tmp_path / "out", None, {res.name: res}, tmp_path / "cache")
    assert read_lines(tmp_path / "out/test.src") == EN[:2] and read_lines(tmp_path / "out/test.tgt") == DE[:2]


def test_the_extracted_folder_is_readable_as_the_umask_allows(server, tmp_path):
    folder = download.ensure(resource(server, "/corpus.tgz", CORPUS), tmp_path / "cache")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask


def test_a_checksum_that_yaml_read_as_a_number_is_refused_by_entry(tmp_path):
    manifest = tmp_path / "downloads.yaml"
    manifest.write_text("corpus:\n  url: https://example.org/c.tgz\n  sha256: " + "1" * 64 + "\n")
    with pytest.raises(InputError, match=r"entry 'corpus': sha256 must be a quoted string"):
        download.load_manifest(manifest)
    manifest.write_text("corpus:\n  url: https://example.org/c.tgz\n  sha256: '" + "1" * 64 + "'\n  size: 10\n")
    assert download.load_manifest(manifest)["corpus"].sha256 == "1" * 64


@pytest.mark.parametrize("entry, error", [
    ("  git_blob: '" + "1" * 64 + "'\n", r"git_blob must be 40 lower-case hex digits"),
    ("  sha256: '" + "1" * 64 + "'\n  trust_on_first_use: true\n", r"has a published checksum, so trust_on_first_use"),
])
def test_a_malformed_checksum_entry_is_refused_by_entry(tmp_path, entry, error):
    manifest = tmp_path / "downloads.yaml"
    manifest.write_text("corpus:\n  url: https://example.org/c.tgz\n" + entry)
    with pytest.raises(InputError, match=rf"entry 'corpus'.*{error}"):
        download.load_manifest(manifest)
