"""Chinese->English: jieba segmentation in the one tokenizer, prepare on Chinese, the shipped Tatoeba
splits, and a zh-en experiment resolved from the config."""
from __future__ import annotations

import re
from argparse import Namespace
from pathlib import Path

from nmtrepro.study.config import experiments, load, validate
from nmtrepro.core.files import read_lines, write_lines
from nmtrepro.core.text import detokenize, tokenize
from nmtrepro.data import prepare, tatoeba
from nmtrepro.study.config_checks import check_dataset_files

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data/tatoeba-cmn"
CJK = re.compile(r"[\u4e00-\u9fff]")

ZH = ["我们在学习中文。", "他说：“我不知道。”", "汤姆喜欢在公园里跑步。", "这本书很有意思！"]
EN = ["We are studying Chinese.", "He said: \"I don't know.\"", "Tom likes running in the park.",
      "This book is very interesting!"]


def test_jieba_segments_chinese_into_words_that_join_back_to_the_input():
    assert tokenize(["我们在学习中文。"], "zh") == ["我们 在 学习 中文 。"]
    for line, words in zip(ZH, tokenize(ZH, "zh")):
        assert words.replace(" ", "") == line and "  " not in words
    assert tokenize(["  我们\t在  学习 "], "zh") == ["我们 在 学习"]  # whitespace runs collapsed


def test_chinese_detokenizes_without_spaces_beside_cjk_and_english_is_still_moses():
    assert detokenize(["他 说 ： “ 我 不 知道 。 ”", "我 喜欢 New York 。"], "zh") == [
        "他说：“我不知道。”", "我喜欢New York。"]
    assert tokenize(EN[1:2], "en") == ['He said : " I don \'t know . "']


def test_prepare_on_chinese_learns_joint_bpe_with_chinese_pieces(tmp_path):
    data = tmp_path / "fetched"
    for split, n in (("train", 10), ("valid", 1), ("test", 1)):
        write_lines(data / f"{split}.src", ZH * n)
        write_lines(data / f"{split}.tgt", EN * n)
    stats = prepare.prepare(data, tmp_path / "prep", "zh", "en", bpe_merges=10, max_len=30, max_ratio=3.0)
    assert stats["splits"]["train"]["pairs"] == 40
    assert any(CJK.search(code) for code in read_lines(tmp_path / "prep/bpe.codes"))
    assert read_lines(tmp_path / "prep/train.src.bpe")[0] == "我@@ 们 在 学@@ 习 中@@ 文 。"  # words split into characters
    src_pieces = {line.split()[0] for line in read_lines(tmp_path / "prep/dict.src.txt")}
    assert {"中@@", "文", "汤姆"} <= src_pieces

    prepare.run_prepare_test(Namespace(prepared=str(tmp_path / "prep"), data_dir=str(data), split="test",
                                       src_lang="zh", tgt_lang="en", out_prefix=str(tmp_path / "t")))
    src_bpe = read_lines(tmp_path / "t.src.bpe")
    assert [line.replace("@@ ", "").replace(" ", "") for line in src_bpe] == ZH
    assert read_lines(tmp_path / "t.ref.tok") == tokenize(EN, "en")  # the English side scores as before


def readme_counts() -> dict[str, int]:
    row = next(line for line in (REPO / "data/README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `tatoeba-cmn/`"))
    return {name: int(count.replace(",", "")) for name, count in re.findall(r"(train|valid|test) ([\d,]+)", row)}


def test_shipped_tatoeba_splits_are_the_derivation_disjoint_in_source_and_counted_in_the_readme():
    shipped = {name: list(zip(read_lines(DATA / f"{name}.zh.gz"), read_lines(DATA / f"{name}.en.gz")))
               for name in tatoeba.SPLITS}
    assert shipped == tatoeba.split_pairs(tatoeba.read_pairs(DATA / "cmn.txt.gz"))
    assert {name: len(pairs) for name, pairs in shipped.items()} == readme_counts()
    sources = {name: {zh for zh, _ in pairs} for name, pairs in shipped.items()}
    assert not sources["train"] & sources["test"]
    assert not sources["train"] & sources["valid"] and not sources["valid"] & sources["test"]


def test_the_config_resolves_a_zh_en_experiment_at_ci_and_paper_scale():
    config = load(REPO / "config.yaml", ["scale=ci"])[0]
    config["experiments"]["base_zh_en"] = {"model": "transformer_base", "task": "zh-en"}
    validate(config, REPO / "workflow/schemas/config.schema.yaml")
    # Resolve this experiment alone (the others and their tables are test_workflow's).
    config.update(experiments={"base_zh_en": config["experiments"]["base_zh_en"]}, tables={}, claims={}, analyses={})
    resolved = experiments(config)
    zh_en = resolved["base_zh_en"]
    assert (zh_en.dataset, zh_en.src_lang, zh_en.tgt_lang, zh_en.test) == ("tatoeba_zh_en", "zh", "en", "test")
    check_dataset_files(config, {"base_zh_en": zh_en}, REPO)
    config["scale"] = "paper"
    zh_en = experiments(config)["base_zh_en"]
    assert (zh_en.dataset, zh_en.test) == ("wmt17_zh_en", "newstest2017")
