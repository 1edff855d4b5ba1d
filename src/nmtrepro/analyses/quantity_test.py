"""`nmtrepro quantity-test`: a claim on a quantity an analysis measures (evaluation/quantities.py), tested
as `nmtrepro significance` tests a claim on BLEU: the system's quantity less the baseline's over the seed
pairs both trained, its variance from the pairs' spread and a paired bootstrap of the test sentences that
every pair shares (`significance.statistics_test`). The JSON has the significance JSON's shape under the
quantity's name, so that a claims page reads and judges it beside the BLEU claims, in the same family.

Each seed's file gives the quantity's statistics per test sentence (`STATISTICS`): a head-similarity JSON
(`nmtrepro head-similarity`, its `sentences`), a segment model's decode stats (`segmented`: words and
segments of each output) or, for a word-level decoder, its tokenized output (each word a segment of its
own), or a probe JSON (`nmtrepro probe`: each test example of a task right or not). A quantity of a model that does not translate measures nothing: the JSON carries the seeds' BLEU
from the same two experiments' significance JSON (`--floor`), which the page holds to its BLEU floor.
"""
from __future__ import annotations

import numpy as np

from ..core.files import InputError, read_json, read_lines, write_json
from ..evaluation.quantities import PROBING_TASKS, QUANTITIES
from ..evaluation.significance import RESAMPLES, recipe_of, statistics_test
from ..reporting.report import read_significance

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "quantity-test": "a claim on an analysis' quantity (segment length, head similarity), tested over seed pairs",
}

FLOOR_METRIC = "sacrebleu"  # the BLEU the claims page holds a quantity claim's models to (claims.floor_metric)


def head_statistics(path: str) -> np.ndarray:
    """(n, 2): each sentence's summed mean head cosine and its tokens x layers (`nmtrepro head-similarity`)."""
    sentences = read_json(path).get("sentences")
    if not sentences or any(row is None for row in sentences):
        raise InputError(f"{path}: no per-sentence statistics (`sentences`) for every line; compute it again: "
                         "snakemake --forcerun head_similarity")
    return np.array(sentences, dtype="float64")


def segment_statistics(path: str) -> np.ndarray:
    """(n, 2): each output's words and segments. A decode stats JSON of a segment model (NPMT) holds its
    outputs with segments split by " • " (its `segmented`, empty segments dropped as footnote 4 of paper C
    says); any other file is a word-level decoder's tokenized output, each word a segment."""
    if path.endswith(".json"):
        stats = read_json(path)
        if "segmented" not in stats:
            raise InputError(f"{path}: decode stats without `segmented`: not a segment model's (NPMT); give a "
                             "word-level model's tokenized output instead")
        lines = [[seg for seg in line.split(" • ") if seg.strip()] if line.strip() else [] for line in stats["segmented"]]
        return np.array([[sum(len(seg.split()) for seg in segs), len(segs)] for segs in lines], dtype="float64")
    words = [len(line.split()) for line in read_lines(path)]
    return np.array([[n, n] for n in words], dtype="float64")


def probing_statistics(task: str):
    """A reader of a probe JSON (`nmtrepro probe`): (n, 2), each test example of `task` right (100) or
    not (0) over 1, so that the ratio is the accuracy in %."""
    def read(path: str) -> np.ndarray:
        result = read_json(path).get(task)
        if result is None or "correct" not in result:
            raise InputError(f"{path}: no per-example outcomes of {task} (`correct`); probe again: "
                             "snakemake --forcerun probe")
        return np.array([[100.0 * c, 1.0] for c in result["correct"]])
    return read


STATISTICS = {"head_similarity": head_statistics, "segment_length": segment_statistics,
              **{f"probe_{task}": probing_statistics(task) for task in PROBING_TASKS}}


def quantity_test(quantity: str, systems: list[str], baselines: list[str], seeds: list[int] | None = None,
                  samples: int = RESAMPLES) -> dict:
    """The test of `quantity` over the seed pairs (systems[i], baselines[i]), each a file `STATISTICS`
    reads: statistics_test's entry (score, baseline, delta, var, df, seeds, ...) in the quantity's units."""
    if quantity not in STATISTICS:
        raise InputError(f"--quantity {quantity!r}: one of {sorted(STATISTICS)}")
    if len(systems) != len(baselines) or not systems:
        raise InputError(f"{len(systems)} system files but {len(baselines)} baseline ones: one pair a seed")
    read = STATISTICS[quantity]
    stats = [read(path) for pair in zip(systems, baselines) for path in pair]
    if len({len(s) for s in stats}) != 1:
        raise InputError(f"{quantity}: the files hold different numbers of sentences: "
                         f"{', '.join(f'{p} ({len(s)})' for p, s in zip([p for pair in zip(systems, baselines) for p in pair], stats))}")
    stacked = np.array(stats, dtype="float32").reshape(len(systems), 2, *stats[0].shape)   # [k, 2, n, 2]
    return statistics_test(stacked, QUANTITIES[quantity], samples, seeds)


def add_arguments_quantity_test(parser) -> None:
    parser.add_argument("--quantity", required=True, choices=sorted(STATISTICS))
    parser.add_argument("--stats", action="append", required=True, help="the system's file of a seed (repeat)")
    parser.add_argument("--base-stats", action="append", required=True,
                        help="the baseline's file of the same seed, in the order of --stats")
    parser.add_argument("--seed", action="append", type=int, default=[], help="each pair's seed, in order (labels)")
    parser.add_argument("--floor", required=True,
                        help="the same two experiments' significance JSON: its seeds' BLEU, which the claims page "
                             "holds to its floor")
    parser.add_argument("--samples", type=int, default=RESAMPLES, help="bootstrap resamples (seed: SACREBLEU_SEED)")
    parser.add_argument("--recipe", default="", metavar="SYSTEM/BASELINE",
                        help="the two model families, as significance records them: a quantity's seed noise pools "
                             "within them, as a metric's does")
    parser.add_argument("--out", required=True)


def run_quantity_test(args) -> None:
    kind = recipe_of(args.recipe)
    entry = quantity_test(args.quantity, args.stats, args.base_stats, args.seed or None, args.samples)
    floor = read_significance(args.floor, FLOOR_METRIC)
    if [e["seed"] for e in floor["seeds"]] != [e["seed"] for e in entry["seeds"]]:
        raise InputError(f"{args.floor}: seeds {[e['seed'] for e in floor['seeds']]}, but the quantity's pairs are "
                         f"seeds {[e['seed'] for e in entry['seeds']]}")
    entry["floor"] = {"metric": FLOOR_METRIC, "seeds": floor["seeds"]}
    entry.update(kind)
    write_json(args.out, {args.quantity: entry})
