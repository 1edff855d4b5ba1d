"""Paper B's warm start, examined: does the decoder use the recurrence path, and where does the
warm-started model start?

Paper B initialises each variant from the trained Transformer (Sec. 5.1): the recurrence encoder and
the new top decoder sublayer start at their initialisation, everything else as the baseline ends. The
project reads each variant against a control, the same baseline continued as long. Per seed of a
variant and its control, `warm-start` measures:
- the variant's test BLEU with its recurrence memory shuffled across each batch (every sentence decoded
  with its neighbour's H_r, the source attention untouched): what comes through the recurrence path;
- valid NLL and test BLEU where the continuation starts: the variant as its training builds it (the
  baseline's weights, the new parts initialised from the training's seed) beside the control's start,
  the baseline itself;
- the valid-NLL gap (variant - control) at each validation of the two continuations (their curves).
`warm-start-table` renders them, a row a seed.
"""
from __future__ import annotations

import csv
import logging

import pandas as pd
import torch

from ..core import runtime
from ..core.files import InputError, read_json, read_lines, require_file, write_json
from ..core.vocab import Vocab
from ..evaluation.dev_bleu import tokenized_bleu
from ..evaluation.generate import add_arguments_search
from ..evaluation.sources import Sources, source_options
from ..models import build_model
from ..reporting.render import add_table_arguments, text_cells, write_table
from ..reporting.report import parse_pairs
from ..training import checkpoint
from ..training.corpus import Corpus
from ..training.criterion import valid_loss

log = logging.getLogger("nmtrepro.analyses.warm_start")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "warm-start": "paper B's warm start: BLEU with the recurrence memory shuffled, where training starts",
    "warm-start-table": "table of the warm-start diagnostics, a row a seed",
}


def shuffled_memory(model):
    """`model` with its encoder state's recurrence memory rolled by one sentence across each batch, so
    that every sentence of a batch of two or more decodes with another's H_r."""
    encode = model.encode

    def encode_shuffled(*args, **kwargs):
        enc = encode(*args, **kwargs)
        return {**enc, "rec": enc["rec"].roll(1, 0), "rec_pad": enc["rec_pad"].roll(1, 0)}

    model.encode = encode_shuffled
    return model


def started(spec: dict, init: str, seed: int):
    """The variant where its continuation starts: built from `seed` as the trainer builds it, then the
    baseline's weights loaded over it (`checkpoint.warm_start`)."""
    torch.manual_seed(seed)
    model = build_model(spec)
    checkpoint.warm_start(model, init)
    return model.eval()


def valid_nll(curve: str) -> dict[int, float]:
    """Step -> valid NLL (bits a token) of each validation in a training curve."""
    with open(require_file(curve), encoding="utf-8", newline="") as handle:
        return {int(row["step"]): float(row["valid_nll"]) for row in csv.DictReader(handle, delimiter="\t")
                if row.get("valid_nll")}


def add_arguments_warm_start(parser) -> None:
    parser.add_argument("--variant", required=True, help="the variant's model (averaged.pt)")
    parser.add_argument("--init", required=True, help="the trained baseline it started from (averaged.pt)")
    parser.add_argument("--seed", type=int, required=True, help="the variant's training seed")
    parser.add_argument("--variant-curve", required=True, help="the variant's curve.tsv")
    parser.add_argument("--control-curve", required=True, help="the control's curve.tsv (the baseline continued)")
    for side in ("variant", "control", "base"):
        parser.add_argument(f"--{side}-bleu", required=True, help=f"the {side}'s test bleu.json")
    parser.add_argument("--ref-tok", action="append", required=True, help="the test set's tokenized reference (repeat)")
    add_arguments_search(parser)
    parser.add_argument("--out", required=True)


def run_warm_start(args) -> None:
    device = runtime.setup(args.threads)
    src_vocab, tgt_vocab = Vocab.load_pair(args.prepared)
    lines, refs = read_lines(args.src_bpe), [read_lines(path) for path in args.ref_tok]
    spec = checkpoint.load(args.variant)["model_spec"]
    if spec.get("family") != "recurrence":
        raise InputError(f"{args.variant}: a {spec.get('family')} model has no recurrence memory to shuffle "
                         "(paper B's recurrence family has)")
    vocabs = {"src": src_vocab, "tgt": tgt_vocab}
    variant = checkpoint.load_model(args.variant, device, vocabs, args.prepared)
    sources = Sources.of_lines(variant, lines, src_vocab, **source_options(args))
    shuffled = tokenized_bleu(shuffled_memory(variant), sources, refs, tgt_vocab, device, args)
    start = started(spec, args.init, args.seed).to(device)
    baseline = checkpoint.load_model(args.init, device, vocabs, args.prepared)
    corpus = Corpus(args.prepared)
    nll = {name: valid_loss(model, corpus, args.max_tokens, 0.0, device, args.precision)[1]
           for name, model in (("variant", start), ("base", baseline))}
    ours, control = valid_nll(args.variant_curve), valid_nll(args.control_curve)
    bleu = {side: read_json(getattr(args, f"{side}_bleu"))["tok_bleu"]["score"]
            for side in ("variant", "control", "base")}
    bleu.update(shuffled=shuffled, variant_start=tokenized_bleu(start, sources, refs, tgt_vocab, device, args))
    result = {"seed": args.seed, "bleu": bleu,
              "start_valid_nll": nll,
              "gap": [{"step": step, "variant": ours[step], "control": control[step], "gap": ours[step] - control[step]}
                      for step in sorted(set(ours) & set(control))]}
    log.info("seed %d: BLEU %.2f, memory shuffled %.2f; at the start valid NLL %.3f against the Base's %.3f",
             args.seed, bleu["variant"], shuffled, nll["variant"], nll["base"])
    write_json(args.out, result)


def warm_start_rows(label: str, results: list[dict]) -> pd.DataFrame:
    """A row a seed and their mean: BLEU as trained, with the memory shuffled, the control's and the
    un-continued Base's; valid NLL and test BLEU at the start; the valid-NLL gap at each validation."""
    rows = {}
    for r in sorted(results, key=lambda r: r["seed"]):
        b, gaps = r["bleu"], r["gap"]
        rows[f"{label} (seed {r['seed']})"] = {
            "BLEU": b["variant"], "memory shuffled": b["shuffled"], "Δ shuffled": b["shuffled"] - b["variant"],
            "control": b["control"], "Base, not continued": b["base"],
            "start: valid NLL": r["start_valid_nll"]["variant"],
            "start: Base's valid NLL": r["start_valid_nll"]["base"],
            "start: BLEU": b["variant_start"],
            "valid NLL gap by validation": " → ".join(f"{g['gap']:+.3f}" for g in gaps),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    mean = table.drop(columns="valid NLL gap by validation").mean()
    table.loc[f"{label} (mean)"] = {**mean.to_dict(), "valid NLL gap by validation": ""}
    return table


def add_arguments_warm_start_table(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=JSON[,JSON...]",
                        help="a system's per-seed results, comma-separated (repeat)")
    add_table_arguments(parser)


def run_warm_start_table(args) -> None:
    tables = []
    for label, paths in parse_pairs(args.system, "--system").items():
        results = [read_json(path) for path in paths.split(",")]
        steps = [g["step"] for g in results[0]["gap"]]
        tables.append(warm_start_rows(label, results))
    note = (f"{args.note} Valid NLL in bits a token; the gap (variant − control) at the validations of steps "
            f"{', '.join(map(str, steps))} of the continuation.").strip()
    write_table(text_cells(pd.concat(tables), digits=2), args.title, note, args.out_md, args.out_html, args.out_tex)
