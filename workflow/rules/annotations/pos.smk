# POS tags of the source side for paper D's syntax group (nmtrepro.data.pos): English with the scale's
# `parse_backend` tagger (stanza at paper scale, spaCy at ci and tiny), Chinese with jieba's posseg.
# Sharded and gathered as the parse stage is (parse.smk beside this file).


rule pos:
    input:
        bpe=results("prepare/{dataset}/{part}.src.bpe"),
        stanza=lambda w: stanza_record(w) if config["datasets"][w.dataset]["src"] == "en" else [],
    output:
        pos=temp(results("pos/{dataset}/shards/{part}.{shard}-of-{shards}.pos")),
        stats=temp(results("pos/{dataset}/shards/{part}.{shard}-of-{shards}.stats.json")),
    log:
        results("logs/pos/{dataset}/{part}.{shard}-of-{shards}.log"),
    wildcard_constraints:
        part=ANNOTATED_PART,
        shard=r"\d+",
        shards=r"\d+",
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    threads: PREPROCESS["pos"]["cpus"]
    resources:
        mem_mb=PREPROCESS["pos"]["mem_mb"],
        runtime=job_runtime("pos"),
    params:
        opts=config["parse"],
        lang=lambda w: config["datasets"][w.dataset]["src"],
        backend=PARSE_BACKEND,
        stanza_dir=STANZA_DIR,
    message:
        "Tagging shard {wildcards.shard} of {wildcards.shards} of the source of {wildcards.dataset} "
        "{wildcards.part} with POS tags, one per BPE piece (paper D; {resources.mem_mb} MB, "
        "{resources.runtime} min)"
    shell:
        "nmtrepro pos --src-bpe {input.bpe} --lang {params.lang} --shard {wildcards.shard} --shards {wildcards.shards} "
        "--out {output.pos} --stats {output.stats} --backend {params.backend} --stanza-dir {params.stanza_dir:q} "
        "--batch-size {params.opts[batch_size]} 2> {log}"


rule gather_pos:
    input:
        pos=shard_files("pos", "pos"),
        stats=shard_files("pos", "stats.json"),
    output:
        pos=results("pos/{dataset}/{part}.pos"),
        stats=results("pos/{dataset}/{part}.stats.json"),
    log:
        results("logs/pos/{dataset}/{part}.log"),
    wildcard_constraints:
        part=ANNOTATED_PART,
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    shell:
        "nmtrepro gather-pos --parts {input.pos} --part-stats {input.stats} "
        "--out {output.pos} --stats {output.stats} 2> {log}"
