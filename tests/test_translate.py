"""`nmtrepro translate` and model bundles: raw text in, the workflow's own decode out, and a model that
refuses vocabularies it was not trained with."""
from __future__ import annotations

import gzip
import itertools
import json
import os
import subprocess
from argparse import Namespace
import sys
from pathlib import Path

import pytest

import nmtrepro
from conftest import TINY
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.core.vocab import Vocab
from nmtrepro.data import prepare
from nmtrepro.evaluation.generate import run_decode
from nmtrepro.evaluation.translate import translate_lines
from nmtrepro.training.train import Corpus, Settings, Trainer

REPO = Path(__file__).resolve().parents[1]
SETTINGS = dict(max_tokens=400, update_tokens=400, lr=0.005, warmup=20, save_every=100, keep_last=1,
                log_every=50, threads=1, max_updates=120)


def embedded(name: str, lang: str, lines: int) -> list[str]:
    with gzip.open(REPO / f"data/multi30k/{name}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in itertools.islice(handle, lines)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small En-De Transformer trained briefly on the embedded Multi30k (its outputs vary with the input,
    unlike an untrained model's), its test split prepared and decoded as the workflow does, and its bundle."""
    root = tmp_path_factory.mktemp("translate")
    data = root / "data"
    data.mkdir()
    for split, name, n in (("train", "train", 600), ("valid", "val", 20), ("test", "test_2016_flickr", 60)):
        for side, lang in (("src", "en"), ("tgt", "de")):
            (data / f"{split}.{side}").write_text("\n".join(embedded(name, lang, n)) + "\n", encoding="utf-8")
    prepared = root / "prepared"
    prepare.prepare(data, prepared, "en", "de", bpe_merges=400, max_len=60, max_ratio=3.0)
    trainer = Trainer(Corpus(prepared), {**TINY, "d_model": 32, "ffn": 64}, Settings.from_dict(SETTINGS),
                      root / "checkpoints")
    trainer.train()
    trainer.write_outputs(root / "final.pt", root / "curve.tsv")
    test = str(root / "test")
    assert cli.main(["prepare-test", "--prepared", str(prepared), "--data-dir", str(data), "--split", "test",
                     "--src-lang", "en", "--tgt-lang", "de", "--out-prefix", test]) == 0
    assert cli.main(["decode", "--model", str(root / "final.pt"), "--prepared", str(prepared), "--src-bpe",
                     f"{test}.src.bpe", "--tgt-lang", "de", "--beam", "3", "--threads", "1",
                     "--out", str(root / "test.hyp"), "--out-tok", str(root / "test.hyp.tok")]) == 0
    assert cli.main(["bundle", "--model", str(root / "final.pt"), "--prepared", str(prepared), "--max-len", "60",
                     "--beam", "3", "--experiment", "base_en_de", "--dataset", "multi30k_en_de", "--scale", "test",
                     "--out", str(root / "bundle")]) == 0
    return root


def translate(bundle, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The command as a user runs it, in its own process."""
    return subprocess.run([sys.executable, "-m", "nmtrepro.cli", "translate", "--model", str(bundle),
                           "--threads", "1", *args], input=stdin, capture_output=True,
                          env={**os.environ, "NMTREPRO_FORKSERVER": "off"})


def test_translate_of_the_raw_test_source_equals_the_workflows_decode(trained):
    hyps = (trained / "test.hyp").read_text(encoding="utf-8").splitlines()
    out = trained / "translated.txt"
    assert cli.main(["translate", "--model", str(trained / "bundle"), "--input", str(trained / "test.src"),
                     "--output", str(out), "--threads", "1"]) == 0
    ours = out.read_text(encoding="utf-8").splitlines()
    assert len(set(hyps)) > 10                      # a model whose output varies: the comparison can fail
    assert ours == hyps


def test_stdin_lines_in_one_line_out_each_empty_for_empty(trained):
    lines = (trained / "test.src").read_text(encoding="utf-8").splitlines()[:3]
    hyps = (trained / "test.hyp").read_text(encoding="utf-8").splitlines()[:3]
    given = "\n".join([lines[0], "", lines[1], "   ", lines[2]])   # no newline after the last line
    run = translate(trained / "bundle", stdin=given.encode("utf-8"))
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode("utf-8").split("\n") == [hyps[0], "", hyps[1], "", hyps[2], ""]


def test_invalid_utf8_is_an_error_naming_its_line_and_writes_no_output(trained, tmp_path):
    source = tmp_path / "bad.en"
    source.write_bytes(b"A man rides a horse.\nA dog \xff runs.\n")
    run = translate(trained / "bundle", "--input", str(source), "--output", str(tmp_path / "out.de"))
    assert run.returncode == 2 and f"{source}:2: not valid UTF-8" in run.stderr.decode()
    assert not (tmp_path / "out.de").exists()


def test_an_overlong_line_is_translated_in_parts_and_named(trained):
    long = " ".join(["A man in a red shirt rides a horse on the beach ."] * 8)
    bundle = nmtrepro.load(trained / "bundle", "cpu", threads=1).bundle
    warnings = []
    out = translate_lines(bundle, ["A dog runs.", long], max_source_len=30, warn=warnings.append)
    assert len(out) == 2 and out[1][0][1]
    assert len(warnings) == 1 and warnings[0].startswith("line 2: ") and "parts" in warnings[0]


def test_nbest_rows_are_tab_separated_and_the_first_is_the_one_best(trained):
    lines = (trained / "test.src").read_text(encoding="utf-8").splitlines()[:4]
    hyps = (trained / "test.hyp").read_text(encoding="utf-8").splitlines()[:4]
    run = translate(trained / "bundle", "--nbest", "2", stdin="\n".join(lines).encode("utf-8") + b"\n")
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    rows = [row.split("\t") for row in run.stdout.decode("utf-8").splitlines()]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(n, k) for n in range(1, 5) for k in (1, 2)]
    assert [r[3] for r in rows if r[1] == "1"] == hyps
    assert all(float(a[2]) >= float(b[2]) for a, b in zip(rows[::2], rows[1::2]))


def test_python_api_translates_as_the_command(trained):
    lines = (trained / "test.src").read_text(encoding="utf-8").splitlines()[:5]
    hyps = (trained / "test.hyp").read_text(encoding="utf-8").splitlines()[:5]
    translator = nmtrepro.load(trained / "bundle", "cpu", threads=1)
    assert translator.translate(lines) == hyps
    assert [best[0][1] for best in translator.nbest(lines, 2)] == hyps
    meta = json.loads((trained / "bundle/bundle.json").read_text())
    assert meta["src_lang"] == "en" and meta["search"]["beam"] == 3 and meta["provenance"]["experiment"] == "base_en_de"


def test_a_model_refuses_a_vocabulary_it_was_not_trained_with(trained, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    vocab = Vocab.load(trained / "prepared/dict.tgt.txt")
    swapped = Vocab(vocab.symbols[5:6] + vocab.symbols[4:5] + vocab.symbols[6:])  # same size, two symbols swapped
    swapped.save(other / "dict.tgt.txt")
    for name in ("dict.src.txt", "stats.json"):
        (other / name).write_bytes((trained / "prepared" / name).read_bytes())
    with pytest.raises(InputError, match=r"another tgt vocabulary than .*other/dict.tgt.txt"):
        run_decode(Namespace(model=str(trained / "final.pt"), prepared=str(other), threads=1))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for path in (trained / "bundle").iterdir():
        (bundle / path.name).write_bytes(path.read_bytes())
    swapped.save(bundle / "dict.tgt.txt")
    with pytest.raises(InputError, match="another tgt vocabulary"):
        nmtrepro.load(bundle, "cpu")


def test_a_folder_that_is_no_bundle_is_named(tmp_path):
    with pytest.raises(InputError, match="not a model bundle"):
        nmtrepro.load(tmp_path / "nowhere")
    (tmp_path / "half").mkdir()
    (tmp_path / "half/model.pt").write_bytes(b"")
    with pytest.raises(InputError, match="dict.src.txt, dict.tgt.txt, bpe.codes, bundle.json missing"):
        nmtrepro.load(tmp_path / "half")


def test_decode_of_raw_text_warns_that_it_was_not_prepared(trained, tmp_path, caplog):
    def decode(source):
        caplog.clear()
        assert cli.main(["decode", "--model", str(trained / "final.pt"), "--prepared", str(trained / "prepared"),
                         "--src-bpe", str(source), "--tgt-lang", "de", "--beam", "1", "--threads", "1",
                         "--out", str(tmp_path / "h"), "--out-tok", str(tmp_path / "t")]) == 0
        return caplog.text

    with caplog.at_level("WARNING"):
        assert "nmtrepro translate" in decode(trained / "test.src")
        assert "nmtrepro translate" not in decode(trained / "test.src.bpe")
