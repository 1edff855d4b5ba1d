"""Analyses beyond corpus BLEU, each pinned on a hand-computed case: length buckets, n-gram gaps,
speed/size, head similarity, and the paper-beside-ours rendering they share (significance:
test_significance.py)."""
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t
import torch
from torch import nn

from nmtrepro import cli
from nmtrepro.analyses.buckets import bucket_index, bucket_labels, bucket_scores
from nmtrepro.analyses.lingeval import pair_args, pair_files
from nmtrepro.analyses import groups_args
from nmtrepro.analyses.heads import group_similarity, head_cosines, similarity
from nmtrepro.analyses.ngrams import precision_gaps
from nmtrepro.analyses.probing.tasks import TASKS, classifier_args, probe_task_files, table_tasks
from nmtrepro.analyses.speed import paper_size_args, speed_table, training_speed
from nmtrepro.core.files import InputError
from nmtrepro.models import build_model
from nmtrepro.models.size import parameter_counts
from nmtrepro.reporting.papers import beside


def test_bucket_boundaries_are_inclusive_upper_bounds():
    edges = [15, 30, 45]
    assert bucket_labels(edges) == ["≤15", "(15,30]", "(30,45]", ">45"]
    assert [bucket_index(n, edges) for n in (1, 15, 16, 30, 31, 45, 46, 200)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert bucket_labels([10, 20]) == ["≤10", "(10,20]", ">20"]
    with pytest.raises(InputError):
        bucket_labels([30, 15])


def test_bucket_scores_count_sentences_and_score_each_bucket_alone():
    refs = ["a b c d e", "f g h i j", "k l m n o"]
    hyps = ["a b c d e", "f g h i j", "x y z w v"]        # perfect short ones, wrong long one
    base = ["a b c d e", "x y z w v", "x y z w v"]
    buckets = bucket_scores([3, 10, 50], [(hyps, base)], refs, [5, 20])
    assert [b["n"] for b in buckets] == [1, 1, 1]
    assert buckets[0]["bleu"] == pytest.approx(100) and buckets[0]["delta"] == pytest.approx(0)
    assert buckets[1]["bleu"] == pytest.approx(100) and buckets[1]["baseline_bleu"] == pytest.approx(0)
    assert buckets[2]["bleu"] == pytest.approx(0)
    empty = bucket_scores([3], [(["a"], ["a"])], ["a"], [5, 20])
    assert [b["n"] for b in empty] == [1, 0, 0] and empty[1]["bleu"] is None and empty[1]["delta_low"] is None


def test_bucket_deltas_are_seed_means_with_the_pooled_bootstrap_ci_of_the_bucket():
    refs = [f"w{i} x{i} y{i} z{i}" for i in range(8)]
    wrong = [f"q{i} r{i} s{i} t{i}" for i in range(8)]
    lengths = [3] * 4 + [30] * 4                          # short sentences in bucket 0, long in bucket 1
    # seed 1: the system is right on every sentence; seed 2: only on the short ones; the baseline never
    pairs = [(refs, wrong), (refs[:4] + wrong[4:], wrong)]
    short, long = bucket_scores(lengths, pairs, refs, [10], samples=200, seeds=[1, 2])
    assert short["delta"] == pytest.approx(100) and [s["delta"] for s in short["seeds"]] == pytest.approx([100, 100])
    assert long["delta"] == pytest.approx(50) and [s["delta"] for s in long["seeds"]] == pytest.approx([100, 0])
    assert short["delta_low"] == short["delta_high"] == pytest.approx(100)   # no resample changes it
    # the seeds split (100 and 0) and no resample moves either: s^2/k = 2500 on one degree of freedom
    half = student_t(1).ppf(0.975) * 50
    assert (long["delta_low"], long["delta_high"]) == pytest.approx((50 - half, 50 + half))


def test_ngram_gaps_are_system_minus_baseline_per_order():
    row = precision_gaps({"precisions": [60.0, 40.0, 30.0, 20.0]}, {"precisions": [55.0, 41.0, 30.0, 10.0]})
    assert [row[f"Δ {n}-gram"] for n in (1, 2, 3, 4)] == [5.0, -1.0, 0.0, 10.0]
    with pytest.raises(InputError):
        precision_gaps({"precisions": [1.0]}, {"precisions": [1.0, 2.0, 3.0, 4.0]})


BASE_SPEEDS = {"params": 2_000_000, "non_embedding_params": 1_000_000, "train_tgt_tok_s": 100.0,
               "train_src_tok_s": 90.0, "decode_sent_s": 10.0, "decode_tgt_tok_s": 200.0, "decode_src_tok_s": 150.0}


def test_speed_table_reports_time_relative_to_the_baseline():
    base = BASE_SPEEDS
    slow = dict(base, params=3_000_000, train_tgt_tok_s=50.0, decode_sent_s=4.0)
    table = speed_table({"Base": base, "Slow": slow}, {"Base": base, "Slow": base})
    assert table.loc["Base", "Train time / token"] == 1.0 and table.loc["Base", "Decode time"] == 1.0
    assert table.loc["Slow", "Train time / token"] == 2.0 and table.loc["Slow", "Decode time"] == 2.5
    assert table.loc["Slow", "Para. (M)"] == 3.0
    assert table.loc["Base", "#Speed1"] == 90.0 and table.loc["Base", "#Speed2"] == 150.0  # paper D: source tokens/s
    spec = {"family": "transformer", "src_vocab": 10, "tgt_vocab": 10, "d_model": 8, "ffn": 16, "heads": 2,
            "encoder_layers": 1, "decoder_layers": 1}
    at_paper_size = speed_table({"Base": base}, {"Base": base}, {"Base": spec})
    assert at_paper_size.loc["Base", "Para. (M) trained"] == 2.0  # the trained model moves aside
    assert at_paper_size.loc["Base", "Para. (M)"] * 1e6 == parameter_counts(build_model(spec))["total"]
    curve = pd.DataFrame({"tgt_tok_s": [10.0, None, 300.0, 200.0, 250.0]})
    assert training_speed(curve) == 225.0  # median over logged windows, checkpoint rows skipped
    assert training_speed(curve.rename(columns={"tgt_tok_s": "src_tok_s"}), column="src_tok_s") == 225.0


def test_speed_table_says_its_speeds_carry_the_load_their_jobs_ran_under(tmp_path):
    speeds = tmp_path / "base.json"
    speeds.write_text(json.dumps(BASE_SPEEDS))
    out = tmp_path / "speed"
    assert cli.main(["speed-table", "--system", f"Base={speeds}={speeds}", "--title", "T", "--note", "Ours.",
                     "--out-md", f"{out}.md", "--out-html", f"{out}.html", "--out-tex", f"{out}.tex"]) == 0
    note = (tmp_path / "speed.md").read_text()
    assert "Ours. Speeds are those of the training and decoding jobs themselves" in " ".join(note.split())


def test_parameter_counts_separate_embeddings_and_count_a_shared_table_once():
    table = nn.Embedding(10, 4)
    tied = nn.Embedding(10, 4)
    tied.weight = table.weight
    model = nn.Sequential(table, nn.Linear(4, 3), tied)
    assert parameter_counts(model) == {"total": 40 + 15, "embedding": 40, "non_embedding": 15}


def test_head_cosines_on_identical_and_orthogonal_heads():
    out = torch.zeros(1, 3, 2, 2)                 # (B, H, T, d_head)
    out[0, 0, :, 0] = 1.0
    out[0, 1, :, 0] = 2.0                         # same direction as head 0
    out[0, 2, :, 1] = 1.0                         # orthogonal to both
    pad = torch.tensor([[False, True]])           # second token is padding
    cos, n, per_sentence = head_cosines(out, pad)
    assert n == 1 and per_sentence.tolist() == [[pytest.approx(5 / 9), 1.0]]  # the token's mean over 3 x 3 pairs
    assert torch.allclose(cos, torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    sims = group_similarity(cos, ["A", "A", "B"])
    assert sims["A"]["A"] == pytest.approx(1.0) and sims["A"]["B"] == pytest.approx(0.0)
    assert sims["B"]["B"] == pytest.approx(1.0)   # Eq. 14: a head is compared with itself too


def test_head_similarity_on_a_transformer_leaves_the_hot_path_untouched():
    torch.manual_seed(0)
    model = build_model({"family": "transformer", "src_vocab": 20, "tgt_vocab": 20, "d_model": 8, "ffn": 16,
                         "heads": 2, "encoder_layers": 2, "decoder_layers": 1}).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])  # 0 = padding
    result = similarity(model, [{"src": src}])
    assert result["heads"] == 2 and result["layers"] == 2 and result["tokens"] == 7
    assert result["average"] == pytest.approx((1 + result["pairwise"]) / 2)  # 2 heads: diag 1, off-diag
    assert result["groups"] == {"Global": {"Global": pytest.approx(result["average"])}}
    # each sentence's statistics: summed over its tokens and the layers, they make the average again
    sentences = np.array(result["sentences"])
    assert sentences[:, 1].tolist() == [8, 6] and sentences[:, 0].sum() / 14 == pytest.approx(result["average"])
    attn = model.encoder[0].self_attn.sublayer
    assert attn.head_outputs is None


def test_beside_adds_paper_columns_and_differences():
    ours = pd.DataFrame({"x": [1.0, 2.0]}, index=["A", "B"])
    paper = pd.DataFrame({"row": ["A", "C"], "column": ["x", "y"], "value": [0.5, 3.0], "note": ["", ""]})
    table = beside(ours, paper)
    assert list(table.index) == ["A", "B", "C"]
    assert table.loc["A", "x: ours − paper"] == 0.5
    assert math.isnan(table.loc["B", "paper: x"]) and table.loc["C", "paper: y"] == 3.0


def test_a_tables_mark_uses_the_claims_pages_seed_noise_and_keeps_the_papers_test_beside_it(tmp_path):
    """A one-seed row whose bootstrap alone gives p 0.004 (the paper's test: ++) is tested with the seed
    noise pooled over a three-seed comparison of its recipe (spread 0.1033, no own test-set part): var
    0.1033 + 0.1, the spread's part estimated on 2 df, p 0.039 for its +1.2: + only. Without a pool its seed noise is unmeasured: no
    p, no mark, the paper's test's mark still beside it."""
    from nmtrepro.evaluation.significance import MeanDifference

    paper = tmp_path / "paper.tsv"
    paper.write_text("row\tcolumn\tvalue\tnote\nBase\tEn-De\t27.38\t\n+PR\tEn-De\t28.67\t† p < 0.01\n")
    entry = {"score": 30.0, "signature": "sig", "precisions": [0] * 4, "bp": 1.0, "sys_len": 1, "ref_len": 1}
    bleu = tmp_path / "b.json"
    bleu.write_text(json.dumps({"n": 1, "tok_bleu": entry, "chrf": entry}))

    def significance(name, deltas, var):
        entry = {"score": 30.0, "baseline": 29.0, "delta": float(np.mean(deltas)), "var": var, "df": None,
                 "p_greater": 0.004, "var_seeds": float(np.var(deltas, ddof=1)) / 3 if len(deltas) > 1 else None,
                 "var_bootstrap_mean": var, "var_bootstrap_each": var, "samples": 10000, "bootstrap_seed": 12345,
                 "recipe": "phrase/transformer",
                 "seeds": [{"seed": i + 1, "score": 29.0 + d, "baseline": 29.0, "delta": d} for i, d in enumerate(deltas)]}
        (tmp_path / name).write_text(json.dumps({"tok_bleu": entry, "sacrebleu": entry, "chrf": entry}))
        return str(tmp_path / name)
    sig, central = significance("s.json", [1.2], 0.1), significance("c.json", [0.6, 1.2, 1.1], 0.1)
    out = {ext: tmp_path / f"t.{ext}" for ext in ("md", "html", "tex")}
    argv = ["table", "--title", "T", "--paper-numbers", str(paper), "--metric", "tok_bleu",
            "--marks", "plus", "--out-md", str(out["md"]), "--out-html", str(out["html"]), "--out-tex", str(out["tex"])]
    cells = [{"experiment": "pr", "row": "+PR", "column": "En-De", "scores": [str(bleu)],
              "significance": {"baseline": "base", "path": sig}}]
    assert cli.main(argv + ["--inputs", json.dumps({"cells": cells, "pool": {"central": central}})]) == 0
    md = out["md"].read_text()
    spread = np.var([0.6, 1.2, 1.1], ddof=1)
    test = MeanDifference(1.2, spread + 0.1, 2, spread / (spread + 0.1))
    row = [cell.strip() for cell in next(line for line in md.splitlines() if line.startswith("| pr ")).split("|")]
    assert f"{test.p(+1):.3f}" == "0.039" and f"{test.p(+1):.3f}" in row
    assert "30.00+" in row and "{:+.2f} to {:+.2f}".format(*test.bounds(0.9)) in row and row[-2] == "++"
    assert "the claims pages' test" in md and "'paper's test': the mark the papers' own kind of test" in md
    assert "1 of the 1 compared with their baseline improve on it significantly (1 by the paper's test alone)" in md
    assert "10,000 resamples, seed 12345" in md and "\\begin{tabular}" in out["tex"].read_text()
    assert cli.main(argv + ["--inputs", json.dumps({"cells": cells})]) == 0
    row = [cell.strip() for cell in next(line for line in out["md"].read_text().splitlines()
                                         if line.startswith("| pr ")).split("|")]
    assert "30.00" in row and "seed noise unmeasured" in row and row[-2] == "++"


def test_a_baseline_on_another_test_set_is_refused_naming_the_key():
    from pathlib import Path

    from nmtrepro.study.config import experiments, load, validate

    repo = Path(__file__).resolve().parents[1]
    config, _ = load(repo / "config.yaml")
    validate(config, repo / "workflow/schemas/config.schema.yaml")
    experiments(config)                                   # the default's baselines are valid
    config["tables"]["A_table1"]["cells"][0]["baseline"] = "base_en_fr"
    with pytest.raises(InputError, match=r"tables.A_table1.cells\[0\].baseline = 'base_en_fr' is tested on "
                                         r"multi30k_en_fr/test_2016_flickr"):
        experiments(config)


def test_a_system_without_a_baseline_gets_no_delta_per_bucket(tmp_path):
    src, hyp, ref = (tmp_path / name for name in ("src", "hyp", "ref"))
    src.write_text("a b\nc d e f\n")
    hyp.write_text("a b\nc d\n")
    ref.write_text("a b\nc x\n")
    out = tmp_path / "b.json"
    args = ["length-buckets", "--src-bpe", str(src), "--ref-tok", str(ref), "--edges", "3", "--samples", "20",
            "--out", str(out), "--hyp-tok", str(hyp)]
    assert cli.main(args) == 0
    own = json.loads(out.read_text())
    assert [b["bleu"] for b in own] != [None, None] and {b["delta"] for b in own} == {None}  # not a Δ of 0
    other = tmp_path / "other"
    other.write_text("a b\nx x\n")
    assert cli.main([*args, "--base-hyp-tok", str(other)]) == 0
    assert json.loads(out.read_text())[1]["delta"] is not None


def plot_two_sentences(tmp_path, lengths) -> dict:
    """plot-buckets over two test sentences of `lengths` (the first translated exactly), paper A's Δ >45
    beside them: its outputs by extension."""
    buckets = bucket_scores(lengths, [(["a b", "c d"], ["a b", "x y"])], ["a b", "c d"], [15, 30, 45])
    result = tmp_path / "b.json"
    result.write_text(json.dumps(buckets))
    paper = tmp_path / "paper.tsv"
    paper.write_text("row\tcolumn\tvalue\tnote\nOurs\tΔ >45\t1.72\t\n", encoding="utf-8")
    out = {ext: tmp_path / f"f.{ext}" for ext in ("png", "svg", "md", "html", "tex")}
    assert cli.main(["plot-buckets", "--system", f"Ours={result}", "--paper-numbers", str(paper), "--title", "F",
                     *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    return out


def test_plot_buckets_writes_figure_and_table_with_the_papers_delta(tmp_path):
    out = plot_two_sentences(tmp_path, [3, 50])
    assert out["png"].read_bytes()[:4] == b"\x89PNG" and "<svg" in out["svg"].read_text()
    md = out["md"].read_text()
    assert "paper: Δ >45" in md and "| Ours " in md and "-1.72" in md   # ours Δ 0 on >45: 0 − 1.72
    assert "CI ≤15" in md and "[+0.00, +0.00]" in md                     # one identical sentence: no spread
    assert "each paired with the baseline of its seed" in " ".join(md.split())


def test_an_empty_length_bucket_says_so_on_the_figure_and_in_the_table(tmp_path):
    """Paper A's >45 on a test set without such sources: its cells and its tick say "no test sentence", the
    table's reading names it, and the paper's number stands alone beside it."""
    out = plot_two_sentences(tmp_path, [3, 20])
    md = out["md"].read_text()
    assert "Buckets (30,45], >45: no test sentence at this scale, so nothing there is measured or judged" in md
    ours = next(line for line in md.splitlines() if line.startswith("| Ours"))
    assert ours.count("no test sentence") == 3 + 4 and "1.72" in ours  # BLEU, Δ, CI of each; >45's Δ − paper
    assert "no test sentence" in out["svg"].read_text()


# -- what the workflow passes each analysis command (the kinds' own argument builders) ---------------

def test_the_workflow_arguments_of_each_kind_come_from_its_config_alone():
    """Each kind builds its rule's inputs and arguments from its config entry (the rule file only wires
    them): the contrastive pairs in their three forms, a system's head groups, the probe's tasks and
    classifier grid, and a speed table's paper-size specs."""
    def under(path):
        return f"results/tiny/{path}"

    distil = {"distil_dir": "d", "sets": ["a", "b"], "parser": "spacy", "max_tokens": 900, "max_per_set": 20}
    assert pair_files(distil, under)[:3] == ["d/a/src.en.gz", "d/a/tgt.correct.de.gz", "d/a/tgt.incorrect.de.gz"]
    assert pair_args(distil, under) == ["--distil-set", "d/a", "--distil-set", "d/b", "--parser", "spacy",
                                        "--max-per-set", "20", "--max-tokens", "900"]
    download = {"download": "lingeval97", "max_tokens": 900}
    assert pair_files(download, under) == ["results/tiny/downloads/lingeval97.json"]
    given = {"lingeval97": "x.json", "max_tokens": 9}
    assert pair_args(given, under) == ["--lingeval97", "x.json", "--max-tokens", "9"]
    systems = [{"experiment": "fusing_en_de", "groups": ["rec", "rec", "syn"]}, {"experiment": "d_base_en_de"}]
    assert groups_args(systems, "fusing_en_de") == ["--groups", "rec", "rec", "syn"]
    assert groups_args(systems, "d_base_en_de") == []
    tables = {"t5": {"kind": "probing", "systems": [{"experiment": "pr"}], "tasks": ["top_constituents", "tree_depth"]},
              "other": {"kind": "probing", "systems": [{"experiment": "base"}]}}
    assert probe_task_files(tables, "pr", "ptb", under) == ["results/tiny/probing/tasks/tree_depth.txt",  # TASKS' order
                                                            "results/tiny/probing/tasks/top_constituents.txt"]
    assert len(probe_task_files(tables, "base", "senteval", under)) == len(TASKS)  # no tasks: all ten
    with pytest.raises(InputError, match=r"analyses\.t5\.tasks: \['depth'\]"):
        table_tasks("t5", {"tasks": ["tree_depth", "depth"]})
    assert classifier_args({"nhid": [50, 100], "max_epochs": 3}) == ["--nhid", "50", "100", "--max-epochs", "3"]
    assert paper_size_args({"systems": []}, None) == []   # no paper_size: nothing to count
    sizes = {"systems": [{"label": "Base", "experiment": "b"}], "paper_size": {"scale": "paper", "src_vocab": 9,
                                                                               "tgt_vocab": 8, "output_bias": True}}
    assert paper_size_args(sizes, lambda e, scale: {"at": f"{e}@{scale}"}) == [
        "--paper-size", 'Base={"at": "b@paper", "src_vocab": 9, "tgt_vocab": 8, "output_bias": true}']
