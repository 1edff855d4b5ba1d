# probing: SentEval-protocol probing of frozen encoders (paper B Table 5, paper D Table VII) --
# nmtrepro.analyses.probing. Config `probing.tasks_from` says per scale where the task files come from:
# SentEval's own (the senteval_* downloads, as the papers) or stand-ins derived from the PTB sample.
from nmtrepro.analyses.probing.tasks import TASKS, classifier_args, probe_task_files, table_tasks

ANALYSIS_OUTPUTS["probing"] = ["md", "html"]
# A claim on a task's accuracy (paper D, Table VII) reads each seed's probe of both systems.
QUANTITY_FILES |= {f"probe_{task}": (lambda a, e: results(f"probing/{e}.json"),) * 2 for task in TASKS}
PROBING = config["probing"]
PROBING_FROM = for_scale(config, PROBING["tasks_from"], "ptb")
PROBING_CLASSIFIER = for_scale(config, PROBING.get("classifier", {}), {})


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
        # a seed replicate probes its experiment's tasks (a claim on one pairs its seeds)
        tasks=lambda w: probe_task_files(ANALYSES, exp(w).replicate_of, PROBING_FROM, results),
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
        tasks=lambda w, input: shlex.join(
            ["--task-downloads" if PROBING_FROM == "senteval" else "--tasks", *input.tasks]
        ),
        classifier=lambda w: shlex.join(classifier_args(PROBING_CLASSIFIER)),
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
        tasks=lambda w: shlex.join(
            ["--tasks", *table_tasks(w.analysis, ANALYSES[w.analysis]), "--tasks-from", PROBING_FROM]
        ),
    shell:
        "nmtrepro probing-table {params.systems} {params.numbers} {params.tasks} --title {params.title:q} "
        "--out-md {output.md} --out-html {output.html} 2> {log}"
