# The claims pages' inputs (rules claims and across_scales, reporting.smk): each claim's significance,
# curves, shorter budgets and other scales' results, as the claims commands read them.
from nmtrepro.reporting.claims_inputs import GIVEN as GIVEN_CLAIM_FIELDS
from nmtrepro.study.config import central_at_scale, quantity_pool


def claims_document(names):
    """A claims page's inputs as one JSON document (nmtrepro claims --inputs; reporting/claims_inputs.py
    says what it holds), each claim keyed by its name in the config's `claims`: the claims, the central
    ones primary, the tests the seed noise pools over (`scale_pool`), their curves, their shorter budgets,
    the other scales' tests and pools, the protocol note."""
    pools = other_scales_pools(names)
    tests = claim_significance(names)
    document = {
        "claims": {name: claim_entry(name, tests.get(name)) for name in names},
        "primary": [name for name in names if name in CENTRAL["claims"]],
        "pool": scale_pool(names),
        "curves": claim_curves(names),
        "budgets": budgets_at(names),
        "others": {
            scale: {"claims": files, "pool": pools.get(scale, {})}
            for scale, files in other_scales_significance(names).items()
        },
        "notes": [claims_protocol(names)],
    }
    return json.dumps(document, ensure_ascii=False)


def claim_entry(name, significance):
    """A claim as the claims commands read it, its fields named as the package's Claim (those a paper's
    entry gives as they are: GIVEN_CLAIM_FIELDS): a claim of no gain carries its margin; a claim without
    a test (not comparable at this scale) has none (null)."""
    claim = config["claims"][name]
    entry = {
        "text": claim["claim"],
        "paper_delta": claim["paper_delta"],
        "metric": claim["metric"],
        "significance": significance,
    }
    if claim["test"] == "non_superiority":
        entry["margin"] = NO_GAIN_MARGINS[name]
    return entry | {key: claim[key] for key in GIVEN_CLAIM_FIELDS if key in claim}


def across_document(page):
    """An across-scales page's inputs as one JSON document (nmtrepro across-scales --inputs;
    reporting/claims_inputs.py): its claims page's claims at this scale and at each other scale that holds
    them, by their names in the config, the central ones primary, each scale's seed noise pooled over its
    own central claims' tests, each scale's gaps over training."""
    names, own = ACROSS_PAGES[page], page.removesuffix("_across_scales")
    tests = claim_significance(names)
    scales = {config["scale"]: {name: claim_entry(name, tests.get(name)) for name in names}}
    for scale, files in other_scales_significance(names).items():
        scales[scale] = {name: claim_entry(name, files[name]) for name in names_in(files, names)}
    document = {
        "claims": scales,
        "primary": [name for name in names if name in CENTRAL["claims"]],
        "pool": central_pools(names),
        "gaps": {config["scale"]: results(f"report/{own}.gap.tsv"), **other_scales_gaps(own)},
    }
    return json.dumps(document, ensure_ascii=False)


def claim_significance(names):
    """The test of each of these claims comparable at this scale (`claim_test`: the pooled paired bootstrap,
    or a quantity's test)."""
    return {
        name: results(claim_test(config["claims"][name])) for name in names if at_scale(config, config["claims"][name])
    }


def claim_curves(names):
    """{claim: {"system": [curve TSV of each seed], "baseline": [...]}} of these claims comparable at this
    scale, on the seeds both train, as the significance test pairs them (study/config.py `seed_pairs`); not of a
    claim on a part of the test set (`source_longer_than`), which the validation curves do not measure."""
    curves = {}
    for name in names:
        claim = config["claims"][name]
        if at_scale(config, claim) and "source_longer_than" not in claim:
            pairs = seed_pairs(EXPERIMENTS, claim["experiment"], claim["baseline"])
            curves[name] = {
                side: [results(f"train/{pair[i]}/curve.tsv") for pair in pairs]
                for i, side in enumerate(("system", "baseline"))
            }
    return curves


def claim_budgets(names):
    """{claim: [(fraction, its significance JSON there, the system's updates there)]}: these claims'
    shorter budgets (study/budgets.py; the central claims' trainings keep their windows)."""
    found = {}
    for name in names:
        claim = config["claims"][name]
        if name in CENTRAL["claims"]:
            found[name] = [
                (share, significance_file(system, baseline), EXPERIMENTS[system].stops_at)
                for share, system, baseline in budget_pairs(config, EXPERIMENTS, claim["experiment"], claim["baseline"])
            ]
    return {name: levels for name, levels in found.items() if levels}


def budgets_at(names):
    """These claims at their shorter budgets, as a claims page's inputs hold them: each budget's seed noise
    pooled over the central claims there."""
    budgets, central = claim_budgets(names), claim_budgets(CENTRAL["claims"])
    shares = sorted({share for levels in budgets.values() for share, _, _ in levels})
    full = {name: EXPERIMENTS[config["claims"][name]["experiment"]].train["max_updates"] for name in budgets}
    levels = [
        {
            "label": budget_label(share),
            "claims": {
                name: {
                    "significance": path,
                    "updates": stops,
                    "label": budget_label(stops / full[name]),
                }
                for name, found in budgets.items()
                for s, path, stops in found
                if s == share
            },
            "pool": {name: path for name, found in central.items() for s, path, _ in found if s == share},
        }
        for share in shares
    ]
    return {"levels": levels, "final": budget_label(1.0), "updates": full}


def budget_label(share):
    """A budget as the page names it: a share of the scale's training (30 %), or with `budget` N above 1
    a multiple of the scale's budget (1x, 2x, 4x)."""
    return f"{share * config['budget']:g}x" if config["budget"] > 1 else f"{share:.0%}"


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
            name: other_scale_file(scale, local, claim_test(config["claims"][name]))
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


def pool_tests(scaled, names):
    """{name: test JSON, relative to a results tree}: what the seed noise of these claims pools over at
    `scaled`'s scale: its central claims' tests, and the quantities these claims are on, measured on their
    paper's central comparisons (study/config.py `quantity_pool`)."""
    central = central_at_scale(scaled)
    quantities = quantity_pool(scaled, PAPERS, names, central)
    return {name: claim_test(config["claims"][name]) for name in central} | {
        name: QUANTITY_TEST.format(**test) for name, test in quantities.items()
    }


def scale_pool(names):
    """This scale's pool for these claims (`pool_tests`), in its results tree."""
    return {name: results(path) for name, path in pool_tests(config, names).items()}


def other_scales_pools(names):
    """{scale: {name: JSON}}: each other scale's pool for these claims (`pool_tests`, with that scale's own
    central claims) where its results tree or measured folder holds them (`other_scales`)."""
    found = {}
    for scale, label, local in other_scales():
        files = {
            name: other_scale_file(scale, local, path)
            for name, path in pool_tests({**config, "scale": scale}, names).items()
        }
        files = {name: path for name, path in files.items() if os.path.exists(path)}
        if files:
            found[label] = files
    return found


def central_pools(names):
    """{scale: {name: JSON}}: this scale's pool for these claims, then those other scales' results trees in
    this checkout hold; each scale's seed noise pools over its own."""
    return {config["scale"]: scale_pool(names), **other_scales_pools(names)}
