# The report: paper tables, training curves, claims pages and the targets that build them.
include: "reporting_inputs.smk"
include: "claims_inputs.smk"


rule table:
    input:
        scores=lambda w: [path for cell in table_cells(w.table) for path in cell["scores"]],
        significance=lambda w: [cell["significance"]["path"] for cell in table_cells(w.table) if cell["significance"]],
        # the marks' seed noise, pooled over the central claims' comparisons as on the claims pages
        pool=lambda w: list(table_pool(w.table).values()),
        numbers=lambda w: TABLES[w.table]["paper_numbers"],
        annotation_stats=lambda w: [path for paths in table_annotation_stats(w.table).values() for path in paths],
    output:
        md=results("report/{table}.md"),
        html=report(
            results("report/{table}.html"),
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
        tex=results("report/{table}.tex"),
    log:
        results("logs/report/{table}.log"),
    conda:
        CONDA_ENV
    params:
        scale=config["scale"],
        title=lambda w: f"{TABLES[w.table]['title']} (scale {config['scale']})",
        metric=lambda w: TABLES[w.table]["metric"],
        marks=lambda w: TABLES[w.table]["marks"],
        lowercased=lambda w: "--lowercased" if lowercased(c["experiment"] for c in TABLES[w.table]["cells"]) else "",
        # its cells (seeds, test set, comparison), the pool, the paper's columns, annotation stats and notes
        inputs=lambda w: table_document(w.table),
    shell:
        "nmtrepro table --title {params.title:q} --paper-numbers {input.numbers} --metric {params.metric} "
        "--scale {params.scale} {params.lowercased} --marks {params.marks} --inputs {params.inputs:q} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"


rule plot_curves:
    input:
        lambda w: expand(results("train/{experiment}/curve.tsv"), experiment=CURVES[w.curves]),
    output:
        report(results("report/{curves}.png"), caption="../report/curves.rst", category="Training"),
    log:
        results("logs/report/{curves}.log"),
    wildcard_constraints:
        curves="|".join(CURVES),
    conda:
        CONDA_ENV
    params:
        scale=config["scale"],
        curves=lambda w, input: " ".join(f"--curve {e}={path}" for e, path in zip(CURVES[w.curves], input)),
    shell:
        "nmtrepro plot-curves {params.curves} --scale {params.scale} --out {output} 2> {log}"


rule across_scales:
    input:
        unpack(lambda w: claim_significance(ACROSS_PAGES[w.page])),
        others=lambda w: [
            path for files in other_scales_significance(ACROSS_PAGES[w.page]).values() for path in files.values()
        ],
        # every page's seed noise pools over the central claims' comparisons, a quantity's over its paper's measured
        # in it (docs/statistics.md)
        pool=lambda w: [path for files in central_pools(ACROSS_PAGES[w.page]).values() for path in files.values()],
        gaps=lambda w: [results(f"report/{own_page(w)}.gap.tsv"), *other_scales_gaps(own_page(w)).values()],
    output:
        md=results("report/{page}.md"),
        html=report(
            results("report/{page}.html"),
            caption="../report/across_scales.rst",
            category="Claims",
            labels=lambda w: {"claims": f"across scales: {claims_label(own_page(w))}"},
        ),
        svg=results("report/{page}.svg"),
        gap_svg=results("report/{page}.gap.svg"),
    log:
        results("logs/report/{page}.log"),
    wildcard_constraints:
        page="|".join(ACROSS_PAGES) or "^$",
    conda:
        CONDA_ENV
    params:
        title=lambda w: f"{claims_title(own_page(w))} at every scale in this checkout",
        # each scale's claims by name, the central ones primary, each scale's pool and gaps over training
        inputs=lambda w: across_document(w.page),
    shell:
        "nmtrepro across-scales --title {params.title:q} --inputs {params.inputs:q} "
        "--out-md {output.md} --out-html {output.html} --out-svg {output.svg} --out-gap-svg {output.gap_svg} 2> {log}"


rule claims:
    input:
        unpack(lambda w: claim_significance(CLAIMS_PAGES[w.page])),
        pool=lambda w: list(scale_pool(CLAIMS_PAGES[w.page]).values()),
        curves=lambda w: [
            path for sides in claim_curves(CLAIMS_PAGES[w.page]).values() for paths in sides.values() for path in paths
        ],
        budgets=lambda w: [
            path
            for names in (CLAIMS_PAGES[w.page], CENTRAL["claims"])
            for levels in claim_budgets(names).values()
            for _, path, _ in levels
        ],
        others=lambda w: [
            path for files in other_scales_significance(CLAIMS_PAGES[w.page]).values() for path in files.values()
        ],
        other_pools=lambda w: [
            path for files in other_scales_pools(CLAIMS_PAGES[w.page]).values() for path in files.values()
        ],
    output:
        md=results("report/{page}.md"),
        # The label orders the category: the central claims ("central ...") before "paper A" ...
        html=report(
            results("report/{page}.html"),
            caption="../report/claims.rst",
            category="Claims",
            labels=lambda w: {"claims": claims_label(w.page)},
        ),
        svg=results("report/{page}.svg"),
        gap_svg=results("report/{page}.gap.svg"),
        gap_tsv=results("report/{page}.gap.tsv"),
    log:
        results("logs/report/{page}.log"),
    wildcard_constraints:
        page="|".join(CLAIMS_PAGES) or "^$",
    conda:
        CONDA_ENV
    params:
        scale=config["scale"],
        title=lambda w: f"{claims_title(w.page)} beside this run (scale {config['scale']})",
        # its claims by name, the central ones primary, the seed noise pooled over their comparisons, ...
        inputs=lambda w: claims_document(CLAIMS_PAGES[w.page]),
    shell:
        "nmtrepro claims --title {params.title:q} --inputs {params.inputs:q} --scale {params.scale} "
        "--out-md {output.md} --out-html {output.html} --out-svg {output.svg} --out-gap-svg {output.gap_svg} "
        "--out-gap-tsv {output.gap_tsv} 2> {log}"


# A claims page in brief (its reading; the central page's verdicts too), which the report's first screen
# includes (workflow/report/workflow.rst): what the run found, without a click.
rule landing:
    input:
        results("report/{page}.md"),
    output:
        results("report/{page}.brief.rst"),
    log:
        results("logs/report/{page}.brief.log"),
    wildcard_constraints:
        page="|".join(CLAIMS_PAGES) or "^$",
    conda:
        CONDA_ENV
    params:
        label=lambda w: claims_label(w.page),
        verdicts=lambda w: "--verdicts" if w.page == "central_claims" else "",
    shell:
        "nmtrepro landing --page {input} --label {params.label:q} {params.verdicts} --out {output} 2> {log}"


rule central:
    input:
        central_outputs(),


rule tables:
    input:
        all_outputs(),


# The claims over a longer budget (study/budgets.py): `snakemake budget_sweep --config budget=4` trains the
# sweep's central claims (`budget_sweep.claims`) 4x as long in results/<scale>-budget4 and judges them at
# 1x, 2x and 4x; at budget 1 it is the central claims page with the scale's own `budgets`.
rule budget_sweep:
    input:
        expand(results("report/central_claims.{ext}"), ext=("md", "html", "brief.rst")),
        results("report/central_training_curves.png"),


# One target per paper file: `snakemake --cores all paper_A` builds that paper's tables and figures;
# `diagnostics_A` its diagnostic tables at this scale (if any).
for _paper, _owned in PAPERS.items():

    rule:
        name:
            f"paper_{_paper}"
        input:
            report_files(paper_tables(_owned["tables"]), [a for a in _owned["analyses"] if a in ANALYSES], [_paper]),

    rule:
        name:
            f"diagnostics_{_paper}"
        input:
            report_files(paper_tables(_owned["tables"], diagnostic=True), []),
