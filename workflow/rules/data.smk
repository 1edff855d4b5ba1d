rule fetch_dataset:
    output:
        "results/data/{dataset}/manifest.json",
    log:
        "results/logs/data/{dataset}.log",
    params:
        spec=lambda w: json.dumps(config["datasets"][w.dataset]),
        out_dir=subpath(output[0], parent=True),
        max_lines=f"--max-lines {SCALE['prepare']['max_lines']}" if "max_lines" in SCALE["prepare"] else "",
    message:
        "Fetching dataset {wildcards.dataset}"
    shell:
        "nmtrepro fetch --name {wildcards.dataset} --spec {params.spec:q} --out-dir {params.out_dir} "
        "{params.max_lines} 2> {log}"
