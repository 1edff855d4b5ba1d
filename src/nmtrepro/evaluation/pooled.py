"""The run's seed noise as the verdicts and the results tables read it: pooled over the central claims'
significance JSONs (the `pool` of a page's or table's `--inputs`), each comparison's every seed held to
the BLEU floor, in each metric a page or a table tests in (seed_noise.py pools it; docs/statistics.md
says why). A claims page and a results table read it here, so that a table's mark and a page's verdict
rest on the same seed noise. A quantity's seed noise (quantities.py) pools alike over the pool's tests of
that quantity (`nmtrepro quantity-test`: the workflow adds the quantity measured on its claims' paper's
central comparisons), a metric's over the pool's tests of metrics.
"""
from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING

from ..core.files import InputError, read_json, require_file
from .quantities import QUANTITIES

if TYPE_CHECKING:
    from .seed_noise import SeedNoise

# The BLEUs a model's floor (MIN_BASELINE_BLEU) is read in; a claim in another metric reads sacreBLEU's,
# of the same detokenized text.
BLEUS = ("tok_bleu", "sacrebleu")
# Below this BLEU a claim is not judged: a model there writes a few frequent words, and two such models
# can "agree" on 0.00 (a claim of no gain reproduced) or differ by a lucky n-gram. Every trained seed of
# `tiny` and above scores 19 or more; `ci` and `smoke` models score 0-2. Each seed of both systems is held
# to it, so that one collapsed seed among good ones shows by name.
MIN_BASELINE_BLEU = 5.0


def floor_metric(metric: str) -> str:
    """The BLEU a model's floor is read in beside a test in `metric`."""
    return metric if metric in BLEUS else "sacrebleu"


def collapsed(sig: dict) -> list[str]:
    """The seeds of either system that score below MIN_BASELINE_BLEU, by name ("seed 2's system scores
    0.31"): a claim with any is not judged."""
    return [f"seed {entry['seed']}'s {side} scores {entry[key]:.2f}" for entry in sig["seeds"]
            for side, key in (("system", "score"), ("baseline", "baseline")) if entry[key] < MIN_BASELINE_BLEU]


@functools.lru_cache(maxsize=None)
def _significance_json(path: str, version: tuple[int, int]) -> dict:
    """A significance JSON, parsed once a process while its (mtime, size) `version` holds: a claims page
    reads each several times (its claim, its budgets, the seed noise's pool). Callers never change it."""
    return read_json(path)


def significance_json(path) -> dict:
    """A JSON written by `nmtrepro significance`, whole (parsed once a process, `_significance_json`);
    json.JSONDecodeError where it is not JSON."""
    stat = os.stat(require_file(path))
    return _significance_json(str(path), (stat.st_mtime_ns, stat.st_size))


def read_significance(path, metric: str) -> dict:
    """The metric's entry of a JSON written by `nmtrepro significance`."""
    try:
        entry = significance_json(path)[metric]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(f"{path}: no {metric!r} significance result ({err})") from err
    if "var" not in entry:  # the two-level bootstrap's JSON, before 2026-11-28
        raise InputError(f"{path}: written by the seed-resampling test this project used before 2026-11-28; "
                         "compute it again: snakemake --forcerun significance")
    return entry


def seed_noises(pool: dict[str, str], metrics) -> dict[str, SeedNoise | None]:
    """The run's seed noise in each of `metrics`, pooled over the tests of it in `pool` ({name: path}:
    significance JSONs and quantities' tests) whose every seed translates (a model below the floor has no
    seed noise worth the name); None where the pool holds no test of it."""
    from .seed_noise import SeedNoise  # scipy, only for pages and tables that test

    noises = {}
    for metric in sorted(set(metrics)):
        tests = {name: path for name, path in pool.items() if tests_in(path, metric)}
        entries = {name: read_entry(path, metric) for name, path in tests.items()}
        translating = {name: entry for name, entry in entries.items()
                       if not collapsed(floor_of(tests[name], metric, entry))}
        noises[metric] = SeedNoise.of(translating) if tests else None
    return noises


def tests_in(path: str, metric: str) -> bool:
    """Whether a pool's JSON tests in `metric`: a quantity's test holds its quantity alone; a significance
    JSON every metric (read_entry names the file where one is missing)."""
    try:
        data = significance_json(path)
        return metric in data if metric in QUANTITIES else data.keys().isdisjoint(QUANTITIES)
    except (json.JSONDecodeError, AttributeError) as err:
        raise InputError(f"{path}: no {metric!r} significance result ({err})") from err


def floor_of(path: str, metric: str, entry: dict) -> dict:
    """The entry whose seeds' BLEU the floor holds a test's models to: its own in a BLEU, the BLEU a
    quantity's test carries (`floor`), else sacreBLEU's of the same JSON."""
    if metric in BLEUS:
        return entry
    if metric in QUANTITIES:
        return entry["floor"]
    return read_entry(path, floor_metric(metric))


def read_entry(path: str, metric: str) -> dict:
    """A significance JSON's entry as a claims page needs it: with the bootstrap's two variances that
    seed noise pools with (a JSON written before 2026-12-01 lacks them; a table reads it still)."""
    entry = read_significance(path, metric)
    if "var_bootstrap_mean" not in entry:
        raise InputError(f"{path}: written by an earlier version of the test, without the bootstrap variances "
                         "that the claims pages pool seed noise with; compute it again (no training): "
                         "snakemake --forcerun significance")
    return entry
