# POS tags of the source side for paper D's syntax group (nmtrepro.data.pos): English with the scale's
# `parse_backend` tagger (stanza at paper scale, spaCy at ci and tiny), Chinese with jieba's posseg.


rule pos:
    input:
        bpe="results/prepare/{dataset}/{part}.src.bpe",
        stanza=lambda w: stanza_record(w) if config["datasets"][w.dataset]["src"] == "en" else [],
    output:
        pos="results/pos/{dataset}/{part}.pos",
        stats="results/pos/{dataset}/{part}.stats.json",
    log:
        "results/logs/pos/{dataset}/{part}.log",
    params:
        opts=config["parse"],
        lang=lambda w: config["datasets"][w.dataset]["src"],
        backend=PARSE_BACKEND,
        stanza_dir=STANZA_DIR,
    wildcard_constraints:
        part="(test/)?[A-Za-z0-9_.-]+",
    message:
        "Tagging the source of {wildcards.dataset} {wildcards.part} with POS tags, one per BPE piece (paper D)"
    shell:
        "nmtrepro pos --src-bpe {input.bpe} --lang {params.lang} --out {output.pos} --stats {output.stats} "
        "--backend {params.backend} --stanza-dir {params.stanza_dir:q} "
        "--batch-size {params.opts[batch_size]} 2> {log}"
