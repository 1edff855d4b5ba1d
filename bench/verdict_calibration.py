"""How often a claim's verdict is wrong, in two parts, each in one run.

`comparisons`: the false-positive rate and power of one comparison's own test under several mixes of
noise, the current rule beside the one before 2026-11-28. Each setting simulates comparisons of k seed
pairs (`nmtrepro.evaluation.calibration`: BLEU-like sentences with a known true difference, test-set
noise that all pairs share, each pair's own and seed offsets) and runs the project's own test on their
sentence statistics (`significance.statistics_test`) beside the old rule (seed pairs resampled with the
sentences, their deviations inflated by sqrt(k/(k-1)), the count rule's p), written out here since the
package no longer holds it.

`pages`: whole claims pages as a run makes them, before and after the seed noise was pooled and the
page's procedure gated. A simulated run has four central comparisons of three seed pairs (the pool;
the first is the page's primary claim) and a page of eleven claims like paper A's at `tiny` (the primary,
two more of three seed pairs, eight of one), each comparison's test the package's `statistics_test` as
`nmtrepro significance` writes it; the page is judged by the claims command's own `assess` (pooled seed
noise, the primary two-sided at 0.05, then Holm over the rest). Before: each claim's own test (a
one-seed claim's bootstrap alone), Holm over both directions of all eleven, and the central page
uncorrected. Printed: each claim's false-positive rate at 0.05 and at Holm's small levels (k = 1 and
k = 3), the page's familywise rate of a wrong decisive verdict, the primary's, and power at a true
difference. `--commands N` writes the first N pages' JSONs and runs `nmtrepro claims` on them as the
workflow does (one inputs document), checking its verdicts equal the in-process ones.

`recipes`: seed noise per recipe. A run pools four three-seed comparisons whose seed pairs' offsets have
SD 0.5 and one of the claims' recipe, whose seeds vary 0.5, 1 or 2 times as much (each side's seed offset
its own); its claims (one and three seed pairs) are of that recipe, of a recipe and families no comparison
measures, or of one system of each family (a recipe no comparison measures, its families measured in the
comparisons' systems). Printed per ratio: each kind of claim's false-positive rate at 0.05 and at Holm's
smaller levels (rate over level) before (one pool of every comparison) and after (`SeedNoise.basis`: its
recipe's, or its families'), the share left unjudged, and the power at a true +1.0 BLEU; the first
`--commands` runs' pages also go through `nmtrepro claims` (the JSONs written as `nmtrepro significance`
writes them, in one inputs document), whose verdicts must equal `assess`'s. Claims of a run share its
pool, so a rate's binomial standard error understates its spread a little.

`reference`: the test's reference alone, idealised (normal noise, no sentences): a mean difference whose
variance is a spread s² on ν degrees of freedom (σ² 1) plus a known part (its share of the whole),
tested three ways: the linear rule (a t on ν · v / s² degrees of freedom, the reference up to 2026-12-05,
written out here), the fiducial mixture alone (`significance.mixture_sf`) and the package's test
(`significance.Reference`: the linear rule's p from LINEAR_FROM up, below it at least the mixture's); per
ν and share, the rate over the level at 0.05, 0.04, 0.01 and 0.001 and the power at a true difference of
2.5 standard deviations, `--draws` a setting (the far tail's events at 0.001: 200 at 200,000).

    python bench/verdict_calibration.py reference --draws 200000          # ~2 min
    python bench/verdict_calibration.py recipes --runs 300 --commands 5   # 10 min on 2 cores beside a job
    python bench/verdict_calibration.py recipes --runs 40 --commands 3    # a check, ~4 min
    python bench/verdict_calibration.py pages --runs 300 --commands 20   # ~35 min on 2 cores
    python bench/verdict_calibration.py comparisons           # 1,000 comparisons a setting, ~25 min

Each rate is printed with its binomial standard error; "var ratio" is the mean estimated variance of the
mean difference over its empirical variance across the runs (1 is calibrated).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("SACREBLEU_SEED", "12345")

from nmtrepro.evaluation.metrics import METRICS  # noqa: E402
from nmtrepro.evaluation.calibration import Mix, corpus, sentence_stats, slope  # noqa: E402
from nmtrepro.evaluation.significance import (LINEAR_FROM, MeanDifference, mixture_sf, recipe_of, sentence_counts,  # noqa: E402
                                              statistics_test)
from nmtrepro.evaluation.multiplicity import holm  # noqa: E402
from nmtrepro.evaluation.seed_noise import SeedNoise  # noqa: E402
from nmtrepro import cli  # noqa: E402
from nmtrepro.evaluation.verdicts import Claim, assess, verdict_word  # noqa: E402

ALPHA = 0.05
MIXES = [
    Mix("realistic: test set + seed offsets N(0, 0.5)"),
    Mix("no seed variation", seed_sd=0.0),
    Mix("heavy per-pair test-set noise", own_sd=1.0, seed_sd=0.0),
    Mix("seed noise only", shared=0.0, own=0.0),
    Mix("one seed (k = 1), seed SD 0.5", k=1),
    Mix("power: realistic, true +0.5", effect=0.5),
    Mix("power: realistic, true +1.0", effect=1.0),
]


def old_p(stats: np.ndarray, metric, samples: int, rng) -> tuple[float, float]:
    """The rule before 2026-11-28: sentences and seed pairs resampled, the pairs' deviations from each
    resample's mean inflated by sqrt(k/(k-1)); the count rule's one-sided p of 'beats'; the variance of
    the resampled mean differences."""
    k, n = stats.shape[0], stats.shape[2]
    counts = sentence_counts(rng.choice(n, size=(samples, n)), n)
    resampled = metric.score(np.matmul(counts, stats))               # [k, 2, B]
    deltas = resampled[:, 0] - resampled[:, 1]
    if k > 1:
        centre = deltas.mean(0)
        deltas = centre + math.sqrt(k / (k - 1)) * (deltas - centre)
        deltas = deltas[rng.integers(0, k, (samples, k)).T, np.arange(samples)].mean(0)
    else:
        deltas = deltas[0]
    observed = metric.score(stats.sum(2))
    observed = float((observed[:, 0] - observed[:, 1]).mean())
    null = deltas - deltas.mean()
    return (np.sum(null >= observed) + 1) / (samples + 1), float(deltas.var())


def run(mix: Mix, runs: int, n: int, samples: int, seed: int) -> dict:
    rng, metric = np.random.default_rng(seed), METRICS["tok_bleu"]
    lengths, difficulty = corpus(rng, n)
    per_logit = slope(lengths, difficulty, metric)
    means, rejected, var = [], {"new": 0, "old": 0}, {"new": [], "old": []}
    for _ in range(runs):
        stats = sentence_stats(rng, mix, lengths, difficulty, per_logit)
        new = statistics_test(stats, metric, samples)
        old, old_var = old_p(stats, metric, samples, rng)
        means.append(new["delta"])
        rejected["new"] += new["p_greater"] < ALPHA
        rejected["old"] += old < ALPHA
        var["new"].append(new["var"])
        var["old"].append(old_var)
    spread = float(np.var(means, ddof=1))
    return {rule: {"rate": rejected[rule] / runs, "var_ratio": float(np.mean(var[rule])) / spread}
            for rule in ("old", "new")}


# A page like paper A's at tiny: the primary and two more claims of three seed pairs, eight of one; the
# run's pool: the primary's comparison and three other papers' central ones.
PAGE_K = [3, 3, 3] + [1] * 8
POOL_OTHERS = 3
LEVELS = [0.05, 0.01, 0.005, 0.0025, 0.001]
# Seed pairs' spread at tiny: the SD of the three Δ's of A's +PR (-0.38, -0.66, -1.01) is 0.32, of D's
# +Fusing_Diverse (+2.10, +1.86, +2.36) 0.25; half the realistic mix's own test-set noise and seed offsets
# of SD 0.2 give a spread of 0.29 on a bootstrap SD of the mean difference of 0.38 (the run prints the
# pooled spread).
PAGE_MIXES = [
    Mix("realistic: test set + seed offsets N(0, 0.5)"),
    Mix("tiny-like: own test-set noise 0.5, seed offsets N(0, 0.2)", own=0.5, seed_sd=0.2),
    Mix("no seed variation", seed_sd=0.0),
    Mix("heavy per-pair test-set noise", own_sd=1.0, seed_sd=0.0),
    Mix("seed noise only", shared=0.0, own=0.0),
    Mix("power: tiny-like, true +1.0", own=0.5, seed_sd=0.2, effect=1.0),
]


def old_page(claims: list[Claim], entries: list[dict]) -> list[str]:
    """The procedure before 2026-12-01: each claim's own test (one seed: the bootstrap's variance
    alone), Holm over both directions of every claim, the seed-majority guard."""
    tests = [MeanDifference.of(entry) for entry in entries]
    raw = [p for claim, test in zip(claims, tests) for p in (test.p(+1), test.p(-1))]
    adjusted = holm(raw)
    out = []
    for i, entry in enumerate(entries):
        sides = [int(np.sign(d)) for d in [entry["delta"]] + [e["delta"] for e in entry["seeds"]]]
        seeds = sides[1:]
        if adjusted[2 * i] < ALPHA and sides[0] > 0 and 2 * seeds.count(1) > len(seeds):
            out.append("reproduced")
        elif adjusted[2 * i + 1] < ALPHA and sides[0] < 0 and 2 * seeds.count(-1) > len(seeds):
            out.append("contradicted")
        else:
            out.append("not reproduced")
    return out


def simulate_page(rng, mix: Mix, corpus_parts, metric, samples: int) -> tuple[list[dict], list[dict]]:
    """The run's pool (the primary's comparison first) and the page's entries (the primary first)."""
    lengths, difficulty, per_logit = corpus_parts
    page = [statistics_test(sentence_stats(rng, replace(mix, k=k), lengths, difficulty, per_logit), metric, samples)
            for k in PAGE_K]
    others = [statistics_test(sentence_stats(rng, replace(mix, k=3, effect=0.0), lengths, difficulty, per_logit),
                              metric, samples) for _ in range(POOL_OTHERS)]
    return [page[0]] + others, page


def page_claims(n: int) -> list[Claim]:
    return [Claim(f"claim {i}", 1.0, "tok_bleu", f"claim{i}.json", primary=i == 0) for i in range(n)]


def run_pages(job) -> dict:
    mix, runs, n, samples, seed, commands = job
    rng, metric = np.random.default_rng(seed), METRICS["tok_bleu"]
    lengths, difficulty = corpus(rng, n)
    parts = (lengths, difficulty, slope(lengths, difficulty, metric))
    claims = page_claims(len(PAGE_K))
    ks = np.array(PAGE_K)
    rejected = {rule: {k: np.zeros(len(LEVELS)) for k in (1, 3)} for rule in ("old", "new")}
    counts = {k: 0 for k in (1, 3)}
    decisive = {"old page": 0, "new page": 0, "old primary": 0, "new primary": 0}
    reproduced = {rule: {"primary": 0, 1: 0, 3: 0} for rule in ("old", "new")}
    agree, compared, spreads = 0, 0, []
    for run in range(runs):
        pool, entries = simulate_page(rng, mix, parts, metric, samples)
        noise = SeedNoise.of({f"central {j}": e for j, e in enumerate(pool)})
        spreads.append(noise.spread)
        for i, entry in enumerate(entries):
            k = int(ks[i])
            counts[k] += 1
            for rule, test in (("old", MeanDifference.of(entry)), ("new", noise.basis(entry).test)):
                rejected[rule][k] += np.array([test.p(+1) < level for level in LEVELS])
        table = assess(claims, dict(enumerate(entries)), {"tok_bleu": noise})
        new = [verdict_word(v) for v in table["verdict"]]
        old = old_page(claims, entries)
        central = MeanDifference.of(entries[0])       # before: the central page tested it alone, both ways
        decisive["old primary"] += central.p(+1) < ALPHA or central.p(-1) < ALPHA
        decisive["new primary"] += new[0] in ("reproduced", "contradicted")
        decisive["old page"] += any(v in ("reproduced", "contradicted") for v in old)
        decisive["new page"] += any(v in ("reproduced", "contradicted") for v in new)
        for rule, verdicts in (("old", old), ("new", new)):
            reproduced[rule]["primary"] += verdicts[0] == "reproduced"
            for i, v in enumerate(verdicts[1:], 1):
                reproduced[rule][int(ks[i])] += v == "reproduced"
        if run < commands:
            agree += through_commands(claims, pool, entries, list(table["verdict"]))
            compared += 1
    return {"mix": mix, "runs": runs, "counts": counts, "rejected": rejected, "decisive": decisive,
            "reproduced": reproduced, "agree": agree, "compared": compared, "spread": float(np.mean(spreads))}


def through_commands(claims: list[Claim], pool: list[dict], entries: list[dict], verdicts: list[str]) -> bool:
    """The page through `nmtrepro claims` as the workflow runs it (its JSONs on disk, its inputs one
    document: the claims by id, the primary, the pool): whether its verdicts in BLEU equal `verdicts`. Each JSON holds the entry under
    every metric's name, as `nmtrepro significance` writes one a metric (the page judges chrF too)."""
    import json

    with tempfile.TemporaryDirectory() as tmp:
        def written(name, entry):
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps({metric: entry for metric in METRICS}))
            return str(path)
        inputs = {"claims": {f"claim{i}": {"text": claim.text, "paper_delta": claim.paper_delta, "metric": claim.metric,
                                           "significance": written(f"claim{i}", entry)}
                             for i, (claim, entry) in enumerate(zip(claims, entries))},
                  "primary": [f"claim{i}" for i, claim in enumerate(claims) if claim.primary],
                  "pool": {f"central{j}": written(f"pool{j}", entry) for j, entry in enumerate(pool)}}
        argv = ["claims", "--title", "t", "--inputs", json.dumps(inputs), "--out-md", f"{tmp}/p.md",
                "--out-html", f"{tmp}/p.html", "--out-svg", f"{tmp}/p.svg"]
        if cli.main(argv) != 0:
            return False
        lines = [line for line in Path(f"{tmp}/p.md").read_text().splitlines() if re.match(r"\| claim \d", line)]
        header = next(line for line in Path(f"{tmp}/p.md").read_text().splitlines() if line.startswith("| claim "))
        column = [cell.strip() for cell in header.split("|")].index("verdict")
        words = [verdict_word(line.split("|")[column].strip().replace("\\", "")) for line in lines]
        return words == [verdict_word(v) for v in verdicts]


# Seed noise per recipe: a run pools four three-seed comparisons of a family "other" against itself whose
# seed pairs' offsets have SD 0.5 (each side's own SD 0.5 / √2), and one of "theirs" against itself, whose
# seeds vary RATIOS times as much; its claims of one and of three seed pairs are of that recipe
# ("measured"), of a recipe the run measures in no comparison and families it measures in no system
# ("unmeasured", the same ratio), or of "theirs" against "other", a recipe no comparison measures of two
# families the systems do ("families").
RATIOS = (0.5, 1.0, 2.0)
RECIPE_LEVELS = [0.05, 0.01, 0.005, 0.001]
OTHERS = 4
# (what the run measures of its recipe, k): claims of each a run
RECIPE_CLAIMS = {("measured", 1): 2, ("measured", 3): 2, ("unmeasured", 1): 1, ("unmeasured", 3): 1,
                 ("families", 1): 2}
RECIPE_MIX = Mix("realistic: test set + seed offsets N(0, 0.5)")
SIDE_SD = RECIPE_MIX.seed_sd / math.sqrt(2)


def run_recipes(job) -> dict:
    """One ratio's runs (a true difference `effect` in the claims): each claim's one-sided p toward 'beats'
    at RECIPE_LEVELS before (one pool of every comparison, SeedNoise.test) and after (its recipe's,
    SeedNoise.basis), the share left unjudged after, and the first `commands` runs' pages through
    `nmtrepro claims` against the in-process `assess`."""
    ratio, effect, runs, n, samples, seed, commands = job
    rng, metric = np.random.default_rng(seed), METRICS["tok_bleu"]
    lengths, difficulty = corpus(rng, n)
    per_logit = slope(lengths, difficulty, metric)
    sd = {"other": SIDE_SD, "theirs": SIDE_SD * ratio, "unmeasured": SIDE_SD * ratio}

    def simulated(families, k, effect=0.0):
        mix = replace(RECIPE_MIX, k=k, effect=effect, sides=tuple(sd[family] for family in families))
        return {**statistics_test(sentence_stats(rng, mix, lengths, difficulty, per_logit), metric, samples),
                **recipe_of("/".join(families))}
    claim_families = {"measured": ("theirs", "theirs"), "unmeasured": ("unmeasured", "unmeasured"),
                      "families": ("theirs", "other")}
    kinds = [kind for kind, m in RECIPE_CLAIMS.items() for _ in range(m)]
    claims = [Claim(f"claim {i}", 1.0, "tok_bleu", f"claim{i}.json") for i in range(len(kinds))]
    counts = {kind: np.zeros(len(RECIPE_LEVELS) * 2 + 1) for kind in RECIPE_CLAIMS}  # before, after, unjudged
    agree = compared = 0
    for run in range(runs):
        pool = [simulated(("other", "other"), 3) for _ in range(OTHERS)] + [simulated(("theirs", "theirs"), 3)]
        entries = [simulated(claim_families[measured], k, effect) for measured, k in kinds]
        after = SeedNoise.of({f"central {j}": e for j, e in enumerate(pool)})
        before = SeedNoise.of({f"central {j}": {**e, "recipe": ""} for j, e in enumerate(pool)})
        for kind, entry in zip(kinds, entries):
            basis = after.basis(entry)
            old = before.test(entry).p(+1)
            new = basis.test.p(+1) if basis.test else 1.0
            counts[kind] += np.array([old < level for level in RECIPE_LEVELS] + [new < level for level in RECIPE_LEVELS]
                                     + [basis.test is None])
        if run < commands:
            table = assess(claims, dict(enumerate(entries)), {"tok_bleu": after})
            agree += through_commands(claims, pool, entries, list(table["verdict"]))
            compared += 1
    return {"ratio": ratio, "effect": effect, "runs": runs, "counts": counts, "agree": agree, "compared": compared}


def print_recipes(result: dict, seconds: float) -> None:
    ratio, effect, runs = result["ratio"], result["effect"], result["runs"]
    print(f"\nclaims' recipe's seed SD {ratio:g}x the others' (true Δ {effect:+.1f}; {runs} runs; {seconds:.0f} s)")
    levels = len(RECIPE_LEVELS)
    for (measured, k), counts in result["counts"].items():
        n = runs * RECIPE_CLAIMS[(measured, k)]
        where = f"{measured:<10}"
        if effect == 0:
            small = "  ".join(f"{level:g}: {counts[levels + j] / n / level:4.2f}x"
                              for j, level in enumerate(RECIPE_LEVELS[1:], 1))
            print(f"  recipe {where} k = {k}: at 0.05 before {rate(counts[0], n)}, after {rate(counts[levels], n)};"
                  f" after, rate / level at {small}; before at 0.01: {counts[1] / n / 0.01:4.2f}x; "
                  f"unjudged after: {rate(counts[-1], n)}  ({n} claims)")
        else:
            print(f"  recipe {where} k = {k}: power at 0.05, before {rate(counts[0], n)}, after "
                  f"{rate(counts[levels], n)}; at 0.01 before {rate(counts[1], n)}, after {rate(counts[levels + 1], n)}"
                  f"  ({n} claims)")
    if result["compared"]:
        print(f"  through `nmtrepro claims`: {result['agree']} of {result['compared']} pages' verdicts equal "
              f"the in-process ones")


def rate(hits: float, n: int) -> str:
    r = hits / n
    return f"{100 * r:5.2f} ± {100 * math.sqrt(max(r * (1 - r), 1e-12) / n):4.2f} %"


def print_pages(result: dict, seconds: float) -> None:
    mix, runs = result["mix"], result["runs"]
    print(f"\n{mix.name} (true Δ {mix.effect:+.1f}; {runs} pages; pooled seed pairs' spread, SD "
          f"{math.sqrt(result['spread']):.2f} BLEU; {seconds:.0f} s)")
    if mix.effect == 0:
        for k in (1, 3):
            n = result["counts"][k]
            cells = "  ".join(f"{level:g}: {rate(result['rejected'][rule][k][j], n)}"
                              for rule in ("old", "new") for j, level in enumerate(LEVELS[:1]))
            small = "  ".join(f"{level:g}: {result['rejected']['new'][k][j] / n / level:4.2f}x"
                              for j, level in enumerate(LEVELS[1:], 1))
            old_small = "  ".join(f"{result['rejected']['old'][k][j] / n / level:4.2f}x"
                                  for j, level in enumerate(LEVELS[1:], 1))
            print(f"  k = {k}: false-positive rate at 0.05, before / after: {cells}  ({n} claims)")
            print(f"         at Holm's small levels, rate / level, after: {small}; before: {old_small}")
        d = result["decisive"]
        print(f"  a wrong decisive verdict on the page (familywise): before {rate(d['old page'], runs)}, "
              f"after {rate(d['new page'], runs)}")
        print(f"  ... of the primary claim: before (central page, uncorrected, both ways) "
              f"{rate(d['old primary'], runs)}, after {rate(d['new primary'], runs)}")
    else:
        r = result["reproduced"]
        print("  power (reproduced), before / after: " + "; ".join(
            f"{name}: {rate(r['old'][key], runs * per)} / {rate(r['new'][key], runs * per)}"
            for name, key, per in (("primary (k = 3)", "primary", 1), ("secondary k = 3", 3, 2), ("secondary k = 1", 1, 8))))
    if result["compared"]:
        print(f"  through `nmtrepro claims`: {result['agree']} of {result['compared']} pages' verdicts equal "
              f"the in-process ones")


REFERENCE_DF = (2, 4, 10)
REFERENCE_SHARES = (0.05, 0.2, 0.5, 0.8)   # the known part's share of the variance
REFERENCE_LEVELS = (0.05, 0.04, 0.01, 0.001)
REFERENCE_RULES = ("linear", "mixture", "test")


def run_reference(job) -> dict:
    """One (ν, share) setting of `reference`: p's of `draws` nulls and of as many at +2.5 SD, each rule."""
    df, share, draws, seed = job
    rng, known = np.random.default_rng(seed), share / (1 - share)      # the spread's σ² is 1
    spreads = rng.chisquare(df, draws) / df
    nulls = rng.normal(0, math.sqrt(1 + known), draws)

    def p(rule, d, s):
        v = s + known
        if rule == "linear":
            return MeanDifference(d, v, df * v / s).p(+1)
        if rule == "mixture":
            return mixture_sf(d / math.sqrt(v), df, s / v)
        return MeanDifference(d, v, df, s / v).p(+1)
    ps = {rule: [np.array([p(rule, d, s) for d, s in zip(nulls + shift, spreads)])
                 for shift in (0.0, 2.5 * math.sqrt(1 + known))] for rule in REFERENCE_RULES}
    return {"df": df, "share": share, "draws": draws,
            "rates": {rule: [float((null < level).mean()) / level for level in REFERENCE_LEVELS]
                      for rule, (null, _) in ps.items()},
            "power": {rule: float((shifted < ALPHA).mean()) for rule, (_, shifted) in ps.items()}}


def print_reference(result: dict) -> None:
    cells = "; ".join(f"{rule}: " + " / ".join(f"{r:4.2f}" for r in result["rates"][rule])
                      + f", power {100 * result['power'][rule]:4.1f} %" for rule in REFERENCE_RULES)
    print(f"  ν {result['df']:>2}, known part {result['share']:4.2f}: rate / level at "
          f"{' / '.join(f'{level:g}' for level in REFERENCE_LEVELS)}, {cells}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("comparisons", "pages", "recipes", "reference"), nargs="?", default="comparisons")
    ap.add_argument("--runs", type=int, default=1000, help="comparisons (pages) a setting")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000, help="sentence resamples a comparison")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--commands", type=int, default=0, help="pages a setting also run through `nmtrepro claims`")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--draws", type=int, default=200_000, help="`reference`: nulls a setting")
    args = ap.parse_args()
    if args.part == "reference":
        print(f"idealised: a spread on ν degrees of freedom plus a known part; {args.draws} nulls a setting, power "
              f"at +2.5 SD one-sided at {ALPHA}; the linear rule (up to 2026-12-05), the fiducial mixture alone, "
              f"and the package's test (the linear rule's p from {LINEAR_FROM} up, the mixture's bound below)")
        jobs = [(df, share, args.draws, args.seed + 10 * df + i)
                for df in REFERENCE_DF for i, share in enumerate(REFERENCE_SHARES)]
        with Pool(args.processes) as pool:
            for result in pool.imap(run_reference, jobs):
                print_reference(result)
        return
    if args.part == "recipes":
        print(f"runs of {OTHERS} comparisons of 3 seed pairs (seed SD 0.5) and one of the claims' recipe; claims a run "
              f"(recipe measured, k): {RECIPE_CLAIMS}; {args.sentences} sentences, {args.samples} resamples")
        jobs = [(ratio, 0.0, args.runs, args.sentences, args.samples, args.seed + 200 + i, args.commands)
                for i, ratio in enumerate(RATIOS)]
        jobs.append((1.0, 1.0, args.runs, args.sentences, args.samples, args.seed + 299, args.commands))
        start = time.perf_counter()
        with Pool(args.processes) as pool:
            for result in pool.imap(run_recipes, jobs):
                print_recipes(result, time.perf_counter() - start)
        return
    if args.part == "pages":
        print(f"pages of {len(PAGE_K)} claims (seed pairs {PAGE_K}), pools of {POOL_OTHERS + 1} comparisons of "
              f"3 seed pairs; {args.sentences} sentences, {args.samples} resamples; alpha {ALPHA}")
        jobs = [(mix, args.runs, args.sentences, args.samples, args.seed + 100 + i, args.commands)
                for i, mix in enumerate(PAGE_MIXES)]
        start = time.perf_counter()
        with Pool(args.processes) as pool:
            for result in pool.imap(run_pages, jobs):
                print_pages(result, time.perf_counter() - start)
        return
    print(f"{args.runs} comparisons a setting, {args.sentences} sentences, {args.samples} resamples, "
          f"one-sided alpha {ALPHA} (rate of p < alpha toward 'beats')")
    print(f"{'mix':<46} {'k':>2} {'old rate':>15} {'new rate':>15} {'old var ratio':>14} {'new var ratio':>14}")
    for i, mix in enumerate(MIXES):
        start = time.perf_counter()
        result = run(mix, args.runs, args.sentences, args.samples, args.seed + i)
        cells = [f"{100 * r['rate']:5.1f} ± {100 * math.sqrt(r['rate'] * (1 - r['rate']) / args.runs):3.1f} %"
                 for r in (result["old"], result["new"])]
        print(f"{mix.name:<46} {mix.k:>2} {cells[0]:>15} {cells[1]:>15} {result['old']['var_ratio']:>14.2f} "
              f"{result['new']['var_ratio']:>14.2f}   ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
