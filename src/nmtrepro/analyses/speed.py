"""`nmtrepro speed` and `nmtrepro speed-table`: model size and training/decoding speed, each relative to
the table's baseline (paper A Table 2 "Para." and "Time"; paper D Table V).

Measured the same way for every experiment: parameters counted on the averaged model (embeddings
included, as paper A's 88.1M for Transformer Base; the non-embedding count beside it); training speed
is the median target tokens/s over the training log windows (the curve's `tgt_tok_s`), so a slow first
window does not skew it, and likewise in source tokens/s (`src_tok_s`, paper D's #Speed1); decoding
speed comes from the beam-search run that produced the scored hypotheses (sentences/s, target
tokens/s, and source BPE tokens/s as paper D counts).
"""
from __future__ import annotations

import json

import pandas as pd

from ..core.files import InputError, read_json, read_lines, write_json
from ..reporting.papers import beside, read_paper_numbers
from ..reporting.render import add_table_arguments, text_cells, write_table
from ..reporting.report import parse_pairs, read_curve

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "speed": "parameter count, training and decoding speed of one experiment",
    "speed-table": "table of size and speed relative to baselines",
}

# Said under every speed table: the speeds come from the jobs that trained and decoded, not from a
# timing of its own, so the load beside each job is in them (at `tiny` a run over sittings mixed loads).
LOAD_NOTE = ("Speeds are those of the training and decoding jobs themselves, so the ratios compare models "
             "only when their jobs ran under the same load: one job a GPU does; jobs sharing CPU cores with "
             "others, or run in different sittings, do not. Ratios that a shared machine's load hits alike: "
             "bench/variant_speed.py times each variant beside Base on the same batches, interleaved, in one run "
             "(docs/measurements.md).")


def training_speed(curve: pd.DataFrame, path="curve", column="tgt_tok_s") -> float:
    """Median tokens/s over the logged training windows: target tokens, or source ones (`src_tok_s`)."""
    if column not in curve.columns or curve[column].dropna().empty:
        raise InputError(f"{path}: no training speed ({column}) logged")
    return float(curve[column].dropna().median())


# Our training time relative to the baseline is a target token's: how many updates each system trains
# differs by scale and paper (paper A's Big trains 3x Base's steps, and its 'Time' counts them), so a
# paper's total training time is compared with this only once divided by its steps (the paper file's
# column of this name, its note says how).
TRAIN_TIME = "Train time / token"


def relative(table: pd.DataFrame, speeds: dict[str, dict], baselines: dict[str, dict]) -> pd.DataFrame:
    """Paper A's 'Time' columns: time per unit of work relative to the baseline (= baseline speed / speed):
    a training target token (TRAIN_TIME), and decoding the test set."""
    def ratio(label, key):
        return baselines[label][key] / speeds[label][key]
    return table.assign(**{
        TRAIN_TIME: [ratio(label, "train_tgt_tok_s") for label in table.index],
        "Decode time": [ratio(label, "decode_sent_s") for label in table.index],
    })


def speed_table(speeds: dict[str, dict], baselines: dict[str, dict],
                paper_size: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per system label; column names follow the paper tables so `beside` can diff them.

    `paper_size`: per label the model spec at the paper's size and vocabulary; its parameter count
    (built on the meta device) is then "Para. (M)", the one the paper's column compares with, and the
    trained model's count moves to "Para. (M) trained".
    """
    from ..models.size import spec_parameter_counts

    trained = "Para. (M) trained" if paper_size else "Para. (M)"
    table = pd.DataFrame.from_dict({label: {
        **({"Para. (M)": spec_parameter_counts(paper_size[label])["total"] / 1e6} if paper_size else {}),
        trained: s["params"] / 1e6,
        "non-emb. (M)": s["non_embedding_params"] / 1e6,
        "train tgt tok/s": s["train_tgt_tok_s"],
        "#Speed1": s["train_src_tok_s"],        # paper D: training, source tokens per second
        "decode sent/s": s["decode_sent_s"],
        "decode tgt tok/s": s["decode_tgt_tok_s"],
        "#Speed2": s["decode_src_tok_s"],       # paper D: decoding, source tokens per second
    } for label, s in speeds.items()}, orient="index")
    return relative(table, speeds, baselines)


def add_arguments_speed(parser) -> None:
    parser.add_argument("--model", required=True, help="the model that was decoded")
    parser.add_argument("--curve", required=True, help="its training curve TSV")
    parser.add_argument("--decode-stats", required=True, help="JSON written by `nmtrepro decode --stats`")
    parser.add_argument("--src-bpe", required=True, help="the source it decoded (for source tokens/s)")
    parser.add_argument("--out", required=True)


def run_speed(args) -> None:
    from ..models.size import parameter_counts
    from ..training import checkpoint

    decode = read_json(args.decode_stats)
    src_tokens = sum(len(line.split()) for line in read_lines(args.src_bpe))
    counts = parameter_counts(checkpoint.load_model(args.model))
    curve = read_curve(args.curve)
    write_json(args.out, {
        "params": counts["total"], "non_embedding_params": counts["non_embedding"],
        "train_tgt_tok_s": training_speed(curve, args.curve),
        "train_src_tok_s": training_speed(curve, args.curve, "src_tok_s"),
        "decode_sent_s": decode["sentences_per_s"],
        "decode_tgt_tok_s": decode["tokens_per_s"],
        "decode_src_tok_s": src_tokens / decode["seconds"],
        "decode_device": decode.get("device", ""), "decode_threads": decode.get("threads"),
    })


def paper_size_args(analysis: dict, options_at) -> list[str]:
    """`--paper-size LABEL=SPEC` per system of an analysis with a `paper_size`: its model's options at
    that scale (`options_at(experiment, scale)`, the config's, which the workflow resolves) with the
    given vocabulary, for the paper's parameter count; nothing without one."""
    spec = analysis.get("paper_size")
    if not spec:
        return []
    extra = {key: spec[key] for key in ("src_vocab", "tgt_vocab", "output_bias")}
    args = []
    for system in analysis["systems"]:
        options = {**options_at(system["experiment"], spec["scale"]), **extra}
        args += ["--paper-size", f"{system['label']}={json.dumps(options)}"]
    return args


def add_arguments_speed_table(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=JSON=BASELINE_JSON",
                        help="a system's speed JSON and its baseline's (repeat)")
    parser.add_argument("--paper-numbers", help="TSV of the paper's numbers (row, column, value, note)")
    parser.add_argument("--paper-size", action="append", default=[], metavar="LABEL=SPEC_JSON",
                        help="a system's model spec at the paper's size and vocabulary, counted for Para. (M)")
    add_table_arguments(parser)


def run_speed_table(args) -> None:
    speeds, baselines = {}, {}
    for label, spec in parse_pairs(args.system, "--system").items():
        path, sep, base = spec.partition("=")
        if not sep:
            raise InputError(f"--system wants LABEL=JSON=BASELINE_JSON, got {label}={spec}")
        speeds[label], baselines[label] = read_json(path), read_json(base)
    paper = read_paper_numbers(args.paper_numbers) if args.paper_numbers else None
    paper_size = {label: json.loads(spec) for label, spec in parse_pairs(args.paper_size, "--paper-size").items()}
    missing = sorted(set(speeds) - set(paper_size)) if paper_size else []
    if missing:
        raise InputError(f"--paper-size is missing system(s) {missing}")
    write_table(text_cells(beside(speed_table(speeds, baselines, paper_size or None), paper)), args.title,
                " ".join(filter(None, [args.note, LOAD_NOTE])), args.out_md, args.out_html, args.out_tex)
