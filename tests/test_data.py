"""Dataset registry, tokenize/BPE wrappers and prepare: bad input is refused by name, text round-trips."""
from __future__ import annotations

import gzip
import hashlib
import os
import stat
from argparse import Namespace
from pathlib import Path

import pytest

from nmtrepro import cli
from nmtrepro.study.config import load, validate
from nmtrepro.core.files import InputError, evenly_spaced, read_json, read_lines, write_lines
from nmtrepro.core.text import BPE, detokenize, learn_bpe, strip_bpe, tokenize
from nmtrepro.core import vocab
from nmtrepro.core.vocab import IndexedData, Vocab
from nmtrepro.data import datasets, prepare

EN = ["A man is riding a bike, down the hill.", "Two dogs play in the snow!", "The girl's hat is red."]
DE = ["Ein Mann fährt mit dem Fahrrad den Hügel hinunter.", "Zwei Hunde spielen im Schnee!",
      "Der Hut des Mädchens ist rot."]
ROOT = Path(__file__).resolve().parents[1]


def gz(path, lines):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


def embedded(tmp_path, src_lines, tgt_lines):
    """An embedded registry entry over two gzipped files, listed in a SHA256SUMS beside them."""
    folder = tmp_path / "data"
    folder.mkdir()
    src, tgt = gz(folder / "train.en.gz", src_lines), gz(folder / "train.de.gz", tgt_lines)
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.name}\n" for p in (src, tgt))
    (folder / "SHA256SUMS").write_text("# test\n" + sums)
    return {"kind": "embedded", "src": "en", "tgt": "de", "splits": {"train": {"src": str(src), "tgt": str(tgt)}}}


def test_fetch_writes_splits_and_manifest(tmp_path):
    spec = embedded(tmp_path, EN, DE)
    datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=2)
    assert read_lines(tmp_path / "out/train.src") == EN[:2]
    assert read_lines(tmp_path / "out/train.tgt") == DE[:2]
    assert read_json(tmp_path / "out/manifest.json")["splits"]["train"]["lines"] == 2


def test_fetch_refuses_a_changed_file_and_leaves_nothing(tmp_path):
    spec = embedded(tmp_path, EN, DE)
    gz(tmp_path / "data/train.de.gz", DE[::-1])
    with pytest.raises(InputError, match="checksum mismatch.*train.de.gz"):
        datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=None)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no staging folder left behind


def test_fetch_refuses_mismatched_parallel_files(tmp_path):
    spec = embedded(tmp_path, EN, DE[:2])
    with pytest.raises(InputError, match=r"train.en.gz has 3 lines.*train.de.gz has 2"):
        datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=None)


def test_fetch_names_a_file_missing_from_the_checksums(tmp_path):
    spec = embedded(tmp_path, EN, DE)
    (tmp_path / "data/SHA256SUMS").write_text("")
    with pytest.raises(InputError, match="not listed in"):
        datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=None)


def test_tokenize_detokenize_round_trip():
    tokens = tokenize(EN, "en")
    assert tokens[0] == "A man is riding a bike , down the hill ."
    assert tokens[2] == "The girl 's hat is red ."  # no XML escaping of the apostrophe
    assert detokenize(tokens, "en") == EN


def test_bpe_splits_and_strips_back(tmp_path):
    src, tgt = tokenize(EN * 5, "en"), tokenize(DE * 5, "de")
    learn_bpe(src, tgt, 30, tmp_path / "codes")
    pieces = BPE(tmp_path / "codes")(src)
    assert any("@@ " in line for line in pieces)
    assert [strip_bpe(line) for line in pieces] == src
    assert strip_bpe("unfinish@@") == "unfinish"


def test_a_training_line_too_long_to_keep_never_shapes_the_bpe_codes(tmp_path):
    """One 2,000-word pair, dropped from training, must not be among the lines BPE learns from."""
    for name, extra in (("clean", []), ("long", [" ".join(f"w{i % 300}" for i in range(2000))])):
        data = tmp_path / name
        write_lines(data / "train.src", EN * 4 + extra)
        write_lines(data / "train.tgt", DE * 4 + extra)
        write_lines(data / "valid.src", EN)
        write_lines(data / "valid.tgt", DE)
        stats = prepare.prepare(data, tmp_path / f"{name}-prep", "en", "de", bpe_merges=40, max_len=30, max_ratio=3.0)
    assert stats["splits"]["train"]["dropped"] == {"empty": 0, "too_long": 1, "ratio": 0}
    assert (tmp_path / "long-prep/bpe.codes").read_text() == (tmp_path / "clean-prep/bpe.codes").read_text()


def test_keep_pair_reasons():
    assert prepare.keep_pair("a b", "c d e", max_len=5, max_ratio=2.0) is None
    assert prepare.keep_pair("", "c", max_len=5, max_ratio=2.0) == "empty"
    assert prepare.keep_pair("a " * 6, "c", max_len=5, max_ratio=9.0) == "too_long"
    assert prepare.keep_pair("a b c", "c", max_len=5, max_ratio=2.0) == "ratio"


def test_prepare_filters_train_and_binarizes(tmp_path):
    data = tmp_path / "fetched"
    train_src = EN * 4 + ["a very long sentence " * 10, "short"]
    train_tgt = DE * 4 + ["lang", "ein viel zu langer Satz der nicht passt"]
    write_lines(data / "train.src", train_src)
    write_lines(data / "train.tgt", train_tgt)
    write_lines(data / "valid.src", EN)
    write_lines(data / "valid.tgt", DE)
    stats = prepare.prepare(data, tmp_path / "prep", "en", "de", bpe_merges=40, max_len=30, max_ratio=3.0)
    assert stats["splits"]["train"]["pairs"] == 12
    assert stats["splits"]["train"]["dropped"] == {"empty": 0, "too_long": 1, "ratio": 1}
    assert stats["splits"]["valid"]["pairs"] == 3  # validation is never filtered
    train = IndexedData(tmp_path / "prep/train.tgt.bin")
    assert len(train) == 12
    tgt_vocab = Vocab.load(tmp_path / "prep/dict.tgt.txt")
    bpe = BPE(tmp_path / "prep/bpe.codes")
    assert tgt_vocab.decode(train[0].tolist()) == bpe(tokenize(DE[:1], "de"))[0]

    # The test split keeps every line, raw and prepared, aligned.
    write_lines(data / "test.src", EN + [""])
    write_lines(data / "test.tgt", DE + [""])
    prepare.run_prepare_test(Namespace(prepared=str(tmp_path / "prep"), data_dir=str(data), split="test",
                                       src_lang="en", tgt_lang="de", out_prefix=str(tmp_path / "t")))
    for suffix in ("src", "src.bpe", "ref", "ref.tok"):
        assert len(read_lines(tmp_path / f"t.{suffix}")) == 4


def test_invalid_utf8_is_named_with_its_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_bytes("ok\nnot \xe9 ok\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"bad.txt:2: not valid UTF-8"):
        read_lines(tmp_path / "bad.txt")
    gz(tmp_path / "bad.gz", [])
    with gzip.open(tmp_path / "bad.gz", "wb") as handle:
        handle.write(b"fine\nfine\n\xff\n")
    with pytest.raises(InputError, match=r"bad.gz:3: not valid UTF-8"):
        read_lines(tmp_path / "bad.gz")


def test_a_truncated_gz_is_named(tmp_path):
    spec = embedded(tmp_path, EN * 200, DE * 200)
    src = tmp_path / "data/train.en.gz"
    src.write_bytes(src.read_bytes()[:-30])
    with pytest.raises(InputError, match=r"train.en.gz.*truncated or corrupt"):
        read_lines(src)
    sums = tmp_path / "data/SHA256SUMS"
    sums.write_text(f"{hashlib.sha256(src.read_bytes()).hexdigest()}  ./train.en.gz\n"
                    + sums.read_text().splitlines()[-1] + "\n")
    with pytest.raises(InputError, match=r"train.en.gz.*truncated or corrupt"):
        datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=None)


def test_a_fetched_dataset_folder_is_readable_as_the_umask_allows(tmp_path):
    spec = embedded(tmp_path, EN, DE)
    datasets.fetch_embedded("toy", spec, tmp_path / "out", max_lines=None)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o777 & ~umask


def test_word_level_lowercased_preparation_maps_rare_words_to_unk_in_the_scored_reference_too(tmp_path):
    """Paper C: no BPE (0 merges), lowercased, words seen fewer than min_count times -> <unk>; the test
    split is lowercased the same way, references included, and the tokenized reference is binarized as
    the authors scored (`runs`, seen once, is <unk>); the raw reference keeps its words."""
    data = tmp_path / "fetched"
    write_lines(data / "train.src", ["Der Hund läuft .", "Der Hund schläft .", "Ein Unikat ."])
    write_lines(data / "train.tgt", ["The dog runs .", "The dog sleeps .", "A Unique ."])
    write_lines(data / "valid.src", ["Der Hund ."])
    write_lines(data / "valid.tgt", ["The dog ."])
    stats = prepare.prepare(data, tmp_path / "prep", "de", "en", bpe_merges=0, max_len=50, max_ratio=3.0,
                            lowercase=True, min_count=2)
    assert stats["lowercase"] and stats["min_count"] == 2
    tgt_vocab = Vocab.load(tmp_path / "prep/dict.tgt.txt")
    assert {"the", "dog", "."} <= set(tgt_vocab.symbols) and "unique" not in tgt_vocab.symbols
    third = IndexedData(tmp_path / "prep/train.tgt.bin")[2].tolist()
    assert tgt_vocab.decode(third) == "<unk> <unk> ."
    assert read_lines(tmp_path / "prep/train.src.bpe")[0] == "der hund läuft ."      # whole words, no "@@"
    assert BPE(tmp_path / "prep/bpe.codes")(["unzerlegbare Wörter"]) == ["unzerlegbare Wörter"]
    write_lines(data / "test.src", ["Der Hund läuft ."])
    write_lines(data / "test.tgt", ["The Dog runs."])
    prepare.run_prepare_test(Namespace(prepared=str(tmp_path / "prep"), data_dir=str(data), split="test",
                                       src_lang="de", tgt_lang="en", out_prefix=str(tmp_path / "t")))
    assert read_lines(tmp_path / "t.src.bpe") == ["der hund läuft ."]
    assert read_lines(tmp_path / "t.ref") == ["the dog runs."]
    assert read_lines(tmp_path / "t.ref.tok") == ["the dog <unk> ."]


def in_memory_preparation(data, merges, max_len, max_ratio, codes):
    """Tokenization, BPE and filtering as prepare does them, on whole lists in memory: pairs too long in
    words are dropped before BPE is learned, the rest filtered in pieces after."""
    src, tgt = read_lines(data / "train.src"), read_lines(data / "train.tgt")
    words = [(s, t) for s, t in zip(tokenize(src, "en"), tokenize(tgt, "de"))
             if prepare.keep_pair(s, t, max_len, float("inf")) is None]
    src, tgt = [s for s, _ in words], [t for _, t in words]
    learn_bpe(src, tgt, merges, codes)
    bpe = BPE(codes)
    pairs = [(s, t) for s, t in zip(bpe(src), bpe(tgt)) if prepare.keep_pair(s, t, max_len, max_ratio) is None]
    return [s for s, _ in pairs], [t for _, t in pairs]


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_preparation_in_chunks_and_processes_matches_the_in_memory_one(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(prepare, "_CHUNK", 5)  # several chunks, several tasks per worker
    data = tmp_path / "fetched"
    train_src = [f"{s} ({i})" for i in range(6) for s in EN] + ["a very long sentence " * 10]
    train_tgt = [f"{t} ({i})" for i in range(6) for t in DE] + ["lang"]
    write_lines(data / "train.src", train_src)
    write_lines(data / "train.tgt", train_tgt)
    write_lines(data / "valid.src", EN)
    write_lines(data / "valid.tgt", DE)
    prepare.prepare(data, tmp_path / "prep", "en", "de", bpe_merges=60, max_len=30, max_ratio=3.0, workers=workers)
    expected, _ = in_memory_preparation(data, 60, 30, 3.0, tmp_path / "codes")
    assert (tmp_path / "prep/bpe.codes").read_text() == (tmp_path / "codes").read_text()
    assert read_lines(tmp_path / "prep/train.src.bpe") == expected and len(expected) == 18
    assert not [p for p in (tmp_path / "prep").iterdir() if p.name.startswith(".")]  # the tokenized text is gone


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_binarization_writes_the_vocabularies_and_files_of_the_in_memory_one_byte_for_byte(
        tmp_path, monkeypatch, workers):
    """prepare before it streamed: every split's ids as lists (`Vocab.encode`), then `flatten` and
    torch.save. The streamed files must be the same bytes, so that a trainer reads the same ids."""
    monkeypatch.setattr(prepare, "_CHUNK", 4)  # several chunks a split, in several processes
    data = tmp_path / "fetched"
    write_lines(data / "train.src", [f"{s} ({i})" for i in range(6) for s in EN])
    write_lines(data / "train.tgt", [f"{t} ({i})" for i in range(6) for t in DE])
    write_lines(data / "valid.src", EN)
    write_lines(data / "valid.tgt", DE)
    stats = prepare.prepare(data, tmp_path / "prep", "en", "de", bpe_merges=60, max_len=30, max_ratio=3.0,
                            workers=workers)
    train = in_memory_preparation(data, 60, 30, 3.0, tmp_path / "codes")
    bpe = BPE(tmp_path / "codes")
    splits = {"train": train, "valid": (bpe(tokenize(EN, "en")), bpe(tokenize(DE, "de")))}
    for k, side in enumerate(("src", "tgt")):
        expected = Vocab.build(train[k])
        (tmp_path / f"dict.{side}.txt").write_text("".join(f"{s} {c}\n" for s, c in zip(expected.symbols[4:],
                                                                                          expected.counts)))
        assert (tmp_path / f"prep/dict.{side}.txt").read_bytes() == (tmp_path / f"dict.{side}.txt").read_bytes()
        for split, lines in splits.items():
            ids = [expected.encode(line) for line in lines[k]]
            vocab.save_flat(tmp_path / "old.bin", vocab.flatten(ids))
            assert (tmp_path / f"prep/{split}.{side}.bin").read_bytes() == (tmp_path / "old.bin").read_bytes()
            assert stats["splits"][split][f"{side}_tokens"] == sum(map(len, ids))
            assert stats["splits"][split]["pairs"] == len(ids) > 2
    assert not [p for p in (tmp_path / "prep").iterdir() if p.name.startswith(".")]  # no spool is left


def test_parallel_files_of_different_lengths_are_refused_naming_the_shorter(tmp_path):
    write_lines(tmp_path / "train.src", EN)
    write_lines(tmp_path / "train.tgt", DE[:2])
    with pytest.raises(InputError, match=r"train\.tgt ends after 2 lines"):
        list(prepare.iter_parallel(tmp_path / "train.src", tmp_path / "train.tgt"))


def nist_like(tmp_path, refs):
    """A licensed-folder dataset whose test split has the references `refs` (the first its `tgt`)."""
    folder = tmp_path / "ldc"
    folder.mkdir()
    write_lines(folder / "test.zh", ["我 走", "你 好", "他 来"])
    for k, lines in enumerate(refs):
        write_lines(folder / f"test.en{k}", lines)
    return {"kind": "download", "src": "zh", "tgt": "en", "local": ["ldc"],
            "splits": {"test": {"src": "ldc:test.zh", "tgt": "ldc:test.en0",
                                "refs": [f"ldc:test.en{k}" for k in range(1, len(refs))]}}}, {"ldc": str(folder)}


def test_fetch_writes_every_reference_of_a_test_split_cut_like_its_source(tmp_path):
    refs = [["I go", "Hello", "He comes"], ["I walk", "Hi", "He is coming"], ["I leave", "Hello there", "He arrives"]]
    spec, local = nist_like(tmp_path, refs)
    datasets.fetch_download("nist", spec, tmp_path / "out", 2, {}, tmp_path / "cache", local)
    assert read_lines(tmp_path / "out/test.tgt") == refs[0][:2]
    assert read_lines(tmp_path / "out/test.tgt1") == refs[1][:2]
    assert read_lines(tmp_path / "out/test.tgt2") == refs[2][:2]
    assert len(read_json(tmp_path / "out/manifest.json")["splits"]["test"]["refs_path"]) == 2


def test_fetch_names_the_reference_whose_line_count_differs_from_the_source(tmp_path):
    spec, local = nist_like(tmp_path, [["I go", "Hello", "He comes"], ["I walk", "Hi"]])
    with pytest.raises(InputError, match=r"reference .*test.en1 \(datasets.nist.splits.test.refs, item 1\) has 2 "
                                         r"lines, the source has 3"):
        datasets.fetch_download("nist", spec, tmp_path / "out", None, {}, tmp_path / "cache", local)
    assert not (tmp_path / "out").exists()


def test_prepare_ref_prepares_a_further_reference_as_the_first(tmp_path):
    data = tmp_path / "fetched"
    write_lines(data / "train.src", EN * 4)
    write_lines(data / "train.tgt", DE * 4)
    write_lines(data / "valid.src", EN[:1])
    write_lines(data / "valid.tgt", DE[:1])
    prepare.prepare(data, tmp_path / "prep", "en", "de", bpe_merges=20, max_len=100, max_ratio=3.0)
    write_lines(data / "test.src", EN)
    write_lines(data / "test.tgt", DE)
    write_lines(data / "test.tgt1", DE[::-1])
    args = dict(prepared=str(tmp_path / "prep"), data_dir=str(data), split="test", tgt_lang="de",
                out_prefix=str(tmp_path / "t"))
    prepare.run_prepare_test(Namespace(**args, src_lang="en"))
    prepare.run_prepare_ref(Namespace(**args, ref=1))
    assert read_lines(tmp_path / "t.ref1") == DE[::-1]
    assert read_lines(tmp_path / "t.ref1.tok") == read_lines(tmp_path / "t.ref.tok")[::-1] == tokenize(DE, "de")[::-1]
    write_lines(data / "test.tgt2", DE[:2])
    with pytest.raises(InputError, match=r"test.tgt2 has 2"):
        prepare.run_prepare_ref(Namespace(**args, ref=2))


def test_evenly_spaced_takes_n_items_through_to_the_last_and_all_of_a_short_corpus():
    assert list(evenly_spaced(range(10), 10, 3)) == [3, 6, 9]
    assert list(evenly_spaced(range(10), 10, 4)) == [2, 4, 7, 9]
    assert list(evenly_spaced(range(5), 5, 9)) == [0, 1, 2, 3, 4]
    assert len(list(evenly_spaced(range(40_000), 40_000, 4_000))) == 4_000


def test_bpe_learned_on_a_sample_reads_only_the_sampled_pairs_and_applies_to_all(tmp_path):
    """`bpe_sample_lines`: the codes are those learned on the evenly spaced pairs alone (a word that only
    an unsampled pair holds never shapes them), the same on every run, and every pair is still prepared."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett"]
    src = [f"{w} {w}s the {w}" for w in words]
    tgt = [f"le {w} des {w}x" for w in words]
    data = tmp_path / "fetched"
    write_lines(data / "train.src", src)
    write_lines(data / "train.tgt", tgt)
    write_lines(data / "valid.src", src[:2])
    write_lines(data / "valid.tgt", tgt[:2])
    runs = [prepare.prepare(data, tmp_path / f"prep{k}", "en", "fr", bpe_merges=50, max_len=30, max_ratio=3.0,
                            bpe_sample_lines=3) for k in (1, 2)]
    assert runs[0]["bpe_learned_on"] == 3 and runs[0]["bpe_sample_lines"] == 3
    assert runs[0]["splits"]["train"]["pairs"] == 10  # learned on 3, applied to all 10
    sampled = [3, 6, 9]  # pairs 4, 7 and 10: evenly spaced, the last among them
    learn_bpe([src[i] for i in sampled], [tgt[i] for i in sampled], 50, tmp_path / "expected.codes")
    codes = (tmp_path / "prep1/bpe.codes").read_text()
    assert codes == (tmp_path / "expected.codes").read_text() == (tmp_path / "prep2/bpe.codes").read_text()
    assert "a l" not in codes.splitlines()  # alpha, in an unsampled pair only, is never merged
    full = prepare.prepare(data, tmp_path / "full", "en", "fr", bpe_merges=50, max_len=30, max_ratio=3.0)
    assert full["bpe_learned_on"] == 10 and (tmp_path / "full/bpe.codes").read_text() != codes
    more = prepare.prepare(data, tmp_path / "more", "en", "fr", bpe_merges=50, max_len=30, max_ratio=3.0,
                           bpe_sample_lines=50)  # more than the corpus holds: all of it
    assert more["bpe_learned_on"] == 10
    assert (tmp_path / "more/bpe.codes").read_text() == (tmp_path / "full/bpe.codes").read_text()


@pytest.mark.parametrize("value", [0, -5, "all", 2.5])
def test_a_bad_bpe_sample_size_is_refused_naming_its_key(value):
    config, _ = load(str(ROOT / "config.yaml"), ["scale=paper"])
    config["datasets"]["wmt14_en_fr"].setdefault("prepare", {})["bpe_sample_lines"] = value
    with pytest.raises(InputError, match=r"datasets\.wmt14_en_fr\.prepare\.bpe_sample_lines"):
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")


def test_prepare_refuses_a_sample_of_no_pairs(tmp_path, capsys):
    data = tmp_path / "fetched"
    for split in ("train", "valid"):
        write_lines(data / f"{split}.src", EN)
        write_lines(data / f"{split}.tgt", DE)
    assert cli.main(["prepare", "--data-dir", str(data), "--out-dir", str(tmp_path / "prep"), "--src-lang", "en",
                     "--tgt-lang", "de", "--bpe-merges", "10", "--max-len", "30", "--max-ratio", "3",
                     "--bpe-sample-lines", "0"]) == 2
    assert "--bpe-sample-lines 0" in capsys.readouterr().err
    assert not (tmp_path / "prep/bpe.codes").exists()
