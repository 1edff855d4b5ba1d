"""What a preprocessing job costs, and so how the workflow cuts and sizes it: seconds a line of each CPU
stage, the lines of a dataset part, and from them the parse and pos stages' shard counts and each job's
runtime request (`scales.<scale>.preprocess`: `shards: auto`, `runtime: auto`).

A rate is measured where the run will run (`nmtrepro calibrate` writes the rates file, `rates_file`) or
else the config's assumed figure (`plan.cpu_seconds_per_line`). A measured rate prices only the tool it
was measured with: at the config's assumed rates spaCy's stand-in parses 25x faster than stanza, so a
calibration with one never prices, shards or times a run with the other. prepare has two rates: its
tokenization, BPE and binarizing run in `cpus` worker processes, while learning BPE and counting the
vocabularies run in one, which more cores do not shorten. Learning BPE is most of that one-process part,
and it grows with the corpus's word types (its merges) and tokens (its word count), not its lines: a
rate a line prices it roughly (bench/bpe_scaling.py measured it per type; a dataset's `bpe_sample_lines`
bounds it, docs/paper-scale.md).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from ..core.files import InputError, count_lines, read_json, results_tree
from .annotations import by_stage

MIN_RUNTIME = 60  # minutes: the least an `auto` runtime asks for (a parser's start-up, a slow node, a short part)


@dataclass(frozen=True)
class Rate:
    tool: str                # prepare, or the parser or tagger of an annotation stage
    seconds: float           # a line's seconds in one process (prepare: its steps that workers share)
    serial: float = 0.0      # prepare: a line's seconds in its one-process steps (learn BPE, vocabularies)
    setup: float = 0.0       # a job's seconds before its first line (loading a parser's models)
    measured: str | None = None  # where and when `nmtrepro calibrate` measured it; None: the config's assumption

    def job_hours(self, lines: int, workers: int = 1) -> float:
        """Wall-clock hours of a job over `lines`, its shared steps spread over `workers` processes."""
        return (self.setup + lines * (self.seconds / workers + self.serial)) / 3600

    def cpu_hours(self, lines: int) -> float:
        return lines * (self.seconds + self.serial) / 3600


def rates_file(config: dict) -> Path:
    """Where the scale's measured rates live: the config's `cpu_rates`, else results/<scale>/plan/rates.json."""
    return Path(config.get("cpu_rates") or f"{results_tree(config['scale'])}/plan/rates.json")


def load_rates(config: dict) -> dict:
    """The scale's measured rates ({} where none were measured); a file measured at another scale is
    refused, as its samples were that scale's data."""
    path = rates_file(config)
    if not path.is_file():
        return {}
    rates = read_json(path)
    if rates.get("scale") != config["scale"]:
        raise InputError(f"{path}: rates measured at scale {rates.get('scale')!r}, not {config['scale']!r}: "
                         f"run `nmtrepro calibrate --config scale={config['scale']}`")
    return rates


def tool_of(config: dict, stage: str, dataset: str) -> str:
    """What a stage runs on a dataset: prepare, or the annotation's tool for the scale's backend and the
    source's language (parse: the parser; pos: the tagger, jieba for a Chinese source)."""
    if stage == "prepare":
        return "prepare"
    backend = config["scales"][config["scale"]]["parse_backend"]
    return by_stage(stage).tool(config["datasets"][dataset]["src"], backend)


def stage_rate(config: dict, rates: dict, stage: str, dataset: str) -> Rate | None:
    """A stage's rate on a dataset: measured (`rates`) where measured with the tool the scale runs, else
    the config's assumed figure; None where neither is known."""
    tool = tool_of(config, stage, dataset)
    measured = rates.get("datasets", {}).get(dataset, {}).get(stage)
    if measured and measured["tool"] == tool:
        return Rate(tool, measured["seconds_per_line"], measured.get("serial_seconds_per_line", 0.0),
                    measured["setup_seconds"], f"{rates['machine']['host']}, {rates['date'][:10]}")
    assumed = config.get("plan", {}).get("cpu_seconds_per_line", {})
    if stage == "prepare":
        return Rate(tool, assumed["prepare"]["parallel"], assumed["prepare"]["serial"]) if "prepare" in assumed else None
    figure = assumed.get(stage, {}).get(tool)
    return None if figure is None else Rate(tool, figure)


@functools.lru_cache(maxsize=None)
def _count_lines(path: str) -> int:
    return count_lines(path)


def part_lines(config: dict, dataset: str, part: str) -> int | None:
    """Lines of a dataset part (train, valid, test/<split>) that preprocessing reads: `plan.lines` for
    a download set's training pairs, else counted in the repository's file (at most the scale's
    max_lines); None where neither is known (a download set's valid and test sets, a few thousand lines)."""
    split = part.removeprefix("test/")
    known = config.get("plan", {}).get("lines", {})
    cap = config["scales"][config["scale"]]["prepare"].get("max_lines")
    if split == "train" and dataset in known:
        return min(known[dataset], cap) if cap else known[dataset]
    src = config["datasets"][dataset]["splits"].get(split, {}).get("src")
    if not isinstance(src, str) or not Path(src).is_file():
        return None
    return min(_count_lines(src), cap) if cap else _count_lines(src)


def _known(config: dict, rates: dict, stage: str, dataset: str, part: str) -> tuple[Rate, int] | None:
    """The rate and lines of a part's stage; None for a valid or test set of unknown length; an error for
    a training source, which an `auto` setting cannot cut or time without them."""
    rate, lines = stage_rate(config, rates, stage, dataset), part_lines(config, dataset, part)
    if rate is not None and lines is not None:
        return rate, lines
    if part != "train":
        return None
    missing = (f"plan.lines.{dataset}" if lines is None else
               f"plan.cpu_seconds_per_line.{stage}.{tool_of(config, stage, dataset)} or `nmtrepro calibrate`")
    raise InputError(f"config: scales.{config['scale']}.preprocess asks for `auto` shards or runtimes, and the "
                     f"{stage} stage's cost on {dataset} is unknown: give {missing}")


def shard_count(config: dict, rates: dict, stage: str, dataset: str, part: str) -> int:
    """Jobs that annotate a part: one for valid and test sets (a few thousand lines, not worth loading a
    parser for each piece); for a training source the scale's `shards`, or with `shards: auto` as many
    as keep a job near `shard_hours`, at most `max_shards`."""
    preprocess = config["scales"][config["scale"]]["preprocess"]
    if part != "train":
        return 1
    if preprocess["shards"] != "auto":
        return preprocess["shards"]
    rate, lines = _known(config, rates, stage, dataset, part)
    return max(1, min(preprocess["max_shards"], math.ceil(rate.job_hours(lines) / preprocess["shard_hours"])))


def job_runtime(config: dict, rates: dict, stage: str, dataset: str, part: str = "train", shards: int = 1) -> int:
    """Minutes a job of the stage asks for: the scale's `runtime`, or with `runtime: auto` its largest
    shard's expected time (prepare's shared steps on its `cpus`) times `runtime_margin`, at least
    MIN_RUNTIME; a valid or test set of unknown length gets MIN_RUNTIME."""
    preprocess = config["scales"][config["scale"]]["preprocess"]
    resources = preprocess[stage]
    if resources["runtime"] != "auto":
        return resources["runtime"]
    if (known := _known(config, rates, stage, dataset, part)) is None:
        return MIN_RUNTIME
    rate, lines = known
    hours = rate.job_hours(math.ceil(lines / shards), resources["cpus"] if stage == "prepare" else 1)
    return max(MIN_RUNTIME, math.ceil(preprocess["runtime_margin"] * hours * 60))
