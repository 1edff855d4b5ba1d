"""The study as config describes it: experiments resolved against the chosen scale.

config.yaml holds the datasets, scales and shared models; each paper's models, experiments, tables
and analyses live in a file of their own (config.yaml `papers`), merged in by `merge_papers`. The
JSON schema (workflow/schemas/config.schema.yaml) checks each key's type and spelling; this module
checks what a schema cannot: that names refer to things that exist (an experiment's model and task,
a table's experiments, a size in the scale, a model option the family accepts), and the cross-checks
between keys (analysis kinds and languages, checkpoints kept for averaging, dataset files on disk).
Every error names the offending key path.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import jsonschema
import yaml

from .core.files import InputError, require_file

PAPER_SECTIONS = ("models", "experiments", "tables", "analyses", "claims")
# An experiment's keys naming the experiment whose trained weights it starts from (`_warm_starts`).
STARTS = ("warm_start", "init_from")
# Analyses whose systems must translate from (source, target) = these languages; None: any.
ANALYSIS_LANGUAGES = {"probing": ("en", None), "agreement": ("en", "de")}
# Source annotations a model may read (names in its config's `extra_inputs`) -> the stage that makes
# them per dataset part, as results/<stage>/<dataset>/<part>.<name> (+ <part>.stats.json).
ANNOTATIONS = {"spans": "parse", "pos": "pos"}
# Decoding options a scale or experiment may leave out (the segment-model ones are off).
DECODE_DEFAULTS = {"max_tokens": 8000, "max_len_a": 1.2, "max_len_b": 10, "precision": "fp32",
                   "word_bonus": 0.0, "lm_order": 0, "lm_weight": 0.0}


@dataclass(frozen=True)
class Experiment:
    name: str
    dataset: str            # dataset registry key
    src_lang: str
    tgt_lang: str
    test: str               # test split decoded and scored
    variant: str            # key of `models`
    model: dict             # model spec: family + options, sizes resolved for the scale
    train: dict             # training settings at the scale, with the model size's regime
    average: dict           # checkpoint averaging, likewise
    resources: dict         # what its training job asks of the executor, likewise
    decode: dict            # decoding at the scale, with the experiment's own options over it
    init: str | None = None  # the experiment whose averaged model this one warm-starts from
    same_as: str | None = None  # an earlier experiment with the very same training (`_shared_trainings`)

    @property
    def annotations(self) -> dict[str, str]:
        """The source annotations the model reads beside the source, name -> the stage making them
        (`ANNOTATIONS`: parser phrases "spans" from parse, POS tags "pos" from pos), as its family's
        config declares in `extra_inputs`; {} for a model reading the tokens alone."""
        from .models import configure

        return {name: ANNOTATIONS[name] for name in configure(self.model).extra_inputs if name in ANNOTATIONS}


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


def check_analysis_kinds(config: dict, kinds) -> None:
    """Every analysis names a kind the workflow has rules for (one rule file per kind)."""
    for name, spec in config.get("analyses", {}).items():
        _known(spec["kind"], kinds, f"analyses.{name}.kind")


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


def validate(config: dict, schema_path: str | Path) -> None:
    """Check `config` against the JSON schema, filling defaults; one line per error, each naming its key."""
    schema = yaml.safe_load(require_file(schema_path).read_text(encoding="utf-8"))
    validator = _with_defaults(jsonschema.validators.validator_for(schema))(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = [f"  {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in errors]
        raise InputError(f"config does not match {Path(schema_path).name}:\n" + "\n".join(lines))


def _known(value, known, key):
    if value not in known:
        raise InputError(f"config: {key} = {value!r} is not defined; known: {', '.join(sorted(known))}")


def model_options(config: dict, variant: str, key: str) -> dict:
    """A model variant's options at the scale: its `by_scale` entry for the scale over the rest (paper D
    sizes its groups in heads, and tiny models have half of Base's), `size` expanded from the scale's
    size table."""
    from .models import REGISTRY, option_names  # torch import only when a model is actually resolved

    _known(variant, config["models"], key)
    options = dict(config["models"][variant])
    by_scale = options.pop("by_scale", {})
    for name in by_scale:
        _known(name, config["scales"], f"models.{variant}.by_scale")
    options.update(by_scale.get(study_scale(config), {}))
    scale = config["scales"][config["scale"]]
    size = options.pop("size", None)
    if size is not None:
        _known(size, scale["sizes"], f"models.{variant}.size")
        options = {**scale["sizes"][size], **options}
    family = options["family"]
    _known(family, REGISTRY, f"models.{variant}.family")
    accepted = option_names(family)
    for option in options:
        if option != "family" and option not in accepted:
            raise InputError(f"config: models.{variant}.{option}: family {family!r} has no such option; "
                             f"it takes {', '.join(sorted(accepted))}")
    _buildable(variant, options)
    return options


def _buildable(variant: str, options: dict) -> None:
    """Build the model on the meta device (no memory, no time), so that values its family refuses
    (a glance it does not know, d_model not divisible by heads) fail the dry run, not the training job."""
    import torch

    from .models import build_model

    try:
        with torch.device("meta"):
            build_model({**options, "src_vocab": 8, "tgt_vocab": 8})
    except ValueError as err:
        raise InputError(f"config: models.{variant}: {err}") from None


def experiments(config: dict) -> dict[str, Experiment]:
    """Resolve every experiment for `config['scale']`, checking each reference on the way."""
    _known(config["scale"], config["scales"], "scale")
    _known(study_scale(config), config["scales"], f"scales.{config['scale']}.stands_for")
    scale = config["scales"][config["scale"]]
    for size, regime in scale["by_size"].items():
        _known(size, scale["sizes"], f"scales.{config['scale']}.by_size")
        for key in regime.get("train", {}):
            _known(key, scale["train"], f"scales.{config['scale']}.by_size.{size}.train key")
    for name, regime in scale["by_regime"].items():
        for key in regime.get("train", {}):
            _known(key, scale["train"], f"scales.{config['scale']}.by_regime.{name}.train key")
    regimes = {name for s in config["scales"].values() for name in s.get("by_regime", {})}
    out = {}
    for name, exp in config["experiments"].items():
        _known(exp["task"], scale["tasks"], f"experiments.{name}.task")
        task = scale["tasks"][exp["task"]]
        _known(task["dataset"], config["datasets"], f"scales.{config['scale']}.tasks.{exp['task']}.dataset")
        dataset = config["datasets"][task["dataset"]]
        _known(task["test"], dataset["splits"], f"scales.{config['scale']}.tasks.{exp['task']}.test")
        _known(exp["model"], config["models"], f"experiments.{name}.model")
        regime = scale["by_size"].get(config["models"][exp["model"]].get("size"), {})
        if "regime" in exp:               # its paper's own regime (paper D's), over the size's, where the scale has it
            _known(exp["regime"], regimes, f"experiments.{name}.regime")
            own = scale["by_regime"].get(exp["regime"], {})
            regime = {key: {**regime.get(key, {}), **own.get(key, {})} for key in ("train", "average", "resources")}
        out[name] = Experiment(name=name, dataset=task["dataset"], src_lang=dataset["src"],
                               tgt_lang=dataset["tgt"], test=task["test"], variant=exp["model"],
                               model=model_options(config, exp["model"], f"experiments.{name}.model"),
                               train={**scale["train"], **regime.get("train", {})},
                               average={**scale["average"], **regime.get("average", {})},
                               resources={**scale["resources"], **regime.get("resources", {})},
                               decode={**DECODE_DEFAULTS, **scale["decode"], **exp.get("decode", {})})
        _enough_checkpoints(config, name, out[name])
    _warm_starts(config, out)
    _shared_trainings(out)
    for table, spec in config["tables"].items():
        _known_scales(config, spec, f"tables.{table}.scales")
    for table, spec in tables_at_scale(config).items():
        for i, cell in enumerate(spec["cells"]):
            _known(cell["experiment"], out, f"tables.{table}.cells[{i}].experiment")
            baseline = cell.get("baseline", spec.get("baseline"))
            if baseline is not None:
                _comparable(out, cell["experiment"], baseline, f"tables.{table}.cells[{i}].baseline")
    for name, claim in config.get("claims", {}).items():
        _known(claim["experiment"], out, f"claims.{name}.experiment")
        _comparable(out, claim["experiment"], claim["baseline"], f"claims.{name}.baseline")
        _known_scales(config, claim, f"claims.{name}.scales")
    for name, spec in config.get("analyses", {}).items():
        labels = [system["label"] for system in spec["systems"]]
        if len(set(labels)) != len(labels):
            raise InputError(f"config: analyses.{name}.systems: labels must be unique, got {labels}")
        for i, system in enumerate(spec["systems"]):
            _known(system["experiment"], out, f"analyses.{name}.systems[{i}].experiment")
            _comparable(out, system["experiment"], system.get("baseline", system["experiment"]),
                        f"analyses.{name}.systems[{i}].baseline")
        if "paper_size" in spec:
            _known(spec["paper_size"]["scale"], config["scales"], f"analyses.{name}.paper_size.scale")
        if spec["kind"] == "length_buckets" and "edges" not in spec:
            raise InputError(f"config: analyses.{name}: kind length_buckets needs `edges`")
        _check_languages(out, name, spec)
    return out


def study_scale(config: dict) -> str:
    """The scale whose study `config['scale']` runs: itself, or the one it `stands_for` (smoke runs
    the paper scale's tables, claims, analyses and model options on slices)."""
    return config["scales"][config["scale"]].get("stands_for", config["scale"])


def with_scale_data(config: dict) -> dict:
    """The config with the scale's own data sources over the top-level ones: its `download_cache`, and
    its `local_data` folders merged in (smoke reads a mirror of slices, cached apart from the real
    downloads, and a NIST folder it ships). The manifest is the scale's `downloads`."""
    scale = config["scales"][config["scale"]]
    return {**config, "download_cache": scale.get("download_cache", config["download_cache"]),
            "local_data": {**config.get("local_data", {}), **scale.get("local_data", {})}}


def at_scale(config: dict, spec: dict) -> bool:
    """Whether a table or claim with optional `scales` applies at the study's scale (no `scales`: all)."""
    return study_scale(config) in spec.get("scales", [study_scale(config)])


def _known_scales(config: dict, spec: dict, key: str) -> None:
    for scale in spec.get("scales", []):
        _known(scale, config["scales"], key)


def tables_at_scale(config: dict) -> dict[str, dict]:
    """The tables built at `config['scale']` (a table may compare models that exist at one scale only,
    e.g. the warm-start protocol's scratch runs)."""
    return {name: spec for name, spec in config["tables"].items() if at_scale(config, spec)}


def _warm_starts(config: dict, out: dict[str, Experiment]) -> None:
    """The warm-start protocol, where the scale has `warm_start` (continuation settings): each
    experiment named by another's `warm_start` or `init_from` trains from scratch as `<name>_scratch`;
    it and every experiment that names it then continue from that model's average for the same number
    of updates. So a variant (new sublayers initialised as its family does) and its control (the
    baseline continued) see the same data, schedule and updates. Without the protocol `warm_start` is
    ignored (paper A trains every model from scratch) and `init_from` starts the experiment from the
    named one's trained weights with the scale's full recipe (paper B initialises its models from the
    trained baseline)."""
    scale_name = config["scale"]
    protocol = config["scales"][scale_name].get("warm_start")
    sources, inits = {}, {}
    for name, exp in config["experiments"].items():
        keys = [key for key in STARTS if key in exp]
        if not keys:
            continue
        if len(keys) > 1:
            raise InputError(f"config: experiments.{name}: set `warm_start` or `init_from`, not both")
        key, source = f"experiments.{name}.{keys[0]}", exp[keys[0]]
        _known(source, out, key)
        if any(start in config["experiments"][source] for start in STARTS):
            raise InputError(f"config: {key} = {source!r} itself warm-starts; start from an experiment "
                             "trained from scratch")
        if out[source].dataset != out[name].dataset:
            raise InputError(f"config: {key} = {source!r} trains on {out[source].dataset}, but {name!r} on "
                             f"{out[name].dataset}: a warm start needs the same data and vocabulary")
        _contains(out[name].model, out[source].model, key)
        sources.setdefault(source, []).append(name)
        if keys[0] == "init_from":
            inits[name] = source
    if not protocol:
        for name, source in inits.items():
            out[name] = replace(out[name], init=source)
        return
    for key in protocol:
        _known(key, config["scales"][scale_name]["train"], f"scales.{scale_name}.warm_start key")
    for source in sorted(sources):
        scratch = f"{source}_scratch"
        if scratch in out:
            raise InputError(f"config: experiments.{scratch}: the name is taken by the warm-start protocol "
                             f"(experiment {source!r} trained from scratch); rename it")
        out[scratch] = replace(out[source], name=scratch)
        for name in [source, *sources[source]]:
            out[name] = replace(out[name], init=scratch, train={**out[name].train, **protocol})


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


def protocol_note(config: dict) -> str:
    """How this scale trains the models a table compares, for the notes under tables and claims."""
    name = config["scale"]
    scale = config["scales"][name]
    train, protocol = scale["train"], scale.get("warm_start")
    regimes = "".join(f"; {size} models {regime['train']['max_updates']}" for size, regime in scale["by_size"].items()
                      if "max_updates" in regime.get("train", {}))
    regimes += "".join(f"; experiments of regime {name} {regime['train']['max_updates']}"  # paper D's own
                       for name, regime in scale["by_regime"].items() if "max_updates" in regime.get("train", {}))
    batch = (f"one batch of up to {train['max_tokens']} tokens" if train["update_tokens"] <= train["max_tokens"]
             else f"at least {train['update_tokens']} target tokens")
    scratch = f"{train['max_updates']} updates of {batch}{regimes}"
    if not protocol:
        note = f"Protocol (scale `{name}`): every model trained from scratch, {scratch}, as the papers do"
        if not any("init_from" in exp for exp in config["experiments"].values()):
            return note + "."
        return (note + ", except those that start from a trained baseline as paper B's do (`init_from`): they "
                "load its averaged weights and train that long again, twice the baseline's training; so does the "
                "baseline's continued twin (`*_continued`), against which each such claim is read a second time.")
    settings = ", ".join(f"{key} {value}" for key, value in protocol.items())
    return (f"Protocol (scale `{name}`): warm start. Each baseline trains from scratch ({scratch}); then the "
            f"baseline itself (the control) and every variant that names it continue from its averaged weights "
            f"with a fresh optimizer and schedule ({settings}). A variant's new sublayers start as its family "
            f"initialises them, so variant and control see the same data and updates; a baseline row is the "
            f"continued baseline.")


def _contains(variant: dict, source: dict, key: str) -> None:
    """Every weight of `source` exists with the same shape in `variant` (built on the meta device)."""
    import torch

    from .models import build_model, warm_start_mismatch

    with torch.device("meta"):
        own, theirs = (build_model({**options, "src_vocab": 8, "tgt_vocab": 8}).state_dict()
                       for options in (variant, source))
    mismatch = warm_start_mismatch(own, theirs)
    if mismatch:
        raise InputError(f"config: {key}: the {variant['family']} model lacks or shapes differently a weight "
                         f"of the model it starts from: its {mismatch} (another size?)")


def _check_languages(experiments: dict[str, Experiment], name: str, spec: dict) -> None:
    """Probing tasks are English sentences, LingEval97 pairs English->German: refuse other systems."""
    src, tgt = ANALYSIS_LANGUAGES.get(spec["kind"], (None, None))
    for i, system in enumerate(spec["systems"]):
        e = experiments[system["experiment"]]
        if (src and e.src_lang != src) or (tgt and e.tgt_lang != tgt):
            raise InputError(f"config: analyses.{name}.systems[{i}].experiment = {e.name!r} translates "
                             f"{e.src_lang}->{e.tgt_lang}; the {spec['kind']} analysis needs "
                             f"{src or 'any'}->{tgt or 'any'}")


def _enough_checkpoints(config: dict, name: str, experiment: Experiment) -> None:
    """Averaging reads the last `average.last` checkpoints, so training must keep that many."""
    keep, last = experiment.train["keep_last"], experiment.average["last"]
    if keep < last:
        raise InputError(f"config: scales.{config['scale']}.train.keep_last = {keep} (by_size included, "
                         f"experiment {name}) is below its average.last = {last}: keep at least as many "
                         "checkpoints as are averaged")


def dataset_files(config: dict, dataset: str, root: str | Path) -> list[Path]:
    """The files in the repository (embedded data) or in a `local_data` folder (licensed corpora) that
    a dataset's splits read, in split order; downloads and recipe outputs are not among them, nor a
    local corpus whose folder is not set (fetch then says how to set it)."""
    return [path for _, path in _dataset_refs(config, dataset, root)]


def _dataset_refs(config: dict, dataset: str, root: str | Path) -> list[tuple[str, Path]]:
    """(key path, file) of each repository or local file a dataset's splits name."""
    spec, out = config["datasets"][dataset], []
    for split, sides in spec["splits"].items():
        for side in ("src", "tgt", "refs"):  # refs: a test split's further references
            if side not in sides:
                continue
            refs = [sides[side]] if isinstance(sides[side], str) else sides[side]
            for ref in refs:
                source, sep, inner = ref.partition(":")
                key = f"datasets.{dataset}.splits.{split}.{side}"
                if not sep:
                    out.append((key, Path(root) / ref))
                elif source in spec.get("local", []) and source in config.get("local_data", {}):
                    out.append((key, Path(config["local_data"][source]).expanduser() / inner))
    return out


def check_dataset_files(config: dict, resolved: dict[str, Experiment], root: str | Path) -> None:
    """Every repository or local file that the experiments' datasets read exists (paths relative to `root`)."""
    for dataset in sorted({e.dataset for e in resolved.values()}):
        for key, path in _dataset_refs(config, dataset, root):
            if not path.is_file():
                raise InputError(f"config: {key}: {path} does not exist")


def _comparable(experiments: dict[str, Experiment], experiment: str, baseline: str, key: str) -> None:
    """A baseline must exist and be scored on the same sentences, or a paired test means nothing."""
    _known(baseline, experiments, key)
    ours, theirs = experiments[experiment], experiments[baseline]
    if (ours.dataset, ours.test) != (theirs.dataset, theirs.test):
        raise InputError(f"config: {key} = {baseline!r} is tested on {theirs.dataset}/{theirs.test}, but "
                         f"{experiment!r} on {ours.dataset}/{ours.test}: a baseline needs the same test set")
