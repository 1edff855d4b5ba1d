rule parse:
    input:
        "results/prepare/{dataset}/{part}.src.bpe",
    output:
        spans="results/parse/{dataset}/{part}.spans",
        stats="results/parse/{dataset}/{part}.stats.json",
    log:
        "results/logs/parse/{dataset}/{part}.log",
    params:
        opts=config["parse"],
    wildcard_constraints:
        part="(test/)?[A-Za-z0-9_.-]+",
    message:
        "Parsing the source of {wildcards.dataset} {wildcards.part} into phrases (paper A, Algorithm 1)"
    shell:
        "nmtrepro parse --src-bpe {input} --out {output.spans} --stats {output.stats} "
        "--backend {params.opts[backend]} --stanza-dir {params.opts[stanza_dir]} "
        "--batch-size {params.opts[batch_size]} 2> {log}"
