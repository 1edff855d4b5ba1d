def table_cells(wildcards):
    """Each cell's BLEU files, one a seed replicate of its experiment."""
    return {
        f"cell{i}": [bleu_file(name) for name in REPLICATES[c["experiment"]]]
        for i, c in enumerate(TABLES[wildcards.table]["cells"])
    }


def cell_baseline(table, cell):
    """The cell's baseline (its own or the table's); none for the baseline's own row, which a paired
    test against itself would only mark +0.00 and count among the compared."""
    baseline = cell.get("baseline", TABLES[table].get("baseline"))
    return None if baseline == cell["experiment"] else baseline


def table_significance(wildcards):
    cells = TABLES[wildcards.table]["cells"]
    return {
        f"sig{i}": significance_file(c["experiment"], cell_baseline(wildcards.table, c))
        for i, c in enumerate(cells)
        if cell_baseline(wildcards.table, c)
    }


def table_cell_args(wildcards, input):
    args = []
    for i, cell in enumerate(TABLES[wildcards.table]["cells"]):
        e = EXPERIMENTS[cell["experiment"]]
        args += ["--cell", f"{e.name}={cell['row']}={cell['column']}={','.join(input[f'cell{i}'])}"]
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
                found += [results(f"{stage}/{e.dataset}/{part}.stats.json") for part in ("train", f"test/{e.test}")]
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
        cells=table_cell_args,
        marks=lambda w: TABLES[w.table]["marks"],
        columns=lambda w: shlex.join(a for c in TABLES[w.table]["paper_columns"] for a in ("--paper-column", c)),
        lowercased=lambda w: "--lowercased" if lowercased(c["experiment"] for c in TABLES[w.table]["cells"]) else "",
        parser=lambda w, input: shlex.join(a for path in input.parser_stats for a in ("--parser-stats", path)),
        tagger=lambda w, input: shlex.join(a for path in input.pos_stats for a in ("--pos-stats", path)),
        notes=lambda w: shlex.join(
            a
            for n in [protocol(c["experiment"] for c in TABLES[w.table]["cells"]), TABLES[w.table].get("note")]
            if n
            for a in ("--note", n)
        ),
    shell:
        "nmtrepro table --title {params.title:q} --paper-numbers {input.numbers} --metric {params.metric} "
        "--scale {params.scale} {params.lowercased} {params.cells} --marks {params.marks} {params.columns} "
        "{params.parser} {params.tagger} {params.notes} --out-md {output.md} --out-html {output.html} "
        "--out-tex {output.tex} 2> {log}"


def lowercased(names):
    """Whether every one of these experiments' data were lowercased when prepared (paper C's)."""
    datasets = {EXPERIMENTS[name].dataset for name in names}
    return bool(datasets) and all(dataset_preparation(d)["lowercase"] for d in datasets)


def replicates_of(names):
    """These experiments' seed replicates, each once, in order."""
    return list(dict.fromkeys(replica for name in names for replica in REPLICATES[name]))


def compared(claims):
    """The experiments and baselines of these claims."""
    return [config["claims"][claim][key] for claim in claims for key in ("experiment", "baseline")]


# The training curves of the experiments that this scale's tables, analyses and claims read (the `tables`
# target; an experiment none reads, e.g. NPMT below paper scale, is not trained), and of the central
# study's alone.
CURVES = {
    "training_curves": replicates_of(
        [c[key] for spec in TABLES.values() for c in spec["cells"] for key in ("experiment", "baseline") if key in c]
        + [spec["baseline"] for spec in TABLES.values() if "baseline" in spec]
        + [
            s[key]
            for spec in ANALYSES.values()
            for s in spec["systems"]
            for key in ("experiment", "baseline")
            if key in s
        ]
        + compared(name for name, claim in config["claims"].items() if at_scale(config, claim))
    ),
    "central_training_curves": replicates_of(compared(CENTRAL["claims"])),
}


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


def claim_args(names, input, scale=""):
    """--claim=[SCALE=]PAPER_DELTA[<MARGIN][:WORD]=METRIC=yes|no=SIGNIFICANCE_JSON|-=TEXT per claim (nmtrepro
    claims; across-scales prefixes the scale): a claim of no gain carries its margin; a claim without a
    JSON in `input` (not comparable at this scale) is listed, unmeasured."""
    args = []
    for name in names:
        claim = config["claims"][name]
        comparable = name in input.keys()
        margin = f"<{NO_GAIN_MARGINS[name]}" if claim["test"] == "non_superiority" else ""
        says = f":{claim['paper_says']}" if "paper_says" in claim else ""
        args.append(
            f"--claim={f'{scale}=' if scale else ''}{claim['paper_delta']}{margin}{says}={claim['metric']}="
            f"{'yes' if comparable else 'no'}={input[name] if comparable else '-'}={claim['claim']}"
        )
    return shlex.join(args)


def claim_significance(names):
    """The pooled paired bootstrap of each of these claims comparable at this scale."""
    return {
        name: significance_file(config["claims"][name]["experiment"], config["claims"][name]["baseline"])
        for name in names
        if at_scale(config, config["claims"][name])
    }


def claim_curves(names):
    """{claim: {"system": [curve TSV of each seed], "baseline": [...]}} of these claims comparable at this
    scale, on the seeds both train, as the significance test pairs them (config.py `seed_pairs`)."""
    curves = {}
    for name in names:
        claim = config["claims"][name]
        if at_scale(config, claim):
            pairs = seed_pairs(EXPERIMENTS, claim["experiment"], claim["baseline"])
            curves[name] = {
                side: [results(f"train/{pair[i]}/curve.tsv") for pair in pairs]
                for i, side in enumerate(("system", "baseline"))
            }
    return curves


def curves_arg(names):
    """--curves: the JSON of `claim_curves`, keyed by each claim's sentence (nmtrepro claims)."""
    return shlex.quote(
        json.dumps({config["claims"][name]["claim"]: curves for name, curves in claim_curves(names).items()})
    )


def claim_budgets(names):
    """{claim: [(fraction, its significance JSON there, the system's updates there)]}: these claims'
    shorter budgets (budgets.py; the central claims' trainings keep their windows)."""
    found = {}
    for name in names:
        claim = config["claims"][name]
        if name in CENTRAL["claims"]:
            found[name] = [
                (share, significance_file(system, baseline), EXPERIMENTS[system].stops_at)
                for share, system, baseline in budget_pairs(config, EXPERIMENTS, claim["experiment"], claim["baseline"])
            ]
    return {name: levels for name, levels in found.items() if levels}


def budgets_arg(names):
    """--budgets: the JSON of these claims at their shorter budgets, each budget's seed noise pooled over
    the central claims there (nmtrepro claims)."""
    budgets, central = claim_budgets(names), claim_budgets(CENTRAL["claims"])
    shares = sorted({share for levels in budgets.values() for share, _, _ in levels})
    levels = [
        {
            "label": budget_label(share),
            "claims": {
                config["claims"][name]["claim"]: {"significance": path, "updates": updates}
                for name, found in budgets.items()
                for s, path, updates in found
                if s == share
            },
            "pool": {name: path for name, found in central.items() for s, path, _ in found if s == share},
        }
        for share in shares
    ]
    updates = {
        config["claims"][name]["claim"]: EXPERIMENTS[config["claims"][name]["experiment"]].train["max_updates"]
        for name in budgets
    }
    return shlex.quote(json.dumps({"levels": levels, "final": budget_label(1.0), "updates": updates}))


def budget_label(share):
    """A budget as the page names it: a share of the scale's training (30 %), or with `budget` N above 1
    a multiple of the scale's budget (1x, 2x, 4x)."""
    return f"{share * config['budget']:g}x" if config["budget"] > 1 else f"{share:.0%}"


def others_arg(names):
    """--others: the JSON of these claims' tests at the other scales this checkout holds or keeps as data
    (`other_scales_significance`), each scale's seed noise pooled over its central claims."""
    pools = other_scales_significance(CENTRAL["claims"])
    return shlex.quote(
        json.dumps(
            {
                scale: {
                    "claims": {config["claims"][name]["claim"]: path for name, path in files.items()},
                    "pool": pools.get(scale, {}),
                }
                for scale, files in other_scales_significance(names).items()
            }
        )
    )


def procedure_args(names, pools, scaled=False):
    """--primary for each of these claims that is its paper's central one, and --pool for each central
    claim's JSON that `pools` holds ({scale: {claim: JSON}}; `scaled`: the scale named before it, as
    across-scales takes them): the page's procedure and the comparisons its seed noise pools."""
    primaries = [f"--primary={config['claims'][name]['claim']}" for name in names if name in CENTRAL["claims"]]
    pooled = [
        f"--pool={f'{scale}=' if scaled else ''}{name}={path}"
        for scale, files in pools.items()
        for name, path in files.items()
    ]
    return shlex.join(primaries + pooled)


def claims_protocol(names):
    """The protocol note of the experiments these claims compare."""
    return protocol(compared(n for n in names if at_scale(config, config["claims"][n])))


# Each paper's claims page, and the central claims of all four on one page, which the report opens with.
CLAIMS_PAGES = {f"{paper}_claims": owned["claims"] for paper, owned in PAPERS.items() if owned["claims"]}
CLAIMS_PAGES["central_claims"] = CENTRAL["claims"]


def other_scales():
    """(scale, its label on the pages, whether it is local) of each scale but this one whose results tree
    this checkout holds (local), or whose claims it keeps as data (workflow/measured/<scale>,
    reporting/measured.py: labelled with its provenance); a local run takes precedence."""
    for scale in config["scales"]:
        local = os.path.isdir(f"results/{scale}")
        if scale != config["scale"] and (local or os.path.isdir(f"{MEASURED}/{scale}")):
            yield scale, scale if local else measured_label(f"{MEASURED}/{scale}"), local


def other_scale_file(scale, local, path):
    """Another scale's file: `path` in its results tree, or the file of that name in its measured folder."""
    return f"results/{scale}/{path}" if local else f"{MEASURED}/{scale}/{os.path.basename(path)}"


def other_scales_significance(names):
    """{scale: {claim: JSON}}: the significance JSONs of these claims that other scales hold
    (`other_scales`; a claim where it is comparable at that scale), for the pages across scales."""
    found = {}
    for scale, label, local in other_scales():
        study = config["scales"][scale].get("stands_for", scale)
        files = {
            name: other_scale_file(scale, local, SIGNIFICANCE.format(**config["claims"][name]))
            for name in names
            if study in config["claims"][name].get("scales", [study])
        }
        files = {name: path for name, path in files.items() if os.path.exists(path)}
        if files:
            found[label] = files
    return found


def other_scales_gaps(page):
    """{scale: TSV}: the gaps over training of claims page `page` that other scales hold (`other_scales`)."""
    found = {label: other_scale_file(scale, local, f"report/{page}.gap.tsv") for scale, label, local in other_scales()}
    return {label: path for label, path in found.items() if os.path.exists(path)}


# Beside each claims page, the same claims at every scale whose results are in this checkout (built where
# another scale's are: `across_scales_pages`).
ACROSS_PAGES = {f"{page}_across_scales": names for page, names in CLAIMS_PAGES.items()}


def across_scales_pages(pages):
    """The across-scales pages of these claims pages where another scale has results for them."""
    return [f"{page}_across_scales" for page in pages if other_scales_significance(CLAIMS_PAGES[page])]


rule across_scales:
    input:
        unpack(lambda w: claim_significance(ACROSS_PAGES[w.page])),
        others=lambda w: [
            path for files in other_scales_significance(ACROSS_PAGES[w.page]).values() for path in files.values()
        ],
        # every page's seed noise pools over the central claims' comparisons (docs/statistics.md)
        pool=lambda w: [path for files in central_pools().values() for path in files.values()],
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
        claims=lambda w, input: " ".join(
            [claim_args(ACROSS_PAGES[w.page], input, config["scale"])]
            + [
                claim_args(names_in(files, ACROSS_PAGES[w.page]), files, scale)
                for scale, files in other_scales_significance(ACROSS_PAGES[w.page]).items()
            ]
        ),
        procedure=lambda w: procedure_args(ACROSS_PAGES[w.page], central_pools(), scaled=True),
        gaps=lambda w: shlex.join(
            f"--gaps={scale}={path}"
            for scale, path in {
                config["scale"]: results(f"report/{own_page(w)}.gap.tsv"),
                **other_scales_gaps(own_page(w)),
            }.items()
        ),
    shell:
        "nmtrepro across-scales --title {params.title:q} {params.claims} {params.procedure} {params.gaps} "
        "--out-md {output.md} --out-html {output.html} --out-svg {output.svg} --out-gap-svg {output.gap_svg} 2> {log}"


def own_page(wildcards):
    """The claims page an across-scales page sets beside other scales."""
    return wildcards.page.removesuffix("_across_scales")


def names_in(files, names):
    """These claims, in order, that `files` holds."""
    return [name for name in names if name in files]


def claims_title(page):
    return (
        "The central claims of papers A-D"
        if page == "central_claims"
        else f"Paper {page.removesuffix('_claims')}: claims"
    )


def claims_label(page):
    """A claims page's name in the report's Claims category, which sorts by it: the central page first."""
    return "central: one claim a paper" if page == "central_claims" else f"paper {page.removesuffix('_claims')}"


def central_pools():
    """{scale: {central claim: JSON}}: this scale's central claims' tests, then those other scales'
    results trees in this checkout hold; each scale's seed noise pools over its own."""
    return {config["scale"]: claim_significance(CENTRAL["claims"]), **other_scales_significance(CENTRAL["claims"])}


rule claims:
    input:
        unpack(lambda w: claim_significance(CLAIMS_PAGES[w.page])),
        pool=lambda w: list(claim_significance(CENTRAL["claims"]).values()),
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
            path for files in other_scales_significance(CENTRAL["claims"]).values() for path in files.values()
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
        claims=lambda w, input: claim_args(CLAIMS_PAGES[w.page], input),
        # the central claims, each its paper's primary; the seed noise pooled over their comparisons
        procedure=lambda w: procedure_args(
            CLAIMS_PAGES[w.page], {config["scale"]: claim_significance(CENTRAL["claims"])}
        ),
        protocol=lambda w: claims_protocol(CLAIMS_PAGES[w.page]),
        curves=lambda w: curves_arg(CLAIMS_PAGES[w.page]),
        budgets=lambda w: budgets_arg(CLAIMS_PAGES[w.page]),
        others=lambda w: others_arg(CLAIMS_PAGES[w.page]),
    shell:
        "nmtrepro claims --title {params.title:q} {params.claims} {params.procedure} --curves {params.curves} "
        "--budgets {params.budgets} --others {params.others} "
        "--note {params.protocol:q} --scale {params.scale} --out-md {output.md} --out-html {output.html} "
        "--out-svg {output.svg} --out-gap-svg {output.gap_svg} --out-gap-tsv {output.gap_tsv} 2> {log}"


def report_files(tables, analyses, papers=()):
    """The report files of these tables and analyses (an analysis' kind says which it renders) and the
    claims pages of these papers (those with claims)."""
    files = expand(results("report/{table}.{ext}"), table=tables, ext=TABLE)
    pages = [f"{paper}_claims" for paper in papers if PAPERS[paper]["claims"]]
    files += [results(f"report/{page}.{ext}") for page in pages + across_scales_pages(pages) for ext in ("md", "html")]
    return files + [
        results(f"report/{name}.{ext}") for name in analyses for ext in ANALYSIS_OUTPUTS[ANALYSES[name]["kind"]]
    ]


def paper_tables(names, diagnostic=False):
    """Those of these tables built at this scale that are (or, diagnostic=True, are not) the paper's own."""
    return [name for name in names if name in TABLES and TABLES[name]["diagnostic"] == diagnostic]


def central_outputs():
    """The central study: the central claims page, the tables and analyses its models fill, their curves."""
    if not CENTRAL["claims"]:
        return []
    return (
        expand(
            results("report/{page}.{ext}"),
            page=["central_claims", *across_scales_pages(["central_claims"])],
            ext=("md", "html"),
        )
        + report_files(CENTRAL["tables"], CENTRAL["analyses"])
        + [results("report/central_training_curves.png")]
    )


def all_outputs():
    """Every table, analysis and claims page at this scale, and the central study."""
    return (
        report_files(paper_tables(TABLES), ANALYSES, PAPERS)
        + [results("report/training_curves.png")]
        + central_outputs()
    )


def default_outputs():
    """What `snakemake` without a target builds: the scale's `target` (tiny: the central study)."""
    return central_outputs() if SCALE["target"] == "central" else all_outputs()


rule central:
    input:
        central_outputs(),


rule tables:
    input:
        all_outputs(),


# The claims over a longer budget (budgets.py): `snakemake budget_sweep --config budget=4` trains the
# sweep's central claims (`budget_sweep.claims`) 4x as long in results/<scale>-budget4 and judges them at
# 1x, 2x and 4x; at budget 1 it is the central claims page with the scale's own `budgets`.
rule budget_sweep:
    input:
        expand(results("report/central_claims.{ext}"), ext=("md", "html")),
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
