"""Seed noise pooled over a run's multi-seed comparisons, and each claim's test with it.

A comparison's seed pairs differ by d_i = Δ + c + u_i + e_i (significance.py): their spread s² estimates
σu² + σe² on k − 1 degrees of freedom, the paired bootstrap gives each pair's own test-set part σe²
(`var_bootstrap_each` − `var_bootstrap_mean`, times k / (k − 1)), and their difference is the seed offsets'
variance σu². With three seeds one comparison measures σu² on two degrees of freedom, and with one seed
not at all: a one-seed claim's bootstrap p counts the test set alone. Yet σu² belongs to a recipe at a
scale (how much a difference of two trainings moves with their seeds), not to one comparison, so a run
pools it over its multi-seed comparisons, Σ(k_j − 1)(s_j² − σe_j²) / Σ(k_j − 1), and every claim of that
run is tested with it: the variance of a claim's mean over k pairs is σu²/k plus its own bootstrap
variance of that mean (σc² + σe²/k: the test-set part, measured for every claim whatever its k), its
estimated part on the pool's degrees of freedom and the rest known (`significance.Reference`,
`SeedNoise.test`). Each comparison's own σe² is taken out before pooling, so that comparisons on test
sets of other sizes or of systems that differ more sentence by sentence pool only what they share.
docs/statistics.md says which comparisons pool (the central claims') and why;
`bench/verdict_calibration.py` measures the rates.

One σu² for every claim assumes every recipe's seeds vary alike, and a claim whose recipe varies twice as
much as the pool's is rejected twice as often as its level says (a GRU against a Transformer beside
Transformer variants). So the pool is kept per recipe (`recipe` in the significance JSON: the workflow
names the two model families), and a claim takes the seed noise of its own recipe's comparisons
(`SeedNoise.basis`); where the run measures its recipe in none, a claim of several seed pairs is tested
with its own seeds' spread. A one-seed claim of such a recipe takes its two model families' seed noise:
each multi-seed comparison's system and baseline each vary over their seeds by a variance of their own
(σv² plus their own test-set part, `significance.side_parts`), pooled per family over the distinct
systems (`SeedNoise.systems`), and a difference of a system of family F and one of G varies by σv_F² +
σv_G², as independent seeds make it (two systems started alike, with one seed each, vary together less:
then it is conservative). Where either family is measured in no system, its seed noise is unmeasured and
it gets no verdict. Borrowing the other recipes' pool would rest its verdict on an assumption no data of
the run can test (that its recipe varies as theirs do; Bartlett's test compares only the recipes
measured), and where its recipe varied twice as much it was rejected 12% of the time at 0.05
(docs/statistics.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special

from .significance import MeanDifference


@dataclass(frozen=True)
class Comparison:
    """One multi-seed comparison's parts of the pool (BLEU²), or one system's (`Comparison.sides`)."""
    name: str
    k: int
    spread: float     # s², the sample variance of the k seed pairs' differences: σu² + σe²
    test_own: float   # σe², each pair's own test-set variance, from the paired bootstrap
    recipe: str = ""  # the kind of comparison ("phrase/transformer"): seed noise pools within one; a system's family
    sides: tuple["Comparison", ...] = ()  # its system's and baseline's own parts, where the JSON has them
    scores: tuple[float, ...] = ()  # a side's scores over its seeds: the same system on the same test set
                                    # scores the same in every comparison it is in, so it pools once

    @classmethod
    def of(cls, name: str, entry: dict) -> "Comparison":
        """From a significance JSON's entry of k >= 2 seed pairs."""
        k = len(entry["seeds"])
        sides = tuple(cls(f"{name}'s {role}", k, side["spread"], side["test_own"], family, (), tuple(scores))
                      for role, family, side, scores in zip(
                          ("system", "baseline"), entry.get("families", ()), entry.get("sides", ()),
                          zip(*((e["score"], e["baseline"]) for e in entry["seeds"]))))
        return cls(name, k, entry["var_seeds"] * k,
                   max(0.0, (entry["var_bootstrap_each"] - entry["var_bootstrap_mean"]) * k / (k - 1)),
                   entry.get("recipe", ""), sides)


@dataclass(frozen=True)
class Basis:
    """A claim's test with the seed noise it takes (None: unmeasured), and where that comes from in words
    for its verdict ("": its own recipe's pool, the page's note says so)."""
    test: MeanDifference | None
    words: str


@dataclass(frozen=True)
class SeedNoise:
    """σu² pooled over `comparisons` (those of k >= 2), with its degrees of freedom."""
    comparisons: tuple[Comparison, ...]

    @classmethod
    def of(cls, entries: dict[str, dict]) -> "SeedNoise":
        """From {name: significance entry}; entries of one seed pair measure no seed noise and are left out."""
        return cls(tuple(Comparison.of(name, entry) for name, entry in entries.items() if len(entry["seeds"]) >= 2))

    @property
    def df(self) -> int:
        return sum(c.k - 1 for c in self.comparisons)

    def _pooled(self, field: str) -> float:
        return sum((c.k - 1) * getattr(c, field) for c in self.comparisons) / self.df

    @property
    def spread(self) -> float:
        """Pooled s² (σu² + σe²): the part of a claim's variance whose estimate carries the df."""
        return self._pooled("spread")

    @property
    def estimate(self) -> float:
        """Pooled σu², unbiased: negative where the spreads fell below their test-set parts by chance."""
        return self.spread - self._pooled("test_own")

    @property
    def var(self) -> float:
        """Pooled σu² as a page prints it, floored at 0."""
        return max(0.0, self.estimate)

    def homogeneity(self) -> float | None:
        """Bartlett's p that the comparisons' spreads s_j² share one variance (None: fewer than two, or a
        spread of 0). A small p says the pooled σu² averages recipes whose seed noise differs."""
        parts = [(c.k - 1, c.spread) for c in self.comparisons]
        if len(parts) < 2 or any(s <= 0 for _, s in parts):
            return None
        statistic = self.df * math.log(self.spread) - sum(n * math.log(s) for n, s in parts)
        scale = 1 + (sum(1 / n for n, _ in parts) - 1 / self.df) / (3 * (len(parts) - 1))
        return float(special.chdtrc(len(parts) - 1, statistic / scale))  # scipy.stats' chi2.sf

    def within(self, recipe: str) -> "SeedNoise":
        """The pool of one recipe's comparisons (of the systems': one family's)."""
        return SeedNoise(tuple(c for c in self.comparisons if c.recipe == recipe))

    def systems(self) -> "SeedNoise":
        """The comparisons' systems and baselines as comparisons of their own, each family a recipe, each
        system once (by its scores)."""
        distinct = {(side.recipe, side.scores): side for c in self.comparisons for side in c.sides}
        return SeedNoise(tuple(distinct.values()))

    def basis(self, entry: dict) -> Basis:
        """A claim's test (`entry`: its significance entry) with the seed noise of its recipe: its recipe's
        pooled comparisons where the run has any; else its own seeds' spread where it has several seed
        pairs (its own t-test, exact whatever its recipe); else, for one seed pair, its two families'
        systems' where the run measures both (`families`); else none: the run cannot tell how its recipe's
        seeds vary."""
        recipe = entry.get("recipe", "")
        own = self.within(recipe)
        if own.df:
            return Basis(own.test(entry), "")
        named = f", {recipe}," if recipe else ""
        if len(entry["seeds"]) > 1:
            return Basis(MeanDifference.of(entry), "" if not self.df else f"seed noise from its own seed pairs "
                                                   f"(no other comparison of its recipe{named} at this scale)")
        families = self.families(entry)
        if families:
            return families
        return Basis(None, "one seed pair, and " + ("no multi-seed comparison at this scale to pool it from"
                                                    if not self.df else
                                                    f"no multi-seed comparison of its recipe{named} nor of a system of "
                                                    f"each of its families at this scale"))

    def families(self, entry: dict) -> Basis | None:
        """A claim's test with its two model families' seed noise, σv_F² + σv_G² (module docstring): each
        family's pooled over its systems, their spreads' sum the estimated part, on Satterthwaite's degrees
        of freedom for that sum (one family's own where F = G: one estimate counted twice). None where the
        entry names no families, or the run measures a family in no system."""
        names = entry.get("recipe", "").split("/")
        systems = self.systems()
        pools = [systems.within(name) for name in names]
        if len(names) != 2 or not all(pool.df for pool in pools):
            return None
        first, second = pools
        spread = first.spread + second.spread
        if names[0] == names[1] or spread <= 0:
            df = first.df
        else:
            df = spread ** 2 / (first.spread ** 2 / first.df + second.spread ** 2 / second.df)
        which = f"two {names[0]} systems" if names[0] == names[1] else f"a {names[0]} and a {names[1]} system"
        return Basis(pooled_test(entry, first.estimate + second.estimate, spread, df),
                     f"seed noise of {which}, from the systems of the run's multi-seed comparisons (none of its "
                     f"recipe, {'/'.join(names)}, at this scale)")

    def test(self, entry: dict) -> MeanDifference:
        """A claim's test over its k seed pairs with this pool's seed noise (`pooled_test`)."""
        return pooled_test(entry, self.estimate, self.spread, self.df)


def pooled_test(entry: dict, estimate: float, spread: float, df: float) -> MeanDifference:
    """A claim's test over its k seed pairs with the seed noise `estimate` (σu², its estimate's spread s²
    on `df` degrees of freedom): σu²/k plus its bootstrap variance of the mean difference, tested with s²/k
    as the part estimated on df and the bootstrap's as known (`Reference`).
    σu² enters unfloored (a floor at 0 biases the variance up where seeds do not vary), the variance kept
    above a quarter of the claim's own test-set part; where the claim's test-set part is below the pool's
    (the known part negative), the variance is all estimated: Student's t on df."""
    k = len(entry["seeds"])
    own = entry["var_bootstrap_mean"]
    var = max(estimate / k + own, own / 4)
    random = spread / k
    return MeanDifference(entry["delta"], var, df if random > 0 else None, min(1.0, random / var) if var > 0 else 1.0)
