"""A claims page's claims beyond its own verdict: at shorter budgets of the same trainings (`at_budgets`),
at other scales (`elsewhere`), and their gap in validation NLL over training (`over_training`), each
judged by the page's own procedure (evaluation/verdicts.py), each giving the reading a clause.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..evaluation.pooled import seed_noises
from ..evaluation.verdicts import (CI, COLUMNS, HIDDEN, NOT_MEASURED, UNJUDGED, Claim, assess, build_claims, load,
                                   verdict_word)
from . import gaps as budget

BUDGET_COLUMNS = ["claim", "budget", "updates", "ours Δ", "Δ per seed", CI, "p", "page p", "verdict"]


def at_budgets(claims: list[Claim], budgets: dict, sigs: dict[int, dict], table: pd.DataFrame):
    """Each claim at each shorter budget (`PageInputs.budgets`, by claim id), judged as the page judges it (each budget a
    family of its own under the page's procedure, its seed noise pooled over the central claims at that
    budget), then at the page's own: the rows (BUDGET_COLUMNS), each claim's Δ BLEU per seed pair at
    each budget ({sentence: budget.bleu_at_budgets}) and the reading's clause on verdicts that change
    with the budget."""
    rows, points = [], {}
    for level in budgets["levels"]:
        here = [replace(claim, significance=level["claims"][claim.id]["significance"])
                if claim.id in level["claims"] else replace(claim, comparable=False, significance=NOT_MEASURED)
                for claim in claims]
        entries = load(here)
        judged = assess(here, entries, seed_noises(level["pool"], [here[i].metric for i in entries]))
        for i in entries:
            updates = level["claims"][claims[i].id]["updates"]
            label = level["claims"][claims[i].id].get("label", level["label"])  # the share its window reaches
            rows.append({"budget": label, "updates": updates, **judged.iloc[i].to_dict()})
            points.setdefault(claims[i].text, []).append((updates, entries[i]))
    for i, claim in enumerate(claims):
        if claim.text in points and i in sigs:
            rows.append({"budget": budgets["final"], "updates": budgets["updates"][claim.id], **table.iloc[i].to_dict()})
            points[claim.text].append((budgets["updates"][claim.id], sigs[i]))
    found = pd.DataFrame(rows, columns=COLUMNS + HIDDEN + ["budget", "updates"])
    order = {claim.text: i for i, claim in enumerate(claims)}
    found = found.sort_values(["claim", "updates"], key=lambda c: c.map(order) if c.name == "claim" else c, kind="stable")
    changing = [text for text, rows in found.groupby("claim", sort=False)
                if rows["verdict"].map(verdict_word).nunique() > 1]
    clause = ""
    if changing:
        each = "; ".join(f"{text} (" + ", ".join(
            f"{verdict_word(v)} at {u:,}" for u, v in zip(rows["updates"], rows["verdict"])) + " updates)"
            for text, rows in found[found["claim"].isin(changing)].groupby("claim", sort=False))
        clause = f" The verdict changes with the training budget for {len(changing)} of them: {each}."
    return found, {text: budget.bleu_at_budgets(p) for text, p in points.items()}, clause


def elsewhere(claims: list[Claim], table: pd.DataFrame, others: dict, scale: str | None) -> str:
    """The reading's clause on each claim whose verdict at another scale (`PageInputs.others`; judged
    by this page's procedure over the claims that scale holds, with that scale's pooled seed noise) is another
    word than this run's: a converged run that finds no gain where the laptop's does says so here."""
    ours = dict(zip(table["claim"], table["verdict"].map(verdict_word)))
    clauses = []
    for other, spec in others.items():
        held = [replace(claim, significance=spec["claims"][claim.id]) for claim in claims if claim.id in spec["claims"]]
        held = [claim for claim in held if not ours[claim.text].startswith(UNJUDGED)]
        if not held:
            continue
        theirs = build_claims(held, spec["pool"])
        differing = [f"{text} ({ours[text]} here, {verdict_word(v)} there)"
                     for text, v in zip(theirs["claim"], theirs["verdict"])
                     if not v.startswith(UNJUDGED) and verdict_word(v) != ours[text]]
        if differing:
            clauses.append(f" At {other} the verdict differs from this run's ({scale or 'this scale'}) for "
                           f"{len(differing)}: {'; '.join(differing)}.")
    return "".join(clauses)


def over_training(claims: list[Claim], curves: dict, table: pd.DataFrame, scale: str | None):
    """The gap over training of each claim `curves` names by its id (gaps.py): the table with the qualifier of a
    closing gap added to its verdict, the reading's clause on them, and the small multiples' panels
    (empty where `curves` names none)."""
    panels, closing = {}, []
    verdicts = table["verdict"].copy()
    for row, claim in enumerate(claims):
        if claim.id not in curves:
            continue
        found = budget.gaps(curves[claim.id]["system"], curves[claim.id]["baseline"])
        trend = budget.trend(found)
        panels[claim.text] = (found, trend, claim.direction if claim.margin is None else 1)
        words = budget.qualifier(trend)
        if words:
            verdicts.iloc[row] = f"{verdicts.iloc[row]}; {words}"
            closing.append(claim.text)
    clause = (f" The gap in validation NLL was closing when training stopped for {len(closing)} of them: "
              f"{'; '.join(closing)}." if closing else "")
    return table.assign(verdict=verdicts), clause, panels

