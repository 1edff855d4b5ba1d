# head_similarity: cosine similarity between encoder self-attention heads, within and across
# feature groups (paper D Table IV) -- nmtrepro.analyses.heads.
from nmtrepro.analyses import groups_args

ANALYSIS_OUTPUTS["head_similarity"] = TABLE
# A claim on head similarity (paper D: +Fusing_Diverse's heads less alike than Base's) reads each seed's
# measurement of both systems.
QUANTITY_FILES["head_similarity"] = (lambda a, e: results(f"analyse/{a}/{e}.heads.json"),) * 2


rule head_similarity:
    input:
        model=results("train/{experiment}/averaged.pt"),
        src=lambda w: test_input(w.experiment, "src.bpe"),
        annotations=lambda w: annotation_files(w, [f"test/{exp(w).test}"]),
    output:
        results("analyse/{analysis}/{experiment}.heads.json"),
    log:
        results("logs/analyse/{analysis}.{experiment}.heads.log"),
    wildcard_constraints:
        analysis=analyses_of("head_similarity"),
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        groups=lambda w: shlex.join(groups_args(ANALYSES[w.analysis]["systems"], w.experiment)),
        annotations=annotation_args,
    shell:
        "nmtrepro head-similarity --model {input.model} --prepared {params.data_dir} --src-bpe {input.src} "
        "{params.annotations} {params.groups} --threads {threads} --out {output} 2> {log}"


rule head_table:
    input:
        unpack(system_inputs(lambda a, s: results(f"analyse/{a}/{s['experiment']}.heads.json"))),
    output:
        **report_outputs("Head similarity", "../../report/heads.rst", ANALYSIS_OUTPUTS["head_similarity"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("head_similarity"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro head-table {params.systems} {params.numbers} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"
