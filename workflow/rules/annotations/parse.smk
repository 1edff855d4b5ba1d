# Parser phrases for paper A (nmtrepro.data.parse): Algorithm 1 over the scale's parser's trees, as
# BPE-position spans of each dataset part, in line-range shards gathered in line order.


rule parse:
    input:
        bpe=results("prepare/{dataset}/{part}.src.bpe"),
        stanza=stanza_record,
    output:
        spans=temp(results("parse/{dataset}/shards/{part}.{shard}-of-{shards}.spans")),
        stats=temp(results("parse/{dataset}/shards/{part}.{shard}-of-{shards}.stats.json")),
    log:
        results("logs/parse/{dataset}/{part}.{shard}-of-{shards}.log"),
    wildcard_constraints:
        part=ANNOTATED_PART,
        shard=r"\d+",
        shards=r"\d+",
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    threads: PREPROCESS["parse"]["cpus"]
    resources:
        mem_mb=PREPROCESS["parse"]["mem_mb"],
        runtime=job_runtime("parse"),
    params:
        opts=config["parse"],
        backend=PARSE_BACKEND,
        stanza_dir=STANZA_DIR,
    message:
        "Parsing shard {wildcards.shard} of {wildcards.shards} of the source of {wildcards.dataset} "
        "{wildcards.part} into phrases (paper A, Algorithm 1; {resources.mem_mb} MB, "
        "{resources.runtime} min)"
    shell:
        "nmtrepro parse --src-bpe {input.bpe} --shard {wildcards.shard} --shards {wildcards.shards} "
        "--out {output.spans} --stats {output.stats} --backend {params.backend} --stanza-dir {params.stanza_dir:q} "
        "--batch-size {params.opts[batch_size]} 2> {log}"


rule gather_parse:
    input:
        spans=shard_files("parse", "spans"),
        stats=shard_files("parse", "stats.json"),
    output:
        spans=results("parse/{dataset}/{part}.spans"),
        stats=results("parse/{dataset}/{part}.stats.json"),
    log:
        results("logs/parse/{dataset}/{part}.log"),
    wildcard_constraints:
        part=ANNOTATED_PART,
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    shell:
        "nmtrepro gather-parse --parts {input.spans} --part-stats {input.stats} "
        "--out {output.spans} --stats {output.stats} 2> {log}"
