# agreement: LingEval97-protocol contrastive scoring, subject-verb agreement accuracy by distance
# (paper A Fig. 4) -- nmtrepro.analyses.contrastive (scores) and nmtrepro.analyses.agreement (figure).
# Config `scales.<scale>.contrastive` names the pairs; at a scale without it the analysis is skipped.
CONTRASTIVE = SCALE.get("contrastive")
ANALYSIS_OUTPUTS["agreement"] = FIGURE if CONTRASTIVE else []


def contrastive_test_files(wildcards):
    if "download" in CONTRASTIVE:
        return [results(f"downloads/{CONTRASTIVE['download']}.json")]
    if "lingeval97" in CONTRASTIVE:
        return [CONTRASTIVE["lingeval97"]]
    return expand(
        "{dir}/{set}/{file}",
        dir=CONTRASTIVE["distil_dir"],
        set=CONTRASTIVE["sets"],
        file=["src.en.gz", "tgt.correct.de.gz", "tgt.incorrect.de.gz"],
    )


def contrastive_args(wildcards):
    c = CONTRASTIVE
    if "download" in c:
        args = ["--lingeval97-download", results(f"downloads/{c['download']}.json")]
    elif "lingeval97" in c:
        args = ["--lingeval97", c["lingeval97"]]
    else:
        args = [a for s in c["sets"] for a in ("--distil-set", f"{c['distil_dir']}/{s}")] + ["--parser", c["parser"]]
    if "max_per_set" in c:
        args += ["--max-per-set", str(c["max_per_set"])]
    return shlex.join(args + ["--max-tokens", str(c["max_tokens"])])


rule contrastive:
    input:
        prepared,
        contrastive_test_files,
        model=results("train/{experiment}/averaged.pt"),
        stanza=parser_inputs,
    output:
        results("analyse/{experiment}/contrastive.json"),
    log:
        results("logs/analyse/{experiment}.contrastive.log"),
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        args=contrastive_args,
        parser=parser_args,
    shell:
        "nmtrepro contrastive --model {input.model} --prepared {params.data_dir} {params.args} {params.parser} "
        "--threads {threads} --out {output} 2> {log}"


rule plot_agreement:
    input:
        unpack(system_inputs(lambda a, s: results(f"analyse/{s['experiment']}/contrastive.json"))),
    output:
        **report_outputs("Subject-verb agreement", "../../report/agreement.rst", FIGURE),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("agreement") if CONTRASTIVE else "^$",
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        title=lambda w: f"{ANALYSES[w.analysis]['title']} (scale {config['scale']})",
    shell:
        "nmtrepro plot-agreement {params.systems} --title {params.title:q} --out-png {output.png} "
        "--out-svg {output.svg} 2> {log}"
