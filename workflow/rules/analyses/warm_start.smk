# warm_start: paper B's warm start examined, a row a seed -- the variant's BLEU with its recurrence
# memory shuffled, valid NLL and BLEU where its continuation starts, the valid-NLL gap to its control by
# validation (nmtrepro.analyses.warm_start). A system's baseline is its control; its `init_from` is the
# un-continued Base.
ANALYSIS_OUTPUTS["warm_start"] = TABLE


rule warm_start:
    input:
        variant=results("train/{experiment}/averaged.pt"),
        init=lambda w: results(f"train/{exp(w).init}/averaged.pt"),
        variant_curve=results("train/{experiment}/curve.tsv"),
        control_curve=results("train/{baseline}/curve.tsv"),
        variant_bleu=lambda w: bleu_file(w.experiment),
        control_bleu=lambda w: bleu_file(w.baseline),
        base_bleu=lambda w: bleu_file(exp(w).init),
        data=prepared,
        src=lambda w: test_input(w.experiment, "src.bpe"),
        ref_tok=lambda w: test_refs(w.experiment, "ref.tok"),
    output:
        results("analyse/{analysis}/{experiment}.vs.{baseline}.warm_start.json"),
    log:
        results("logs/analyse/{analysis}.{experiment}.vs.{baseline}.log"),
    wildcard_constraints:
        analysis=analyses_of("warm_start"),
        baseline="|".join(EXPERIMENTS) or "^$",
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        seed=lambda w: exp(w).train["seed"],
        search=search_args,
        refs=lambda w, input: shlex.join(a for path in input.ref_tok for a in ("--ref-tok", path)),
    shell:
        "nmtrepro warm-start --variant {input.variant} --init {input.init} --seed {params.seed} "
        "--variant-curve {input.variant_curve} --control-curve {input.control_curve} --variant-bleu {input.variant_bleu} "
        "--control-bleu {input.control_bleu} --base-bleu {input.base_bleu} --prepared {params.data_dir} "
        "--src-bpe {input.src} {params.refs} {params.search} --threads {threads} --out {output} 2> {log}"


rule warm_start_table:
    input:
        unpack(
            system_inputs(
                lambda a, s: [
                    results(f"analyse/{a}/{ours}.vs.{control}.warm_start.json")
                    for ours, control in seed_pairs(EXPERIMENTS, s["experiment"], baseline_of(s))
                ]
            )
        ),
    output:
        **report_outputs("Warm start", "../../report/warm_start.rst", ANALYSIS_OUTPUTS["warm_start"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("warm_start"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: ",".join(input[f"sys{i}"])),
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro warm-start-table {params.systems} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
