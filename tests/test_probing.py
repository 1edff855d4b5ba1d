"""Probing suite: tree reading, task labels on hand-made trees, deterministic splits, SentEval reader,
and a classifier that learns a separable toy task."""
import io
import zipfile

import pytest
import torch

from nmtrepro.analyses.probing import tasks
from nmtrepro.analyses.probing.classifier import Grid, probe
from nmtrepro.core.files import InputError
from nmtrepro.data.trees import read_bracketed, read_treebank, sentence

PAST_SG = """( (S (NP-SBJ (DT The) (NN company)) (VP (VBD bought) (NP (CD two) (NNS plants)))
  (. .)) )"""
PRES_PL = """( (S (NP-SBJ-1 (NNS Investors)) (VP (VBP expect) (S (NP-SBJ (-NONE- *-1))
  (VP (TO to) (VP (VB see) (NP (DT a) (NN rally)))))) (. .)) )"""
COORD = """( (S (S (NP-SBJ (PRP He)) (VP (VBD left))) (, ,) (CC and) (S (NP-SBJ (PRP she))
  (VP (VBD stayed) (-LRB- -LRB-) (ADVP (RB here)) (-RRB- -RRB-))) (. .)) )"""


def test_reader_drops_traces_and_splits_function_tags():
    tree = read_bracketed(PRES_PL)[0]
    assert tree.words() == ["Investors", "expect", "to", "see", "a", "rally", "."]
    assert tree.children[0].label == "NP" and tree.children[0].tags == ("SBJ",)
    assert tree.depth() == 7  # S VP S VP VP NP DT


def test_sentence_undoes_ptb_escapes():
    assert sentence(["-LRB-", "``", "a\\/b", "''", "-RRB-"]) == '( " a/b " )'


def test_labels_on_hand_made_trees():
    past, pres = read_bracketed(PAST_SG)[0], read_bracketed(PRES_PL)[0]
    assert [l for l, _ in tasks.tense([past, pres])] == ["PAST", "PRES"]
    assert [l for l, _ in tasks.subj_num([past, pres])] == ["NN", "NNS"]
    assert [l for l, _ in tasks.obj_num([past, pres])] == ["NNS"]  # "see a rally" is in an embedded S
    assert tasks.top_constituents([past])[0][0] == "NP_VP_."
    assert tasks.sentlen([past]) == [("0", "The company bought two plants .")]  # 6 words: bin 5-8


def test_coordination_inversion_swaps_the_clauses_only():
    tree = read_bracketed(COORD)[0]
    [(label, text)] = tasks.coordination_inversion([tree])
    original = "He left , and she stayed ( here ) ."
    if label == "I":
        assert text == "she stayed ( here ) , and He left ."
    else:
        assert text == original


def test_bigram_shift_swaps_two_adjacent_words():
    tree = read_bracketed(PAST_SG)[0]
    [(label, text)] = tasks.bigram_shift([tree])
    words, orig = text.split(), tree.words()
    diff = [i for i, (a, b) in enumerate(zip(words, orig)) if a != b]
    assert sorted(words) == sorted(orig)
    assert (label, len(diff)) in {("O", 0), ("I", 2)} and (not diff or diff[1] == diff[0] + 1)


def _zip_of(trees: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("treebank/combined/wsj_0001.mrg", trees)
    return buf.getvalue()


def test_derivation_is_deterministic(tmp_path):
    path = tmp_path / "tb.zip"
    path.write_bytes(_zip_of("\n".join([PAST_SG, PRES_PL, COORD] * 3)))
    first, second = tasks.derive(read_treebank(path)), tasks.derive(read_treebank(path))
    assert first == second
    assert tasks.split_of("bigram_shift", "a b c") == tasks.split_of("bigram_shift", "a b c")


def test_split_shares_follow_the_10_1_1_layout():
    splits = [tasks.split_of("t", f"sentence {i}") for i in range(6000)]
    assert 0.07 < splits.count("te") / 6000 < 0.1 and 0.07 < splits.count("va") / 6000 < 0.1


def test_balance_downsamples_to_rarest_class():
    labelled = [("A", f"a{i}") for i in range(5)] + [("B", "b0"), ("B", "b1")]
    kept = tasks.balance("t", labelled)
    assert sorted(l for l, _ in kept) == ["A", "A", "B", "B"]


def test_senteval_reader_roundtrip_and_errors(tmp_path):
    examples = [tasks.Example("tr", "PAST", "He left ."), tasks.Example("va", "PRES", "She stays ."),
                tasks.Example("te", "PAST", "It rained .")]
    path = tmp_path / "past_present.txt"
    tasks.write_task(path, examples)
    assert path.read_text() == "tr\tPAST\tHe left .\nva\tPRES\tShe stays .\nte\tPAST\tIt rained .\n"
    assert tasks.read_task(path) == examples
    path.write_text("train\tPAST\tHe left .\n")
    with pytest.raises(InputError, match="past_present.txt:1"):
        tasks.read_task(path)


def test_classifier_learns_separable_toy_task():
    gen = torch.Generator().manual_seed(0)
    feats, labels = {}, {}
    for split, n in (("tr", 200), ("va", 50), ("te", 50)):
        x = torch.randn(n, 4, generator=gen)
        feats[split], labels[split] = x, ["pos" if v > 0 else "neg" for v in x[:, 0] + x[:, 1]]
    grid = Grid(nhid=(50,), dropout=(0.0,), weight_decay=(0.0,), max_epochs=100, batch_size=64, lr=1e-2)
    result = probe(feats, labels, grid)
    assert result["test"] > 0.9 and len(result["correct"]) == 50            # each test example's outcome kept,
    assert sum(result["correct"]) / 50 == pytest.approx(result["test"])    # for a claim's paired test
    assert probe(feats, labels, grid, logistic=True)["test"] > 0.9


def test_two_encoders_vectors_are_combined_by_a_learned_gate():
    """Paper B's probe: the label lives in the second encoder's vector only, so the gate must open to it."""
    gen = torch.Generator().manual_seed(0)
    feats, labels = {}, {}
    for split, n in (("tr", 1000), ("va", 100), ("te", 100)):
        x = torch.randn(n, 2, 4, generator=gen)
        feats[split], labels[split] = x, ["pos" if v > 0 else "neg" for v in x[:, 1, 0]]
    grid = Grid(nhid=(50,), dropout=(0.0,), weight_decay=(0.0,), max_epochs=100, batch_size=64, lr=1e-2)
    assert probe(feats, labels, grid)["test"] > 0.9


@pytest.mark.parametrize("family, shape", [({"family": "transformer"}, (2, 8)),
                                           ({"family": "recurrence", "steps": 3}, (2, 2, 8))])
def test_sentence_vector_ignores_padding_and_keeps_input_order(tmp_path, family, shape):
    from nmtrepro.analyses.probing.vectors import encode_sentences
    from nmtrepro.core.text import BPE
    from nmtrepro.core.vocab import Vocab
    from nmtrepro.models import build_model

    torch.manual_seed(0)
    vocab = Vocab(["a", "b", "c", "."])
    model = build_model({**family, "src_vocab": len(vocab), "tgt_vocab": len(vocab),
                         "d_model": 8, "ffn": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1,
                         "dropout": 0.0}).eval()
    codes = tmp_path / "bpe.codes"
    codes.write_text("#version: 0.2\nx y\n")  # one merge that never applies
    bpe = BPE(codes)
    both = encode_sentences(model, ["a b c .", "a ."], vocab, bpe, "en", batch_size=2)
    alone = encode_sentences(model, ["a ."], vocab, bpe, "en")
    assert both.shape == shape
    assert torch.allclose(both[1], alone[0], atol=1e-5)  # padding in the batch changes nothing


def test_probing_table_puts_ours_beside_the_paper(tmp_path):
    import pandas as pd

    from nmtrepro.analyses.probing.commands import build_probing_table

    paper = pd.DataFrame({"row": ["Base", "Base"], "column": ["TrDep", "BShif"], "value": [44.74, 71.24],
                          "note": ["x, paper B Table 5"] * 2})
    table = build_probing_table({"exp": {"tree_depth": {"test": 0.5}, "bigram_shift": {"test": 0.61234}}}, [paper])
    assert list(table.columns) == ["system", "TrDep", "BShif"]
    assert table.iloc[0].tolist() == ["exp (ours)", 50.0, 61.23]
    assert table.iloc[1].tolist() == ["Base (paper B Table 5)", 44.74, 71.24]


@pytest.mark.parametrize("tasks_from, says", [("senteval", "SentEval's own probing data"), ("ptb", "3,914 PTB trees")])
def test_probing_table_shows_its_tasks_only_and_says_where_ours_came_from(tmp_path, tasks_from, says):
    from nmtrepro import cli
    from nmtrepro.core.files import write_json

    write_json(tmp_path / "base.json", {"sentence_length": {"test": 0.9}, "tree_depth": {"test": 0.5}})
    assert cli.main(["probing-table", "--system", f"Base={tmp_path / 'base.json'}", "--tasks", "tree_depth",
                     "--tasks-from", tasks_from, "--out-md", str(tmp_path / "t.md"),
                     "--out-html", str(tmp_path / "t.html")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "TrDep" in text and "SeLen" not in text  # paper D Table VII has no SeLen column
    assert says in text
