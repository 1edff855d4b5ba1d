# ---- contrastive scoring (LingEval97 protocol) -- nmtrepro.contrastive, nmtrepro.agreement ---------------
# Config `scales.<scale>.contrastive`: the sets every En->De experiment force-scores. Only En->De models
# can be scored (the pairs are English sources with German targets).
CONTRASTIVE = SCALE.get("contrastive")
CONTRASTIVE_EXPERIMENTS = [name for name, e in EXPERIMENTS.items()
                           if CONTRASTIVE and (e.src_lang, e.tgt_lang) == ("en", "de")]


def contrastive_outputs():
    return expand("results/report/subject_verb_agreement.{ext}", ext=["png", "svg"]) if CONTRASTIVE_EXPERIMENTS else []


def contrastive_test_files(wildcards):
    if "lingeval97" in CONTRASTIVE:
        return [CONTRASTIVE["lingeval97"]]
    return expand("{dir}/{set}/{file}", dir=CONTRASTIVE["distil_dir"], set=CONTRASTIVE["sets"],
                  file=["src.en.gz", "tgt.correct.de.gz", "tgt.incorrect.de.gz"])


def contrastive_args(wildcards):
    c = CONTRASTIVE
    if "lingeval97" in c:
        args = ["--lingeval97", c["lingeval97"]]
    else:
        args = [a for s in c["sets"] for a in ("--distil-set", f"{c['distil_dir']}/{s}")] + ["--parser", c["parser"]]
    if "max_per_set" in c:
        args += ["--max-per-set", str(c["max_per_set"])]
    return shlex.join(args + ["--max-tokens", str(c["max_tokens"])])


rule contrastive_scores:
    input:
        prepared,
        contrastive_test_files,
        model="results/train/{experiment}/averaged.pt",
    output:
        "results/analyse/{experiment}/contrastive.json",
    log:
        "results/logs/analyse/{experiment}.contrastive.log",
    params:
        data_dir=lambda w: f"results/prepare/{exp(w).dataset}",
        args=contrastive_args,
    threads: SCALE["train"].get("threads") or 1
    message:
        "Contrastive scoring (LingEval97 protocol): {wildcards.experiment}"
    shell:
        "nmtrepro contrastive --model {input.model} --data {params.data_dir} {params.args} "
        "--threads {threads} --out {output} 2> {log}"


rule subject_verb_agreement_figure:
    input:
        expand("results/analyse/{experiment}/contrastive.json", experiment=CONTRASTIVE_EXPERIMENTS),
    output:
        png=report("results/report/subject_verb_agreement.png", caption="../report/agreement.rst",
                   category="Analyses"),
        svg="results/report/subject_verb_agreement.svg",
    log:
        "results/logs/report/subject_verb_agreement.log",
    params:
        results=lambda w, input: shlex.join(
            a for e, p in zip(CONTRASTIVE_EXPERIMENTS, input) for a in ("--result", f"{e}={p}")),
    shell:
        "nmtrepro plot-agreement {params.results} --out-png {output.png} --out-svg {output.svg} 2> {log}"
# ---- end of contrastive scoring ---------------------------------------------------------------------------
