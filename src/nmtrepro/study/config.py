"""The study as config describes it: experiments resolved against the chosen scale.

config.yaml holds the datasets, scales and shared models; each paper's models, experiments, tables
and analyses live in a file of their own (config.yaml `papers`), merged in by `merge_papers`. The
JSON schema (workflow/schemas/config.schema.yaml) checks each key's type and spelling; `experiments`
checks what a schema cannot as it resolves (that names refer to things that exist, a model option the
family accepts, the cross-checks between keys), with the checks of `nmtrepro.study.config_checks`. Every error
names the offending key path.
"""
from __future__ import annotations

import copy
import csv
import json
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import jsonschema
import yaml

from ..core.files import InputError, require_file
from ..data.annotations import registry
from ..evaluation.options import DEFAULTS as DECODE
from ..evaluation.quantities import QUANTITIES
from ..training.settings import Settings
from . import budgets
from .config_checks import (buildable, check_claim_test, check_known, check_quantity_claim, comparable, contains,
                            enough_checkpoints, known_scales)
from .experiment import Experiment
from .meta_models import family_options
from .scales import study_scale

PAPER_SECTIONS = ("models", "experiments", "tables", "analyses", "claims")


def load(configfile: str | Path, overrides: list[str] = ()) -> tuple[dict, dict[str, dict[str, list[str]]]]:
    """config.yaml with `KEY=VALUE` overrides (values parsed as YAML, as Snakemake's --config does)
    and its papers merged in; returns it with `merge_papers`'s account of which paper owns what."""
    config = yaml.safe_load(require_file(configfile).read_text(encoding="utf-8"))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--config {item}: expected KEY=VALUE")
        config[key] = yaml.safe_load(value)
    return config, merge_papers(config, Path(configfile).parent)


def merge_papers(config: dict, root: str | Path) -> dict[str, dict[str, list[str]]]:
    """Merge each file of `config['papers']` (paths relative to `root`) into `config`, in place.

    A paper file holds only the sections of PAPER_SECTIONS, and a name may be defined once across
    config.yaml and all papers, so a paper can never silently redefine another's experiment. Returns
    paper name (the file's stem, e.g. "A") -> section -> the names that paper defines.
    """
    owned = {}
    for entry in config.get("papers", []):
        path = require_file(Path(root) / entry)
        try:
            paper = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise InputError(f"{path}: not valid YAML: {err}") from None
        if not isinstance(paper, dict):
            raise InputError(f"{path}: expected a mapping of {', '.join(PAPER_SECTIONS)}")
        for section in paper:
            if section not in PAPER_SECTIONS:
                raise InputError(f"{path}: unknown section {section!r}; a paper file holds "
                                 f"{', '.join(PAPER_SECTIONS)} (the rest belongs in config.yaml)")
        owned[path.stem] = {}
        for section in PAPER_SECTIONS:
            entries = paper.get(section) or {}
            target = config.setdefault(section, {})
            for name, spec in entries.items():
                if name in target:
                    raise InputError(f"{path}: {section}.{name} is already defined (config.yaml or an "
                                     "earlier paper); a name may be defined once")
                target[name] = spec
            owned[path.stem][section] = list(entries)
    return owned


def _with_defaults(validator_class):
    """A validator that also fills in each property's schema default (as snakemake's validate does)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


def _type_strings(config: dict, errors) -> bool:
    """Read as YAML each string the schema refuses where the YAML is a number or a boolean: Snakemake
    parses a nested `--config` entry (`scales={paper: {train: {max_tokens: 8192}}}`) with YAML's base
    loader, so every value in it arrives as a string. Returns whether any value changed."""
    changed = False
    pending = list(errors)
    while pending:
        error = pending.pop()
        pending.extend(error.context or [])
        path = list(error.absolute_path)
        if not path or not isinstance(error.instance, str):
            continue
        try:
            value = yaml.safe_load(error.instance)
        except yaml.YAMLError:
            continue
        if isinstance(value, (bool, int, float)):
            parent = config
            for key in path[:-1]:
                parent = parent[key]
            if parent[path[-1]] == error.instance:
                parent[path[-1]] = value
                changed = True
    return changed


def _merged(base: dict, over: dict) -> dict:
    """`over` on a copy of `base`: mappings merged key by key, any other value replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def inherit_scales(config: dict) -> None:
    """Resolve each scale that names another (`from: tiny`) into that one with its own keys over it, in
    place: a user's own scale (a laptop with 8 cores, a longer budget) is a few lines of config. It runs
    the study of the scale it comes from (`stands_for`, unless it names its own)."""
    scales = config.get("scales", {})

    def resolved(name: str, seen: tuple[str, ...]) -> dict:
        spec = scales[name]
        base = spec.get("from")
        if base is None:
            return spec
        if base not in scales:
            raise InputError(f"config: scales.{name}.from: {base!r} is not a scale; known: {', '.join(scales)}")
        if base in seen:
            raise InputError(f"config: scales.{name}.from: {' -> '.join(seen + (base,))} comes back to itself")
        parent = resolved(base, seen + (base,))
        return {**_merged(parent, spec), "stands_for": spec.get("stands_for", parent.get("stands_for", base))}

    for name in list(scales):
        scales[name] = resolved(name, (name,))
    if "scale" in config and config["scale"] not in scales:
        raise InputError(f"config: scale = {config['scale']!r} is not a scale; known: {', '.join(scales)} "
                         "(a scale of your own: scales.<name> with `from: <scale>`, docs/organisation.md)")


def scale_lineage(config: dict) -> list[str]:
    """The scale and those it comes from (`from`), nearest first."""
    names = [config["scale"]]
    while (base := config["scales"][names[-1]].get("from")) is not None:
        names.append(base)
    return names


def for_scale(config: dict, by_name: dict, default):
    """A setting keyed by scale name (probing's task files and classifier): the entry of the scale, else
    of the nearest scale it comes from, else `default`."""
    return next((by_name[name] for name in scale_lineage(config) if name in by_name), default)


def rule_files(workflow_dir: str | Path, folder: str) -> list[Path]:
    """The rule files of workflow/rules/<folder>/: one per analysis kind (`analyses`, its options beside
    it) or per source annotation's stage (`annotations`)."""
    return sorted(Path(workflow_dir, "workflow/rules", folder).glob("*.smk"))


def analysis_kinds(rule_files: Sequence[Path]) -> dict[str, dict]:
    """Each analysis kind (a rule file of workflow/rules/analyses/) -> what it declares in <kind>.schema.yaml
    beside it ({} where it has none): what it is (`description`), the languages its systems must translate
    (`languages`: `src`, `tgt`, each left out for any), the options it takes (`properties`, `required`),
    those each of its systems takes (`system_properties`), and the config's sections and scale keys its
    rules read (`config_properties`, `scale_properties`)."""
    kinds = {}
    for rules in rule_files:
        path = rules.with_suffix(".schema.yaml")
        kinds[rules.stem] = own = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
        if unknown := sorted(set(own.get("languages", {})) - {"src", "tgt"}):
            raise InputError(f"{path}: languages.{unknown[0]}: a kind's languages are `src` and `tgt`")
    return kinds


def with_analysis_kinds(schema: dict, kinds: dict[str, dict]) -> dict:
    """The schema with each analysis kind's own keys (`analysis_kinds`; a kind without a schema file
    has none): an analysis of that kind takes the common keys and its options, no others, and each of its
    systems the common system keys and the kind's `system_properties` (head_similarity's `groups`); the
    config and each scale take the sections the kinds' rules read."""
    entry = schema["properties"]["analyses"]["additionalProperties"]

    def systems(keys: dict) -> dict:  # the common `systems` entry, its items taking `keys` too
        items = entry["properties"]["systems"]["items"]
        return {**entry["properties"]["systems"], "items": {**items, "properties": {**items["properties"], **keys}}}

    every = {key: spec for own in kinds.values() for key, spec in own.get("system_properties", {}).items()}
    common = {**entry["properties"], "systems": systems(every)}  # the kind's branch refuses another kind's keys
    branches = [{"if": {"properties": {"kind": {"const": kind}}},
                 "then": {"properties": {**common, **own.get("properties", {}),
                                         "systems": systems(own.get("system_properties", {}))},
                          "required": own.get("required", []), "additionalProperties": False}}
                for kind, own in kinds.items()]
    analyses = {**schema["properties"]["analyses"], "additionalProperties": {**entry, "properties": common,
                                                                             "allOf": branches}}
    sections = _kinds_keys(kinds, "config_properties", schema["properties"])
    scale = schema["$defs"]["scale"]
    scale = {**scale, "properties": _kinds_keys(kinds, "scale_properties", scale["properties"])}
    return {**schema, "$defs": {**schema["$defs"], "scale": scale}, "properties": {**sections, "analyses": analyses}}


def _kinds_keys(kinds: dict[str, dict], field: str, keys: dict) -> dict:
    """`keys` (the schema's top-level or a scale's properties) with the ones the kinds read there (their
    `config_properties`, `scale_properties`: probing's section, agreement's `contrastive`), each key once."""
    out = dict(keys)
    for kind, own in kinds.items():
        for key, spec in own.get(field, {}).items():
            if key in out:
                raise InputError(f"workflow/rules/analyses/{kind}.schema.yaml: {field}.{key} is a key the config "
                                 "schema or another kind has already")
            out[key] = spec
    return out


def with_annotation_stages(schema: dict) -> dict:
    """The schema with each source annotation's stage (`nmtrepro.data.annotations`) among the CPU stages:
    what one of its jobs asks for (`scales.<scale>.preprocess.<stage>`) and its assumed seconds a line by
    tool (`plan.cpu_seconds_per_line.<stage>`, keyed as its `tools` say). A new annotation's config then
    edits no schema, and a stage no annotation has is still refused by name."""
    schema = copy.deepcopy(schema)
    resources = schema["$defs"]["scale"]["properties"]["preprocess"]["properties"]
    costs = schema["properties"]["plan"]["properties"]["cpu_seconds_per_line"]["properties"]
    for annotation in registry().values():
        resources[annotation.stage] = {"$ref": "#/$defs/stage_resources", "default": {},
                                       "description": f"one {annotation.stage} job (a shard)"}
        costs[annotation.stage] = {"type": "object", "description": f"per source line by {annotation.tools}",
                                   "additionalProperties": {"type": "number", "minimum": 0}}
    return schema


def validate(config: dict, schema_path: str | Path) -> None:
    """Check `config` against the JSON schema (<workflow>/workflow/schemas/) with what the analysis kinds of
    its workflow and the source annotations declare merged in, filling defaults and typing command-line
    strings (above); one line per error, each naming its key. Scales that come from another (`from`) are
    resolved first."""
    inherit_scales(config)
    schema = yaml.safe_load(require_file(schema_path).read_text(encoding="utf-8"))
    kinds = analysis_kinds(rule_files(Path(schema_path).resolve().parents[2], "analyses"))
    schema = with_annotation_stages(with_analysis_kinds(schema, kinds))
    validator = _with_defaults(jsonschema.validators.validator_for(schema))(schema)
    while _type_strings(config, validator.iter_errors(config)):
        pass
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = [f"  {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in errors]
        raise InputError(f"config does not match {Path(schema_path).name}:\n" + "\n".join(lines))


def model_options(config: dict, variant: str, key: str) -> dict:
    """A model variant's options at the scale: its `by_scale` entry for the scale over the rest (paper D
    sizes its groups in heads, and tiny models have half of Base's), `size` expanded from the scale's
    size table."""
    check_known(variant, config["models"], key)
    options = dict(config["models"][variant])
    by_scale = options.pop("by_scale", {})
    for name in by_scale:
        check_known(name, config["scales"], f"models.{variant}.by_scale")
    options.update(by_scale.get(study_scale(config), {}))
    scale = config["scales"][config["scale"]]
    size = options.pop("size", None)
    if size is not None:
        check_known(size, scale["sizes"], f"models.{variant}.size")
        options = {**scale["sizes"][size], **options}
    family, families = options["family"], family_options()
    check_known(family, families, f"models.{variant}.family")
    accepted = families[family]
    for option in options:
        if option != "family" and option not in accepted:
            raise InputError(f"config: models.{variant}.{option}: family {family!r} has no such option; "
                             f"it takes {', '.join(sorted(accepted))}")
    buildable(variant, options)
    return options


def experiments(config: dict) -> dict[str, Experiment]:
    """Resolve every experiment for `config['scale']`, checking each reference on the way."""
    check_known(config["scale"], config["scales"], "scale")
    check_known(study_scale(config), config["scales"], f"scales.{config['scale']}.stands_for")
    scale = config["scales"][config["scale"]]
    for size, regime in scale["by_size"].items():
        check_known(size, scale["sizes"], f"scales.{config['scale']}.by_size")
        for key in regime.get("train", {}):
            check_known(key, scale["train"], f"scales.{config['scale']}.by_size.{size}.train key")
    for name, regime in scale["by_regime"].items():
        for key in regime.get("train", {}):
            check_known(key, scale["train"], f"scales.{config['scale']}.by_regime.{name}.train key")
    regimes = {name for s in config["scales"].values() for name in s.get("by_regime", {})}
    for name in scale.get("leave_out", []):
        check_known(name, {**config["tables"], **config.get("analyses", {})}, f"scales.{config['scale']}.leave_out")
    specs = _seeded(config)
    out = {}
    for name, exp in specs.items():
        check_known(exp["task"], scale["tasks"], f"experiments.{name}.task")
        task = scale["tasks"][exp["task"]]
        check_known(task["dataset"], config["datasets"], f"scales.{config['scale']}.tasks.{exp['task']}.dataset")
        dataset = config["datasets"][task["dataset"]]
        check_known(task["test"], dataset["splits"], f"scales.{config['scale']}.tasks.{exp['task']}.test")
        check_known(exp["model"], config["models"], f"experiments.{name}.model")
        regime = scale["by_size"].get(config["models"][exp["model"]].get("size"), {})
        priority = regime.get("priority", 0)
        if "regime" in exp:               # its paper's own regime (paper D's), over the size's, where the scale has it
            check_known(exp["regime"], regimes, f"experiments.{name}.regime")
            own = scale["by_regime"].get(exp["regime"], {})
            regime = {key: {**regime.get(key, {}), **own.get(key, {})} for key in ("train", "average", "resources")}
        train = {**scale["train"], **regime.get("train", {})}
        seed = exp.get("seed", train.get("seed", 1))
        out[name] = Experiment(name=name, dataset=task["dataset"], src_lang=dataset["src"],
                               tgt_lang=dataset["tgt"], test=task["test"], variant=exp["model"],
                               model=model_options(config, exp["model"], f"experiments.{name}.model"),
                               train={**train, "seed": seed}, seed=seed,
                               average={**scale["average"], **regime.get("average", {})},
                               resources={**scale["resources"], **regime.get("resources", {})},
                               decode={**DECODE, **scale["decode"], **exp.get("decode", {})},
                               replicate_of=exp["replicate_of"], priority=priority)
        enough_checkpoints(config, name, out[name])
    _inits(config, specs, out)
    budgets.lengthen(config, out)
    _check_trainings(config, out)
    _shared_trainings(out)
    claimed = {replica for name in central_at_scale(config)
               for key in ("experiment", "baseline") for replica in replicates(out)[config["claims"][name][key]]}
    budgets.keep_windows(config, out, claimed)
    budgets.add_stopped(config, out, claimed)
    for table, spec in config["tables"].items():
        known_scales(config, spec, f"tables.{table}.scales")
        for i, cell in enumerate(spec["cells"]):
            known_scales(config, cell, f"tables.{table}.cells[{i}].scales")
    for table, spec in tables_at_scale(config).items():
        for i, cell in enumerate(spec["cells"]):
            check_known(cell["experiment"], out, f"tables.{table}.cells[{i}].experiment")
            baseline = cell.get("baseline", spec.get("baseline"))
            if baseline is not None:
                comparable(out, cell["experiment"], baseline, f"tables.{table}.cells[{i}].baseline")
                seed_pairs(out, cell["experiment"], baseline, f"tables.{table}.cells[{i}].baseline")
    for name, claim in config.get("claims", {}).items():
        check_known(claim["experiment"], out, f"claims.{name}.experiment")
        comparable(out, claim["experiment"], claim["baseline"], f"claims.{name}.baseline")
        seed_pairs(out, claim["experiment"], claim["baseline"], f"claims.{name}.baseline")
        known_scales(config, claim, f"claims.{name}.scales")
        check_claim_test(claim, f"claims.{name}")
        check_quantity_claim(config, claim, f"claims.{name}")
    for name, spec in config.get("analyses", {}).items():
        known_scales(config, spec, f"analyses.{name}.scales")
        labels = [system["label"] for system in spec["systems"]]
        if len(set(labels)) != len(labels):
            raise InputError(f"config: analyses.{name}.systems: labels must be unique, got {labels}")
        for i, system in enumerate(spec["systems"]):
            check_known(system["experiment"], out, f"analyses.{name}.systems[{i}].experiment")
            comparable(out, system["experiment"], system.get("baseline", system["experiment"]),
                        f"analyses.{name}.systems[{i}].baseline")
        if "paper_size" in spec:
            check_known(spec["paper_size"]["scale"], config["scales"], f"analyses.{name}.paper_size.scale")
    return out


def with_scale_data(config: dict) -> dict:
    """The config with the scale's own data sources over the top-level ones: its `download_cache`, and
    its `local_data` folders merged in (smoke reads a mirror of slices, cached apart from the real
    downloads, and a NIST folder it ships). The manifest is the scale's `downloads`."""
    scale = config["scales"][config["scale"]]
    return {**config, "download_cache": scale.get("download_cache", config["download_cache"]),
            "local_data": {**config.get("local_data", {}), **scale.get("local_data", {})}}


def dataset_preparation(config: dict, dataset: str) -> dict:
    """The scale's preparation with the dataset's own options over it (paper C: word level, lowercased)."""
    return {"lowercase": False, "min_count": 1, **config["scales"][config["scale"]]["prepare"],
            **config["datasets"][dataset].get("prepare", {})}


def at_scale(config: dict, spec: dict) -> bool:
    """Whether a table or claim with optional `scales` applies at the study's scale (no `scales`: all)."""
    return study_scale(config) in spec.get("scales", [study_scale(config)])


def no_gain_margins(config: dict, owned: dict[str, dict]) -> dict[str, float]:
    """The margin of each claim of no gain (`test: non_superiority`), by one rule fixed before any result
    (docs/statistics.md): half the smallest gain that the same paper calls a help, i.e. the smallest
    positive paper_delta among its claims of a difference (on a metric, not a quantity). A claim of no gain on a paper that claims no
    gain at all is an error naming it."""
    margins = {}
    papers = {paper: sections.get("claims", []) for paper, sections in owned.items()}
    unowned = [name for name in config.get("claims", {}) if not any(name in names for names in papers.values())]
    if unowned:  # claims config.yaml holds itself (or a config merged before): one group
        papers["config.yaml"] = unowned
    for paper, names in papers.items():
        claims = {name: config["claims"][name] for name in names}
        gains = [c["paper_delta"] for c in claims.values() if c.get("test", "superiority") == "superiority"
                 and c["paper_delta"] > 0 and c.get("metric") not in QUANTITIES]   # a gain in its metric's points
        for name, claim in claims.items():
            if claim.get("test") == "non_superiority":
                if not gains:
                    raise InputError(f"config: claims.{name}: a claim of no gain takes half the smallest gain paper "
                                     f"{paper} calls a help as its margin, and paper {paper} claims no gain")
                margins[name] = round(min(gains) / 2, 4)
    return margins


def tables_at_scale(config: dict) -> dict[str, dict]:
    """The tables built at `config['scale']`, each with the cells filled there (a table or a cell may
    name the `scales` where its models exist: paper C's NPMT trains at paper scale only)."""
    left_out = config["scales"][config["scale"]].get("leave_out", [])
    return {name: {**spec, "cells": [cell for cell in spec["cells"] if at_scale(config, cell)]}
            for name, spec in config["tables"].items() if at_scale(config, spec) and name not in left_out}


def analyses_at_scale(config: dict) -> dict[str, dict]:
    """The analyses built at `config['scale']` (an analysis' `scales`, as a table's; the scale's `leave_out`)."""
    left_out = config["scales"][config["scale"]].get("leave_out", [])
    return {name: spec for name, spec in config.get("analyses", {}).items()
            if at_scale(config, spec) and name not in left_out}


def central_at_scale(config: dict) -> list[str]:
    """The central claims comparable at the study's scale (`budgets.central_claims` within their `scales`)."""
    return [name for name in budgets.central_claims(config) if at_scale(config, config["claims"][name])]


def central_study(config: dict, resolved: dict[str, Experiment]) -> dict[str, list[str]]:
    """What the central study builds at this scale: its `claims` (those marked `central`, comparable
    here), and the non-diagnostic `tables` and the `analyses` whose every experiment and baseline is a
    training those claims need already (same_as counts: paper D's Base is paper A's below paper scale),
    so that they cost decoding and scoring, never a training more."""
    claims = central_at_scale(config)
    trained = {training_of(resolved, config["claims"][name][key]) for name in claims for key in ("experiment", "baseline")}

    def covered(names) -> bool:
        return all(training_of(resolved, name) in trained for name in names)

    tables = [name for name, spec in tables_at_scale(config).items() if spec["cells"] and not spec["diagnostic"]
              and covered(name for cell in spec["cells"] for name in
                          (cell["experiment"], cell.get("baseline", spec.get("baseline", cell["experiment"]))))]
    analyses = [name for name, spec in analyses_at_scale(config).items()
                if covered(name for system in spec["systems"] for name in
                           (system["experiment"], system.get("baseline", system["experiment"])))]
    return {"claims": claims, "tables": tables, "analyses": analyses}


def quantity_pool(config: dict, owned: dict[str, dict], names: Sequence[str],
                  central: Sequence[str]) -> dict[str, dict[str, str]]:
    """{name: the quantity test's analysis, experiment, baseline and metric}: the tests that the seed noise
    of these claims on a quantity pools over at the study's scale (evaluation/pooled.py), as a metric's pools
    over the `central` claims' tests (`central_at_scale`): each one's quantity, measured by its analysis on
    each central comparison of its own paper whose system that analysis measures (paper D's probing tasks
    and head similarity on +Fusing_Diverse against Base; paper C's segment length on NPMT against the
    seq2seq at `paper`). Named by the central claim and the quantity, so that claims sharing one count it
    once. Only a page holding such claims asks for them: the central study probes nothing."""
    pool = {}
    for sections in owned.values():
        claims = sections.get("claims", [])
        for name in (name for name in claims if name in names):
            claim = config["claims"][name]
            if claim["metric"] not in QUANTITIES or not at_scale(config, claim):
                continue
            measured = {system["experiment"] for system in config["analyses"][claim["analysis"]]["systems"]}
            for other in (other for other in central if other in claims):
                comparison = config["claims"][other]
                if comparison["metric"] not in QUANTITIES and comparison["experiment"] in measured:
                    pool[f"{other}, {claim['metric']}"] = {
                        "analysis": claim["analysis"], "experiment": comparison["experiment"],
                        "baseline": comparison["baseline"], "metric": claim["metric"]}
    return pool


def training_of(resolved: dict[str, Experiment], name: str) -> str:
    """The experiment whose training job makes `name`'s model (itself, or the one it is `same_as`)."""
    return resolved[name].same_as or name


def seed_replica(name: str, index: int, seed: int) -> str:
    """The experiment that trains the `index`-th of `name`'s seeds: the first under its own name, the
    others as `<name>_seed<N>`."""
    return name if index == 0 else f"{name}_seed{seed}"


def _central_experiments(config: dict) -> set[str]:
    """The experiments that the central claims compare, and those they start from (`init_from`), whose
    seeds must match theirs."""
    names = {config["claims"][c][key] for c in budgets.central_claims(config) for key in ("experiment", "baseline")}
    pending = list(names)
    while pending:
        source = config["experiments"].get(pending.pop(), {}).get("init_from")
        if source and source not in names:
            names.add(source)
            pending.append(source)
    return names


def _seeded(config: dict) -> dict[str, dict]:
    """The configured experiments with one entry a seed: an experiment naming `seeds: [1, 2, 3]` trains
    once per seed (the seed sets initialisation, dropout and batch order), the first under its own name,
    the others as `<name>_seed<N>`; the scale's `max_seeds` keeps the first N (paper scale: 1, as each
    seed there costs GPU-days), its `central_seeds` the first N of the central claims' systems (paper: 3). Each entry records `replicate_of`, and `seed` where the
    experiment names its seeds (else it trains with the scale's `train.seed`). A replicate of an
    experiment that starts from another (`init_from`) starts from that one's replicate of the same seed."""
    scale = config["scales"][config["scale"]]
    central = _central_experiments(config)
    default_seed = scale["train"].get("seed", 1)
    specs = {}
    for name, exp in config["experiments"].items():
        seeds = exp.get("seeds")
        if seeds is None:
            specs[name] = {**exp, "replicate_of": name}
            continue
        cap = scale.get("central_seeds", scale.get("max_seeds")) if name in central else scale.get("max_seeds")
        for i, seed in enumerate(seeds[:cap]):
            replica = seed_replica(name, i, seed)
            if replica in specs or (i and replica in config["experiments"]):
                raise InputError(f"config: experiments.{replica}: the name is taken by seed {seed} of "
                                 f"experiments.{name}.seeds; rename it")
            specs[replica] = {key: value for key, value in exp.items() if key != "seeds"}
            specs[replica].update(seed=seed, replicate_of=name)
    for name, spec in specs.items():
        if "init_from" not in spec:
            continue
        source = spec["init_from"]
        check_known(source, config["experiments"], f"experiments.{spec['replicate_of']}.init_from")
        twins = {specs[n].get("seed", default_seed): n for n in specs if specs[n]["replicate_of"] == source}
        seed = spec.get("seed", default_seed)
        if seed not in twins:
            raise InputError(f"config: experiments.{spec['replicate_of']}: its seed {seed} starts from "
                             f"{source!r}, which trains no seed {seed} here (its seeds: {sorted(twins)}); "
                             "give both the same `seeds`")
        spec["init_from"] = twins[seed]
    return specs


def _inits(config: dict, specs: dict[str, dict], out: dict[str, Experiment]) -> None:
    """Experiments that start from another's trained weights (`init_from`; paper B initialises its
    models from its trained baseline) load that one's averaged model, then train the scale's
    `continuation` (keys of `train` overridden: tiny continues 300 updates), or the full recipe again
    where the scale sets none (paper scale, where the variant so trains twice as long as its baseline,
    and each claim has a control that trains the baseline as long, `*_continued`)."""
    scale_name = config["scale"]
    continuation = config["scales"][scale_name].get("continuation", {})
    for key in continuation:
        check_known(key, config["scales"][scale_name]["train"], f"scales.{scale_name}.continuation key")
    for name, spec in specs.items():
        if "init_from" not in spec:
            continue
        key, source = f"experiments.{spec['replicate_of']}.init_from", spec["init_from"]
        if "init_from" in specs[source]:
            raise InputError(f"config: {key} = {specs[source]['replicate_of']!r} itself starts from another "
                             "experiment; start from an experiment trained from scratch")
        if out[source].dataset != out[name].dataset:
            raise InputError(f"config: {key} = {source!r} trains on {out[source].dataset}, but {name!r} on "
                             f"{out[name].dataset}: starting from it needs the same data and vocabulary")
        contains(out[name].model, out[source].model, key)
        out[name] = replace(out[name], init=source, train={**out[name].train, **continuation})


def replicates(resolved: dict[str, Experiment]) -> dict[str, list[str]]:
    """Each configured experiment -> its seed replicates (itself first), as `_seeded` named them."""
    out = {}
    for name, e in resolved.items():
        out.setdefault(e.replicate_of, []).append(name)
    return out


def seed_pairs(resolved: dict[str, Experiment], experiment: str, baseline: str,
               key: str = "baseline") -> list[tuple[str, str]]:
    """(experiment replicate, baseline replicate) of each seed both train, in seed order: a comparison
    pools the differences of same-seed pairs (`nmtrepro significance`). A variant with one seed against
    a baseline with three is read on the seed they share."""
    ours = {resolved[n].seed: n for n in replicates(resolved)[experiment]}
    theirs = {resolved[n].seed: n for n in replicates(resolved)[baseline]}
    shared = sorted(set(ours) & set(theirs))
    if not shared:
        raise InputError(f"config: {key} = {baseline!r} trains seeds {sorted(theirs)}, but {experiment!r} "
                         f"seeds {sorted(ours)}: a paired comparison needs a seed in common")
    return [(ours[seed], theirs[seed]) for seed in shared]


def _shared_trainings(out: dict[str, Experiment]) -> None:
    """Mark each experiment whose training is that of an earlier one (same data, resolved model, regime
    and start) `same_as` it: the workflow trains it once and links the result. Two papers' baselines on
    one embedded dataset (paper B's WMT17 Zh-En and paper D's NIST Zh-En are both Tatoeba at tiny), or a
    heads sweep that meets a table's model at one scale, then cost one training, not two. Decoding is
    not part of the key: paper C's greedy and beam rows are one model decoded twice."""
    first = {}
    for name in sorted(out, key=lambda n: out[n].init is not None):  # starts before what starts from them
        e = out[name]
        init = (out[e.init].same_as or e.init) if e.init else None
        key = json.dumps([e.dataset, e.model, e.train, e.average, init], sort_keys=True)
        if key in first:
            out[name] = replace(e, same_as=first[key])
        else:
            first[key] = name


def _check_trainings(config: dict, resolved: dict[str, Experiment]) -> None:
    """Every scale's train settings, and each experiment's at this scale (its size's, regime's and
    continuation's keys over them), read as the trainer reads them (training.settings): a bad value or
    combination fails the dry run, not the training job after preprocessing."""
    for scale, spec in config["scales"].items():
        Settings.from_dict(spec["train"], f"config: scales.{scale}.train.")
    for name, experiment in resolved.items():
        Settings.from_dict(experiment.train, f"config: experiments.{name} (scales.{config['scale']}.train with its "
                                             "size's, regime's and continuation's keys over it): train setting ")


def check_paper_cells(config: dict, root: str | Path) -> None:
    """Every cell a table fills at this scale has its line, (row, column), in the table's paper numbers
    (`paper_numbers`, paths relative to `root`), so that a row added to a table without its paper line
    fails the dry run, naming both, not the table job after every training."""
    for name, spec in tables_at_scale(config).items():
        path = Path(root) / spec["paper_numbers"]
        with open(require_file(path), encoding="utf-8", newline="") as f:
            known = {(line["row"], line["column"]) for line in csv.DictReader(f, delimiter="\t")}
        for i, cell in enumerate(spec["cells"]):
            if (cell["row"], cell["column"]) not in known:
                raise InputError(f"config: tables.{name}.cells[{i}]: ({cell['row']}, {cell['column']}) has no line in "
                                 f"{spec['paper_numbers']} (give the paper's number, or n/a where it only plots it)")
