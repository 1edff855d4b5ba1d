"""`export-ct2`: CTranslate2 decodes our trained Transformer's weights as our beam search does."""
from __future__ import annotations

import random

import ctranslate2
import pytest
import torch

from conftest import TINY, write_copy_corpus
from nmtrepro import cli
from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation import ct2
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.training import checkpoint
from nmtrepro.training.train import Corpus, Settings, Trainer

MODEL = {**TINY, "d_model": 32, "ffn": 64, "heads": 4}
SETTINGS = dict(max_tokens=64, update_tokens=100, lr=0.01, warmup=10, save_every=1000, keep_last=1,
                log_every=1000, threads=1)


def bundle(tmp_path, updates: int = 150, **options):
    """A folder as a model bundle holds one: model.pt (a model of the toy reversal task trained
    `updates` updates, long enough that its outputs end where it chooses) and dict.src/tgt.txt."""
    folder = write_copy_corpus(tmp_path / "bundle", n_train=128)
    trainer = Trainer(Corpus(folder), {**MODEL, **options}, Settings.from_dict({**SETTINGS, "max_updates": updates}),
                      tmp_path / "ckpt")
    trainer.train()
    checkpoint.save({"model_spec": trainer.spec, "model": trainer.model.state_dict(),
                     "vocab": checkpoint.vocab_digests(*Vocab.load_pair(folder))}, folder / "model.pt")
    return folder


def sources(vocab: Vocab, n: int = 60) -> list[list[str]]:
    """Unseen sentences of the task (lengths 1 to 9: some shorter and longer than any trained)."""
    rng = random.Random(1)
    return [[rng.choice(vocab.symbols[4:]) for _ in range(rng.randint(1, 9))] for _ in range(n)]


def ours(folder, lines: list[list[str]], beam: int) -> list[list[str]]:
    model = checkpoint.load_model(folder / "model.pt")
    src_vocab, tgt_vocab = Vocab.load(folder / "dict.src.txt"), Vocab.load(folder / "dict.tgt.txt")
    return [tgt_vocab.decode(beam_search(model, {"src": torch.tensor([src_vocab.encode(" ".join(words))])},
                                         beam=beam)[0]).split() for words in lines]


@pytest.mark.parametrize("options", [{"pre_norm": True}, {"pre_norm": False, "output_bias": True}],
                         ids=["pre-norm", "post-norm-output-bias"])
def test_ct2_greedy_equals_ours_and_beam_nearly(tmp_path, options):
    folder = bundle(tmp_path, **options)
    assert cli.main(["export-ct2", "--model", str(folder), "--out", str(tmp_path / "ct2")]) == 0
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    lines = sources(Vocab.load(folder / "dict.src.txt"))
    greedy = ours(folder, lines, beam=1)
    assert len({len(h) for h in greedy}) > 3                       # not degenerate: lengths of its own
    assert ct2.translate(translator, lines, beam=1) == greedy
    beam = ours(folder, lines, beam=5)
    same = sum(a == b for a, b in zip(ct2.translate(translator, lines, beam=5), beam)) / len(lines)
    assert same >= 0.9, same                                       # measured: 60 of 60 in either


def test_a_model_file_exports_with_its_prepared_folder_and_int8_weights(tmp_path):
    folder = bundle(tmp_path, updates=20)
    out = tmp_path / "ct2-int8"
    args = ["export-ct2", "--model", str(folder / "model.pt"), "--prepared", str(folder), "--out", str(out),
            "--quantization", "int8"]
    assert cli.main(args) == 0
    assert cli.main(args) == 0                                     # an existing export is replaced whole
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    lines = sources(Vocab.load(folder / "dict.src.txt"), 5)
    assert len(ct2.translate(ctranslate2.Translator(str(out), intra_threads=1), lines, beam=2)) == 5
    assert cli.main(["export-ct2", "--model", str(folder / "model.pt"), "--out", str(out)]) == 2  # no dictionaries


@pytest.mark.parametrize("spec, named", [({"family": "phrase"}, "model family 'phrase'"),
                                         ({"rel_pos_clip": 4}, "option rel_pos_clip=4"),
                                         ({"directional": True}, "option directional=True")])
def test_other_families_and_options_are_refused_by_name(tmp_path, capsys, spec, named):
    spec = {**TINY, "src_vocab": 16, "tgt_vocab": 16, **spec}
    checkpoint.save({"model_spec": spec, "model": {}}, tmp_path / "model.pt")
    write_copy_corpus(tmp_path, n_train=1, n_valid=1)
    assert cli.main(["export-ct2", "--model", str(tmp_path), "--out", str(tmp_path / "ct2")]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "ct2").exists()


def test_dictionaries_that_are_not_the_models_are_refused(tmp_path, capsys):
    folder = bundle(tmp_path, updates=1)
    other = tmp_path / "other"
    other.mkdir()
    src, tgt = ((folder / f"dict.{side}.txt").read_text().splitlines() for side in ("src", "tgt"))
    (other / "dict.src.txt").write_text("\n".join(src[:4] + src[4:][::-1]) + "\n")   # same size, other order
    (other / "dict.tgt.txt").write_text("\n".join(tgt) + "\n")
    args = ["export-ct2", "--model", str(folder / "model.pt"), "--prepared", str(other), "--out", str(tmp_path / "ct2")]
    assert cli.main(args) == 2
    assert "another src vocabulary" in capsys.readouterr().err and not (tmp_path / "ct2").exists()
