# Config: the papers merged in, validated, resolved for the scale; the input functions the rules share.
import json
import os
import shlex
from pathlib import Path

from nmtrepro.study.budgets import budget_pairs
from nmtrepro.study.config import (
    analyses_at_scale,
    analysis_kinds,
    at_scale,
    central_study,
    check_paper_cells,
    dataset_preparation as preparation_of,
    experiments,
    for_scale,
    merge_papers,
    model_options,
    no_gain_margins,
    replicates,
    rule_files,
    seed_pairs,
    tables_at_scale,
    training_of,
    validate,
    with_scale_data,
)
from nmtrepro.study.config_checks import check_analysis_kinds, check_dataset_files, check_languages, dataset_files
from nmtrepro.forks import server as forkserver
from nmtrepro.core.files import InputError, results_tree
from nmtrepro.core.gpus import count_visible
from nmtrepro.data import costs
from nmtrepro.data.annotations import check_rule_files, registry
from nmtrepro.data.datasets import check_user_data
from nmtrepro.evaluation.options import SEGMENTS, flags
from nmtrepro.evaluation.quantities import QUANTITIES
from nmtrepro.reporting.measured import MEASURED, label as measured_label
from nmtrepro.reporting.protocol import protocol_note

# One rule file per analysis kind (workflow/rules/analyses/<kind>.smk), one per source annotation's stage
# (workflow/rules/annotations/<stage>.smk); analyses.smk and annotations.smk include them all.
ANALYSIS_RULES = rule_files(workflow.basedir, "analyses")
ANNOTATION_RULES = rule_files(workflow.basedir, "annotations")

try:
    ANALYSIS_KINDS = analysis_kinds(ANALYSIS_RULES)  # kind -> what its <kind>.schema.yaml declares: languages, options
    PAPERS = merge_papers(config, workflow.basedir)  # paper name -> the tables and analyses it defines
    validate(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
    config.update(with_scale_data(config))  # the scale's download cache and licensed folders
    check_analysis_kinds(config, ANALYSIS_KINDS)
    check_rule_files([path.stem for path in ANNOTATION_RULES])
    EXPERIMENTS = experiments(config)
    check_languages(config, EXPERIMENTS, ANALYSIS_KINDS)
    check_dataset_files(config, EXPERIMENTS, ".")
    check_paper_cells(config, workflow.basedir)
    NO_GAIN_MARGINS = no_gain_margins(config, PAPERS)  # each claim of no gain's margin, by docs/statistics.md's rule
except InputError as err:
    raise WorkflowError(str(err)) from None
SCALE = config["scales"][config["scale"]]
# Every training waits on its data: fetching, preparing and annotating (parse, pos) run before any queued
# training, whose priority is its size's (at most 2) plus one where others start from it. Otherwise an
# annotation queued behind every training holds its systems' trainings back to the end of the run, where
# too few short jobs are left to keep the other cores busy (docs/results.md, the default run's timing).
DATA_PRIORITY = 4

# Every rule's software: the one environment (`--sdm conda` builds it on a cluster; envs/requirements.txt
# pins the same set for pip).
CONDA_ENV = f"{workflow.basedir}/envs/nmtrepro.yaml"
# Every file a run writes lives under results/<scale>/: a `ci` check or a `gpu` run beside the default
# `tiny` one never touches the other's models, evaluations or report; a longer budget (`budget` N) under
# results/<scale>-budget<N>/.
RESULTS = results_tree(config["scale"], config["budget"])


def results(path):
    """`path` (a pattern, wildcards kept) inside this scale's results tree."""
    return f"{RESULTS}/{path}"


if SCALE["needs_gpu"] and not config["allow_cpu"] and not count_visible():
    raise WorkflowError(
        f"scale={config['scale']} is sized for a GPU, and this machine shows none (nvidia-smi, "
        "CUDA_VISIBLE_DEVICES): its recipe would train on the CPU for days. On a CPU run scale=tiny; "
        "to run it here all the same, add allow_cpu=true after --config."
    )

# Experiments that train (and decode) as an earlier one (study/config.py `_shared_trainings`) -> that one:
# their models and outputs are links (training.smk, evaluation.smk).
SHARED = {name: e.same_as for name, e in EXPERIMENTS.items() if e.same_as and not e.stops_at}
# Shorter budgets of a training (study/budgets.py, `<name>_at<N>`): its averaging window ending at update N.
STOPPED = [name for name, e in EXPERIMENTS.items() if e.stops_at]
# ... and of those, the ones that also decode as it (paper C decodes one model greedily and by beam).
SHARED_DECODES = [name for name, source in SHARED.items() if EXPERIMENTS[name].decode == EXPERIMENTS[source].decode]
TABLES = tables_at_scale(config)  # the tables built at this scale (a table's `scales`), with their cells there
# Each configured experiment -> its seed replicates (itself first; `seeds`, study/config.py `_seeded`).
REPLICATES = replicates(EXPERIMENTS)
# What the central study builds (`claims.<name>.central`): its claims, and the tables and analyses that
# its models fill; `snakemake` alone builds it where the scale's `target` is `central` (tiny).
CENTRAL = central_study(config, EXPERIMENTS)
PREPARED = (
    ["bpe.codes", "dict.src.txt", "dict.tgt.txt", "stats.json"]
    + [f"{split}.{side}.bin" for split in ("train", "valid") for side in ("src", "tgt")]
    + [f"{split}.src.bpe" for split in ("train", "valid")]
)


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    experiment="|".join(EXPERIMENTS) or "^$",
    table="|".join(TABLES) or "^$",
    split="[A-Za-z0-9_.-]+",
    resource="[A-Za-z0-9_]+",


def exp(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def of_shared(pattern):
    """Input function: the file `pattern` names for the experiment whose training this one shares."""
    return lambda w: pattern.format(**dict(w.items(), experiment=SHARED[w.experiment]))


# Jobs one GPU runs at once (`jobs_per_gpu`; the gpu scale: 8). Snakemake counts slots: unless the
# command line gives a `gpu` limit, the workflow sets it to the visible GPUs times the slots, so
# `snakemake --cores all` keeps one card full without a profile; decoding then takes a slot too.
JOBS_PER_GPU = SCALE["jobs_per_gpu"]
if JOBS_PER_GPU > 1 and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", max(1, count_visible()) * JOBS_PER_GPU)
DECODE_GPUS = 1 if JOBS_PER_GPU > 1 else 0  # a profile's set-resources gives decode a GPU elsewhere


def on_gpus(wildcards, resources, job="decode"):
    """`nmtrepro with-gpus N --` ahead of a job that asks for N >= 1 GPUs (config or a profile's
    set-resources): run locally, it claims a slot on N devices that no other job holds beyond their
    slots (Snakemake only counts them), and where they are shared, waits for the memory a `job` of its
    kind (train, decode) needs; under SLURM the allocation has pinned them already and it only runs the
    command."""
    gpus = int(resources.get("gpu", 0))
    if not gpus:
        return ""
    sharing = (
        f"--slots {JOBS_PER_GPU} --free-mb {SCALE['gpu_free_mb'][job]} --poll-seconds 2 " if JOBS_PER_GPU > 1 else ""
    )
    return f"nmtrepro with-gpus {sharing}{gpus} -- "


def link_commands(wildcards, input, output):
    """Shell commands making each output a relative symlink to the input of the same name: a new link
    is newer than its target (a hard link would share the target's time, older than its other inputs)."""
    return " && ".join(
        f"ln -sfn {shlex.quote(os.path.relpath(input[key], os.path.dirname(output[key])))} "
        f"{shlex.quote(output[key])}"
        for key in output.keys()
    )


def dataset_preparation(dataset):
    """The scale's preparation with the dataset's own options over it (nmtrepro.study.config)."""
    return preparation_of(config, dataset)


def prepare_options(wildcards):
    return dataset_preparation(wildcards.dataset)


def prepared(wildcards):
    return expand(results("prepare/{dataset}/{file}"), dataset=exp(wildcards).dataset, file=PREPARED)


def search_args(wildcards):
    """The experiment's beam search flags (`--beam 4 --lenpen 1.0 ...`), as decode, select-checkpoint
    and warm-start take them."""
    return shlex.join(flags(exp(wildcards).decode))


def segment_args(wildcards):
    """A segment model's search flags (`--word-bonus ... --lm-order ... --lm-weight ...`: NPMT's), decode's alone."""
    return shlex.join(flags(exp(wildcards).decode, SEGMENTS))


def annotation_files(wildcards, parts, ext=""):
    """The source annotations of dataset `parts` that the experiment's model reads (the parse stage's
    .spans, the pos stage's .pos; with `ext` ".bin", those files binarized), else nothing."""
    e = exp(wildcards)
    return [
        results(f"{stage}/{e.dataset}/{part}.{name}{ext}") for name, stage in e.annotations.items() for part in parts
    ]


def annotation_args(wildcards, input):
    """`--annotation spans=FILE --annotation pos=FILE` for the `annotations` input (each file's
    extension names its annotation)."""
    return shlex.join(a for path in input.annotations for a in ("--annotation", f"{Path(path).suffix[1:]}={path}"))


def annotation_dirs(wildcards):
    """`--annotation spans=DIR ...`: the folders of the train/valid annotations the model reads."""
    e = exp(wildcards)
    return shlex.join(
        a
        for name, stage in e.annotations.items()
        for a in ("--annotation", f"{name}={results(f'{stage}/{e.dataset}')}")
    )


# The parse stage's parser and the pos stage's English tagger at this scale, and where stanza's English
# models live (rule stanza_models).
PARSE_BACKEND = SCALE["parse_backend"]
STANZA_DIR = f"{config['download_cache']}/stanza"
STANZA_RECORD = results("downloads/stanza-models.json")


def stanza_record(wildcards):
    """Rule stanza_models' record where this scale parses with stanza, so its models are fetched first."""
    return [STANZA_RECORD] if PARSE_BACKEND == "stanza" else []


def parser_args(wildcards):
    """For the sources that the parse and pos stages never saw (probing, contrastive) of an experiment
    reading annotations: the parser and tagger, the scale's `parse_backend`, the command runs itself."""
    if not exp(wildcards).annotations:
        return ""
    return shlex.join(["--parse-backend", PARSE_BACKEND, "--stanza-dir", STANZA_DIR])


def parser_inputs(wildcards):
    """The stanza models record for an experiment reading annotations, whose command may run stanza."""
    return stanza_record(wildcards) if exp(wildcards).annotations else []


def test_files(wildcards, kind):
    return results(f"prepare/{exp(wildcards).dataset}/test/{wildcards.split}.{kind}")


def reference_files(dataset, split, kind):
    """A prepared test split's references of a kind ("ref" raw, "ref.tok" Moses-tokenized): the split's
    `tgt` first (the prepare_test rule), then one per entry of its `refs` (.ref1, .ref1.tok, ...; the
    prepare_ref rule)."""
    extra = len(config["datasets"][dataset]["splits"].get(split, {}).get("refs", []))
    names = [kind] + [kind.replace("ref", f"ref{k}", 1) for k in range(1, extra + 1)]
    return [results(f"prepare/{dataset}/test/{split}.{name}") for name in names]


def test_refs(experiment, kind):
    """An experiment's test references of a kind ("ref" or "ref.tok"), in order, the first being
    test_input(experiment, kind): pass each as a repeated --ref / --ref-tok."""
    e = EXPERIMENTS[experiment]
    return reference_files(e.dataset, e.test, kind)


def evaluated(experiment, ext):
    """An experiment's evaluate-stage file of its test set (`hyp`, `hyp.tok`, `bleu.json`, ...)."""
    return results(f"evaluate/{experiment}/{EXPERIMENTS[experiment].test}.{ext}")


def test_input(experiment, kind):
    """An experiment's prepared test file (`src.bpe`, `ref`, `ref.tok`, ...)."""
    e = EXPERIMENTS[experiment]
    return results(f"prepare/{e.dataset}/test/{e.test}.{kind}")


# The paired bootstrap of an experiment against a baseline, pooled over the seeds both train (rule
# significance), in a results tree.
SIGNIFICANCE = "analyse/significance/{experiment}.vs.{baseline}.json"


def significance_file(experiment, baseline):
    return results(SIGNIFICANCE.format(experiment=experiment, baseline=baseline))


# The same test on the sentences whose source is longer than `length` tokens (rule significance_longer).
SIGNIFICANCE_LONGER = "analyse/significance/{experiment}.vs.{baseline}.longer_than_{length}.json"


# A claim on a quantity an analysis measures (evaluation/quantities.py) is tested by that analysis (rule
# quantity_test), in a results tree; a claim on a metric by its paired bootstrap.
QUANTITY_TEST = "analyse/{analysis}/{experiment}.vs.{baseline}.{metric}.json"


def claim_test(claim):
    """A claim's test JSON, relative to a results tree: its quantity's test, or its metric's paired
    bootstrap on the whole test set or on the sentences whose source is longer than its
    `source_longer_than` (paper A's "> 45 tokens")."""
    if claim["metric"] in QUANTITIES:
        return QUANTITY_TEST.format(**claim)
    if "source_longer_than" in claim:
        return SIGNIFICANCE_LONGER.format(length=claim["source_longer_than"], **claim)
    return SIGNIFICANCE.format(**claim)


# quantity -> (system's, baseline's) file of a seed replicate, `f(analysis, replicate)`, that measures it for
# a claim on it: registered by the rule file of the analysis kind that measures it (rule quantity_test).
QUANTITY_FILES = {}


def quantity_files(side):
    """Input function: the file of each seed pair's system (side 0) or baseline (side 1) that measures the
    claim's quantity, in seed order (study/config.py `seed_pairs`)."""
    return lambda w: [
        QUANTITY_FILES[w.metric][side](w.analysis, pair[side])
        for pair in seed_pairs(EXPERIMENTS, w.experiment, w.baseline)
    ]


def protocol(names):
    """The note on how these experiments (a table's rows, a claims page's) were trained (reporting/protocol.py)."""
    return protocol_note(config, EXPERIMENTS, names)


def bleu_file(experiment):
    return evaluated(experiment, "bleu.json")


def download_options():
    """`nmtrepro download/fetch` options from config: the manifest, the shared cache, offline, trust."""
    flags = ["--offline"] * config["offline"] + ["--allow-unverified"] * config["allow_unverified"]
    # Relative to the working directory: an absolute path would be a params change (and rerun the
    # whole study) whenever the checkout moves.
    manifest = os.path.relpath(Path(workflow.basedir, SCALE["downloads"]))
    return shlex.join(["--manifest", manifest, "--cache", config["download_cache"], *flags])


def data_files(wildcards):
    """The repository and local_data files a dataset reads: editing one fetches the dataset again. What
    only the user can provide (a licensed folder; offline, the downloads) fails the dry run of a target
    that needs the dataset, naming the key to set; a summary (`nmtrepro plan`) runs nothing, so it
    prices a scale whose data are not there yet."""
    if workflow.executor_plugin is not None:
        try:
            check_user_data(config, wildcards.dataset, Path(workflow.basedir, SCALE["downloads"]))
        except InputError as err:
            raise WorkflowError(str(err)) from None
    return [str(path) for path in dataset_files(config, wildcards.dataset, ".")]


def download_records(wildcards):
    """A download dataset's fetched resources, one `download` job each."""
    names = config["datasets"][wildcards.dataset].get("downloads", [])
    return expand(results("downloads/{resource}.json"), resource=names)


def options_at(scale, experiment, key):
    """An experiment's model options at another scale (a speed table's paper-size count), `key` naming
    the config entry that asks, for errors."""
    return model_options({**config, "scale": scale}, config["experiments"][experiment]["model"], key)


# Training jobs: their order, launcher and time limit (rule train).
def train_priority(wildcards):
    """Its size's `priority` (the longest trainings first), plus one where other models start from it."""
    return exp(wildcards).priority + (wildcards.experiment in STARTED_FROM)


def train_launcher(wildcards, resources):
    """The job's GPUs claimed, then torchrun with one process per GPU when there are several. On a
    stop signal torchrun forwards it and waits --shutdown-timeout seconds (default 30) before SIGKILL:
    240 lets the trainers finish a paper-scale update and save, inside the 300 s that profiles/slurm
    asks SLURM to warn before the time limit."""
    claim = on_gpus(wildcards, resources, "train")
    if int(resources.gpu) <= 1:
        return claim
    return (
        f"{claim}torchrun --standalone --nproc-per-node {resources.gpu} "
        "--signals-to-handle SIGTERM,SIGINT,SIGUSR1 --shutdown-timeout 240 --no-python "
    )


def capped_runtime(wildcards, attempt):
    """`runtime * attempt` minutes, at most the scale's `max_runtime`: a request past a partition's
    time limit would never start, and a job stopped at the limit resumes from its newest checkpoint."""
    resources = exp(wildcards).resources
    return min(resources["runtime"] * attempt, resources["max_runtime"])


# Annotation shards of the parse and pos stages (a part's pieces, gathered in line order).
ANNOTATED_PART = "(test/)?[A-Za-z0-9_.-]+"  # a dataset part they annotate: train, valid or test/<split>
# The annotations' names and stages, as wildcard constraints (rule binarize_annotation).
ANNOTATION_NAME = "|".join(registry())
ANNOTATION_STAGE = "|".join(sorted({a.stage for a in registry().values()}))


# The CPU stages' rates as `nmtrepro calibrate` measured them on this machine ({} where it has not run):
# with `auto` settings, a training source's shard count and each job's runtime follow from them
# (nmtrepro.data.costs), else from the config's assumed rates.
try:
    CPU_RATES = costs.load_rates(config)
except InputError as err:
    raise WorkflowError(str(err)) from None


def shard_count(stage, dataset, part):
    """Jobs that annotate a part (nmtrepro.data.costs `shard_count`)."""
    try:
        return costs.shard_count(config, CPU_RATES, stage, dataset, part)
    except InputError as err:
        raise WorkflowError(str(err)) from None


def job_runtime(stage):
    """Resource function: minutes a job of the stage asks for (nmtrepro.data.costs `job_runtime`), times
    the attempt where the scale says `runtime: auto`, so that a retry after the limit asks for more."""

    def runtime(wildcards, attempt):
        try:
            minutes = costs.job_runtime(
                config,
                CPU_RATES,
                stage,
                wildcards.dataset,
                wildcards.get("part", "train"),
                int(wildcards.get("shards", 1)),
            )
        except InputError as err:
            raise WorkflowError(str(err)) from None
        return minutes * (attempt if SCALE["preprocess"][stage]["runtime"] == "auto" else 1)

    return runtime


def shard_files(stage, ext):
    """Input function of a gather rule: the stage's shard files of the part, in line order."""

    def files(wildcards):
        n = shard_count(stage, wildcards.dataset, wildcards.part)
        return [
            results(f"{stage}/{wildcards.dataset}/shards/{wildcards.part}.{k}-of-{n}.{ext}") for k in range(1, n + 1)
        ]

    return files


# The seed pairs of a paired test (rule significance).
def seed_pair_files(ext, side):
    """Input function: the evaluate-stage `ext` file of each seed pair's system (side 0) or baseline
    (side 1), in seed order (study/config.py `seed_pairs`)."""
    return lambda w: [evaluated(pair[side], ext) for pair in seed_pairs(EXPERIMENTS, w.experiment, w.baseline)]


def seed_pair_args(wildcards, input, flags):
    """`--FLAG FILE` for each file of each (flag, input name) of `flags` (`seed_pair_files`: one a seed
    pair, in seed order), then `--seed N` once a pair."""
    args = [a for flag, name in flags for path in input[name] for a in (flag, path)]
    pairs = seed_pairs(EXPERIMENTS, wildcards.experiment, wildcards.baseline)
    return args + [a for system, _ in pairs for a in ("--seed", str(EXPERIMENTS[system].seed))]


def significance_args(wildcards, input):
    """--stats/--base-stats/--seed once a seed pair, and --recipe: the system's and the baseline's model
    families, whose seed noise the claims pages and tables pool (evaluation/seed_noise.py)."""
    families = [EXPERIMENTS[name].model["family"] for name in (wildcards.experiment, wildcards.baseline)]
    return shlex.join(
        seed_pair_args(wildcards, input, [("--stats", "stats"), ("--base-stats", "base_stats")])
        + ["--recipe", "/".join(families)]
    )
