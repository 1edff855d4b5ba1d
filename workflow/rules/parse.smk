rule stanza_models:
    output:
        STANZA_RECORD,
    log:
        "results/logs/downloads/stanza-models.log",
    params:
        dir=STANZA_DIR,
        offline="--offline" if config["offline"] else "",
    retries: 3
    message:
        "Downloading stanza's English models into the shared cache (md5-checked against stanza's resources.json)"
    shell:
        "nmtrepro stanza-models --dir {params.dir:q} --out {output} {params.offline} 2> {log}"


rule parse:
    input:
        bpe="results/prepare/{dataset}/{part}.src.bpe",
        stanza=stanza_record,
    output:
        spans="results/parse/{dataset}/{part}.spans",
        stats="results/parse/{dataset}/{part}.stats.json",
    log:
        "results/logs/parse/{dataset}/{part}.log",
    params:
        opts=config["parse"],
        backend=PARSE_BACKEND,
        stanza_dir=STANZA_DIR,
    wildcard_constraints:
        part="(test/)?[A-Za-z0-9_.-]+",
    message:
        "Parsing the source of {wildcards.dataset} {wildcards.part} into phrases (paper A, Algorithm 1)"
    shell:
        "nmtrepro parse --src-bpe {input.bpe} --out {output.spans} --stats {output.stats} "
        "--backend {params.backend} --stanza-dir {params.stanza_dir:q} "
        "--batch-size {params.opts[batch_size]} 2> {log}"
