"""A new source annotation is its data module, its rule file, the family that reads it and the config
(docs/organisation.md, "A new annotation"): a toy one, defined outside the package, flows through the
corpus, the sources, the train and decode commands, the FLOPs count, the plan, the table's note and a
dry run of the workflow with nothing else edited."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import TINY, binarize_annotations, write_copy_corpus
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.data import annotations
from nmtrepro.models import REGISTRY, build_model

# nmtrepro.data.toy_marks: a mark a source piece (5 capitalised, 4 not; EOS's 2), and a family reading them.
TOY_MODULE = '''
import json
from dataclasses import dataclass

import torch
from torch import nn

from nmtrepro.core.files import InputError, read_lines
from nmtrepro.core.vocab import IndexedData, Vocab
from nmtrepro.data.annotations import Annotation
from nmtrepro.models import register
from nmtrepro.models.layers import ModelConfig
from nmtrepro.models.transformer import Transformer


def marks_of(lines):
    return IndexedData.of([[5 if piece[:1].isupper() else 4 for piece in line.split()] + [2] for line in lines])


def read_marks(path, lengths=None):
    lines = read_lines(path)
    marks = IndexedData.of([[int(m) for m in line.split()] + [2] for line in lines])
    if lengths is not None and list(marks.sizes) != list(lengths):
        raise InputError(f"{path}: marks not aligned with the source")
    return marks


def add_arguments_marks(parser):
    parser.add_argument("--src-bpe", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stats", required=True)


def annotate_marks(bpe, out, lang, backend, batch_size, stanza_dir):
    marks = marks_of(read_lines(bpe))
    with open(out, "w") as handle:
        handle.writelines(" ".join(map(str, marks[i][:-1].tolist())) + "\\n" for i in range(len(marks)))
    return {"maker": "toy"}


def run_marks(args):
    stats = annotate_marks(args.src_bpe, args.out, None, None, None, None)
    with open(args.stats, "w") as out:
        json.dump(stats, out)


ANNOTATION = Annotation(
    name="marks", stage="marks", read=read_marks, ids=lambda path, lengths: (m.tolist() for m in read_marks(path, lengths)),
    make=lambda lines, lang, backend, stanza_dir: marks_of(lines), annotate=annotate_marks,
    stand_in=lambda n, length, device: {"marks": torch.full((n, length), 4, dtype=torch.long, device=device)},
    note="Marks: made by", stats_key="maker", makers={"toy": "the toy marker"},
    tool=lambda lang, backend: "toy", tools="marker (toy)")
COMMANDS = {"marks": "mark the capitalised source pieces"}


@dataclass(frozen=True)
class MarksConfig(ModelConfig):
    @property
    def extra_inputs(self):
        return ("marks",)


@register("marks_test")
class MarksTransformer(Transformer):
    config_class = MarksConfig

    def __init__(self, src_vocab, tgt_vocab, config):
        super().__init__(src_vocab, tgt_vocab, config)
        self.marks = nn.Embedding(6, config.d_model, padding_idx=Vocab.pad)

    def encode(self, src, marks):
        assert marks.shape == src.shape and marks.eq(Vocab.pad).equal(src.eq(Vocab.pad))
        enc = super().encode(src)
        return {**enc, "out": enc["out"] + self.marks(marks)}
'''
RULE_FILE = '''rule marks:
    input:
        bpe=results("prepare/{dataset}/{part}.src.bpe"),
    output:
        marks=results("marks/{dataset}/{part}.marks"),
        stats=results("marks/{dataset}/{part}.stats.json"),
    log:
        results("logs/marks/{dataset}/{part}.log"),
    wildcard_constraints:
        part=ANNOTATED_PART,
    conda:
        CONDA_ENV
    threads: PREPROCESS["marks"]["cpus"]
    resources:
        mem_mb=PREPROCESS["marks"]["mem_mb"],
        runtime=job_runtime("marks"),
    shell:
        "nmtrepro marks --src-bpe {input.bpe} --out {output.marks} --stats {output.stats} 2> {log}"
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module on nmtrepro.data's path; its family registered while the test runs."""
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "toy_marks.py").write_text(TOY_MODULE)
    import nmtrepro.data

    monkeypatch.setattr(nmtrepro.data, "__path__", [*nmtrepro.data.__path__, str(folder)])
    annotations.registry.cache_clear()
    yield folder
    annotations.registry.cache_clear()
    sys.modules.pop("nmtrepro.data.toy_marks", None)
    REGISTRY.pop("marks_test", None)


def test_a_training_corpus_reads_the_binarized_annotations_as_the_stages_files_read_before(tmp_path):
    """Spans and POS tags binarized once (`binarize-annotation`) and read a batch at a time by `Corpus`
    hold what a rank built before from the text files: `read` (spans as tuples), then `flat_spans`."""
    import torch
    from nmtrepro.core.pos import UPOS
    from nmtrepro.data.parse import flat_spans, format_spans, read_spans
    from nmtrepro.data.pos import read_pos
    from nmtrepro.training.train import Corpus

    corpus_dir = write_copy_corpus(tmp_path / "data", lengths=(1, 9))
    folder = tmp_path / "annotated"
    folder.mkdir()
    for split, (src, _) in Corpus(corpus_dir).splits.items():
        (folder / f"{split}.spans").write_text("".join(
            format_spans([(a, min(a + 1 + k % 3, n - 1)) for a in range(0, n - 1, 1 + k % 3)] + [(n - 1, n)]) + "\n"
            for k, n in enumerate(src.sizes.tolist())))
        tags = [[UPOS[(k + j) % len(UPOS)] for j in range(n - 1)] for k, n in enumerate(src.sizes.tolist())]
        tags[0][-1] = "NOT-A-TAG"                                              # read as <unk>
        (folder / f"{split}.pos").write_text("".join(" ".join(line) + "\n" for line in tags))
    for name in ("spans", "pos"):
        binarize_annotations(folder, corpus_dir, name)
    corpus = Corpus(corpus_dir, {"spans": folder, "pos": folder})
    for split, (src, _) in corpus.splits.items():
        spans, tags = corpus.extras[split]["spans"], corpus.extras[split]["pos"]
        old_spans = read_spans(folder / f"{split}.spans", src.sizes)
        assert [[tuple(pair) for pair in spans[i].view(-1, 2).tolist()] for i in range(len(spans))] == old_spans
        every = range(len(spans))
        assert torch.equal(spans.padded(every, 0), flat_spans(old_spans).padded(every, 0))
        assert spans.offsets.tolist() == flat_spans(old_spans).offsets.tolist()
        old_tags = read_pos(folder / f"{split}.pos", src.sizes)
        assert torch.equal(tags.padded(every, 0), old_tags.padded(every, 0)) and tags.offsets.tolist() == old_tags.offsets.tolist()
        assert tags.dtype == old_tags.dtype and spans.dtype == flat_spans(old_spans).dtype


def test_the_known_annotations_are_the_data_modules_own():
    assert {name: a.stage for name, a in annotations.registry().items()} == {"spans": "parse", "pos": "pos"}
    assert {"parse", "gather-parse", "pos", "gather-pos", "prepare", "probe"} <= set(cli.declared_commands())
    with pytest.raises(InputError, match="'tags' is no source annotation; known: spans, pos"):
        annotations.annotation_paths(["tags=x.pos"])
    with pytest.raises(InputError, match="given twice"):
        annotations.annotation_paths(["pos=a", "pos=b"])
    with pytest.raises(InputError, match="no rule file for the stage"):
        annotations.check_rule_files(["parse"])


def test_a_toy_annotation_flows_through_the_package_named_nowhere_else(toy, tmp_path):
    from nmtrepro.evaluation.sources import Sources
    from nmtrepro.planning.plan import preprocess_output
    from nmtrepro.reporting.report import annotation_note
    from nmtrepro.training.flops import probe_batch
    from nmtrepro.training.train import Corpus, Settings, Trainer

    corpus_dir = write_copy_corpus(tmp_path / "data")
    marks_dir = tmp_path / "marks"
    marks_dir.mkdir()
    for split, (src, _) in Corpus(corpus_dir).splits.items():
        (marks_dir / f"{split}.marks").write_text("".join(" ".join(["4"] * (n - 1)) + "\n" for n in src.sizes))
    spec = {**TINY, "family": "marks_test"}
    settings = Settings.from_dict({"max_tokens": 64, "update_tokens": 1, "max_updates": 2, "warmup": 2,
                                   "save_every": 2, "log_every": 1, "threads": 1})
    trainer = Trainer(Corpus(corpus_dir, {"marks": binarize_annotations(marks_dir, corpus_dir, "marks")}), spec, settings,
                      tmp_path / "ckpt")
    trainer.train()                                                  # the family's encode checks the alignment
    assert trainer.step == 2

    bpe = tmp_path / "test.bpe"
    bpe.write_text("w1 W2 w3\nW4\n")
    assert cli.main(["marks", "--src-bpe", str(bpe), "--out", str(tmp_path / "test.marks"),
                     "--stats", str(tmp_path / "test.stats.json")]) == 0  # its command, found by the CLI
    model = build_model({**spec, "src_vocab": len(trainer.corpus.src_vocab), "tgt_vocab": 20}).eval()
    lines = bpe.read_text().splitlines()
    from_file = Sources.of_lines(model, lines, trainer.corpus.src_vocab, {"marks": str(tmp_path / "test.marks")})
    on_the_fly = Sources.of_lines(model, lines, trainer.corpus.src_vocab)
    assert [m.tolist() for m in from_file.extras["marks"]] == [m.tolist() for m in on_the_fly.extras["marks"]] \
        == [[4, 5, 4, 2], [5, 2]]
    model.encode(**on_the_fly.net_input([0, 1]))

    assert set(probe_batch(model, 7, 5)[0]) == {"src", "marks"}
    assert preprocess_output().match("results/ci/marks/multi30k_en_de/shards/train.1-of-2.marks")
    assert annotation_note("marks", [str(tmp_path / "test.stats.json")]) == "Marks: made by the toy marker."


def test_a_toy_annotation_is_its_rule_file_and_config_entries_on_the_workflow_side(toy, tmp_path):
    """The workflow's half of the walkthrough: a rule file under workflow/rules/annotations/, a model
    of a family reading the annotation, and its stage's resources and assumed cost in config.yaml;
    train and decode get `--annotation marks=...`, its job what the scale gives it, the plan its CPU-hours
    and calibrate its rate, with no other rule file, the schema or calibrate edited. The toy module reaches the Snakemake process
    through a sitecustomize."""
    import copy

    from nmtrepro.planning.calibrate import time_annotation
    from nmtrepro.planning.plan import preprocessing
    from nmtrepro.study.config import validate
    from test_workflow import SCHEMA, repo_config, snakemake, workdir

    (toy / "sitecustomize.py").write_text(
        f"import nmtrepro.data\nnmtrepro.data.__path__.append({str(toy)!r})\nimport nmtrepro.data.toy_marks\n")
    config = repo_config()
    config["models"]["toy"] = {"family": "marks_test", "size": "base"}
    config["experiments"]["toy_en_de"] = {"model": "toy", "task": "en-de"}
    config["scales"]["ci"]["preprocess"] = {"marks": {"mem_mb": 3000}}
    config["plan"]["cpu_seconds_per_line"]["marks"] = {"toy": 0.36}
    checked = copy.deepcopy({**config, "scale": "ci"})
    validate(checked, SCHEMA)
    assert checked["scales"]["ci"]["preprocess"]["marks"] == {"cpus": 1, "mem_mb": 3000, "runtime": 60}
    job = {"stage": "marks", "dataset": "multi30k_en_de", "part": "train", "shard": 1, "shards": 1}
    assert preprocessing(checked, [job])["stages"]["marks"]["cpu_hours"] == pytest.approx(0.03)  # 300 lines
    (tmp_path / "sample.bpe").write_text("w1 W2\nW3\n")
    rate = time_annotation(checked, "marks", "multi30k_en_de", tmp_path / "sample.bpe", tmp_path)  # calibrate's
    assert rate["tool"] == "toy" and rate["seconds_per_line"] > 0
    with pytest.raises(InputError, match=r"scales.ci.preprocess: Additional properties are not allowed \('mark' "):
        validate({**copy.deepcopy(config), "scales": {**config["scales"], "ci": {
            **config["scales"]["ci"], "preprocess": {"mark": {}}}}}, SCHEMA)  # a stage no annotation has
    work = workdir(tmp_path, config)
    (work / "workflow/rules/annotations/marks.smk").write_text(RULE_FILE)
    target = "results/ci/evaluate/toy_en_de/test_2016_flickr.bleu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy), os.environ.get("PYTHONPATH", "")])}
    run = snakemake(work, "-n", "-p", target, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "nmtrepro marks --src-bpe results/ci/prepare/multi30k_en_de/train.src.bpe" in run.stdout
    marks = next(block for block in run.stdout.split("\n\n") if "rule marks:" in block)
    assert "mem_mb=3000" in marks and "runtime=60" in marks
    assert ("nmtrepro binarize-annotation --name marks --text results/ci/marks/multi30k_en_de/train.marks "
            "--source results/ci/prepare/multi30k_en_de/train.src.bin") in run.stdout
    train = next(line for line in run.stdout.splitlines() if "nmtrepro train" in line)
    assert "--annotation marks=results/ci/marks/multi30k_en_de " in train
    decode = next(line for line in run.stdout.splitlines() if "nmtrepro decode" in line and "toy_en_de" in line)
    assert "--annotation marks=results/ci/marks/multi30k_en_de/test/test_2016_flickr.marks" in decode
