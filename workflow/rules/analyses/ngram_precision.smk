# ngram_precision: n-gram precision gaps of each system against its baseline, from the BLEU files
# (paper D Fig. 5) -- nmtrepro.analyses.ngrams.
ANALYSIS_OUTPUTS["ngram_precision"] = FIGURE + TABLE


rule plot_ngrams:
    input:
        unpack(system_inputs(lambda a, s: [bleu_file(s["experiment"]), bleu_file(baseline_of(s))])),
    output:
        **report_outputs("n-gram precision", "../../report/ngrams.rst", ANALYSIS_OUTPUTS["ngram_precision"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("ngram_precision"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: "=".join(input[f"sys{i}"])),
        numbers=paper_numbers_arg,
        metric=lambda w: ANALYSES[w.analysis]["metric"],
        title=lambda w: f"{ANALYSES[w.analysis]['title']} (scale {config['scale']})",
        note=note_arg,
    shell:
        "nmtrepro plot-ngrams {params.systems} {params.numbers} --metric {params.metric} "
        "--title {params.title:q} {params.note} --out-png {output.png} --out-svg {output.svg} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
