"""CLIs of the probing suite: `probing-data` (PTB trees -> task files), `probe` (model + task files, or
the download records of SentEval's own files -> accuracies JSON) and `probing-table` (experiments x tasks
beside a paper's probing table)."""
from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ...core.files import InputError, read_json, write_json
from ...reporting.papers import read_paper_numbers
from ...reporting.render import write_table
from ...reporting.report import parse_pairs
from .tasks import SPLITS, TASKS, derive, read_task, write_task

log = logging.getLogger(__name__)

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "probing-data": "derive SentEval-style probing tasks from PTB trees",
    "probe": "probe a frozen encoder on SentEval-format tasks",
    "probing-table": "render probing accuracies beside the papers' tables",
}

# SentEval file name -> the column name the papers use (paper B Table 5, paper D Table VII)
PAPER_NAMES = {"sentence_length": "SeLen", "word_content": "WC", "tree_depth": "TrDep",
               "top_constituents": "ToCo", "bigram_shift": "BShif", "past_present": "Tense",
               "subj_number": "SubN", "obj_number": "ObjN", "odd_man_out": "SoMo",
               "coordination_inversion": "CoIn"}
# config `probing.tasks_from` -> the note under a probing table
SOURCE_NOTES = {
    "senteval": "Ours: SentEval protocol on SentEval's own probing data (Conneau et al. 2018), the files the "
                "papers probed on, pinned by git blob id.",
    "ptb": "Ours: SentEval protocol on stand-in tasks derived from 3,914 PTB trees, so not comparable in "
           "absolute terms to the papers' 120k-sentence SentEval sets.",
}


def add_arguments_probing_data(parser) -> None:
    parser.add_argument("--treebank", required=True, help="PTB zip with .mrg files (NLTK's treebank.zip)")
    parser.add_argument("--out-dir", required=True, help="folder for <task>.txt in SentEval's format")


def run_probing_data(args) -> None:
    from ...data.trees import read_treebank
    trees = read_treebank(args.treebank)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, examples in derive(trees).items():
        write_task(out / f"{name}.txt", examples)
        log.info("%s: %d examples (%s)", name, len(examples),
                 ", ".join(f"{s} {sum(e.split == s for e in examples)}" for s in SPLITS))


def add_arguments_probe(parser) -> None:
    from ...evaluation.sources import add_arguments_sources  # torch: only for this command

    parser.add_argument("--model", required=True, help="model file or checkpoint")
    parser.add_argument("--prepared", required=True, help="prepared dataset folder (bpe.codes, dict.src.txt)")
    parser.add_argument("--lang", required=True, help="source language of the model (Moses tokenizer)")
    tasks = parser.add_mutually_exclusive_group(required=True)
    tasks.add_argument("--tasks", nargs="+", help="task files in SentEval's probing format, named <task>.txt")
    tasks.add_argument("--task-downloads", nargs="+", metavar="RECORD",
                       help="download records (results/<scale>/downloads/senteval_<task>.json) of SentEval's own task files")
    parser.add_argument("--out", required=True, help="JSON of accuracies per task")
    parser.add_argument("--nhid", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--weight-decay", type=float, nargs="+", default=[0.0, 1e-5, 1e-4, 1e-3])
    parser.add_argument("--max-epochs", type=int, default=200)
    parser.add_argument("--max-examples", type=int, default=0,
                        help="cap on training examples per task (0 = all); dev/test are never cut")
    add_arguments_sources(parser, files=False)


def run_probe(args) -> None:
    import torch

    from ...core.text import BPE
    from ...core.vocab import Vocab
    from ...evaluation.sources import source_options
    from ...training.checkpoint import load_model
    from .classifier import Grid, probe
    from .vectors import encode_sentences

    torch.manual_seed(1)
    prepared = Path(args.prepared)
    vocab, bpe = Vocab.load(prepared / "dict.src.txt"), BPE(prepared / "bpe.codes")
    model = load_model(args.model, vocabs={"src": vocab}, where=prepared)
    for p in model.parameters():
        p.requires_grad_(False)
    grid = Grid(nhid=tuple(args.nhid), dropout=tuple(args.dropout), weight_decay=tuple(args.weight_decay),
                max_epochs=args.max_epochs)
    paths = args.tasks or [read_json(record)["archive"] for record in args.task_downloads]
    results = {}
    for path in paths:
        name = Path(path).stem
        examples = read_task(path)
        by_split = {s: [e for e in examples if e.split == s] for s in SPLITS}
        if args.max_examples:
            by_split["tr"] = by_split["tr"][:args.max_examples]
        feats = {s: encode_sentences(model, [e.sentence for e in ex], vocab, bpe, args.lang, **source_options(args))
                 for s, ex in by_split.items()}
        labels = {s: [e.label for e in ex] for s, ex in by_split.items()}
        results[name] = probe(feats, labels, grid, logistic=(name == "word_content"))
        log.info("%s: test accuracy %.2f (dev %.2f, %s)", name, 100 * results[name]["test"],
                 100 * results[name]["dev"], results[name]["params"])
    write_json(args.out, results)


def add_arguments_probing_table(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=JSON",
                        help="a system's row label = its probe JSON (repeat)")
    parser.add_argument("--paper-numbers", metavar="TSV",
                        help="the paper's probing table (row, column, value, note; columns as PAPER_NAMES)")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS),
                        help="the tasks the table shows, as SentEval's file names (default: all)")
    parser.add_argument("--tasks-from", choices=list(SOURCE_NOTES), required=True,
                        help="where our task files came from, for the note under the table")
    parser.add_argument("--title", default="Probing accuracies (%)")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True)


def build_probing_table(results: dict[str, dict], papers: list[pd.DataFrame], tasks=tuple(TASKS)) -> pd.DataFrame:
    """One row per system (ours, then each paper's), one column per task of `tasks` in the papers' order."""
    columns = [PAPER_NAMES[t] for t in PAPER_NAMES if t in tasks]
    rows = []
    for name, scores in results.items():
        rows.append({"system": f"{name} (ours)",
                     **{PAPER_NAMES.get(t, t): round(100 * s["test"], 2) for t, s in scores.items()}})
    for table in papers:
        for system, cells in table.groupby("row", sort=False):
            source = cells["note"].iloc[0].split(", ")[-1] if len(cells) else "paper"
            rows.append({"system": f"{system} ({source})", **dict(zip(cells["column"], cells["value"]))})
    frame = pd.DataFrame(rows)
    return frame[["system"] + [c for c in columns if c in frame.columns]]


def run_probing_table(args) -> None:
    results = {name: read_json(path) for name, path in parse_pairs(args.system, "--system").items()}
    for name, res in results.items():
        if not isinstance(res, dict) or not all(isinstance(v, dict) and "test" in v for v in res.values()):
            raise InputError(f"--system {name}: not a probe JSON (task -> {{test: ...}})")
    papers = [read_paper_numbers(args.paper_numbers)] if args.paper_numbers else []
    table = build_probing_table(results, papers, args.tasks)
    write_table(table.fillna("–"), args.title, SOURCE_NOTES[args.tasks_from], args.out_md, args.out_html,
                numparse=True, fragment=True)

