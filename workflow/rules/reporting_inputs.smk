# The inputs and arguments of the report's tables, training curves and targets (rules in reporting.smk).
def table_document(table):
    """A table's inputs as one JSON document (nmtrepro table --inputs; reporting/table_inputs.py says what
    it holds): its cells, the seed noise its marks pool over, the paper's columns it keeps, the stats of
    the annotations its cells' models read, and its notes (how its rows were trained, its own note)."""
    spec = TABLES[table]
    document = {
        "cells": table_cells(table),
        "pool": table_pool(table),
        "paper_columns": spec["paper_columns"],
        "annotation_stats": table_annotation_stats(table),
        "notes": [n for n in (protocol(c["experiment"] for c in spec["cells"]), spec.get("note")) if n],
    }
    return json.dumps(document, ensure_ascii=False)


def table_cells(table):
    """Each cell as a table's inputs hold it: its BLEU files (one a seed replicate of its experiment), its
    test set, and its paired bootstrap against its baseline where it has one."""
    cells = []
    for cell in TABLES[table]["cells"]:
        e, baseline = EXPERIMENTS[cell["experiment"]], cell_baseline(table, cell)
        cells.append(
            {
                "experiment": e.name,
                "row": cell["row"],
                "column": cell["column"],
                "scores": [bleu_file(name) for name in REPLICATES[e.name]],
                "test_set": f"{e.dataset}/{e.test}",
                "significance": (
                    {"baseline": baseline, "path": significance_file(e.name, baseline)} if baseline else None
                ),
            }
        )
    return cells


def cell_baseline(table, cell):
    """The cell's baseline (its own or the table's); none for the baseline's own row, which a paired
    test against itself would only mark +0.00 and count among the compared."""
    baseline = cell.get("baseline", TABLES[table].get("baseline"))
    return None if baseline == cell["experiment"] else baseline


def table_pool(table):
    """The central claims' significance JSONs that a table's marks pool their seed noise over, as the
    claims pages' verdicts do (docs/statistics.md); none for a table that marks nothing."""
    return claim_significance(CENTRAL["claims"]) if any(c["significance"] for c in table_cells(table)) else {}


def table_annotation_stats(table):
    """Per source annotation that the table's cells' models read, the stats of its stage (train and test
    parts): the note names who made it (the parser, the tagger); {} for a table without such cells."""
    found = {}
    for cell in TABLES[table]["cells"]:
        e = EXPERIMENTS[cell["experiment"]]
        for name, stage in e.annotations.items():
            found.setdefault(name, set()).update(
                results(f"{stage}/{e.dataset}/{part}.stats.json") for part in ("train", f"test/{e.test}")
            )
    return {name: sorted(paths) for name, paths in found.items()}


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


def report_files(tables, analyses, papers=()):
    """The report files of these tables and analyses (an analysis' kind says which it renders) and the
    claims pages of these papers (those with claims), each with its brief."""
    files = expand(results("report/{table}.{ext}"), table=tables, ext=TABLE)
    pages = [f"{paper}_claims" for paper in papers if PAPERS[paper]["claims"]]
    files += [results(f"report/{page}.{ext}") for page in pages + across_scales_pages(pages) for ext in ("md", "html")]
    files += [results(f"report/{page}.brief.rst") for page in pages]  # the report's first screen
    return files + [
        results(f"report/{name}.{ext}") for name in analyses for ext in ANALYSIS_OUTPUTS[ANALYSES[name]["kind"]]
    ]


def paper_tables(names, diagnostic=False):
    """Those of these tables built at this scale that are (or, diagnostic=True, are not) the paper's own."""
    return [name for name in names if name in TABLES and TABLES[name]["diagnostic"] == diagnostic]


def central_outputs():
    """The central study: the central claims page and its brief, the tables and analyses its models fill,
    their curves and their model bundles."""
    if not CENTRAL["claims"]:
        return []
    return (
        expand(
            results("report/{page}.{ext}"),
            page=["central_claims", *across_scales_pages(["central_claims"])],
            ext=("md", "html"),
        )
        + report_files(CENTRAL["tables"], CENTRAL["analyses"])
        + [results("report/central_claims.brief.rst"), results("report/central_training_curves.png")]
        + expand(results("bundle/{experiment}"), experiment=CURVES["central_training_curves"])
    )


def all_outputs():
    """Every table, analysis and claims page at this scale, the central study, and every model's bundle."""
    return (
        report_files(paper_tables(TABLES), ANALYSES, PAPERS)
        + [results("report/training_curves.png")]
        + expand(results("bundle/{experiment}"), experiment=CURVES["training_curves"])
        + central_outputs()
    )


def default_outputs():
    """What `snakemake` without a target builds: the scale's `target` (tiny: the central study)."""
    return central_outputs() if SCALE["target"] == "central" else all_outputs()
