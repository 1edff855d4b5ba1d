"""Analyses beyond corpus BLEU, one module per kind: each measures and renders its paper figure or table.

This file holds what the workflow reads of an analysis's config while it is parsed, so that the parse
imports no kind's module (and with it torch)."""


def groups_args(systems: list[dict], experiment: str) -> list[str]:
    """`--groups` for an experiment of a head_similarity analysis (its system's `groups`), or nothing."""
    for system in systems:
        if system["experiment"] == experiment and "groups" in system:
            return ["--groups", *system["groups"]]
    return []
