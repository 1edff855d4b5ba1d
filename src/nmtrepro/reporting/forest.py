"""A claims page's forest plot: one row a claim, ours beside the paper's difference (`forest_plot`); the
page across scales draws one row a (claim, scale) with it.
"""
from __future__ import annotations

import textwrap

import pandas as pd

from ..evaluation.quantities import QUANTITIES
from ..evaluation.verdicts import CONFIDENCE, MDE, METRIC_LABELS, POWER, Claim, verdict_word
from .claims_prose import verdict_label
from .render import PALETTE, figure


def forest_plot(claims: list[Claim], table: pd.DataFrame, scale: str | None = None):
    """One row a claim, top to bottom in the page's order: our mean difference (dot) with its interval
    (line) and each seed pair's difference (small grey dots), the paper's (diamond), zero, for a claim
    of no gain its margin (dashed), and the minimal detectable effect (a bar: the run detects a true
    difference beyond it with POWER); the verdict's word at the right. A claim unmeasured at this scale
    shows the paper's difference alone."""
    n = len(claims)
    fig = figure(f"Δ BLEU: ours ({CONFIDENCE:.0%} CI, seed pairs) beside the paper's", scale,
                 figsize=(9.5, 0.9 + 0.62 * n))
    ax = fig.subplots()
    ax.axvline(0, color="#444", linewidth=0.9, zorder=1)
    for row, (claim, (_, line)) in enumerate(zip(claims, table.iterrows())):
        y = n - 1 - row
        if claim.margin is not None:
            ax.plot([claim.margin] * 2, [y - 0.35, y + 0.35], "--", color="#777", linewidth=1, zorder=1)
        if not pd.isna(line["_low"]):
            ax.plot([line["_low"], line["_high"]], [y, y], color=PALETTE[0], linewidth=2.2, solid_capstyle="butt",
                    zorder=2)
        if line["_seeds"]:
            ax.scatter(line["_seeds"], [y - 0.18] * len(line["_seeds"]), s=14, color="#8a8a8a", zorder=3)
            ax.scatter([line["ours Δ"]], [y], s=42, color=PALETTE[0], zorder=4)
        if not pd.isna(line[MDE]):
            ax.scatter([claim.threshold + claim.direction * line[MDE]], [y], marker="|", s=160, color=PALETTE[1],
                       zorder=3)
        ax.scatter([claim.paper_delta], [y], marker="D", s=40, color=PALETTE[3], zorder=5)
        kind = verdict_label(line["verdict"]).kind
        ax.annotate(verdict_word(line["verdict"]), (1.01, y), xycoords=("axes fraction", "data"), va="center",
                    fontsize=8.5, color={"good": "#14532d", "bad": "#7f1d1d", "warn": "#78350f"}.get(kind, "#444"))
    named = [c.text + (f" [Δ {METRIC_LABELS[c.metric]}]" if c.metric in QUANTITIES else "") for c in reversed(claims)]
    ax.set_yticks(range(n), ["\n".join(textwrap.wrap(text, 48)) for text in named], fontsize=8.5)
    ax.set_ylim(-0.7, n - 0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("Δ BLEU (system − baseline)" + ("; a quantity's Δ in its units" * any(
        c.metric in QUANTITIES for c in claims)))
    handles = [ax.scatter([], [], s=42, color=PALETTE[0], label=f"ours: mean, {CONFIDENCE:.0%} CI"),
               ax.scatter([], [], s=14, color="#8a8a8a", label="ours: each seed pair"),
               ax.scatter([], [], marker="|", s=160, color=PALETTE[1], label=f"detectable at {POWER:.0%} power"),
               ax.scatter([], [], marker="D", s=40, color=PALETTE[3], label="paper")]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False)
    return fig
