# ---- probing (SentEval protocol; paper B Table 5, paper D Table VII) --------------------------------
PROBING = config.get("probing")
PROBING_TASKS = [
    "sentence_length", "word_content", "tree_depth", "top_constituents", "bigram_shift",
    "past_present", "subj_number", "obj_number", "odd_man_out", "coordination_inversion",
]
if PROBING:
    for _name in PROBING["experiments"]:
        if _name not in EXPERIMENTS:
            raise WorkflowError(f"config: probing.experiments: unknown experiment {_name!r}")
        if EXPERIMENTS[_name].src_lang != "en":
            raise WorkflowError(f"config: probing.experiments: {_name!r} translates from "
                                f"{EXPERIMENTS[_name].src_lang!r}; the probing tasks are English")


def probing_task_files(wildcards=None):
    folder = PROBING["senteval_dir"] or "results/probing/tasks"
    return [f"{folder}/{task}.txt" for task in PROBING_TASKS]


def probing_classifier_args(wildcards):
    opts = PROBING.get("classifier", {}).get(config["scale"], {})
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
        [f"results/probing/tasks/{task}.txt" for task in PROBING_TASKS],
    log:
        "results/logs/probing/tasks.log",
    params:
        out_dir=lambda w, output: subpath(output[0], parent=True),
    shell:
        "nmtrepro probing-data --treebank {input} --out-dir {params.out_dir} 2> {log}"


rule probe:
    input:
        model="results/train/{experiment}/averaged.pt",
        prepared=prepared,
        tasks=probing_task_files,
    output:
        "results/probing/{experiment}.json",
    log:
        "results/logs/probing/{experiment}.log",
    params:
        prepared=lambda w: f"results/prepare/{exp(w).dataset}",
        lang=lambda w: exp(w).src_lang,
        classifier=probing_classifier_args,
    threads: 2
    shell:
        "OMP_NUM_THREADS={threads} nmtrepro probe --model {input.model} --prepared {params.prepared} "
        "--lang {params.lang} --tasks {input.tasks} {params.classifier} --output {output} 2> {log}"


rule probing_table:
    input:
        results=lambda w: expand("results/probing/{experiment}.json", experiment=PROBING["experiments"]),
        papers=lambda w: PROBING["paper_tables"],
    output:
        md="results/report/probing.md",
        html=report("results/report/probing.html", caption="../report/probing.rst", category="Analyses"),
    log:
        "results/logs/report/probing.log",
    params:
        results=lambda w, input: shlex.join(f"{e}={p}" for e, p in zip(PROBING["experiments"], input.results)),
        papers=lambda w, input: shlex.join(input.papers),
    shell:
        "nmtrepro probing-table --result {params.results} --paper {params.papers} "
        "--output-md {output.md} --output-html {output.html} 2> {log}"


def probing_outputs():
    return ["results/report/probing.md", "results/report/probing.html"] if PROBING else []
# ---- end probing -------------------------------------------------------------------------------------
