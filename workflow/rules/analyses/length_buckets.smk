# length_buckets: BLEU per source-length bucket, each system beside its baseline over the seeds both
# train, with the seed-pooled 95% CI of each bucket's difference (paper A Fig. 3, paper D Fig. 4) --
# nmtrepro.analyses.buckets.
ANALYSIS_OUTPUTS["length_buckets"] = FIGURE + TABLE


rule length_buckets:
    input:
        src=lambda w: test_input(w.experiment, "src.bpe"),
        hyp_tok=seed_pair_files("hyp.tok", 0),
        base_hyp_tok=seed_pair_files("hyp.tok", 1),
        ref_tok=lambda w: test_input(w.experiment, "ref.tok"),
    output:
        results("analyse/{analysis}/{experiment}.vs.{baseline}.buckets.json"),
    log:
        results("logs/analyse/{analysis}.{experiment}.vs.{baseline}.log"),
    wildcard_constraints:
        analysis=analyses_of("length_buckets"),
        baseline="|".join(EXPERIMENTS) or "^$",
    conda:
        CONDA_ENV
    params:
        edges=lambda w: " ".join(map(str, ANALYSES[w.analysis]["edges"])),
        # a system listed without a baseline (`baseline_of` names itself) is scored alone: no Δ
        pairs=lambda w, input: shlex.join(
            seed_pair_args(
                w,
                input,
                (
                    [("--hyp-tok", "hyp_tok")]
                    if w.experiment == w.baseline
                    else [("--hyp-tok", "hyp_tok"), ("--base-hyp-tok", "base_hyp_tok")]
                ),
            )
        ),
    shell:
        "nmtrepro length-buckets --src-bpe {input.src} {params.pairs} --ref-tok {input.ref_tok} "
        "--edges {params.edges} --out {output} 2> {log}"


rule plot_buckets:
    input:
        unpack(system_inputs(lambda a, s: results(f"analyse/{a}/{s['experiment']}.vs.{baseline_of(s)}.buckets.json"))),
    output:
        **report_outputs("Length buckets", "../../report/buckets.rst", ANALYSIS_OUTPUTS["length_buckets"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("length_buckets"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: f"{ANALYSES[w.analysis]['title']} (scale {config['scale']})",
        note=note_arg,
    shell:
        "nmtrepro plot-buckets {params.systems} {params.numbers} --title {params.title:q} {params.note} "
        "--out-png {output.png} --out-svg {output.svg} --out-md {output.md} --out-html {output.html} "
        "--out-tex {output.tex} 2> {log}"
