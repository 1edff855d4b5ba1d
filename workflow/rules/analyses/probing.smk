# probing: SentEval-protocol probing of frozen encoders (paper B Table 5, paper D Table VII) --
# nmtrepro.analyses.probing. Config `probing.tasks_from` says per scale where the task files come from:
# SentEval's own (the senteval_* downloads, as the papers) or stand-ins derived from the PTB sample.
from nmtrepro.analyses.probing.tasks import TASKS

ANALYSIS_OUTPUTS["probing"] = ["md", "html"]
PROBING = config["probing"]
PROBING_FROM = next((PROBING["tasks_from"][s] for s in scale_lineage(config) if s in PROBING["tasks_from"]), "ptb")


def table_tasks(analysis):
    """The tasks a probing table shows: its `tasks`, by default all ten (paper B Table 5); a misspelt
    one fails the dry run, naming the key."""
    tasks = ANALYSES[analysis].get("tasks", list(TASKS))
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise InputError(f"analyses.{analysis}.tasks: {unknown} are not SentEval probing tasks ({', '.join(TASKS)})")
    return tasks


def probing_task_files(wildcards):
    """What an experiment's probe reads: the tasks of every probing table listing it (all ten if none
    does), as SentEval's download records or the PTB-derived task files."""
    wanted = {
        task
        for name, spec in ANALYSES.items()
        if spec["kind"] == "probing" and any(s["experiment"] == wildcards.experiment for s in spec["systems"])
        for task in table_tasks(name)
    }
    tasks = [task for task in TASKS if task in wanted] or list(TASKS)
    if PROBING_FROM == "senteval":
        return [results(f"downloads/senteval_{task}.json") for task in tasks]
    return [results(f"probing/tasks/{task}.txt") for task in tasks]


def probing_task_args(wildcards, input):
    return shlex.join(["--task-downloads" if PROBING_FROM == "senteval" else "--tasks", *input.tasks])


def probing_classifier_args(wildcards):
    classifiers = PROBING.get("classifier", {})
    opts = next((classifiers[s] for s in scale_lineage(config) if s in classifiers), {})
    args = []
    for key in ("nhid", "dropout", "weight_decay"):
        if key in opts:
            args += [f"--{key.replace('_', '-')}"] + [str(v) for v in opts[key]]
    for key in ("max_epochs", "max_examples"):
        if key in opts:
            args += [f"--{key.replace('_', '-')}", str(opts[key])]
    return shlex.join(args)


rule probing_data:
    input:
        lambda w: PROBING["treebank"],
    output:
        [results(f"probing/tasks/{task}.txt") for task in TASKS],
    log:
        results("logs/probing/tasks.log"),
    conda:
        CONDA_ENV
    params:
        out_dir=lambda w, output: subpath(output[0], parent=True),
    shell:
        "nmtrepro probing-data --treebank {input} --out-dir {params.out_dir} 2> {log}"


rule probe:
    input:
        model=results("train/{experiment}/averaged.pt"),
        prepared=prepared,
        tasks=probing_task_files,
        stanza=parser_inputs,
    output:
        results("probing/{experiment}.json"),
    log:
        results("logs/probing/{experiment}.log"),
    conda:
        CONDA_ENV
    threads: 2
    params:
        prepared=lambda w: results(f"prepare/{exp(w).dataset}"),
        lang=lambda w: exp(w).src_lang,
        tasks=probing_task_args,
        classifier=probing_classifier_args,
        parser=parser_args,
    shell:
        "OMP_NUM_THREADS={threads} nmtrepro probe --model {input.model} --prepared {params.prepared} "
        "--lang {params.lang} {params.tasks} {params.classifier} {params.parser} --out {output} 2> {log}"


rule probing_table:
    input:
        unpack(system_inputs(lambda a, s: results(f"probing/{s['experiment']}.json"))),
    output:
        **report_outputs("Probing", "../../report/probing.rst", ANALYSIS_OUTPUTS["probing"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("probing"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: ANALYSES[w.analysis]["title"],
        tasks=lambda w: shlex.join(["--tasks", *table_tasks(w.analysis), "--tasks-from", PROBING_FROM]),
    shell:
        "nmtrepro probing-table {params.systems} {params.numbers} {params.tasks} --title {params.title:q} "
        "--out-md {output.md} --out-html {output.html} 2> {log}"
