def table_cells(wildcards):
    return {f"cell{i}": bleu_file(c["experiment"]) for i, c in enumerate(TABLES[wildcards.table]["cells"])}


def cell_baseline(table, cell):
    return cell.get("baseline", TABLES[table].get("baseline"))


def table_significance(wildcards):
    cells = TABLES[wildcards.table]["cells"]
    return {f"sig{i}": significance_file(c["experiment"], cell_baseline(wildcards.table, c))
            for i, c in enumerate(cells) if cell_baseline(wildcards.table, c)}


def table_cell_args(wildcards, input):
    args = []
    for i, cell in enumerate(TABLES[wildcards.table]["cells"]):
        e = EXPERIMENTS[cell["experiment"]]
        args += ["--cell", f"{e.name}={cell['row']}={cell['column']}={input[f'cell{i}']}"]
        args += ["--test-set", f"{e.name}={e.dataset}/{e.test}"]
        if f"sig{i}" in input.keys():
            args += ["--significance", f"{e.name}={cell_baseline(wildcards.table, cell)}={input[f'sig{i}']}"]
    return shlex.join(args)


def table_stage_stats(stage):
    """Input function: the `stage`'s stats (train and test parts) behind the table's cells whose models
    read what it makes (parse: parser phrases, pos: POS tags), so that the note names the parser or the
    tagger; none for a table without such cells."""
    def files(wildcards):
        found = []
        for cell in TABLES[wildcards.table]["cells"]:
            e = EXPERIMENTS[cell["experiment"]]
            if stage in e.annotations.values():
                found += [f"results/{stage}/{e.dataset}/{part}.stats.json" for part in ("train", f"test/{e.test}")]
        return sorted(set(found))
    return files


rule table:
    input:
        unpack(table_cells),
        unpack(table_significance),
        numbers=lambda w: TABLES[w.table]["paper_numbers"],
        parser_stats=table_stage_stats("parse"),
        pos_stats=table_stage_stats("pos"),
    output:
        md="results/report/{table}.md",
        html=report(
            "results/report/{table}.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
        tex="results/report/{table}.tex",
    log:
        "results/logs/report/{table}.log",
    params:
        title=lambda w: TABLES[w.table]["title"],
        metric=lambda w: TABLES[w.table]["metric"],
        cells=table_cell_args,
        marks=lambda w: TABLES[w.table]["marks"],
        columns=lambda w: shlex.join(a for c in TABLES[w.table]["paper_columns"] for a in ("--paper-column", c)),
        parser=lambda w, input: shlex.join(a for path in input.parser_stats for a in ("--parser-stats", path)),
        tagger=lambda w, input: shlex.join(a for path in input.pos_stats for a in ("--pos-stats", path)),
        notes=lambda w: shlex.join(a for n in [PROTOCOL_NOTE, TABLES[w.table].get("note")] if n for a in ("--note", n)),
    shell:
        "nmtrepro table --title {params.title:q} --paper-numbers {input.numbers} --metric {params.metric} "
        "--scale {config[scale]} {params.cells} --marks {params.marks} {params.columns} {params.parser} {params.tagger} "
        "{params.notes} --out-md {output.md} "
        "--out-html {output.html} --out-tex {output.tex} 2> {log}"


rule plot_curves:
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


def claim_args(wildcards, input):
    """--claim PAPER_DELTA[:WORD]=METRIC=yes|no=SIGNIFICANCE_JSON=TEXT per claim of the paper (nmtrepro claims)."""
    args = []
    for name in PAPERS[wildcards.paper]["claims"]:
        claim = config["claims"][name]
        comparable = "yes" if at_scale(config, claim) else "no"
        says = f":{claim['paper_says']}" if "paper_says" in claim else ""
        args += ["--claim", f"{claim['paper_delta']}{says}={claim['metric']}={comparable}="
                            f"{input[name]}={claim['claim']}"]
    return shlex.join(args)


rule claims:
    input:
        unpack(lambda w: {name: significance_file(config["claims"][name]["experiment"], config["claims"][name]["baseline"])
                          for name in PAPERS[w.paper]["claims"]}),
    output:
        md="results/report/{paper}_claims.md",
        html=report("results/report/{paper}_claims.html", caption="../report/claims.rst", category="Claims",
                    labels={"paper": "{paper}"}),
    log:
        "results/logs/report/{paper}_claims.log",
    wildcard_constraints:
        paper="|".join(PAPERS) or "^$",
    params:
        claims=claim_args,
        protocol=PROTOCOL_NOTE,
    shell:
        "nmtrepro claims --title 'Paper {wildcards.paper}: claims beside this run' {params.claims} "
        "--note {params.protocol:q} --out-md {output.md} --out-html {output.html} 2> {log}"


def report_files(tables, analyses, papers=()):
    """The report files of these tables and analyses (an analysis' kind says which it renders) and the
    claims pages of these papers (those with claims)."""
    files = expand("results/report/{table}.{ext}", table=tables, ext=TABLE)
    files += [f"results/report/{paper}_claims.{ext}" for paper in papers if PAPERS[paper]["claims"]
              for ext in ("md", "html")]
    return files + [f"results/report/{name}.{ext}" for name in analyses
                    for ext in ANALYSIS_OUTPUTS[ANALYSES[name]["kind"]]]


def paper_tables(names, diagnostic=False):
    """Those of these tables built at this scale that are (or, diagnostic=True, are not) the paper's own."""
    return [name for name in names if name in TABLES and TABLES[name]["diagnostic"] == diagnostic]


def all_outputs():
    return report_files(paper_tables(TABLES), ANALYSES, PAPERS) + ["results/report/training_curves.png"]


# One target per paper file: `snakemake --cores all paper_A` builds that paper's tables and figures;
# `diagnostics_A` its diagnostic tables at this scale (if any).
for _paper, _owned in PAPERS.items():

    rule:
        name:
            f"paper_{_paper}"
        input:
            report_files(paper_tables(_owned["tables"]), _owned["analyses"], [_paper]),

    rule:
        name:
            f"diagnostics_{_paper}"
        input:
            report_files(paper_tables(_owned["tables"], diagnostic=True), []),
