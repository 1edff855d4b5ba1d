"""Fixtures shared by the tests: tiny models and tiny binarized corpora built in tmp_path."""
from __future__ import annotations

import html.parser
import json
import random

import pytest
import torch

from nmtrepro.core.vocab import Vocab, save_indexed
from nmtrepro.models import build_model

TINY = {"family": "transformer", "d_model": 16, "ffn": 32, "heads": 2,
        "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24}).eval()


def decode_step_by_step(model, prev, enc):
    """The decoder's hidden states (B, T, d) for `prev` fed one token at a time through a cache: a test
    compares them with the full forward `model.decode(prev, enc)`."""
    cache = {}
    return torch.cat([model.decode(prev[:, t:t + 1], enc, cache) for t in range(prev.size(1))], dim=1)


def write_copy_corpus(directory, n_train=64, n_valid=8, vocab=12, seed=0, lengths=(2, 7)):
    """A toy task (the target is the reversed source) binarized like `nmtrepro prepare` writes it;
    sentences have between lengths[0] and lengths[1] words."""
    rng = random.Random(seed)
    symbols = [f"w{i}" for i in range(vocab)]
    src_vocab, tgt_vocab = Vocab(symbols), Vocab(symbols)
    for side, v in (("src", src_vocab), ("tgt", tgt_vocab)):
        v.save(directory / f"dict.{side}.txt")
    for split, n in (("train", n_train), ("valid", n_valid)):
        pairs = []
        for _ in range(n):
            words = [rng.choice(symbols) for _ in range(rng.randint(*lengths))]
            pairs.append((" ".join(words), " ".join(reversed(words))))
        save_indexed(directory / f"{split}.src.bin", [src_vocab.encode(s) for s, _ in pairs])
        save_indexed(directory / f"{split}.tgt.bin", [tgt_vocab.encode(t) for _, t in pairs])
    return directory


def binarize_annotations(folder, prepared, name):
    """The train and valid files of annotation `name` in `folder` binarized for a training corpus, as the
    workflow's rule binarize_annotation does (`nmtrepro binarize-annotation`): the folder `Corpus` reads."""
    from nmtrepro import cli

    for split in ("train", "valid"):
        code = cli.main(["binarize-annotation", "--name", name, "--text", str(folder / f"{split}.{name}"),
                         "--source", str(prepared / f"{split}.src.bin"), "--out", str(folder / f"{split}.{name}.bin")])
        assert code == 0, (split, name)
    return folder


@pytest.fixture
def copy_corpus(tmp_path):
    return write_copy_corpus(tmp_path / "data")


def sharded_like_one_job(tmp_path, run: list[str], ext: str, shards: int, gather: str, timing: tuple) -> tuple:
    """Run a stage's command (`run`, without --out/--stats) once over its whole input and as `shards`
    shard jobs gathered by the `gather` command; assert the gathered output is the one job's, and
    return (one job's stats, the gathered stats) without the `timing` keys."""
    import json

    from nmtrepro import cli

    assert cli.main(run + ["--out", str(tmp_path / f"one.{ext}"), "--stats", str(tmp_path / "one.json")]) == 0
    parts = [tmp_path / f"train.{k}-of-{shards}" for k in range(1, shards + 1)]
    for k, part in enumerate(parts, 1):
        assert cli.main(run + ["--shard", str(k), "--shards", str(shards), "--out", f"{part}.{ext}",
                               "--stats", f"{part}.json"]) == 0
    assert cli.main([gather, "--parts", *(f"{p}.{ext}" for p in parts), "--part-stats",
                     *(f"{p}.json" for p in parts), "--out", str(tmp_path / f"all.{ext}"),
                     "--stats", str(tmp_path / "all.json")]) == 0
    assert (tmp_path / f"all.{ext}").read_text() == (tmp_path / f"one.{ext}").read_text()
    return tuple({k: v for k, v in json.loads((tmp_path / name).read_text()).items() if k not in timing}
                 for name in ("one.json", "all.json"))


class _Tags(html.parser.HTMLParser):
    """The open elements while parsing; an end tag must close the innermost one."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.open = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        assert self.open and self.open.pop() == tag, f"</{tag}> closes {self.open[-1:] or 'nothing'}"


def assert_balanced_html(text: str) -> None:
    """The page parses with every element closed in order (what a browser would otherwise guess at)."""
    tags = _Tags()
    tags.feed(text)
    tags.close()
    assert tags.open == [], f"never closed: {tags.open}"


def claim(text: str, paper_delta, significance=None, metric: str = "tok_bleu", **fields) -> str:
    """A claim as a claims page's inputs hold it: its JSON, `significance` None where the claim is not
    comparable at the scale."""
    return json.dumps({"text": text, "paper_delta": paper_delta, "metric": metric,
                       "significance": None if significance is None else str(significance), **fields})
