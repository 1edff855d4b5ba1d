"""The claims at several training budgets, from the same trainings.

A verdict taken at one budget says nothing of where the gap goes with more training. The
inverse-sqrt schedule does not depend on `max_updates`, so a training's averaging window that ends at
update N is the window of a training of N updates: keeping those checkpoints (`keep_steps`) gives every
shorter budget for the price of an average, a decode and a test. Two uses:

- a scale's `budgets` (fractions of each training, tiny: 0.3 and 0.6): the central claims' systems are
  also judged at those fractions of the default run;
- `budget` N above 1 (`snakemake budget_sweep --config budget=4`): every training runs N times the scale's
  updates in a results tree of its own (results/<scale>-budget<N>, never the default run's), and the
  sweep's claims (`budget_sweep.claims`) are judged at 1x, 2x, ... Nx of the scale's budget.

A budget of an experiment is an experiment of its own, `<name>_at<N>` (`stops_at` N, `same_as` the
training it averages), so that decoding, BLEU and the paired test run through the rules every model takes.
"""
from __future__ import annotations

from dataclasses import replace

from ..core.files import InputError
from .config_checks import check_known
from .experiment import Experiment
from .scales import study_scale


def fractions(config: dict) -> list[float]:
    """The budgets, as fractions of each training: 1/N, 2/N, 4/N ... below 1 for a budget N above 1,
    else the scale's `budgets`."""
    budget = config.get("budget", 1)
    if budget > 1:
        return [2 ** k / budget for k in range(budget.bit_length()) if 2 ** k < budget]
    return sorted(config["scales"][config["scale"]].get("budgets", []))


def central_claims(config: dict) -> list[str]:
    """The central claims at the study's scale (`central: true`, or the list of scales where a claim is:
    paper C's is NPMT over the seq2seq at `paper`, where NPMT converges, and the reordering layer below it);
    for a budget above 1 only those of `budget_sweep.claims`."""
    names = []
    for name, claim in config.get("claims", {}).items():
        central = claim.get("central", False)
        for scale in central if isinstance(central, list) else ():
            check_known(scale, config["scales"], f"claims.{name}.central")
        if central is True or isinstance(central, list) and study_scale(config) in central:
            names.append(name)
    if config.get("budget", 1) == 1:
        return names
    chosen = config["budget_sweep"]["claims"]
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise InputError(f"config: budget_sweep.claims: {unknown} are not central claims (central: {names})")
    return [name for name in names if name in chosen]


def window_ends(train: dict, last: int, shares: list[float]) -> dict[float, int]:
    """{fraction: the update its averaging window ends at}: the fraction of max_updates to the nearest
    checkpoint (every save_every), for each fraction that leaves room for `last` checkpoints before it
    and ends before the training does (a continuation of 300 updates has no window at 0.3)."""
    every, ends = train["save_every"], {}
    for share in shares:
        end = int(share * train["max_updates"] / every + 0.5) * every
        if last * every <= end < train["max_updates"] and end not in ends.values():
            ends[share] = end
    return ends


def kept_steps(train: dict, last: int, shares: list[float]) -> list[int]:
    """The checkpoints a training keeps past its rotation: every step of each budget's window."""
    return sorted({end - k * train["save_every"] for end in window_ends(train, last, shares).values()
                   for k in range(last)})


def stopped_name(name: str, end: int) -> str:
    return f"{name}_at{end}"


def lengthen(config: dict, resolved: dict[str, Experiment]) -> None:
    """Every training `budget` times as long (its continuation too)."""
    budget = config.get("budget", 1)
    for name, e in resolved.items():
        resolved[name] = replace(e, train={**e.train, "max_updates": e.train["max_updates"] * budget})


def keep_windows(config: dict, resolved: dict[str, Experiment], claimed: set[str]) -> None:
    """The trainings of `claimed` (the central claims' replicates) keep their budgets' windows: set on
    every experiment of such a training (`same_as` it, after the trainings were compared for sharing),
    so that paper B's Base, which is paper A's below paper scale, still trains once."""
    shares = fractions(config)
    trained = {resolved[name].same_as or name for name in claimed}
    for name, e in resolved.items():
        if shares and (e.same_as or name) in trained:
            keep = kept_steps(e.train, resolved[e.same_as or name].average["last"], shares)
            resolved[name] = replace(e, train={**e.train, "keep_steps": keep})


def _source(resolved: dict[str, Experiment], name: str) -> str:
    """The experiment whose budgets serve `name`'s: the training it shares where it decodes as that one
    does (paper D's Base is paper A's below paper scale: one average, one decode a budget), else itself."""
    e = resolved[name]
    return e.same_as if e.same_as and e.decode == resolved[e.same_as].decode else name


def add_stopped(config: dict, resolved: dict[str, Experiment], claimed: set[str]) -> None:
    """The experiments `<name>_at<N>` of each of `claimed`'s budgets: its training's window ending at N."""
    shares = fractions(config)
    for name in sorted(claimed):
        e = resolved[name]
        trained = e.same_as or name
        if _source(resolved, name) != name:
            continue
        for end in window_ends(resolved[trained].train, e.average["last"], shares).values():
            stopped = stopped_name(name, end)
            if stopped in resolved:
                raise InputError(f"config: experiments.{stopped}: the name is taken by {name}'s budget of {end} "
                                 "updates; rename it")
            resolved[stopped] = replace(e, name=stopped, replicate_of=stopped_name(e.replicate_of, end),
                                        same_as=trained, stops_at=end)


def budget_pairs(config: dict, resolved: dict[str, Experiment], experiment: str, baseline: str) -> list[tuple[float, str, str]]:
    """(fraction, the experiment at it, the baseline at it) for each budget both reach, shortest first.
    A budget ends on a checkpoint, so the share a system's window reaches may differ from the fraction
    (ci's 0.5 of 30 updates, saved every 10, is 20 updates; a 300-update continuation's 0.6 is 200):
    the page labels each row by its own share and pools each budget's seed noise by the fraction."""
    shares = fractions(config)
    sources = [_source(resolved, name) for name in (experiment, baseline)]
    ends = [window_ends(resolved[resolved[name].same_as or name].train, resolved[name].average["last"], shares)
            for name in sources]
    return [(share, stopped_name(sources[0], ends[0][share]), stopped_name(sources[1], ends[1][share]))
            for share in shares if share in ends[0] and share in ends[1]]
