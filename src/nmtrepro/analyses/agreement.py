"""Subject-verb distance on an English dependency parse, and the agreement-by-distance figure.

DistilLingEval's subject-verb agreement set has no distance field (LingEval97 has one, counted on
the German reference). We measure one ourselves on the English source, from the offline parser of
nmtrepro.data.nlp; it is our own measure, not LingEval97's, and the figure says so.
"""
from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from ..core.files import InputError, read_json
from ..reporting.render import figure, save_figure
from ..reporting.report import parse_pairs
from .lingeval import DISTANCE_BINS, SUBJ_VERB, UNKNOWN

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "plot-agreement": "plot subject-verb agreement accuracy by distance",
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


def plot_agreement(curves: dict[str, dict[str, dict]], title: str | None = None) -> Figure:
    """Accuracy per distance bin (top), one line per system; triples per bin (bottom)."""
    order = [b for b in DISTANCE_BINS + [UNKNOWN] if any(b in c for c in curves.values())]
    fig = figure(title, figsize=(8, 5))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    x = range(len(order))
    for colour, (label, bins) in enumerate(curves.items()):
        acc = [bins[b]["accuracy"] if b in bins else float("nan") for b in order]
        top.plot(x, acc, "-o", color=f"C{colour}", markersize=4, label=label)
    first = next(iter(curves.values()))
    bottom.bar(x, [first.get(b, {}).get("total", 0) for b in order], color="0.6")
    top.axhline(0.5, color="0.5", linestyle=":", linewidth=1)
    top.set_ylabel("accuracy")
    top.set_ylim(0, 1.02)
    top.grid(alpha=0.3)
    top.legend(fontsize="small")
    bottom.set_ylabel("triples")
    bottom.set_xticks(list(x), order, fontsize="small")
    bottom.set_xlabel("subject-verb distance (words)")
    return fig


def add_arguments_plot_agreement(parser) -> None:
    parser.add_argument("--system", action="append", required=True,
                        metavar="LABEL=JSON", help="a system's `nmtrepro contrastive` JSON, as the legend names it (repeat)")
    parser.add_argument("--title", help="figure title")
    parser.add_argument("--category", help="category holding the bins (default: the subj_verb_agreement one)")
    parser.add_argument("--out-png", required=True)
    parser.add_argument("--out-svg", required=True)


def run_plot_agreement(args) -> None:
    paths = parse_pairs(args.system, "--system")
    fig = plot_agreement({label: agreement_curve(read_json(p), args.category) for label, p in paths.items()},
                         args.title)
    save_figure(fig, args.out_png, args.out_svg)
