# agreement: LingEval97-protocol contrastive scoring, subject-verb agreement accuracy by distance
# (paper A Fig. 4) -- nmtrepro.analyses.contrastive (scores) and nmtrepro.analyses.agreement (figure, table).
# Config `scales.<scale>.contrastive` names the pairs; at a scale without it the analysis is skipped.
from nmtrepro.analyses.lingeval import pair_args, pair_files

CONTRASTIVE = SCALE.get("contrastive")
ANALYSIS_OUTPUTS["agreement"] = FIGURE + TABLE if CONTRASTIVE else []


rule contrastive:
    input:
        prepared,
        lambda w: pair_files(CONTRASTIVE, results),
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
        args=lambda w: shlex.join(pair_args(CONTRASTIVE, results)),
        parser=parser_args,
    shell:
        "nmtrepro contrastive --model {input.model} --prepared {params.data_dir} {params.args} {params.parser} "
        "--threads {threads} --out {output} 2> {log}"


rule plot_agreement:
    input:
        unpack(system_inputs(lambda a, s: results(f"analyse/{s['experiment']}/contrastive.json"))),
    output:
        **report_outputs("Subject-verb agreement", "../../report/agreement.rst", FIGURE + TABLE),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("agreement") if CONTRASTIVE else "^$",
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        title=lambda w: f"{ANALYSES[w.analysis]['title']} (scale {config['scale']})",
        beyond=lambda w: f"--beyond {ANALYSES[w.analysis]['beyond']}" if "beyond" in ANALYSES[w.analysis] else "",
        note=note_arg,
    shell:
        "nmtrepro plot-agreement {params.systems} --title {params.title:q} {params.beyond} {params.note} "
        "--out-png {output.png} --out-svg {output.svg} --out-md {output.md} --out-html {output.html} "
        "--out-tex {output.tex} 2> {log}"
