def table_cells(wildcards):
    return {f"cell{i}": bleu_file(c["experiment"]) for i, c in enumerate(config["tables"][wildcards.table]["cells"])}


def table_cell_args(wildcards, input):
    args = []
    for i, cell in enumerate(config["tables"][wildcards.table]["cells"]):
        e = EXPERIMENTS[cell["experiment"]]
        args += ["--cell", f"{e.name}={cell['row']}={cell['column']}={input[f'cell{i}']}"]
        args += ["--test-set", f"{e.name}={e.dataset}/{e.test}"]
    return shlex.join(args)


rule results_table:
    input:
        unpack(table_cells),
        numbers=lambda w: config["tables"][w.table]["paper_numbers"],
    output:
        md="results/report/{table}.md",
        html=report(
            "results/report/{table}.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    log:
        "results/logs/report/{table}.log",
    params:
        title=lambda w: config["tables"][w.table]["title"],
        metric=lambda w: config["tables"][w.table]["metric"],
        cells=table_cell_args,
    shell:
        "nmtrepro table --title {params.title:q} --paper-numbers {input.numbers} --metric {params.metric} "
        "--scale {config[scale]} {params.cells} --out-md {output.md} --out-html {output.html} 2> {log}"


rule training_curves:
    input:
        expand("results/train/{experiment}/curve.tsv", experiment=EXPERIMENTS),
    output:
        report("results/report/training_curves.png", caption="../report/curves.rst", category="Training"),
    log:
        "results/logs/report/training_curves.log",
    params:
        curves=lambda w, input: " ".join(f"--curve {e}={path}" for e, path in zip(EXPERIMENTS, input)),
    shell:
        "nmtrepro plot-curves {params.curves} --out {output} 2> {log}"
