"""`nmtrepro calibrate`: the CPU stages' seconds a line, measured on the machine that will run them with
the scale's own tools, for `nmtrepro plan` and the workflow's `auto` shard counts and runtimes
(data.costs reads the file this writes).

For each dataset the scale trains on, a sample of its training pairs (lines evenly spaced through the
fetched data, results/<scale>/data/<dataset>, or through the dataset's files in the repository) goes
through each stage's own code in one process, as a job runs it: `prepare` timed whole, and its
tokenization and BPE apart (the steps its workers share; the rest runs in one process), then each
annotation's stage that the scale's experiments read (`parse`, `pos`: their jobs' own work,
`Annotation.annotate`) over the BPE'd source prepare wrote, with the scale's parser and tagger (stanza
at paper scale: its models must be in the download cache) on the stage's cores. Each tool's start-up (a
parser's models, jieba's dictionary) is timed apart on one line first: a job pays it once, not a line at a
time.

Learning BPE grows with the corpus's vocabulary rather than its lines, so a small sample prices
prepare's one-process part only roughly; a larger `--lines` prices it closer.
"""
from __future__ import annotations

import datetime
import logging
import os
import platform
import socket
import tempfile
import time
from pathlib import Path

from ..core.files import InputError, count_lines, evenly_spaced, iter_lines, results_tree, write_json, write_lines
from ..core.text import BPE
from ..data.annotations import by_stage
from ..data.costs import rates_file
from ..data.nlp import resolve_backend
from ..data.prepare import prepare, recipe_tokenized, tokenize_side
from ..study.config import dataset_preparation, experiments, load, validate, with_scale_data

log = logging.getLogger("nmtrepro.planning.calibrate")


def sample_pairs(src: Path, tgt: Path, n: int) -> tuple[list[str], list[str]]:
    """About `n` pairs evenly spaced through two line-aligned files (a corpus concatenated from several,
    Europarl first, is not priced by its first lines alone)."""
    pairs = list(evenly_spaced(zip(iter_lines(src), iter_lines(tgt)), count_lines(src), n))
    if not pairs:
        raise InputError(f"{src}: no lines to sample")
    return [s for s, _ in pairs], [t for _, t in pairs]


def training_files(config: dict, dataset: str) -> tuple[Path, Path, bool] | None:
    """A dataset's training source and target as prepare reads them (fetched, with whether its recipe
    tokenized it), else the repository's own files; None where neither is on this machine."""
    fetched = Path(results_tree(config["scale"])) / "data" / dataset
    if (fetched / "train.src").is_file():
        return fetched / "train.src", fetched / "train.tgt", recipe_tokenized(fetched)
    train = config["datasets"][dataset]["splits"].get("train", {})
    if all(isinstance(train.get(side), str) and Path(train[side]).is_file() for side in ("src", "tgt")):
        return Path(train["src"]), Path(train["tgt"]), False
    return None


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def limit_threads(cpus: int) -> None:
    """Run as a job of `cpus` cores runs (Snakemake sets its threads' variables; torch reads them first)."""
    import torch

    torch.set_num_threads(cpus)


def time_prepare(config: dict, dataset: str, src: list[str], tgt: list[str], tokenized: bool, work: Path) -> dict:
    """prepare's seconds a line over the sample, split into the steps its workers share (tokenizing and
    applying BPE, timed again alone) and the rest. prepare runs on a few lines first (imports, jieba's
    dictionary: its start-up), then twice on the sample, the faster run counted (a busy machine only adds
    time). A run's fixed costs (its files, starting subword-nmt) count in its lines: a small sample
    overstates the rate, never understates it."""
    spec, options = config["datasets"][dataset], dataset_preparation(config, dataset)
    langs = (spec["src"], spec["tgt"])

    def run(lines: int) -> float:
        data, out = work / f"data-{lines}", work / "prepared"
        for side, sample in zip(("src", "tgt"), (src, tgt)):
            write_lines(data / f"train.{side}", sample[:lines])
            write_lines(data / f"valid.{side}", sample[:1])
        return timed(lambda: prepare(data, out, *langs, options["bpe_merges"], options["max_len"],
                                     options["max_ratio"], options["lowercase"], options["min_count"], workers=1,
                                     tokenized=tokenized, bpe_sample_lines=options.get("bpe_sample_lines")))

    setup = run(min(10, len(src)))
    per_line = min(run(len(src)) for _ in range(2)) / len(src)  # the last leaves the sample's prepared files
    words = []
    shared = timed(lambda: words.extend(tokenize_side(lines, lang, options["lowercase"], tokenized)
                                        for lang, lines in zip(langs, (src, tgt))))
    bpe = BPE(work / "prepared" / "bpe.codes")
    shared += timed(lambda: [bpe(side) for side in words])
    return {"tool": "prepare", "setup_seconds": round(setup, 3), "seconds_per_line": min(shared / len(src), per_line),
            "serial_seconds_per_line": max(per_line - shared / len(src), 0.0),
            "sample_seconds": round(per_line * len(src), 3)}


def time_annotation(config: dict, stage: str, dataset: str, bpe_path: Path, work: Path) -> dict:
    """An annotation stage's seconds a line over the sample's BPE'd source, through its job's own work
    (`Annotation.annotate`) with the scale's tool on the stage's cores; its start-up timed apart on the first
    line."""
    annotation = by_stage(stage)
    scale, lang = config["scales"][config["scale"]], config["datasets"][dataset]["src"]
    backend, batch, models = scale["parse_backend"], config["parse"]["batch_size"], f"{config['download_cache']}/stanza"
    if annotation.tool(lang, backend) == backend and resolve_backend(backend, models) == "stanza":
        limit_threads(scale["preprocess"][stage]["cpus"])
    first, stats = work / "first.src.bpe", {}
    write_lines(first, [next(iter_lines(bpe_path))])
    setup = timed(lambda: annotation.annotate(first, work / f"first.{annotation.name}", lang, backend, batch, models))
    seconds = timed(lambda: stats.update(annotation.annotate(bpe_path, work / f"sample.{annotation.name}", lang,
                                                             backend, batch, models)))
    lines = count_lines(bpe_path)
    return {"tool": stats[annotation.stats_key], "setup_seconds": round(setup, 3), "seconds_per_line": seconds / lines,
            "sample_seconds": round(seconds, 3)}


def stages_by_dataset(config: dict) -> dict[str, set[str]]:
    """The datasets the scale trains on, each with the annotation stages its experiments read."""
    found: dict[str, set[str]] = {}
    for experiment in experiments(config).values():
        found.setdefault(experiment.dataset, set()).update(experiment.annotations.values())
    return dict(sorted(found.items()))


def calibrate(config: dict, lines: int, datasets: list[str] | None = None) -> dict:
    """Every CPU stage's rates on every dataset (of `datasets`, default all) found on this machine, and
    the datasets left out."""
    measured, missing, known = {}, {}, stages_by_dataset(config)
    if unknown := sorted(set(datasets or ()) - set(known)):
        raise InputError(f"--datasets {' '.join(unknown)}: scale {config['scale']} trains on {', '.join(known)}")
    for dataset, stages in known.items():
        if datasets and dataset not in datasets:
            continue
        if (files := training_files(config, dataset)) is None:
            missing[dataset] = "no training data on this machine (fetch it first)"
            continue
        src, tgt = sample_pairs(files[0], files[1], lines)
        with tempfile.TemporaryDirectory(prefix="nmtrepro-calibrate-") as folder:
            work = Path(folder)
            rates = {"sample": {"from": str(files[0]), "lines": len(src),
                                "source_characters_per_line": round(sum(map(len, src)) / len(src), 1)},
                     "prepare": time_prepare(config, dataset, src, tgt, files[2], work)}
            for stage in sorted(stages):
                rates[stage] = time_annotation(config, stage, dataset, work / "prepared" / "train.src.bpe", work)
        log.info("%s: %s", dataset, {k: v for k, v in rates.items() if k != "sample"})
        measured[dataset] = rates
    return {"scale": config["scale"], "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"host": socket.gethostname(), "processor": platform.processor() or platform.machine(),
                        "cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
            "sample_lines": lines, "datasets": measured, "not_measured": missing}


def add_arguments_calibrate(parser) -> None:
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, as for snakemake (e.g. scale=paper)")
    parser.add_argument("--configfile", default="config.yaml")
    parser.add_argument("--schema", default="workflow/schemas/config.schema.yaml")
    parser.add_argument("--lines", type=int, default=2000, help="training pairs sampled a dataset")
    parser.add_argument("--datasets", nargs="+", help="only these of the scale's datasets (default: all)")
    parser.add_argument("--out", help="the rates file (default: the config's cpu_rates, else "
                                      "results/<scale>/plan/rates.json, where plan and the workflow read it)")


def run_calibrate(args) -> None:
    if args.lines < 1:
        raise InputError(f"--lines {args.lines}: sample at least one line")
    config, _ = load(args.configfile, args.config)
    validate(config, args.schema)
    config = with_scale_data(config)
    rates = calibrate(config, args.lines, args.datasets)
    if not rates["datasets"]:
        raise InputError(f"no dataset of scale {config['scale']} has its training data on this machine: "
                         f"fetch them first (snakemake --config scale={config['scale']} --until fetch)")
    out = Path(args.out) if args.out else rates_file(config)
    write_json(out, rates)
    log.info("wrote %s (%d datasets measured, %d not: %s)", out, len(rates["datasets"]), len(rates["not_measured"]),
             ", ".join(rates["not_measured"]) or "none")
