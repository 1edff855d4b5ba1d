# examples: translations of each system and its baseline beside the source and the references, the
# hypothesis n-grams found in them in bold (with several references, marked by how many hold each),
# picked by the largest sentence-BLEU gain (paper D Fig. 6) -- nmtrepro.analyses.examples.
ANALYSIS_OUTPUTS["examples"] = TABLE


rule examples:
    input:
        unpack(system_inputs(lambda a, s: [evaluated(e, "hyp.tok") for e in (s["experiment"], baseline_of(s))])),
        src=lambda w: one_test_input(w, "src.bpe"),
        ref_tok=lambda w: test_refs(one_test_experiment(w), "ref.tok"),  # every reference (NIST: four)
    output:
        **report_outputs("Translation examples", "../../report/examples.rst", ANALYSIS_OUTPUTS["examples"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("examples"),
    conda:
        CONDA_ENV
    params:
        refs=lambda w, input: shlex.join(a for ref in input.ref_tok for a in ("--ref-tok", ref)),
        systems=system_args(lambda s, input, i: "=".join(input[f"sys{i}"])),
        n_examples=lambda w: ANALYSES[w.analysis]["count"],
        max_len=lambda w: ANALYSES[w.analysis]["max_len"],
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro examples --src-bpe {input.src} {params.refs} {params.systems} "
        "--count {params.n_examples} --max-len {params.max_len} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
