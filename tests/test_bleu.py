"""BLEU wrapper: pinned on cases small enough to count n-grams by hand."""
import errno
import io
import json
import math
import os

import pytest

from nmtrepro import cli
from nmtrepro.core import files
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.bleu import score


def write_set(tmp_path, hyp, ref, hyp_tok=None, ref_tok=None):
    """Write the four files `score` reads; the tokenized pair defaults to the detokenized one."""
    texts = {"hyp": hyp, "ref": ref, "hyp_tok": hyp_tok or hyp, "ref_tok": ref_tok or ref}
    paths = {}
    for name, lines in texts.items():
        paths[name] = tmp_path / f"test.{name}"
        paths[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def test_identical_text_scores_100_both_ways(tmp_path):
    lines = ["A man rides a horse .", "Two dogs play in the snow ."]
    result = score(**write_set(tmp_path, lines, lines))
    assert result["n"] == 2
    for kind in ("sacrebleu", "tok_bleu"):
        assert result[kind]["score"] == pytest.approx(100.0)
        assert result[kind]["precisions"] == pytest.approx([100.0] * 4)
        assert result[kind]["bp"] == pytest.approx(1.0)
        assert result[kind]["sys_len"] == result[kind]["ref_len"] == 13


def test_precisions_match_hand_count(tmp_path):
    # hyp: the cat sat on the mat / ref: the cat sat on a mat (6 tokens each, BP = 1)
    # 1-grams 5/6 ('the' clipped to 1), 2-grams 3/5, 3-grams 2/4, 4-grams 1/3.
    result = score(**write_set(tmp_path, ["the cat sat on the mat"], ["the cat sat on a mat"]))
    tok = result["tok_bleu"]
    assert tok["precisions"] == pytest.approx([100 * 5 / 6, 100 * 3 / 5, 100 * 2 / 4, 100 * 1 / 3])
    assert tok["bp"] == pytest.approx(1.0)
    assert tok["score"] == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)


def test_short_hypothesis_pays_brevity_penalty(tmp_path):
    # All n-grams match; 4 hypothesis tokens against 6 reference tokens: BP = exp(1 - 6/4).
    result = score(**write_set(tmp_path, ["the cat sat on"], ["the cat sat on the mat"]))
    assert result["tok_bleu"]["precisions"] == pytest.approx([100.0] * 4)
    assert result["tok_bleu"]["bp"] == pytest.approx(math.exp(-0.5))
    assert result["tok_bleu"]["score"] == pytest.approx(100 * math.exp(-0.5))


def test_tokenized_bleu_splits_on_whitespace_only_while_sacrebleu_splits_punctuation(tmp_path):
    # sacreBLEU's 13a splits 'mat.' into 'mat .', so both sides agree; tokenized BLEU keeps 'mat.' whole:
    # 6 vs 7 tokens, precisions 5/6, 4/5, 3/4, 2/3 and BP = exp(1 - 7/6).
    hyp, ref = ["the cat sat on the mat."], ["the cat sat on the mat ."]
    result = score(**write_set(tmp_path, hyp, ref))
    assert result["sacrebleu"]["score"] == pytest.approx(100.0)
    tok = result["tok_bleu"]
    assert (tok["sys_len"], tok["ref_len"]) == (6, 7)
    assert tok["precisions"] == pytest.approx([100 * 5 / 6, 100 * 4 / 5, 100 * 3 / 4, 100 * 2 / 3])
    assert tok["score"] == pytest.approx(100 * math.exp(1 - 7 / 6) * (1 / 3) ** 0.25)


def test_both_bleus_are_case_sensitive(tmp_path):
    result = score(**write_set(tmp_path, ["The dog runs"], ["the dog runs"]))
    for kind in ("sacrebleu", "tok_bleu"):
        assert result[kind]["precisions"][0] == pytest.approx(100 * 2 / 3)


def test_signatures_say_how_each_bleu_was_computed(tmp_path):
    result = score(**write_set(tmp_path, ["a b c d"], ["a b c d"]))
    assert "tok:13a" in result["sacrebleu"]["signature"]
    assert "case:mixed" in result["sacrebleu"]["signature"]
    assert "tok:none" in result["tok_bleu"]["signature"]
    assert "smooth:none" in result["tok_bleu"]["signature"]


def test_line_count_mismatch_names_the_files(tmp_path):
    paths = write_set(tmp_path, ["a b", "c d"], ["a b", "c d"], ref_tok=["a b"])
    with pytest.raises(InputError, match="line count") as err:
        score(**paths)
    assert str(paths["ref_tok"]) in str(err.value) and str(paths["hyp"]) in str(err.value)


def test_empty_hypothesis_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="empty"):
        score(**write_set(tmp_path, [], []))


def test_cli_writes_json_with_both_scores(tmp_path):
    paths = write_set(tmp_path, ["the cat sat on the mat"], ["the cat sat on a mat"])
    out = tmp_path / "out" / "test.bleu.json"
    argv = ["bleu", "--hyp", str(paths["hyp"]), "--ref", str(paths["ref"]), "--hyp-tok", str(paths["hyp_tok"]),
            "--ref-tok", str(paths["ref_tok"]), "--out", str(out)]
    assert cli.main(argv) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(score(**paths)))
    assert set(written["tok_bleu"]) == {"name", "score", "signature", "precisions", "bp", "sys_len", "ref_len"}
    assert {written[key]["name"] for key in ("chrf", "chrf_pp", "ter")} == {"chrF2", "chrF2++", "TER"}


def write_refs(tmp_path, refs):
    """One raw and one tokenized file per reference (the tokenized one the same text)."""
    paths = []
    for k, lines in enumerate(refs):
        paths.append(tmp_path / f"test.ref{k}")
        paths[-1].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def test_multi_reference_bleu_is_sacrebleus_own_and_not_below_any_single_reference(tmp_path):
    from sacrebleu.metrics import BLEU

    hyps = ["the cat sat on the mat", "a dog is running in the park"]
    refs = [["the cat sat on a mat", "a dog runs in the park"],
            ["there is a cat on the mat", "a dog is running through the park"],
            ["the cat is sitting on the mat", "the dog runs in a park"]]
    hyp = tmp_path / "test.hyp"
    hyp.write_text("".join(line + "\n" for line in hyps), encoding="utf-8")
    ref_paths = write_refs(tmp_path, refs)
    result = score(hyp, ref_paths, hyp, ref_paths)
    assert result["references"] == 3
    for kind, metric in (("sacrebleu", BLEU()), ("tok_bleu", BLEU(tokenize="none", smooth_method="none"))):
        assert result[kind]["score"] == pytest.approx(metric.corpus_score(hyps, refs).score)
        assert "nrefs:3" in result[kind]["signature"]
        for one in ref_paths:
            assert result[kind]["score"] >= score(hyp, one, hyp, one)[kind]["score"]
    assert result["tok_bleu"]["score"] > score(hyp, ref_paths[0], hyp, ref_paths[0])["tok_bleu"]["score"]
    assert score(hyp, ref_paths[0], hyp, ref_paths[0])["references"] == 1


def test_a_reference_of_another_line_count_is_named(tmp_path):
    hyp = tmp_path / "test.hyp"
    hyp.write_text("a b\nc d\n", encoding="utf-8")
    good, short = write_refs(tmp_path, [["a b", "c d"], ["a b"]])
    with pytest.raises(InputError, match="line count") as err:
        score(hyp, [good, short], hyp, [good, good])
    assert f"{short} has 1" in str(err.value)
    with pytest.raises(InputError, match="raw and tokenized"):
        score(hyp, [good, good], hyp, [good])


def test_cli_takes_every_reference_in_order(tmp_path):
    paths = write_set(tmp_path, ["the cat sat on the mat"], ["the cat sat on a mat"])
    second, = write_refs(tmp_path, [["the cat sat on the mat"]])
    out = tmp_path / "test.bleu.json"
    argv = ["bleu", "--hyp", str(paths["hyp"]), "--ref", str(paths["ref"]), "--ref", str(second),
            "--hyp-tok", str(paths["hyp_tok"]), "--ref-tok", str(paths["ref_tok"]), "--ref-tok", str(second),
            "--out", str(out)]
    assert cli.main(argv) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["references"] == 2 and written["tok_bleu"]["score"] == pytest.approx(100.0)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failed_write_is_one_error_line_naming_the_output_and_leaves_nothing(tmp_path, monkeypatch, capsys, code):
    """A full disk or a read-only results/ while a command writes its output (injected: the output's
    handle refuses every write): one line naming the file and the reason, no traceback, no partial file."""
    for name in ("hyp", "ref"):
        (tmp_path / name).write_text("a cat sat\n")

    class Refusing(io.StringIO):
        def write(self, text):
            raise OSError(code, os.strerror(code))

    monkeypatch.setattr(files, "open", lambda path, mode="r", **kw: Refusing() if "w" in mode else open(path, mode, **kw),
                        raising=False)
    out = tmp_path / "results" / "test.bleu.json"
    hyp, ref = str(tmp_path / "hyp"), str(tmp_path / "ref")
    assert cli.main(["bleu", "--hyp", hyp, "--ref", ref, "--hyp-tok", hyp, "--ref-tok", ref, "--out", str(out)]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"nmtrepro bleu: error: {out}: {os.strerror(code)}"
    assert list(out.parent.iterdir()) == []  # neither the output nor its temporary file
