"""Subject-verb distance on an English dependency parse, and the agreement-by-distance figure and table.

DistilLingEval's subject-verb agreement set has no distance field (LingEval97 has one, counted on
the German reference). We measure one ourselves on the English source, from the offline parser of
nmtrepro.data.nlp; it is our own measure, not LingEval97's, and the figure and its table say so on
themselves (`measured_on`), as they say which pairs stood in for LingEval97.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from ..core.files import InputError, read_json
from ..reporting.render import add_table_arguments, figure, save_figure, text_cells, write_table
from ..reporting.report import parse_pairs
from .lingeval import DISTANCE_BINS, SUBJ_VERB, UNKNOWN

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "plot-agreement": "plot and tabulate subject-verb agreement accuracy by distance",
}

SUBJECT_DEPS = {"nsubj", "nsubjpass", "nsubj:pass"}
FINITE_DEPS = {"aux", "auxpass", "aux:pass", "cop"}   # the word that carries agreement when present


def subject_verb_distance(tokens: Sequence) -> int | None:
    """Words between the main clause's subject and its finite verb: |i(verb) - i(subject)|.

    `tokens` are nmtrepro.data.nlp.Token (text, upos, tag, head, dep) for one sentence; the root points
    to itself. The contrastive pair changes the number of one German verb; without a word alignment
    we take the English main clause, where most of them sit:
      - predicate = the root (its `dep` is root/ROOT, any case);
      - subject = the head word of the root's nsubj / nsubjpass (nsubj:pass) dependent, the leftmost
        if there are several;
      - verb = the finite word of the predicate: the leftmost aux / auxpass / cop dependent of the
        root if it has one ("The dogs *have* been fed", UD's "They *are* tall"), else the root itself.
    Adjacent subject and verb are distance 1, as in LingEval97. Returns None when the root has no
    nominal subject (fragments, imperatives, parse errors): callers put those in an "unknown" bin.
    """
    roots = [i for i, t in enumerate(tokens) if t.dep.lower() == "root" or t.head == i]
    if not roots:
        return None
    root = roots[0]
    children = [i for i, t in enumerate(tokens) if t.head == root and i != root]
    subjects = [i for i in children if tokens[i].dep.lower() in SUBJECT_DEPS]
    if not subjects:
        return None
    finite = [i for i in children if tokens[i].dep.lower() in FINITE_DEPS]
    verb = min(finite) if finite else root
    return abs(verb - min(subjects))


def agreement_curve(result: dict, category: str | None = None) -> dict[str, dict]:
    """The subject-verb bins of a `nmtrepro contrastive` JSON, in bin order."""
    bins = result.get("distance_bins", {})
    names = [category] if category else [c for c in bins if c.startswith(SUBJ_VERB)]
    if not names or names[0] not in bins:
        raise InputError(f"no subject-verb distance bins in the result (categories with bins: {sorted(bins)})")
    return bins[names[0]]


def measured_on(result: dict) -> tuple[str, str]:
    """What a `nmtrepro contrastive` JSON scored, in words: the pairs (LingEval97, or the DistilLingEval
    set standing in for it) and whose subject-verb distance its bins count (LingEval97's own, or ours)."""
    test_set = result.get("test_set")
    if isinstance(test_set, list):                       # DistilLingEval folders, one a category
        names = [Path(folder).name for folder in test_set]
        sets = [name for name in names if name.startswith(SUBJ_VERB)] or names
        first = f", its first {result['max_per_set']:,} triples" if result.get("max_per_set") else ""
        pairs = f"DistilLingEval {', '.join(sets)}{first}, a stand-in for LingEval97"
    else:
        pairs = "LingEval97 (lingeval97.json)"
    if (result.get("distances") or "").startswith("lingeval97"):
        return pairs, "LingEval97's own distance, in German words"
    parser = result.get("parser") or "a dependency"
    return pairs, f"our distance: words from subject to finite verb in the English source's {parser} parse"


def plot_agreement(curves: dict[str, dict[str, dict]], title: str | None = None,
                   measured: tuple[str, str] | None = None, beyond: int | None = None) -> Figure:
    """Accuracy per distance bin (top), one line per system; triples per bin (bottom). `measured`
    (`measured_on`): the pairs, named over the top panel, and the distance, on the x axis; `beyond`: the
    bins above it shaded (the table's pooled row)."""
    order = [b for b in DISTANCE_BINS + [UNKNOWN] if any(b in c for c in curves.values())]
    pairs, distance = measured or ("", "words")
    fig = figure(title, figsize=(8, 5))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    x = range(len(order))
    for colour, (label, bins) in enumerate(curves.items()):
        acc = [bins[b]["accuracy"] if b in bins else float("nan") for b in order]
        top.plot(x, acc, "-o", color=f"C{colour}", markersize=4, label=label)
    first = next(iter(curves.values()))
    bottom.bar(x, [first.get(b, {}).get("total", 0) for b in order], color="0.6")
    top.axhline(0.5, color="0.5", linestyle=":", linewidth=1)
    if pairs:
        top.set_title(f"pairs: {pairs}", fontsize="small")
    far = [i for i, b in enumerate(order) if beyond is not None and b in far_bins(beyond)]
    if far:
        top.axvspan(far[0] - 0.4, far[-1] + 0.4, color="0.9", zorder=0, label=f"distance > {beyond}")
    top.set_ylabel("accuracy")
    top.set_ylim(0, 1.02)
    top.grid(alpha=0.3)
    top.legend(fontsize="small")
    bottom.set_ylabel("triples")
    bottom.set_xticks(list(x), order, fontsize="small")
    bottom.set_xlabel(f"subject-verb distance ({distance})", fontsize="small")
    return fig


def far_bins(beyond: int) -> list[str]:
    """LingEval97's bins of distances above `beyond` (10: 11..15 and >15); above 15 its bins cannot say."""
    if not 0 <= beyond < 15:
        raise InputError(f"--beyond must be 0..14 (LingEval97 bins distances 0..15 one by one, then >15), got {beyond}")
    return [b for b in DISTANCE_BINS if b == ">15" or int(b) > beyond]


def agreement_table(curves: dict[str, dict[str, dict]], beyond: int | None = None) -> pd.DataFrame:
    """One row a distance bin that holds triples (LingEval97's order, then 'unknown'): its triples and each
    system's accuracy; with `beyond`, a last row pooling the bins above it (paper A: "more than 10 tokens"),
    its accuracy None where they hold no triple."""
    order = [b for b in DISTANCE_BINS + [UNKNOWN] if any(b in c for c in curves.values())]
    first = next(iter(curves.values()))
    rows = {b: {"triples": first.get(b, {}).get("total", 0),
                **{label: bins.get(b, {}).get("accuracy") for label, bins in curves.items()}} for b in order}
    if beyond is not None:
        far = far_bins(beyond)
        def pooled(bins, key):
            return sum(bins.get(b, {}).get(key, 0) for b in far)
        rows[f"> {beyond}"] = {"triples": pooled(first, "total"),
                               **{label: pooled(bins, "correct") / pooled(bins, "total") if pooled(bins, "total") else None
                                  for label, bins in curves.items()}}
    table = pd.DataFrame.from_dict(rows, orient="index")
    return table.astype({"triples": "Int64"} | {label: float for label in curves})


def far_reading(table: pd.DataFrame, beyond: int) -> str:
    """The pooled row above `beyond` in a line: its triples and each system's accuracy, or that it has none."""
    row = table.loc[f"> {beyond}"]
    if not row["triples"]:
        return f"Subject-verb distance > {beyond}: no triple at this scale, so nothing there is measured."
    each = ", ".join(f"{label} {row[label]:.3f}" for label in table.columns if label != "triples")
    n = int(row["triples"])
    return f"Subject-verb distance > {beyond} ({n} triple{'s' * (n != 1)}), accuracy: {each}."


def add_arguments_plot_agreement(parser) -> None:
    parser.add_argument("--system", action="append", required=True,
                        metavar="LABEL=JSON", help="a system's `nmtrepro contrastive` JSON, as the legend names it (repeat)")
    parser.add_argument("--category", help="category holding the bins (default: the subj_verb_agreement one)")
    parser.add_argument("--beyond", type=int, help="the table's last row pools the distances above this (paper A: 10)")
    parser.add_argument("--out-png", required=True)
    parser.add_argument("--out-svg", required=True)
    add_table_arguments(parser)


def run_plot_agreement(args) -> None:
    results = {label: read_json(path) for label, path in parse_pairs(args.system, "--system").items()}
    curves = {label: agreement_curve(result, args.category) for label, result in results.items()}
    measured = {measured_on(result) for result in results.values()}
    if len(measured) > 1:
        raise InputError(f"the systems were scored on different pairs or distances: {sorted(measured)}")
    pairs, distance = measured.pop()
    save_figure(plot_agreement(curves, args.title, (pairs, distance), args.beyond), args.out_png, args.out_svg)
    table = agreement_table(curves, args.beyond)
    shown = text_cells(table, digits=3).rename(columns={"system": "distance"})
    note = (f"Accuracy: the share of triples whose correct translation the model scores higher. Pairs: {pairs}. "
            f"Distance: {distance}; 'unknown': no subject found."
            + (f" '> {args.beyond}': every bin above {args.beyond} pooled." if args.beyond is not None else ""))
    write_table(shown, args.title, " ".join(filter(None, [note, args.note])), args.out_md, args.out_html, args.out_tex,
                reading=far_reading(table, args.beyond) if args.beyond is not None else "")
