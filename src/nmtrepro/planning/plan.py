"""`nmtrepro plan`: what a run will cost before it is paid for: training jobs, GPU-hours, disk per table,
and the CPU-hours of the preprocessing jobs.

The jobs come from Snakemake's own dry run (`--detailed-summary`), so the plan counts exactly what
`snakemake` would run, skips what is already done, and needs no data on disk. Time comes from a
throughput table: measured numbers from the GPU benchmark's JSON when present, otherwise the config's
`plan` table, whose default figures are derived from the Transformer paper's own training times and
labelled as such, with other GPUs (`plan.speedup`) costed beside it: one multiple for every size, or
one per size, or per size and model family where a family was measured apart ("base/phrase": +PR's
phrase layers slow a Base step more than a GPU speeds it). Each experiment is sized by its
own model spec (paper A's +PR Big counts its phrase layers). Disk is the model's size from its
parameter count (built on the meta device, so nothing is allocated) and the download manifest's
archive sizes. The preprocessing jobs (prepare, and each shard of parse and pos) cost their lines times
a stage's seconds a line: measured on this machine by `nmtrepro calibrate` where it ran with the scale's
parser and tagger, else the config's assumed figures (`plan.cpu_seconds_per_line`), each named in the
output as measured or assumed (data.costs); the lines counted from the repository's files or taken
from `plan.lines`.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

from ..core.files import InputError, write_json
from ..data.annotations import registry
from ..data.costs import job_runtime, load_rates, part_lines, stage_rate
from ..data.download import load_manifest
from ..data.shards import shard_range
from ..models.size import spec_parameter_counts
from ..study.config import experiments, load, replicates, tables_at_scale, training_of, validate
from ..study.experiment import batch_tokens

TRAIN_OUTPUT = re.compile(r"^results/[^/]+/train/(?P<experiment>[^/]+)/final\.pt$")
DOWNLOAD_OUTPUT = re.compile(r"^results/[^/]+/downloads/(?P<resource>[^/]+)\.json$")


def preprocess_output() -> re.Pattern:
    """One output per preprocessing job: prepare's stats, each shard of an annotation's stage (parse's
    spans, pos's tags: data.annotations)."""
    stages, names = ("|".join(re.escape(getattr(a, key)) for a in registry().values()) for key in ("stage", "name"))
    return re.compile(r"^results/[^/]+/(?:(?P<prepare>prepare)/(?P<dataset>[^/]+)/stats\.json"
                      rf"|(?P<stage>{stages})/(?P<annotated>[^/]+)/shards/(?P<part>.+)\.(?P<shard>\d+)"
                      rf"-of-(?P<shards>\d+)\.(?:{names}))$")


WEIGHT_BYTES, CHECKPOINT_BYTES = 4, 12  # fp32 weights; weights + Adam's two moments
BASE_EN_DE = "base_en_de"  # the shared baseline, whose recipe's GPU time the plan states on its own


def dry_run_summary(snakefile: str, overrides: list[str]) -> str:
    """`snakemake --detailed-summary` of everything a run would build now (the dry-run DAG)."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", snakefile, "--detailed-summary", "--nolock",
               "--quiet", "all"] + (["--config", *overrides] if overrides else [])
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise InputError(f"snakemake dry run failed ({' '.join(command[2:])}):\n{result.stderr[-2000:]}")
    return result.stdout


def _pending_rows(text: str):
    """The rows of a detailed summary (tab-separated) whose output a run would still make."""
    lines = text[text.index("output_file\t"):] if "output_file\t" in text else ""
    return (row for row in csv.DictReader(io.StringIO(lines), delimiter="\t") if row.get("plan") != "no update")


def parse_summary(text: str) -> tuple[set[str], set[str]]:
    """Pending training and download jobs from `snakemake --detailed-summary`."""
    train, downloads = set(), set()
    for row in _pending_rows(text):
        if row.get("rule") == "train" and (m := TRAIN_OUTPUT.match(row["output_file"])):
            train.add(m["experiment"])
        elif row.get("rule") == "download" and (m := DOWNLOAD_OUTPUT.match(row["output_file"])):
            downloads.add(m["resource"])
    return train, downloads


def preprocessing_jobs(text: str) -> list[dict]:
    """Pending preprocessing jobs from `snakemake --detailed-summary`: prepare per dataset, and parse
    and pos per shard ({stage, dataset, part, shard, shards})."""
    jobs, output = [], preprocess_output()
    for row in _pending_rows(text):
        if not (m := output.match(row["output_file"])):
            continue
        if m["prepare"]:
            jobs.append({"stage": "prepare", "dataset": m["dataset"], "part": "train", "shard": 1, "shards": 1})
        else:
            jobs.append({"stage": m["stage"], "dataset": m["annotated"], "part": m["part"],
                         "shard": int(m["shard"]), "shards": int(m["shards"])})
    order = {"prepare": 0, **{a.stage: k for k, a in enumerate(registry().values(), 1)}}  # the pipeline's order
    return sorted(jobs, key=lambda j: (order[j["stage"]], j["dataset"], j["part"], j["shard"]))


def throughput(config: dict, bench: Path | None) -> tuple[dict, str, dict]:
    """Target tokens/s per GPU by model size, where the numbers come from, and the other GPUs costed
    beside them as multiples of them (the config's estimates, for its assumed table only)."""
    if bench is not None and bench.is_file():
        measured = json.loads(bench.read_text(encoding="utf-8"))
        return measured["tokens_per_s"], f"measured: {bench} ({measured.get('gpu', 'GPU not named')})", {}
    if "plan" not in config:
        raise InputError(f"no measured throughput ({bench}) and no `plan` table in the config")
    table = config["plan"]
    for gpu, factor in table.get("speedup", {}).items():
        if not isinstance(factor, dict):  # one multiple for every size
            continue
        sizes = {key for key in factor if "/" not in key}
        if sizes != set(table["tokens_per_s"]):
            raise InputError(f"config: plan.speedup.{gpu} names sizes {sorted(sizes)}, "
                             f"plan.tokens_per_s {sorted(table['tokens_per_s'])}: give one figure for each")
        for key in sorted(set(factor) - sizes):
            if key.split("/")[0] not in sizes:
                raise InputError(f"config: plan.speedup.{gpu}.{key}: a per-family figure is SIZE/FAMILY, "
                                 f"with SIZE one of {sorted(sizes)}")
    return table["tokens_per_s"], f"assumed: {table['source']}", table.get("speedup", {})


def update_tokens(train: dict) -> int:
    """Target tokens an update holds, roughly: at least update_tokens, and at least one batch (whose
    max_tokens padded tokens stand in for its target tokens; update_tokens 1 means one batch; auto
    sizes a batch to at most half an update, and to the papers' 4,096 where an update is smaller)."""
    return max(train["update_tokens"], batch_tokens(train))


def preprocessing(config: dict, jobs: list[dict], cpu_rates: dict | None = None) -> dict:
    """CPU-hours of the pending preprocessing jobs by stage (lines x seconds a line: `cpu_rates` measured by
    `nmtrepro calibrate` where they hold the scale's tool, else the config's assumed ones), the longest
    job's wall-clock hours (prepare's one-process steps counted whole, its shared ones over its cores)
    beside the runtime the jobs ask for, those expected to outlast it, the rates used, and the jobs whose
    cost is unknown."""
    resources = config["scales"][config["scale"]]["preprocess"]
    stages = {}
    for job in jobs:
        stage, dataset = job["stage"], job["dataset"]
        row = stages.setdefault(stage, {"jobs": 0, "lines": 0, "cpu_hours": 0.0, "longest_job_hours": 0.0,
                                        "longest_serial_hours": 0.0, "runtime_minutes": 0,
                                        "cpus": resources[stage]["cpus"], "rates": {}, "overrunning_jobs": [],
                                        "jobs_of_unknown_cost": []})
        row["jobs"] += 1
        lines, rate = part_lines(config, dataset, job["part"]), stage_rate(config, cpu_rates or {}, stage, dataset)
        name = f"{dataset}/{job['part']}" + (f" {job['shard']}-of-{job['shards']}" if job["shards"] > 1 else "")
        if lines is None or rate is None:
            row["jobs_of_unknown_cost"].append(name)
            continue
        start, end = shard_range(lines, job["shard"], job["shards"])
        hours = rate.job_hours(end - start, row["cpus"] if stage == "prepare" else 1)
        runtime = job_runtime(config, cpu_rates or {}, stage, dataset, job["part"], job["shards"])
        row["lines"] += end - start
        row["cpu_hours"] += rate.cpu_hours(end - start)
        row["rates"][dataset] = dataclasses.asdict(rate)
        row["runtime_minutes"] = max(row["runtime_minutes"], runtime)
        if hours > row["longest_job_hours"]:
            row["longest_job_hours"], row["longest_serial_hours"] = hours, (end - start) * rate.serial / 3600
        if hours * 60 > runtime:
            row["overrunning_jobs"].append(name)
    return {"stages": stages, "cpu_hours": sum(row["cpu_hours"] for row in stages.values()),
            "measured": any(r["measured"] for row in stages.values() for r in row["rates"].values())}


def speedup_of(factor: float | dict, size: str | None, family: str | None = None) -> float:
    """A GPU's multiple of the throughput table for a model size and family: one figure for every size,
    or one per size (measured ones differ: a small GRU gains less from a faster GPU than a Transformer
    Big), or for a family of that size measured apart ("base/phrase"); a family without its own figure
    runs at its size's."""
    if not isinstance(factor, dict):
        return factor
    return factor.get(f"{size}/{family}", factor[size])


def hours_on(jobs: list[dict], speedup: dict) -> dict:
    """The jobs' GPU-hours on each GPU of `speedup`."""
    return {gpu: sum(j["gpu_hours_on"][gpu] for j in jobs) for gpu in speedup}


def paper_jobs(config: dict, resolved: dict, seeds: dict, owned: dict[str, list[str]], tables: dict) -> set[str]:
    """The training jobs a paper needs (`owned`: section -> the names its file defines): its tables'
    jobs, those of the experiments it defines, and those its claims and analyses name (a claim's
    baseline may be trained for the claim alone, as paper B's baselines continued as long), each with
    its seed replicates (`seeds`: `replicates`) and the model it starts from."""
    named = set(owned.get("experiments", []))
    for section in ("claims", "analyses"):
        for name in owned.get(section, []):
            named |= experiment_names(config[section][name], resolved)
    needed = {training_of(resolved, r) for n in named for r in seeds.get(n, [])}
    needed |= {training_of(resolved, resolved[n].init) for n in needed if resolved[n].init}
    return needed | {n for table in owned.get("tables", []) if table in tables for n in tables[table]["experiments"]}


def experiment_names(spec, resolved: dict) -> set[str]:
    """The experiments a claim's or an analysis' spec names, at any depth (`experiment`, `baseline`,
    its systems' lists)."""
    if isinstance(spec, str):
        return {spec} & resolved.keys()
    values = spec.values() if isinstance(spec, dict) else spec if isinstance(spec, list) else ()
    return set().union(*(experiment_names(v, resolved) for v in values))


def plan(config: dict, pending: set[str], downloads: set[str], rates: dict, manifest: dict,
         speedup: dict | None = None, preprocess_jobs: list[dict] | None = None,
         papers: dict[str, dict[str, list[str]]] | None = None, cpu_rates: dict | None = None) -> dict:
    """Per table: training jobs still to run, GPU-hours (on the throughput table's GPU, and on each GPU
    of `speedup`) and disk (checkpoints, models, downloads); per paper (`papers`: paper -> section ->
    the names its file defines), the GPU-hours of the jobs it needs (`paper_jobs`), each once; and the
    preprocessing jobs' CPU-hours (`cpu_rates`: `nmtrepro calibrate`'s measured ones, see `preprocessing`)."""
    scale = config["scales"][config["scale"]]
    vocab = scale["prepare"]["bpe_merges"]  # joint BPE: roughly one symbol per merge (an estimate)
    resolved = experiments(config)
    speedup = speedup or {}

    jobs = {}
    for name in sorted(pending):
        size, family = config["models"][resolved[name].variant].get("size"), resolved[name].model["family"]
        params = spec_parameter_counts({**resolved[name].model, "src_vocab": vocab, "tgt_vocab": vocab})["total"]
        train = resolved[name].train  # the scale's budget with the size's regime (paper: Big 300k)
        tokens = train["max_updates"] * update_tokens(train)  # target tokens to the recipe's end
        gpu_hours = tokens / rates[size] / 3600 if size in rates else None
        gpus = max(resolved[name].resources["gpu"], 1)
        jobs[name] = {
            "size": size, "family": family, "parameters": params, "gpus": gpus, "target_tokens": tokens,
            # None: no throughput is known for the size: shown as unknown
            "gpu_hours": gpu_hours, "hours": None if gpu_hours is None else gpu_hours / gpus,
            "gpu_hours_on": {gpu: 0.0 if gpu_hours is None else gpu_hours / speedup_of(factor, size, family)
                             for gpu, factor in speedup.items()},
            "disk_bytes": params * (CHECKPOINT_BYTES * train["keep_last"]
                                    + WEIGHT_BYTES * (2 + len(train.get("keep_steps", [])))),
        }
    download_bytes = {r: manifest[r].size for r in downloads if r in manifest}
    seeds = replicates(resolved)  # a cell's experiment -> its seed replicates
    tables = {}
    for table, spec in tables_at_scale(config).items():
        cells = {training_of(resolved, name) for cell in spec["cells"] for name in seeds[cell["experiment"]]}
        names = sorted((cells | {training_of(resolved, resolved[n].init) for n in cells if resolved[n].init}) & set(jobs))
        datasets = {resolved[n].dataset for n in cells}
        needed = {r for d in datasets for r in config["datasets"][d].get("downloads", []) if r in downloads}
        gpu_hours = sum(jobs[n]["gpu_hours"] or 0 for n in names)
        tables[table] = {
            "training_jobs": len(names), "experiments": names,
            "gpu_hours": gpu_hours, "gpu_hours_on": hours_on([jobs[n] for n in names], speedup),
            "jobs_of_unknown_speed": sorted(n for n in names if jobs[n]["gpu_hours"] is None),
            "checkpoint_bytes": sum(jobs[n]["disk_bytes"] for n in names),
            "download_bytes": sum(download_bytes.get(r) or 0 for r in needed),
            "downloads_of_unknown_size": sorted(r for r in needed if not download_bytes.get(r)),
        }
    by_paper = {}
    for paper, owned in (papers or {}).items():
        names = sorted(paper_jobs(config, resolved, seeds, owned, tables) & set(jobs))
        if names:
            by_paper[paper] = {"training_jobs": len(names), "experiments": names,
                               "gpu_hours": sum(jobs[n]["gpu_hours"] or 0 for n in names),
                               "gpu_hours_on": hours_on([jobs[n] for n in names], speedup)}
    gpu_hours = sum(j["gpu_hours"] or 0 for j in jobs.values())
    prep = preprocessing(config, preprocess_jobs or [], cpu_rates)
    return {"scale": config["scale"], "jobs": jobs, "tables": tables, "papers": by_paper, "preprocessing": prep,
            "total": {"training_jobs": len(jobs), "gpu_hours": gpu_hours,
                      "gpu_hours_on": hours_on(list(jobs.values()), speedup),
                      "cpu_hours": prep["cpu_hours"],
                      "jobs_of_unknown_speed": sorted(n for n, j in jobs.items() if j["gpu_hours"] is None),
                      "checkpoint_bytes": sum(j["disk_bytes"] for j in jobs.values()),
                      "download_bytes": sum(b or 0 for b in download_bytes.values())}}


def render(result: dict, source: str, gpu: str = "GPU") -> str:
    """The plan as text: per table, the total, per training job, the preprocessing, and the totals."""
    gb = 1e9
    others = list(result["total"]["gpu_hours_on"])
    lines = [f"Plan for scale={result['scale']} (throughput {source})", ""]
    if others:
        lines += [f"GPU-hours on {gpu}, and on {', '.join(others)} from the config's speedups (see plan.speedup).", ""]
    width = {g: max(13, len(g) + 1) for g in others}
    lines.append(f"{'table':<24} {'train jobs':>10} {'GPU-hours':>10} " + "".join(f"{g:>{width[g]}}" for g in others)
                 + f" {'checkpoints GB':>15} {'downloads GB':>13}")
    rows = list(result["tables"].items()) + [("total (unique jobs)", result["total"])]
    for name, row in rows:
        lines.append(f"{name:<24} {row['training_jobs']:>10} {row['gpu_hours']:>10.1f} "
                     + "".join(f"{row['gpu_hours_on'][g]:>{width[g]}.1f}" for g in others)
                     + f" {row['checkpoint_bytes'] / gb:>15.1f} {row['download_bytes'] / gb:>13.1f}")
        if row.get("jobs_of_unknown_speed"):
            lines.append(f"{'':<24} (plus {len(row['jobs_of_unknown_speed'])} job(s) of a size with no throughput "
                         f"figure, not counted: {', '.join(row['jobs_of_unknown_speed'])})")
        if row.get("downloads_of_unknown_size"):
            lines.append(f"{'':<24} (plus downloads of unknown size: {', '.join(row['downloads_of_unknown_size'])})")
    if result["papers"]:
        lines.append("(per paper: the jobs its tables, claims and analyses need and those it defines, each once; "
                     "a job two papers share counts in both)")
    for paper, row in result["papers"].items():
        lines.append(f"{'paper ' + paper:<24} {row['training_jobs']:>10} {row['gpu_hours']:>10.1f} "
                     + "".join(f"{row['gpu_hours_on'][g]:>{width[g]}.1f}" for g in others))
    base = result["jobs"].get(BASE_EN_DE)
    if base and base["gpu_hours"] is not None:
        lines += ["", f"{BASE_EN_DE} to its recipe's end: {base['gpu_hours']:.1f} h on one {gpu}"
                  + "".join(f", {base['gpu_hours_on'][g]:.1f} h on one {g}" for g in others)]
    lines += ["", "Per training job:"]
    for name, job in result["jobs"].items():
        hours = ("GPU-hours unknown" if job["gpu_hours"] is None else
                 f"{job['gpu_hours']:.1f} GPU-hours ({job['hours']:.1f} h on {job['gpus']} GPU{'s' * (job['gpus'] > 1)})")
        lines.append(f"  {name}: {job['size']}, {job['parameters'] / 1e6:.0f}M parameters, "
                     f"{hours}, {job['disk_bytes'] / gb:.1f} GB of checkpoints")
    lines.append("Downloads count archives only; extraction and prepared data need more.")
    stages = result["preprocessing"]["stages"]
    if stages:
        lines += ["", "Preprocessing (lines x seconds a line; the longest job in wall-clock hours, prepare's "
                  "one-process steps whole and the rest over its cores):",
                  f"{'stage':<10} {'jobs':>6} {'lines':>12} {'CPU-hours':>10}  longest job"]
        for stage, row in stages.items():
            serial = f" ({row['longest_serial_hours']:.1f} h of it in one process)" if row["longest_serial_hours"] else ""
            lines.append(f"{stage:<10} {row['jobs']:>6} {row['lines']:>12,} {row['cpu_hours']:>10.1f}  "
                         f"{row['longest_job_hours']:.1f} h{serial}; jobs ask up to "
                         f"{row['runtime_minutes'] / 60:.0f} h on {row['cpus']} core(s)")
            by_source = {}
            for dataset, rate in row["rates"].items():
                by_source.setdefault(rate["measured"], []).append(
                    f"{dataset} {rate['tool']} {rate['seconds']:.2g}"
                    + (f" + {rate['serial']:.2g} in one process" if rate["serial"] else ""))
            for measured, rates in by_source.items():
                source = f"measured on {measured}" if measured else "assumed (config plan.cpu_seconds_per_line)"
                lines.append(f"{'':<10} seconds a line, {source}: {'; '.join(rates)}")
            if stage == "prepare":
                lines.append(f"{'':<10} (its one-process part is mostly learning BPE, whose time grows with the word "
                             f"types, not the lines: a line rate prices it roughly; docs/paper-scale.md)")
            if row["overrunning_jobs"]:
                lines.append(f"{'':<10} ({len(row['overrunning_jobs'])} job(s) expected to outlast the runtime they "
                             f"ask for: {', '.join(row['overrunning_jobs'])})")
            if row["jobs_of_unknown_cost"]:
                lines.append(f"{'':<10} (plus {len(row['jobs_of_unknown_cost'])} job(s) of unknown lines or rate, "
                             f"not counted: {', '.join(row['jobs_of_unknown_cost'])})")
    total = result["total"]
    measured = [rate["measured"] for row in stages.values() for rate in row["rates"].values()]
    cpu_source = ("measured rates" if measured and all(measured) else "partly measured rates" if any(measured)
                  else "assumed rates")
    on_others = "".join(f", {total['gpu_hours_on'][g]:.0f} on {g}" for g in others)
    lines += ["", f"Total: {total['training_jobs']} training jobs, {total['gpu_hours']:.0f} GPU-hours on {gpu}"
              f"{on_others}; {total['cpu_hours']:.0f} CPU-hours of preprocessing ({cpu_source}); "
              f"{total['checkpoint_bytes'] / gb:.0f} GB of checkpoints, {total['download_bytes'] / gb:.1f} GB of downloads."]
    return "\n".join(lines)


def add_arguments_plan(parser) -> None:
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, as for snakemake (e.g. scale=paper)")
    parser.add_argument("--configfile", default="config.yaml")
    parser.add_argument("--snakefile", default="Snakefile")
    parser.add_argument("--schema", default="workflow/schemas/config.schema.yaml")
    parser.add_argument("--manifest", default="workflow/downloads.yaml")
    parser.add_argument("--bench", default="results/bench/throughput.json",
                        help='measured throughput JSON {"gpu": ..., "tokens_per_s": {size: n}}; used when present')
    parser.add_argument("--out", help="also write the plan as JSON")


def run_plan(args) -> None:
    config, owned = load(args.configfile, args.config)
    validate(config, args.schema)
    summary = dry_run_summary(args.snakefile, args.config)
    pending, downloads = parse_summary(summary)
    rates, source, speedup = throughput(config, Path(args.bench) if args.bench else None)
    result = plan(config, pending, downloads, rates, load_manifest(args.manifest), speedup, preprocessing_jobs(summary),
                  owned, load_rates(config))
    gpu = "the measured GPU" if source.startswith("measured") else config["plan"].get("gpu", "the table's GPU")
    print(render(result, source, gpu))
    scale = config["scales"][config["scale"]]
    fewer = {}
    if scale.get("central_seeds", 1) > scale.get("max_seeds", scale.get("central_seeds", 1)):
        # the same plan with the central claims' systems on max_seeds too: what their seeds cost
        overrides = [*args.config, f"scales={{{config['scale']}: {{central_seeds: {scale['max_seeds']}}}}}"]
        pending, downloads = parse_summary(dry_run_summary(args.snakefile, overrides))
        fewer = plan(config, pending, downloads, rates, load_manifest(args.manifest), speedup, [], owned)["total"]
        on = "".join(f", {hours:.0f} on {name}" for name, hours in fewer["gpu_hours_on"].items())
        print(f"With central_seeds: {scale['max_seeds']} (the central claims' systems on one seed too): "
              f"{fewer['training_jobs']} training jobs, {fewer['gpu_hours']:.0f} GPU-hours on {gpu}{on}.")
    if args.out:
        write_json(args.out, {**result, "throughput": rates, "throughput_source": source,
                              "total_with_max_seeds_for_central": fewer or None})
