"""`nmtrepro significance`: paired bootstrap resampling (Koehn 2004) of a system against its baseline.

We call sacreBLEU's own paired bootstrap (`sacrebleu.significance.PairedTest`, test type `bs`: 1000
resamples, seed from SACREBLEU_SEED, default 12345, recorded in the signature) for both BLEUs we report.
Its p-value is two-sided: how often the resampled |difference| (centred) exceeds the observed one.
One degenerate case is handled here: when the two systems score the same (identical hypotheses, or
two untrained systems at BLEU 0 on every resample), every resampled difference is at least as large as
the observed 0, but sacreBLEU's strict `>` count returns its floor 1/(n+1) ~ 0.001, i.e.
"significant"; we report p = 1.
"""
from __future__ import annotations

import logging

from sacrebleu.significance import PairedTest

from ..core.files import InputError, read_lines, write_json
from .bleu import make_metric

log = logging.getLogger(__name__)

# How each paper marks a significant improvement over its baseline: (threshold, mark), strictest first.
MARK_STYLES = {
    "dagger": ((0.01, "†"),),                     # paper A: † p < 0.01
    "arrows": ((0.01, "⇑"), (0.05, "↑")),         # paper B: ↑ / ⇑ p < 0.05 / 0.01
    "plus": ((0.01, "++"), (0.05, "+")),          # paper D: + / ++ p < 0.05 / 0.01
}


def mark(score: float, baseline: float, p_value: float, style: str) -> str:
    """The paper's mark for a significant improvement; none for ties, losses or p above the levels."""
    if score <= baseline:
        return ""
    for threshold, symbol in MARK_STYLES[style]:
        if p_value < threshold:
            return symbol
    return ""


def paired_bootstrap(hyps: list[str], base_hyps: list[str], refs: list[str], metric_name: str,
                     samples: int = 1000) -> dict:
    """Score, baseline score, p-value and 95% CI (mean ± half-width over resamples) of `hyps`."""
    if not (len(hyps) == len(base_hyps) == len(refs)) or not refs:
        raise InputError(f"paired bootstrap needs equally long non-empty inputs, got {len(hyps)} system, "
                         f"{len(base_hyps)} baseline and {len(refs)} reference lines")
    test = PairedTest([("baseline", base_hyps), ("system", hyps)], {"BLEU": make_metric(metric_name)},
                      [refs], test_type="bs", n_samples=samples)
    signatures, results = test()
    base, system = results["BLEU"]
    p_value = 1.0 if system.score == base.score else system.p_value
    return {
        "score": system.score, "baseline": base.score, "p_value": p_value,
        "mean": system.mean, "ci": system.ci,                   # 95% CI: mean ± ci
        "ci_low": system.mean - system.ci, "ci_high": system.mean + system.ci,
        "baseline_mean": base.mean, "baseline_ci": base.ci,
        "signature": str(signatures["BLEU"]),
    }


def compare(system: dict[str, str], baseline: dict[str, str], ref: str, ref_tok: str, samples: int) -> dict:
    """Both BLEUs: sacreBLEU on detokenized `hyp` files, tokenized BLEU on Moses-tokenized `hyp_tok`."""
    refs = {"sacrebleu": read_lines(ref), "tok_bleu": read_lines(ref_tok)}
    files = {"sacrebleu": "hyp", "tok_bleu": "hyp_tok"}
    return {metric: paired_bootstrap(read_lines(system[kind]), read_lines(baseline[kind]), refs[metric],
                                     metric, samples)
            for metric, kind in files.items()}


def add_arguments_significance(parser) -> None:
    parser.add_argument("--hyp", required=True, help="system: detokenized hypothesis")
    parser.add_argument("--hyp-tok", required=True, help="system: Moses-tokenized hypothesis")
    parser.add_argument("--base-hyp", required=True, help="baseline: detokenized hypothesis")
    parser.add_argument("--base-hyp-tok", required=True, help="baseline: Moses-tokenized hypothesis")
    parser.add_argument("--ref", required=True, help="raw reference")
    parser.add_argument("--ref-tok", required=True, help="Moses-tokenized reference")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--out", required=True, help="JSON: per metric score, baseline, p_value, 95%% CI")


def run_significance(args) -> None:
    result = compare({"hyp": args.hyp, "hyp_tok": args.hyp_tok},
                     {"hyp": args.base_hyp, "hyp_tok": args.base_hyp_tok}, args.ref, args.ref_tok, args.samples)
    write_json(args.out, result)
    for metric, entry in result.items():
        log.info("%s: %.2f vs baseline %.2f, p = %.4f, 95%% CI %.2f ± %.2f", metric, entry["score"],
                 entry["baseline"], entry["p_value"], entry["mean"], entry["ci"])
