"""Which study a scale runs: `smoke` runs the paper scale's study on slices (`stands_for`), every other
scale its own. Its own module because both the experiments' resolution (`config`) and the claims each
scale judges (`budgets`) ask it, and `config` imports `budgets`."""
from __future__ import annotations


def study_scale(config: dict) -> str:
    """The scale whose study `config['scale']` runs: itself, or the one it `stands_for` (smoke runs
    the paper scale's tables, claims, analyses and model options on slices)."""
    return config["scales"][config["scale"]].get("stands_for", config["scale"])
