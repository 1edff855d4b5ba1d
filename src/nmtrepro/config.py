"""The study as config describes it: experiments resolved against the chosen scale.

The JSON schema (workflow/schemas/config.schema.yaml) checks each key's type and spelling; this
module checks what a schema cannot: that names refer to things that exist (an experiment's model
and task, a table's experiments, a size in the scale, a model option the family accepts).
Every error names the offending key path.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from .core.files import InputError, require_file


@dataclass(frozen=True)
class Experiment:
    name: str
    dataset: str            # dataset registry key
    src_lang: str
    tgt_lang: str
    test: str               # test split decoded and scored
    model: dict             # model spec: family + options, sizes resolved for the scale
    train: dict             # training settings at the scale, with the model size's regime
    average: dict           # checkpoint averaging, likewise

    @property
    def needs_spans(self) -> bool:
        """Whether the model reads parser phrases (the parse stage's .spans) beside the source, as
        its family's config declares in `extra_inputs`."""
        from .models import configure

        return "spans" in configure(self.model).extra_inputs


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
    """A model variant's options with its `size` expanded from the scale's size table."""
    from .models import REGISTRY, option_names  # torch import only when a model is actually resolved

    _known(variant, config["models"], key)
    options = dict(config["models"][variant])
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
    return options


def experiments(config: dict) -> dict[str, Experiment]:
    """Resolve every experiment for `config['scale']`, checking each reference on the way."""
    _known(config["scale"], config["scales"], "scale")
    scale = config["scales"][config["scale"]]
    for size, regime in scale["by_size"].items():
        _known(size, scale["sizes"], f"scales.{config['scale']}.by_size")
        for key in regime.get("train", {}):
            _known(key, scale["train"], f"scales.{config['scale']}.by_size.{size}.train key")
    out = {}
    for name, exp in config["experiments"].items():
        _known(exp["task"], scale["tasks"], f"experiments.{name}.task")
        task = scale["tasks"][exp["task"]]
        _known(task["dataset"], config["datasets"], f"scales.{config['scale']}.tasks.{exp['task']}.dataset")
        dataset = config["datasets"][task["dataset"]]
        _known(task["test"], dataset["splits"], f"scales.{config['scale']}.tasks.{exp['task']}.test")
        regime = scale["by_size"].get(config["models"][exp["model"]].get("size"), {})
        out[name] = Experiment(name=name, dataset=task["dataset"], src_lang=dataset["src"],
                               tgt_lang=dataset["tgt"], test=task["test"],
                               model=model_options(config, exp["model"], f"experiments.{name}.model"),
                               train={**scale["train"], **regime.get("train", {})},
                               average={**scale["average"], **regime.get("average", {})})
    for table, spec in config["tables"].items():
        for i, cell in enumerate(spec["cells"]):
            _known(cell["experiment"], out, f"tables.{table}.cells[{i}].experiment")
            baseline = cell.get("baseline", spec.get("baseline"))
            if baseline is not None:
                _comparable(out, cell["experiment"], baseline, f"tables.{table}.cells[{i}].baseline")
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
    return out


def _comparable(experiments: dict[str, Experiment], experiment: str, baseline: str, key: str) -> None:
    """A baseline must exist and be scored on the same sentences, or a paired test means nothing."""
    _known(baseline, experiments, key)
    ours, theirs = experiments[experiment], experiments[baseline]
    if (ours.dataset, ours.test) != (theirs.dataset, theirs.test):
        raise InputError(f"config: {key} = {baseline!r} is tested on {theirs.dataset}/{theirs.test}, but "
                         f"{experiment!r} on {ours.dataset}/{ours.test}: a baseline needs the same test set")
