"""`nmtrepro length-buckets` and `nmtrepro plot-buckets`: corpus BLEU per source-length bucket.

Sentences are grouped by the length of their Moses-tokenized source (BPE removed), as paper A (≤15,
(15,30], (30,45], >45 tokens; Figure 3) and paper D (10-token bins; Fig. 4) do, and each group is scored
as its own corpus with tokenized BLEU, for the system and for its baseline on the same sentences.

A system may come with several seed pairs (system and baseline trained with the same seed): each bucket
then reports the mean over the pairs and the seed-pooled paired bootstrap of the difference on that
bucket's sentences (`evaluation.significance.pooled_bootstrap`: sentences and seed pairs resampled), so
a bucket's Δ comes with its 95% CI and p, and a bucket of a few dozen sentences shows how little it
can say. One pair is sacreBLEU's paired bootstrap.
"""
from __future__ import annotations

import bisect

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..core.files import InputError, read_json, read_lines, write_json
from ..core.text import strip_bpe
from ..evaluation.metrics import METRICS
from ..evaluation.significance import pooled_bootstrap
from ..reporting.papers import beside, read_paper_numbers
from ..reporting.render import figure, save_figure, text_cells, write_table
from ..reporting.report import parse_pairs

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "length-buckets": "BLEU per source-length bucket, system and baseline",
    "plot-buckets": "figure and table of BLEU per length bucket",
}


def bucket_labels(edges: list[int]) -> list[str]:
    """Edges [15, 30, 45] -> '≤15', '(15,30]', '(30,45]', '>45': upper bounds are inclusive."""
    if not edges or list(edges) != sorted(set(edges)):
        raise InputError(f"bucket edges must be increasing, got {edges}")
    inner = [f"({low},{high}]" for low, high in zip(edges, edges[1:])]
    return [f"≤{edges[0]}", *inner, f">{edges[-1]}"]


def bucket_index(length: int, edges: list[int]) -> int:
    """Which bucket a sentence of `length` tokens falls in (a length equal to an edge stays below it)."""
    return bisect.bisect_left(edges, length)


def bucket_scores(src_lengths: list[int], pairs: list[tuple[list[str], list[str] | None]], refs: list[str],
                  edges: list[int], samples: int = 1000, seeds: list[int] | None = None) -> list[dict]:
    """Per bucket: sentence count, tokenized BLEU of system and baseline (means over the seed `pairs` of
    (system, baseline) hypotheses), their difference with its seed-pooled 95% CI and one-sided p (the
    system beats the baseline), and each seed's difference; a bucket without sentences has None. Pairs
    whose baseline is None (a system listed without one) give the system's mean BLEU alone: no Δ, no
    resampling."""
    if not pairs or any(len(src_lengths) != len(lines) for pair in pairs for lines in (*pair, refs)
                        if lines is not None):
        raise InputError(f"length buckets need aligned inputs: {len(src_lengths)} sources, (system, baseline) "
                         f"lines {[(len(h), b and len(b)) for h, b in pairs]} and {len(refs)} reference lines")
    paired = all(base is not None for _, base in pairs)
    metric = METRICS["tok_bleu"]
    groups: list[list[int]] = [[] for _ in range(len(edges) + 1)]
    for i, length in enumerate(src_lengths):
        groups[bucket_index(length, edges)].append(i)
    out = []
    for label, members in zip(bucket_labels(edges), groups):
        entry = {"bucket": label, "n": len(members), "bleu": None, "baseline_bleu": None, "delta": None,
                 "delta_low": None, "delta_high": None, "p_greater": None, "seeds": []}
        def pick(lines):
            return [lines[i] for i in members]
        if members and paired:
            result = pooled_bootstrap([(pick(hyps), pick(base)) for hyps, base in pairs], [pick(refs)], metric,
                                      samples, seeds)
            entry.update(bleu=result["score"], baseline_bleu=result["baseline"],
                         delta=result["score"] - result["baseline"], delta_low=result["delta_low"],
                         delta_high=result["delta_high"], p_greater=result["p_greater"],
                         seeds=[{"seed": s["seed"], "delta": s["delta"]} for s in result["seeds"]])
        elif members:
            entry["bleu"] = float(np.mean([metric.corpus(metric.statistics(pick(hyps), [pick(refs)]))["score"]
                                          for hyps, _ in pairs]))
        out.append(entry)
    return out


# Said under every length-bucket table: why Δ need not be the difference of two BLEU columns.
PAIRING_NOTE = ("A system without a baseline shows its mean over all its seeds; one with a baseline shows its "
                "mean, and Δ, over the seeds both have, each paired with the baseline of its seed, so Δ need not "
                "be its row's BLEU minus the baseline's row.")


def empty_buckets(results: dict[str, list[dict]]) -> list[str]:
    """The buckets that hold no test sentence of any system (paper A's >45 on Multi30k): nothing there is
    measured or judged at this scale, and the figure and table say so on themselves."""
    first = next(iter(results.values()))
    return [b["bucket"] for i, b in enumerate(first) if all(buckets[i]["n"] == 0 for buckets in results.values())]


EMPTY = "no test sentence"  # an empty bucket's cells and its tick label


def plot_buckets(results: dict[str, list[dict]], paper: pd.DataFrame | None = None, title: str | None = None) -> Figure:
    """Left: BLEU per bucket per system (sentence counts on the bars); right: Δ BLEU vs its baseline with
    its 95% CI (where the results have one; a system without a baseline has no bar there), the paper's Δ
    as a black cross on the bar of the system whose label is the paper's row. An empty bucket's tick
    says so, and so does a line across both panels."""
    paper_delta = {} if paper is None else {(r, c): v for r, c, v in zip(paper["row"], paper["column"], paper["value"])}
    fig = figure(title, figsize=(10, 4))
    left, right = fig.subplots(1, 2, sharex=True)
    width = 0.8 / max(len(results), 1)
    for k, (label, buckets) in enumerate(results.items()):
        xs = [i + (k - (len(results) - 1) / 2) * width for i in range(len(buckets))]
        bars = left.bar(xs, [b["bleu"] or 0 for b in buckets], width, label=label, color=f"C{k}")
        left.bar_label(bars, labels=[f"n={b['n']}" for b in buckets], fontsize="x-small")
        if all(b["delta"] is None for b in buckets):
            continue                                        # no baseline: nothing for the right panel
        deltas = [b["delta"] or 0 for b in buckets]
        right.bar(xs, deltas, width, label=label, color=f"C{k}")
        spans = [(x, d, b) for x, d, b in zip(xs, deltas, buckets) if b.get("delta_low") is not None]
        if spans:
            right.errorbar([x for x, _, _ in spans], [d for _, d, _ in spans], fmt="none", ecolor="black",
                           elinewidth=0.8, capsize=2, yerr=[[d - b["delta_low"] for _, d, b in spans],
                                                           [b["delta_high"] - d for _, d, b in spans]])
        marked = [(x, paper_delta[label, f"Δ {b['bucket']}"]) for x, b in zip(xs, buckets)
                  if (label, f"Δ {b['bucket']}") in paper_delta]
        if marked:
            right.plot(*zip(*marked), "kx", label=f"paper: {label}")
    labels = [b["bucket"] for b in next(iter(results.values()))]
    empty = empty_buckets(results)
    for ax, name in ((left, "tokenized BLEU"), (right, "Δ BLEU vs baseline")):
        ax.set_xticks(range(len(labels)), [f"{label}\n({EMPTY})" if label in empty else label for label in labels])
        for label in empty:
            ax.text(labels.index(label), 0.5, f"{EMPTY}\nat this scale:\nnot measured", transform=ax.get_xaxis_transform(),
                    ha="center", va="center", fontsize="x-small", color="0.35")
        ax.set_xlabel("source length (Moses tokens)")
        ax.set_ylabel(name)
        ax.grid(axis="y", alpha=0.3)
    right.axhline(0, color="black", linewidth=0.8)
    left.legend(fontsize="small")
    if right.get_legend_handles_labels()[0]:
        right.legend(fontsize="small")
    return fig


def bucket_table(results: dict[str, list[dict]]) -> pd.DataFrame:
    """One row per system: BLEU, Δ (named as the paper's columns, 'Δ ≤15'), the 95% CI of Δ ('CI ≤15', text:
    results without one leave it empty) and n per bucket."""
    def ci(b):
        return None if b.get("delta_low") is None else f"[{b['delta_low']:+.2f}, {b['delta_high']:+.2f}]"
    rows = {label: {**{b["bucket"]: b["bleu"] for b in buckets},
                    **{f"Δ {b['bucket']}": b["delta"] for b in buckets},
                    **{f"CI {b['bucket']}": ci(b) for b in buckets},
                    **{f"n {b['bucket']}": b["n"] for b in buckets}}
            for label, buckets in results.items()}
    table = pd.DataFrame.from_dict(rows, orient="index")
    first = next(iter(results.values()))
    counts, cis = [f"n {b['bucket']}" for b in first], {f"CI {b['bucket']}" for b in first}
    return table.astype({c: float for c in table.columns if c not in counts and c not in cis}
                        | {c: "Int64" for c in counts})


def add_arguments_length_buckets(parser) -> None:
    parser.add_argument("--src-bpe", required=True, help="the BPE'd tokenized source the model translated")
    parser.add_argument("--hyp-tok", action="append", required=True,
                        help="system: Moses-tokenized hypothesis (one a seed)")
    parser.add_argument("--base-hyp-tok", action="append", default=[],
                        help="baseline: Moses-tokenized hypothesis of the same seed, in the order of --hyp-tok "
                             "(none: the system's BLEU per bucket alone, no Δ)")
    parser.add_argument("--seed", action="append", type=int, default=[], help="each pair's seed, in order (labels)")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples per bucket")
    parser.add_argument("--ref-tok", required=True, help="Moses-tokenized reference")
    parser.add_argument("--edges", type=int, nargs="+", required=True, help="inclusive upper bounds, e.g. 15 30 45")
    parser.add_argument("--out", required=True, help="JSON list of buckets")


def run_length_buckets(args) -> None:
    if args.base_hyp_tok and len(args.hyp_tok) != len(args.base_hyp_tok):
        raise InputError("--hyp-tok and --base-hyp-tok need one file a seed each")
    lengths = [len(strip_bpe(line).split()) for line in read_lines(args.src_bpe)]
    bases = [read_lines(base) for base in args.base_hyp_tok] or [None] * len(args.hyp_tok)
    pairs = [(read_lines(hyps), base) for hyps, base in zip(args.hyp_tok, bases)]
    write_json(args.out, bucket_scores(lengths, pairs, read_lines(args.ref_tok), args.edges, args.samples,
                                       args.seed or None))


def add_arguments_plot_buckets(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=JSON",
                        help="a system's length-bucket JSON, under the label the paper's rows use (repeat)")
    parser.add_argument("--paper-numbers", help="TSV of the paper's numbers (row, column, value, note)")
    parser.add_argument("--title", required=True)
    parser.add_argument("--note", default="", help="line under the table")
    for name in ("png", "svg", "md", "html", "tex"):
        parser.add_argument(f"--out-{name}", required=True)


def run_plot_buckets(args) -> None:
    results = {label: read_json(path) for label, path in parse_pairs(args.system, "--system").items()}
    paper = read_paper_numbers(args.paper_numbers) if args.paper_numbers else None
    save_figure(plot_buckets(results, paper, args.title), args.out_png, args.out_svg)
    shown = text_cells(beside(bucket_table(results), paper))
    empty = empty_buckets(results)
    for label in empty:  # its BLEU, Δ and CI, where a system of ours has a row
        for column in (label, f"Δ {label}", f"CI {label}", f"Δ {label}: ours − paper"):
            if column in shown:
                shown.loc[shown["system"].isin(results), column] = EMPTY
    reading = (f"Bucket{'s' * (len(empty) > 1)} {', '.join(empty)}: {EMPTY} at this scale, so nothing there is "
               f"measured or judged; a paper number there stands alone."
               if empty else "")
    write_table(shown, args.title, " ".join(filter(None, [args.note, PAIRING_NOTE])), args.out_md, args.out_html,
                args.out_tex, reading=reading)
