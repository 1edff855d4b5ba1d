"""`nmtrepro segments`: paper C's phrase analysis of segment models (NPMT): each system's average
segment length (its footnote 4: output tokens, `$` excluded, over the non-empty segments) and segmented
example outputs beside source and reference (its Table 2, segments split by " • ").

The paper shows "randomly sampled examples"; here the sample is drawn with a fixed seed from the test
sentences whose source has at most `max_len` tokens, the same lines for every system, so the table
can be rebuilt and compared across systems.
"""
from __future__ import annotations

import random

import pandas as pd

from ..core.files import InputError, read_json, read_lines
from ..core.text import strip_bpe
from ..reporting.papers import read_paper_numbers
from ..reporting.render import write_table
from ..reporting.report import parse_pairs
from .examples import add_example_table_arguments

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "segments": "average segment length and segmented example outputs of segment models (NPMT)",
}

COLUMNS = ["system", "line", "", "text"]
LENGTH = "average segment length"  # its row, and its column in the paper numbers' TSV


def sample_lines(src_lengths: list[int], count: int, max_len: int, seed: int) -> list[int]:
    """`count` line indices drawn with `seed` among sentences of at most `max_len` source tokens, in order."""
    short = [i for i, length in enumerate(src_lengths) if length <= max_len]
    return sorted(random.Random(seed).sample(short, min(count, len(short))))


def segments_table(src: list[str], refs: list[str], systems: dict[str, dict], count: int, max_len: int,
                   seed: int, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per system (label -> its decode stats, which hold `segmented` lines and `avg_segment_length`):
    one row with the average segment length, the paper's beside it where `paper` (read_paper_numbers: row
    the system's label, column LENGTH) has one, then each sampled line's source, reference and output."""
    printed = {} if paper is None else {row.row: row for row in paper.itertuples() if row.column == LENGTH}
    rows = []
    lines = sample_lines([len(line.split()) for line in src], count, max_len, seed)
    for label, stats in systems.items():
        if "segmented" not in stats:
            raise InputError(f"segments: {label}'s decoding kept no segments (not a segment model, e.g. NPMT)")
        if not (len(src) == len(refs) == len(stats["segmented"])):
            raise InputError(f"segments of {label} need aligned inputs: {len(src)} source, {len(refs)} reference "
                             f"and {len(stats['segmented'])} output lines")
        length = stats["avg_segment_length"]
        rows.append([label, "", LENGTH, "n/a" if length is None else f"{length:.2f}"])
        if label in printed:
            rows.append(["", "", f"paper: {LENGTH}", f"{printed[label].value:g} ({printed[label].note})"])
        for i in lines:
            rows += [["", str(i + 1), "Source", src[i]], ["", "", "Reference", refs[i]],
                     ["", "", "Output", stats["segmented"][i]]]
    return pd.DataFrame(rows, columns=COLUMNS)


def add_arguments_segments(parser) -> None:
    add_example_table_arguments(parser)
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=DECODE_JSON",
                        help="a segment model's decode stats (`nmtrepro decode --stats`; repeat)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sample")
    parser.add_argument("--paper-numbers", help=f"TSV of the paper's numbers (row: a system's label, column: {LENGTH})")


def run_segments(args) -> None:
    src = [strip_bpe(line) for line in read_lines(args.src_bpe)]
    systems = {label: read_json(path) for label, path in parse_pairs(args.system, "--system").items()}
    if len(args.ref_tok) != 1:
        raise InputError(f"segments shows one reference; --ref-tok is given {len(args.ref_tok)} times")
    paper = read_paper_numbers(args.paper_numbers) if args.paper_numbers else None
    table = segments_table(src, read_lines(args.ref_tok[0]), systems, args.count, args.max_len, args.seed, paper)
    rule = (f"Average segment length: output tokens over non-empty segments (paper C, footnote 4). Examples: "
            f"{args.count} line(s) drawn with seed {args.seed} among the test sentences whose source has at most "
            f"{args.max_len} tokens, the same for every system; \" • \" separates segments.")
    write_table(table, args.title, " ".join(filter(None, [args.note, rule])), args.out_md, args.out_html, args.out_tex)
