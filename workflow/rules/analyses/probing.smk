# probing: SentEval-protocol probing of frozen encoders (paper B Table 5, paper D Table VII) --
# nmtrepro.analyses.probing. Config `probing` says where the tasks come from and caps the classifier.
ANALYSIS_OUTPUTS["probing"] = ["md", "html"]
PROBING = config["probing"]
PROBING_TASKS = [
    "sentence_length", "word_content", "tree_depth", "top_constituents", "bigram_shift",
    "past_present", "subj_number", "obj_number", "odd_man_out", "coordination_inversion",
]


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
        stanza=parser_inputs,
    output:
        "results/probing/{experiment}.json",
    log:
        "results/logs/probing/{experiment}.log",
    params:
        prepared=lambda w: f"results/prepare/{exp(w).dataset}",
        lang=lambda w: exp(w).src_lang,
        classifier=probing_classifier_args,
        parser=parser_args,
    threads: 2
    shell:
        "OMP_NUM_THREADS={threads} nmtrepro probe --model {input.model} --prepared {params.prepared} "
        "--lang {params.lang} --tasks {input.tasks} {params.classifier} {params.parser} --out {output} 2> {log}"


rule probing_table:
    input:
        unpack(system_inputs(lambda a, s: f"results/probing/{s['experiment']}.json")),
    output:
        **report_outputs("Probing", "../../report/probing.rst", ANALYSIS_OUTPUTS["probing"]),
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis=analyses_of("probing"),
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: ANALYSES[w.analysis]["title"],
    shell:
        "nmtrepro probing-table {params.systems} {params.numbers} --title {params.title:q} "
        "--out-md {output.md} --out-html {output.html} 2> {log}"
