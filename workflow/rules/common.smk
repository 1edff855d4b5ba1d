# Config validation, the resolved study, and the input functions the rules share.
import json
import shlex

from nmtrepro.config import experiments, model_options, validate
from nmtrepro.core.files import InputError


try:
    validate(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
    EXPERIMENTS = experiments(config)
except InputError as err:
    raise WorkflowError(str(err)) from None
SCALE = config["scales"][config["scale"]]
PREPARED = ["bpe.codes", "dict.src.txt", "dict.tgt.txt", "stats.json"] + [
    f"{split}.{side}.bin" for split in ("train", "valid") for side in ("src", "tgt")
] + [f"{split}.src.bpe" for split in ("train", "valid")]


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    experiment="|".join(EXPERIMENTS) or "^$",
    table="|".join(config["tables"]) or "^$",
    split="[A-Za-z0-9_.-]+",
    resource="[A-Za-z0-9_]+",


def exp(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def prepared(wildcards):
    return expand("results/prepare/{dataset}/{file}", dataset=exp(wildcards).dataset, file=PREPARED)


def spans_files(wildcards, parts):
    """The parse stage's phrase spans of `parts` for a parser-phrase experiment, else nothing."""
    e = exp(wildcards)
    return [f"results/parse/{e.dataset}/{part}.spans" for part in parts] if e.needs_spans else []


def parser_args(wildcards):
    """For a parser-phrase experiment's sources that the parse stage never saw (probing, contrastive):
    the parser, from config `parse`, that the command runs on them itself."""
    if not exp(wildcards).needs_spans:
        return ""
    return shlex.join(["--parse-backend", config["parse"]["backend"], "--stanza-dir", config["parse"]["stanza_dir"]])


def test_files(wildcards, kind):
    return f"results/prepare/{exp(wildcards).dataset}/test/{wildcards.split}.{kind}"


def bleu_file(experiment):
    return f"results/evaluate/{experiment}/{EXPERIMENTS[experiment].test}.bleu.json"


def all_outputs():
    tables = expand("results/report/{table}.{ext}", table=config["tables"], ext=["md", "html", "tex"])
    analyses = [f"results/report/{name}.{ext}" for name, spec in config.get("analyses", {}).items()
                if spec["kind"] != "agreement"  # contrastive_outputs(): only at a scale with contrastive data
                for ext in (["png", "svg"] if spec["kind"] in ("length_buckets", "ngram_precision") else [])
                + ["md", "html", "tex"]]
    return tables + analyses + ["results/report/training_curves.png"] + probing_outputs() + contrastive_outputs()


def download_options():
    """`nmtrepro download/fetch` options from config: the manifest, the shared cache, offline, trust."""
    flags = ["--offline"] * config["offline"] + ["--allow-unverified"] * config["allow_unverified"]
    return shlex.join(["--manifest", f"{workflow.basedir}/workflow/downloads.yaml",
                       "--cache", config["download_cache"], *flags])


def download_records(wildcards):
    """A download dataset's fetched resources, one `download_resource` job each."""
    names = config["datasets"][wildcards.dataset].get("downloads", [])
    return expand("results/downloads/{resource}.json", resource=names)
