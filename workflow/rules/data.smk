# One manifest entry into the shared cache: resumed after a cut, checked against its checksum.
rule download:
    output:
        results("downloads/{resource}.json"),
    log:
        results("logs/downloads/{resource}.log"),
    retries: 3
    conda:
        CONDA_ENV
    params:
        options=download_options(),
    shell:
        "nmtrepro download --name {wildcards.resource} --out {output} {params.options} 2> {log}"


rule fetch:
    input:
        download_records,
        data_files,
    output:
        results("data/{dataset}/manifest.json"),
    log:
        results("logs/data/{dataset}.log"),
    priority: DATA_PRIORITY
    conda:
        CONDA_ENV
    params:
        spec=lambda w: json.dumps(config["datasets"][w.dataset]),
        out_dir=subpath(output[0], parent=True),
        max_lines=f"--max-lines {SCALE['prepare']['max_lines']}" if "max_lines" in SCALE["prepare"] else "",
        download=download_options(),
        local_data=json.dumps(config["local_data"]),
    shell:
        "nmtrepro fetch --name {wildcards.dataset} --spec {params.spec:q} --out-dir {params.out_dir} "
        "{params.max_lines} {params.download} --local-data {params.local_data:q} 2> {log}"


rule stanza_models:
    output:
        STANZA_RECORD,
    log:
        results("logs/downloads/stanza-models.log"),
    retries: 3
    conda:
        CONDA_ENV
    params:
        dir=STANZA_DIR,
        offline="--offline" if config["offline"] else "",
    shell:
        "nmtrepro stanza-models --dir {params.dir:q} --out {output} {params.offline} 2> {log}"
