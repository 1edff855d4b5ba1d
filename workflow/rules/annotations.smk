# Source annotations (nmtrepro.data.annotations): one rule file per annotation's stage under annotations/,
# making results/<scale>/<stage>/<dataset>/<part>.<name> and its stats in line-range shards, gathered;
# the training splits' files binarized once (rule binarize_annotation), memory-mapped by every training rank.
for _rules in ANNOTATION_RULES:

    include: _rules


rule binarize_annotation:
    input:
        text=results("{stage}/{dataset}/{part}.{name}"),
        source=results("prepare/{dataset}/{part}.src.bin"),
    output:
        results("{stage}/{dataset}/{part}.{name}.bin"),
    log:
        results("logs/{stage}/{dataset}/{part}.{name}.bin.log"),
    wildcard_constraints:
        stage=ANNOTATION_STAGE,
        name=ANNOTATION_NAME,
        part="train|valid",
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    message:
        "Binarizing the {wildcards.name} of {wildcards.dataset} {wildcards.part} for training"
    shell:
        "nmtrepro binarize-annotation --name {wildcards.name} --text {input.text} --source {input.source} "
        "--out {output} 2> {log}"
