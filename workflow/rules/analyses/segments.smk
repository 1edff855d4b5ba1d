# segments: average segment length and segmented example outputs of segment models (paper C Table 2
# and Sec. 3's 1.3-1.4) -- nmtrepro.analyses.segments.
ANALYSIS_OUTPUTS["segments"] = TABLE
# A claim on segment length (paper C: NPMT decodes phrases) sets a segment model's decode stats against a
# word-level decoder's tokenized output, each of its words a segment.
QUANTITY_FILES["segment_length"] = (
    lambda a, e: evaluated(e, "decode.json"),
    lambda a, e: evaluated(e, "hyp.tok"),
)


rule segments:
    input:
        unpack(system_inputs(lambda a, s: evaluated(s["experiment"], "decode.json"))),
        src=lambda w: one_test_input(w, "src.bpe"),
        ref_tok=lambda w: one_test_input(w, "ref.tok"),
    output:
        **report_outputs("Segments", "../../report/segments.rst", ANALYSIS_OUTPUTS["segments"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("segments"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        n_examples=lambda w: ANALYSES[w.analysis]["count"],
        max_len=lambda w: ANALYSES[w.analysis]["max_len"],
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro segments --src-bpe {input.src} --ref-tok {input.ref_tok} {params.systems} {params.numbers} "
        "--count {params.n_examples} --max-len {params.max_len} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
