"""The config's cross-checks: every name must name something defined, and keys must agree.

The JSON schema (workflow/schemas/config.schema.yaml) checks each key's type and spelling; this module
holds what a schema cannot check. `nmtrepro.study.config` calls it as it resolves the experiments:
`check_known` for each name it looks up (an experiment's model and task, a table's experiments, a size
in the scale), and
the cross-checks of what it resolved (a model its family builds, a warm start whose weights fit, a
baseline tested on the same sentences, the checkpoints kept for averaging, a claim's direction). The
workflow calls the rest around it (analysis kinds that have rules, the languages each kind declares,
dataset files on disk). Every error names the offending key path.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.files import InputError
from ..data.datasets import expected_checksum
from ..evaluation.metrics import METRICS
from ..evaluation.quantities import QUANTITIES
from .experiment import Experiment
from .meta_models import cached, meta_shapes

def check_analysis_kinds(config: dict, kinds) -> None:
    """Every analysis names a kind the workflow has rules for (one rule file per kind)."""
    for name, spec in config.get("analyses", {}).items():
        check_known(spec["kind"], kinds, f"analyses.{name}.kind")


def check_known(value, known, key):
    if value not in known:
        raise InputError(f"config: {key} = {value!r} is not defined; known: {', '.join(sorted(known))}")


def buildable(variant: str, options: dict) -> None:
    """Build the model on the meta device (no memory), so that values its family refuses (a glance it
    does not know, d_model not divisible by heads) fail the dry run, not the training job."""
    built = meta_shapes(json.dumps(options, sort_keys=True))
    if "error" in built:
        raise InputError(f"config: models.{variant}: {built['error']}")


def check_claim_test(claim: dict, key: str) -> None:
    """A claim of a difference has a direction, the sign of its paper_delta (a claim of no gain is
    test: non_superiority, its margin set by config's `no_gain_margins`)."""
    if claim.get("test", "superiority") == "superiority" and claim["paper_delta"] == 0:
        raise InputError(f"config: {key}.paper_delta: 0 gives a superiority test no direction; a claim of no "
                         f"gain is test: non_superiority")


def check_quantity_claim(config: dict, claim: dict, key: str) -> None:
    """A claim's metric is a metric (evaluation/metrics) or a quantity (evaluation/quantities.py); one on a
    quantity names an analysis of the kind that measures it, built wherever the claim is comparable; a claim
    on a metric names none."""
    metric = claim.get("metric", "tok_bleu")
    check_known(metric, [*METRICS, *QUANTITIES], f"{key}.metric")
    quantity = QUANTITIES.get(metric)
    if quantity is None:
        if "analysis" in claim:
            raise InputError(f"config: {key}.analysis: only a claim on a quantity ({sorted(QUANTITIES)}) names one")
        return
    analysis = config.get("analyses", {}).get(claim.get("analysis"))
    if analysis is None or analysis["kind"] != quantity.kind:
        raise InputError(f"config: {key}.analysis: a claim on {quantity.name} names an analysis of kind "
                         f"{quantity.kind!r}, got {claim.get('analysis')!r}")
    studies = {scale: spec.get("stands_for", scale) for scale, spec in config["scales"].items()}  # as at_scale reads them
    missing = [scale for scale, study in studies.items() if study in claim.get("scales", [study])
               and study not in analysis.get("scales", [study])]
    if missing:
        raise InputError(f"config: {key}.scales: its analysis {claim['analysis']} is not built at {sorted(missing)}")


def known_scales(config: dict, spec: dict, key: str) -> None:
    for scale in spec.get("scales", []):
        check_known(scale, config["scales"], key)


def contains(variant: dict, source: dict, key: str) -> None:
    """Every weight of `source` exists with the same shape in `variant` (built on the meta device)."""
    own, theirs = (json.dumps(options, sort_keys=True) for options in (variant, source))

    def compare() -> str | None:
        from ..models import warm_start_mismatch

        return warm_start_mismatch(meta_shapes(own)["shapes"], meta_shapes(theirs)["shapes"])

    mismatch = cached(f"{own} starts from {theirs}", compare)
    if mismatch:
        raise InputError(f"config: {key}: the {variant['family']} model lacks or shapes differently a weight "
                         f"of the model it starts from: its {mismatch} (another size?)")


def check_languages(config: dict, experiments: dict[str, Experiment], kinds: dict[str, dict]) -> None:
    """Each analysis's systems translate the languages its kind declares (`languages` in <kind>.schema.yaml,
    `nmtrepro.study.config.analysis_kinds`: probing's tasks are English sentences, LingEval97 pairs
    English->German): refuse other systems."""
    for name, spec in config.get("analyses", {}).items():
        needs = kinds.get(spec["kind"], {}).get("languages", {})
        src, tgt = needs.get("src"), needs.get("tgt")
        for i, system in enumerate(spec["systems"]):
            e = experiments[system["experiment"]]
            if (src and e.src_lang != src) or (tgt and e.tgt_lang != tgt):
                raise InputError(f"config: analyses.{name}.systems[{i}].experiment = {e.name!r} translates "
                                 f"{e.src_lang}->{e.tgt_lang}; the {spec['kind']} analysis needs "
                                 f"{src or 'any'}->{tgt or 'any'}")


def enough_checkpoints(config: dict, name: str, experiment: Experiment) -> None:
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
    return [path for _, path, _ in _dataset_refs(config, dataset, root)]


def _dataset_refs(config: dict, dataset: str, root: str | Path) -> list[tuple[str, Path, bool]]:
    """(key path, file, whether fetch checks it against a SHA256SUMS) of each repository or local file a
    dataset's splits name: a plain path is checked (an embedded corpus, shipped or your own), a file of a
    licensed `local_data` folder is not."""
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
                    out.append((key, Path(root) / ref, True))
                elif source in spec.get("local", []) and source in config.get("local_data", {}):
                    out.append((key, Path(config["local_data"][source]).expanduser() / inner, False))
    return out


def check_dataset_files(config: dict, resolved: dict[str, Experiment], root: str | Path) -> None:
    """Every repository or local file that the experiments' datasets read exists (paths relative to `root`),
    and each that fetch checks is listed in a SHA256SUMS file above it: without one the fetch job would
    fail after the dry run passed (the sums are read, not the files: a dry run hashes nothing)."""
    for dataset in sorted({e.dataset for e in resolved.values()}):
        for key, path, checked in _dataset_refs(config, dataset, root):
            if not path.is_file():
                raise InputError(f"config: {key}: {path} does not exist")
            if checked:
                try:
                    expected_checksum(path)
                except InputError as err:
                    raise InputError(f"config: {key}: {err}; fetch checks each file of a dataset against it: "
                                     f"run `sha256sum FILES >> SHA256SUMS` in the files' folder "
                                     f"(docs/own-corpus.md)") from None


def comparable(experiments: dict[str, Experiment], experiment: str, baseline: str, key: str) -> None:
    """A baseline must exist and be scored on the same sentences, or a paired test means nothing."""
    check_known(baseline, experiments, key)
    ours, theirs = experiments[experiment], experiments[baseline]
    if (ours.dataset, ours.test) != (theirs.dataset, theirs.test):
        raise InputError(f"config: {key} = {baseline!r} is tested on {theirs.dataset}/{theirs.test}, but "
                         f"{experiment!r} on {ours.dataset}/{ours.test}: a baseline needs the same test set")
