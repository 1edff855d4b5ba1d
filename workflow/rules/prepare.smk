# How the CPU stages run at this scale (scales.<scale>.preprocess): prepare's cores, memory and time,
# and the parse and pos stages' shards (annotations/parse.smk) and resources per shard.
PREPROCESS = SCALE["preprocess"]


rule prepare:
    input:
        results("data/{dataset}/manifest.json"),
    output:
        [results(f"prepare/{{dataset}}/{name}") for name in PREPARED],
    log:
        results("logs/prepare/{dataset}.log"),
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    threads: PREPROCESS["prepare"]["cpus"]
    resources:
        mem_mb=PREPROCESS["prepare"]["mem_mb"],
        runtime=job_runtime("prepare"),
    params:
        data_dir=subpath(input[0], parent=True),
        out_dir=subpath(output[0], parent=True),
        src=lambda w: config["datasets"][w.dataset]["src"],
        tgt=lambda w: config["datasets"][w.dataset]["tgt"],
        opts=prepare_options,
        lowercase=lambda w: "--lowercase" if prepare_options(w)["lowercase"] else "",
        bpe_sample=lambda w: (
            f"--bpe-sample-lines {prepare_options(w)['bpe_sample_lines']}"
            if "bpe_sample_lines" in prepare_options(w)
            else ""
        ),
    message:
        "Tokenizing, learning joint BPE (or keeping words) and binarizing {wildcards.dataset} "
        "({resources.mem_mb} MB, {resources.runtime} min)"
    shell:
        "nmtrepro prepare --data-dir {params.data_dir} --out-dir {params.out_dir} "
        "--src-lang {params.src} --tgt-lang {params.tgt} --bpe-merges {params.opts[bpe_merges]} "
        "--max-len {params.opts[max_len]} --max-ratio {params.opts[max_ratio]} --min-count {params.opts[min_count]} "
        "{params.lowercase} {params.bpe_sample} --workers {threads} 2> {log}"


rule prepare_test:
    input:
        codes=results("prepare/{dataset}/bpe.codes"),
        stats=results("prepare/{dataset}/stats.json"),
        manifest=results("data/{dataset}/manifest.json"),
    output:
        src_bpe=results("prepare/{dataset}/test/{split}.src.bpe"),
        src=results("prepare/{dataset}/test/{split}.src"),
        ref=results("prepare/{dataset}/test/{split}.ref"),
        ref_tok=results("prepare/{dataset}/test/{split}.ref.tok"),
    log:
        results("logs/prepare/{dataset}.{split}.log"),
    conda:
        CONDA_ENV
    params:
        prepared=subpath(input.codes, parent=True),
        data_dir=subpath(input.manifest, parent=True),
        out_prefix=lambda w: results(f"prepare/{w.dataset}/test/{w.split}"),
        src=lambda w: config["datasets"][w.dataset]["src"],
        tgt=lambda w: config["datasets"][w.dataset]["tgt"],
    shell:
        "nmtrepro prepare-test --prepared {params.prepared} --data-dir {params.data_dir} "
        "--split {wildcards.split} --src-lang {params.src} --tgt-lang {params.tgt} "
        "--out-prefix {params.out_prefix} 2> {log}"


# A test split's further references (config `refs`: NIST's ref1..ref3), one job each, prepared as the
# first (common.smk `reference_files` lists them all).
rule prepare_ref:
    input:
        stats=results("prepare/{dataset}/stats.json"),
        manifest=results("data/{dataset}/manifest.json"),
    output:
        ref=results("prepare/{dataset}/test/{split}.ref{k}"),
        ref_tok=results("prepare/{dataset}/test/{split}.ref{k}.tok"),
    log:
        results("logs/prepare/{dataset}.{split}.ref{k}.log"),
    wildcard_constraints:
        k="[1-9][0-9]*",
    conda:
        CONDA_ENV
    params:
        prepared=subpath(input.stats, parent=True),
        data_dir=subpath(input.manifest, parent=True),
        out_prefix=lambda w: results(f"prepare/{w.dataset}/test/{w.split}"),
        tgt=lambda w: config["datasets"][w.dataset]["tgt"],
    shell:
        "nmtrepro prepare-ref --prepared {params.prepared} --data-dir {params.data_dir} --split {wildcards.split} "
        "--ref {wildcards.k} --tgt-lang {params.tgt} "
        "--out-prefix {params.out_prefix} 2> {log}"
