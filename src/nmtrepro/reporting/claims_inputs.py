"""A claims page's inputs: one JSON document, read and checked by `read_inputs` (and a page across
scales' by `read_scaled_inputs`).

The workflow builds it (workflow/rules/claims_inputs.smk `claims_document`) and passes it whole
(`nmtrepro claims --inputs`). It names each claim by a stable id, the claim's key in the config's
`claims` (`pr_base_en_de`), and everything else refers to a claim by that id, never by its sentence:

    {"claims": {ID: CLAIM, ...},              # in the page's order; CLAIM: FORMAT
     "primary": [ID, ...],                    # its papers' central claims (the page's procedure)
     "pool": {NAME: JSON, ...},               # the comparisons the seed noise pools over
     "curves": {ID: {"system": [TSV, ...], "baseline": [TSV, ...]}},   # seed k against seed k
     "budgets": {"levels": [{"label": L, "claims": {ID: {"significance": JSON, "updates": N[, "label": L]}},
                             "pool": {NAME: JSON}}], "final": L, "updates": {ID: N}},
     "others": {SCALE: {"claims": {ID: JSON}, "pool": {NAME: JSON}}},
     "notes": [PARAGRAPH, ...]}

Every key but `claims` may be left out. A page across scales (`nmtrepro across-scales --inputs`,
claims_inputs.smk `across_document`) holds the same claims at each scale, by the same ids:

    {"claims": {SCALE: {ID: CLAIM, ...}, ...},    # this run's scale first, then the others
     "primary": [ID, ...],
     "pool": {SCALE: {NAME: JSON, ...}, ...},     # each scale's seed noise pools over its own
     "gaps": {SCALE: TSV, ...},                   # each scale's gaps over training (claims --out-gap-tsv)
     "notes": [PARAGRAPH, ...]}

A bad document is refused naming its key (`--inputs budgets.levels[0].claims: unknown claim id(s)
['x']`) before any file is read.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..core.files import InputError
from ..evaluation.metrics import METRICS
from ..evaluation.verdicts import METRIC_LABELS, NOT_MEASURED, Claim
from .documents import notes, paths, read_document, typed

# A claim as the document gives it: one JSON object, its fields named as Claim's; `significance` null
# where it is not comparable at this scale. A new claim field is a Claim field with its default and the
# schema's key of the same name (`GIVEN`), read where the page uses it.
FORMAT = ('{"text": SENTENCE, "paper_delta": D, "metric": ' + "|".join(f'"{name}"' for name in METRICS)
          + ', "significance": JSON|null[, "margin": M][, "paper_says": WORD]}')
REQUIRED = ("text", "paper_delta", "metric", "significance")
OPTIONAL = ({field.name for field in fields(Claim)} - set(REQUIRED)
            - {"id", "comparable", "primary", "expects", "unjudged"})
# What a paper's claim entry gives as it is (the config schema's keys of the same names); a claim of no
# gain's margin is the workflow's (one rule: half the smallest gain its paper calls a help).
GIVEN = sorted(OPTIONAL - {"margin"})
KEYS = ("claims", "primary", "pool", "curves", "budgets", "others", "notes")
SCALED_KEYS = ("claims", "primary", "pool", "gaps", "notes")


@dataclass(frozen=True)
class PageInputs:
    """What a claims page reads: its claims (each with its id, marked primary as the document says) and
    the document's other parts by those ids, every optional part filled in (empty where left out)."""
    claims: list[Claim]
    pool: dict[str, str]
    curves: dict[str, dict[str, list[str]]]
    budgets: dict
    others: dict[str, dict]
    notes: list[str]


def claim_of(given, where: str) -> Claim:
    """A claim's object (FORMAT) as a Claim; `where` names it in an error. The paper's difference is
    non-zero for a claim of a difference; a claim of no gain (tested Δ < margin) names its positive
    margin; a comparable claim names its paired bootstrap JSON."""
    if not isinstance(given, dict):
        raise InputError(f"{where} wants an object {FORMAT}, got {given!r}")
    missing = [key for key in REQUIRED if key not in given]
    unknown = sorted(set(given) - set(REQUIRED) - OPTIONAL)
    problems = [f"missing {missing}"] if missing else []
    problems += [f"unknown {unknown} (fields: {FORMAT})"] if unknown else []
    if problems:
        raise InputError(f"{where}: {'; '.join(problems)}")
    delta, margin = given["paper_delta"], given.get("margin")
    if given["metric"] not in METRIC_LABELS:
        raise InputError(f"{where}: metric must be one of {sorted(METRIC_LABELS)}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (delta, margin) if v is not None):
        raise InputError(f"{where}: paper_delta and margin are numbers")
    if margin is not None and margin <= 0:
        raise InputError(f"{where}: a claim of no gain needs a positive margin, got {margin}")
    if margin is None and delta == 0:
        raise InputError(f"{where}: a claim of a difference needs a non-zero paper difference "
                         f"(a claim of no gain names its margin)")
    if not given["text"]:
        raise InputError(f"{where}: its text is empty")
    measured = given["significance"] is not None
    return Claim(**{**given, "paper_delta": float(delta), "margin": None if margin is None else float(margin),
                    "significance": given["significance"] if measured else NOT_MEASURED, "comparable": measured})


def _ids(found, ids, key: str) -> None:
    unknown = [i for i in found if i not in ids]
    if unknown:
        raise InputError(f"--inputs {key}: unknown claim id(s) {unknown}; the claims are {list(ids)}")


def _claims(given, primary: list[str], key: str) -> list[Claim]:
    """The claims of `given` ({ID: claim}), those `primary` names marked primary; none sharing a sentence
    (the page's rows and reading name a claim by it)."""
    typed(given, dict, key, "an object {ID: claim}")
    if not given:
        raise InputError(f"--inputs {key}: no claim")
    claims = [replace(claim_of(spec, f"--inputs {key}.{i}"), id=i, primary=i in primary) for i, spec in given.items()]
    texts = [claim.text for claim in claims]
    repeated = sorted({text for text in texts if texts.count(text) > 1})
    if repeated:
        raise InputError(f"--inputs {key}: two claims share the sentence(s) {repeated}")
    return claims


def read_inputs(text: str) -> PageInputs:
    """The page's inputs from the document (module docstring), each part checked against its claims' ids."""
    doc = read_document(text, KEYS)
    given = typed(doc.get("claims"), dict, "claims", "an object {ID: claim}")
    primary = typed(doc.get("primary", []), list, "primary", "a list of claim ids")
    _ids(primary, given, "primary")
    claims = _claims(given, primary, "claims")
    curves = typed(doc.get("curves", {}), dict, "curves", "an object {ID: {system, baseline}}")
    _ids(curves, given, "curves")
    for i, sides in curves.items():
        if not isinstance(sides, dict) or set(sides) != {"system", "baseline"}:
            raise InputError(f"--inputs curves.{i}: wants {{\"system\": [TSV, ...], \"baseline\": [TSV, ...]}}")
    return PageInputs(claims, paths(doc.get("pool", {}), "pool"), curves, _budgets(doc.get("budgets", {}), given),
                      _others(doc.get("others", {}), given), notes(doc))


@dataclass(frozen=True)
class ScaledInputs:
    """What a page across scales reads: each scale's claims ((scale, claim), this run's scale first, each
    marked primary as the document says), each scale's pool, each scale's gaps TSV, the notes."""
    claims: list[tuple[str, Claim]]
    pools: dict[str, dict[str, str]]
    gaps: dict[str, str]
    notes: list[str]


def read_scaled_inputs(text: str) -> ScaledInputs:
    """A page across scales' inputs from its document (module docstring)."""
    doc = read_document(text, SCALED_KEYS)
    scales = typed(doc.get("claims"), dict, "claims", "an object {SCALE: {ID: claim}}")
    if not scales:
        raise InputError("--inputs claims: no scale")
    primary = typed(doc.get("primary", []), list, "primary", "a list of claim ids")
    ids = [i for scale, given in scales.items() for i in typed(given, dict, f"claims.{scale}", "an object {ID: claim}")]
    _ids(primary, list(dict.fromkeys(ids)), "primary")
    claims = [(scale, claim) for scale, given in scales.items() for claim in _claims(given, primary, f"claims.{scale}")]
    pools = {scale: paths(pool, f"pool.{scale}")
             for scale, pool in typed(doc.get("pool", {}), dict, "pool", "an object {SCALE: pool}").items()}
    return ScaledInputs(claims, pools, paths(doc.get("gaps", {}), "gaps"), notes(doc))


def _budgets(budgets, ids) -> dict:
    """The document's budgets, checked: each level's claims among `ids` and at the page's own budget too."""
    budgets = {"levels": [], "final": "100%", "updates": {}, **typed(budgets, dict, "budgets", "an object")}
    _ids(typed(budgets["updates"], dict, "budgets.updates", "an object {ID: N}"), ids, "budgets.updates")
    for n, level in enumerate(typed(budgets["levels"], list, "budgets.levels", "a list")):
        key = f"budgets.levels[{n}]"
        typed(level, dict, key, "an object {label, claims, pool}")
        typed(level.get("label"), str, f"{key}.label", "the budget's label")
        tests = typed(level.get("claims"), dict, f"{key}.claims", "an object {ID: test}")
        _ids(tests, ids, f"{key}.claims")
        for i, test in tests.items():
            if not isinstance(test, dict) or not {"significance", "updates"} <= set(test):
                raise InputError(f"--inputs {key}.claims.{i}: wants {{\"significance\": JSON, \"updates\": N}}")
            if i not in budgets["updates"]:
                raise InputError(f"--inputs budgets.updates: no {i!r}, which {key} holds (its updates at the "
                                 "page's own budget)")
        level.setdefault("pool", {})
        paths(level["pool"], f"{key}.pool")
    return budgets


def _others(others, ids) -> dict[str, dict]:
    """The document's other scales, checked: each scale's claims among `ids`."""
    found = {}
    for scale, spec in typed(others, dict, "others", "an object {SCALE: {claims, pool}}").items():
        typed(spec, dict, f"others.{scale}", "an object {claims, pool}")
        found[scale] = {"claims": paths(spec.get("claims", {}), f"others.{scale}.claims"),
                        "pool": paths(spec.get("pool", {}), f"others.{scale}.pool")}
        _ids(found[scale]["claims"], ids, f"others.{scale}.claims")
    return found
