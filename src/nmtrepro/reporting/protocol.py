"""The protocol note under a results table or a claims page: how its rows were trained at this scale.

It reads the resolved experiments (`nmtrepro.study.experiment.Experiment`, as `nmtrepro.study.config.experiments`
makes them) by their fields alone: the report stage sits below the config and imports none of it.
"""
from __future__ import annotations


def protocol_note(config: dict, resolved: dict, names) -> str:
    """How the rows of one table or claims page (experiments `names`) were trained at this scale, for the
    note under it: from scratch with which recipe, or from which trained model for how many updates
    more, grouped by recipe, and over which seeds."""
    names = list(dict.fromkeys(names))
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(_recipe(resolved, name), []).append(name)
    if len(groups) == 1:
        body = f"every row {next(iter(groups))}"
    else:
        body = "; ".join(f"{how}: {', '.join(rows)}" for how, rows in groups.items())
    note = f"Protocol (scale `{config['scale']}`): {body}."
    if any(resolved[name].init for name in names):
        note += (" A model started from a trained baseline (`init_from`, as paper B's) is read against that "
                 "baseline continued as long as well (`*_continued`, the control).")
    # each name's seed replicates, in resolution order (config's `replicates`)
    seeded = {name: [e.seed for e in resolved.values() if e.replicate_of == name] for name in names}
    seeded = {name: seeds for name, seeds in seeded.items() if len(seeds) > 1}
    if seeded:
        note += (" Seeds: " + "; ".join(f"{name} {', '.join(map(str, seeds))}" for name, seeds in seeded.items())
                 + " (a row is the mean over its seeds; the rest one seed).")
    return note


def _recipe(resolved: dict, name: str) -> str:
    """One experiment's training in words: from scratch or from which model, how many updates of what."""
    train = resolved[name].train
    per_batch = resolved[name].tokens_per_batch
    batch = (f"one batch of up to {per_batch:,} tokens" if train["update_tokens"] <= per_batch
             else f"at least {train['update_tokens']:,} target tokens")
    recipe = f"{train['max_updates']:,} updates of {batch}"
    init = resolved[name].init
    if init is None:
        return f"trained from scratch, {recipe}"
    return f"started from the trained {resolved[init].replicate_of}, then {recipe} more"
