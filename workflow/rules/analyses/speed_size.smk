# speed_size: parameters, training and decoding speed of each system relative to its baseline
# (paper A Table 2's Para./Time, paper D Table V) -- nmtrepro.analyses.speed.
from nmtrepro.analyses.speed import paper_size_args

ANALYSIS_OUTPUTS["speed_size"] = TABLE


rule speed:
    input:
        model=results("train/{experiment}/averaged.pt"),
        curve=results("train/{experiment}/curve.tsv"),
        stats=lambda w: evaluated(w.experiment, "decode.json"),
        src=lambda w: test_input(w.experiment, "src.bpe"),
    output:
        results("analyse/speed/{experiment}.json"),
    log:
        results("logs/analyse/speed.{experiment}.log"),
    conda:
        CONDA_ENV
    shell:
        "nmtrepro speed --model {input.model} --curve {input.curve} --decode-stats {input.stats} "
        "--src-bpe {input.src} --out {output} 2> {log}"


rule speed_table:
    input:
        unpack(
            system_inputs(
                lambda a, s: [
                    results(f"analyse/speed/{s['experiment']}.json"),
                    results(f"analyse/speed/{baseline_of(s)}.json"),
                ]
            )
        ),
    output:
        **report_outputs("Speed and size", "../../report/speed.rst", ANALYSIS_OUTPUTS["speed_size"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("speed_size"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: "=".join(input[f"sys{i}"])),
        numbers=paper_numbers_arg,
        paper_size=lambda w: shlex.join(
            paper_size_args(
                ANALYSES[w.analysis], lambda e, scale: options_at(scale, e, f"analyses.{w.analysis}.paper_size")
            )
        ),
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro speed-table {params.systems} {params.numbers} {params.paper_size} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
