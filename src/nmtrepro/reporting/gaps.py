"""A claim's gap over training, from what every training already logs: the difference in validation NLL
(bits a target token, system minus baseline) at each validation step, per seed pair, and its trend over
the last half of training; and, where the run kept shorter budgets' windows (nmtrepro.study.budgets), the
BLEU difference per seed pair at each budget.

A BLEU verdict is taken at one budget; the curves say whether the gap was still moving there. A system
ahead has Δ < 0 (a lower NLL); where the trend's interval lies on the other side of zero from the last
Δ, the gap was closing toward zero when training stopped, and a verdict taken there may not hold at a
longer budget (the default run's +Fusing_Diverse: +2.35 BLEU at `tiny`, half that at 2x and 4x the
updates; docs/results.md, the budget sweep). The seed pairs are the significance test's: a system's
seed k against the baseline's seed k, each pair on the validation steps both logged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.files import InputError, atomic_open
from ..evaluation.significance import Reference
from .render import PALETTE, figure

PER_UPDATES = 1000  # the slope's unit: bits a target token per this many updates
MIN_POINTS = 3      # validation steps in the last half that a seed pair's slope needs


def valid_nll(path: str) -> pd.Series:
    """The validation NLL (bits a target token) of a training curve TSV (train.py), by step."""
    try:
        curve = pd.read_csv(path, sep="\t")
    except (OSError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: not a training curve ({err})") from err
    if not {"step", "valid_nll"} <= set(curve):
        raise InputError(f"{path}: a training curve needs step and valid_nll columns, has {list(curve)}")
    rows = curve.dropna(subset=["valid_nll"])
    return rows.groupby("step")["valid_nll"].last()


def gaps(system: list[str], baseline: list[str]) -> pd.DataFrame:
    """(step, pair, delta) rows: system seed k's validation NLL minus the baseline seed k's, at the steps
    both logged; pairs numbered from 1 in the order given."""
    if len(system) != len(baseline) or not system:
        raise InputError(f"the gap over training pairs seeds: {len(system)} system curves, {len(baseline)} baseline")
    rows = []
    for pair, (ours, theirs) in enumerate(zip(system, baseline), 1):
        delta = (valid_nll(ours) - valid_nll(theirs)).dropna()
        rows += [{"step": int(step), "pair": pair, "delta": float(value)} for step, value in delta.items()]
    return pd.DataFrame(rows, columns=["step", "pair", "delta"])


@dataclass(frozen=True)
class Trend:
    """The slope of Δ over the last half of training (per PER_UPDATES updates), the mean of the seed
    pairs' least-squares slopes, with its 95 % interval (t over the pairs; one pair: its fit's own), and
    the mean Δ at the last step all pairs logged."""
    slope: float
    low: float
    high: float
    final: float
    pairs: int

    @property
    def closing(self) -> bool:
        """Δ moving toward zero at 95 %: the interval wholly on the other side of zero from the last Δ."""
        return bool((self.final > 0 and self.high < 0) or (self.final < 0 and self.low > 0))


def trend(table: pd.DataFrame) -> Trend | None:
    """`gaps`' trend over the second half of the steps; None where a pair has fewer than MIN_POINTS there."""
    if table.empty:
        return None
    half = table[table["step"] >= table["step"].max() / 2]
    fits = []                                 # (slope, x, residuals) of each pair
    for _, rows in half.groupby("pair"):
        if len(rows) < MIN_POINTS:
            return None
        x, y = rows["step"].to_numpy(float) / PER_UPDATES, rows["delta"].to_numpy(float)
        slope, intercept = np.polyfit(x, y, 1)
        fits.append((slope, x, y - (slope * x + intercept)))
    slopes, k = [fit[0] for fit in fits], len(fits)
    if k > 1:
        half_width = Reference(k - 1).ppf(0.975) * np.std(slopes, ddof=1) / math.sqrt(k)
    else:                                     # one pair: the least-squares slope's own standard error
        _, x, residual = fits[0]
        error = math.sqrt((residual @ residual) / max(len(x) - 2, 1) / ((x - x.mean()) @ (x - x.mean())))
        half_width = Reference(max(len(x) - 2, 1)).ppf(0.975) * error
    last = table.groupby("step")["pair"].nunique()
    final = table[table["step"] == last[last == k].index.max()]["delta"].mean()
    mean, half_width = float(np.mean(slopes)), float(half_width)
    return Trend(mean, mean - half_width, mean + half_width, float(final), k)


def qualifier(found: Trend | None) -> str:
    """The words a verdict carries where the gap was closing; empty otherwise."""
    if found is None or not found.closing:
        return ""
    return (f"the gap was closing when training stopped (Δ valid NLL {found.final:+.3f} bits, "
            f"{found.slope:+.3f} per {PER_UPDATES:,} updates)")


def bleu_at_budgets(points: list[tuple[int, dict]]) -> pd.DataFrame:
    """(updates, pair, delta) rows from (the system's updates, its significance entry) at each budget:
    each seed pair's Δ BLEU, pairs numbered from 1 in the entry's seed order."""
    return pd.DataFrame([{"updates": updates, "pair": pair, "delta": seed["delta"]}
                         for updates, entry in points for pair, seed in enumerate(entry["seeds"], 1)],
                        columns=["updates", "pair", "delta"])


def _seed_lines(ax, table: pd.DataFrame, x: str, marker: str | None = None) -> None:
    """Each seed pair's Δ (thin) and their mean (thick) over `x`, and zero."""
    for _, pair in table.groupby("pair"):
        ax.plot(pair[x], pair["delta"], color=PALETTE[0], alpha=0.35, linewidth=0.8, marker=marker, markersize=3)
    mean = table.groupby(x)["delta"].mean()
    ax.plot(mean.index, mean.values, color=PALETTE[0], linewidth=2, marker=marker)
    ax.axhline(0, color="black", linewidth=0.6)


def _gain_side(ax, gain_below_zero: bool) -> None:
    """Shade the side of zero where the paper's gain lies."""
    low, high = ax.get_ylim()
    ax.axhspan(*((low, 0) if gain_below_zero else (0, high)), color=PALETTE[1], alpha=0.08, linewidth=0)
    ax.set_ylim(low, high)


def _label(ax, title: str, y: str) -> None:
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("updates", fontsize=8)
    ax.set_ylabel(y, fontsize=8)
    ax.tick_params(labelsize=7)


def gap_figure(panels: dict[str, tuple[pd.DataFrame, Trend | None, int]], scale: str | None = None,
               budgets: dict[str, pd.DataFrame] | None = None):
    """Small multiples, one panel a claim ({sentence: (gaps, trend, the paper's sign of Δ BLEU)}): each
    seed pair's Δ valid NLL over the updates (thin), their mean (thick), zero, and the side of zero the
    paper's gain lies on (shaded: a BLEU gain is a lower NLL). With `budgets` ({sentence:
    `bleu_at_budgets`}), each claim's row adds its Δ BLEU at each budget beside it."""
    budgets = budgets or {}
    columns = 2 if budgets else min(3, len(panels))
    rows = len(panels) if budgets else math.ceil(len(panels) / columns)
    title = "Δ valid NLL over training, system − baseline (thin: seed pairs; shaded: the side of the paper's gain)"
    if budgets:
        title += "; right: Δ BLEU at each budget"
    fig = figure(title, scale, figsize=(4.2 * columns, 0.6 + 2.6 * rows))
    grid = fig.subplots(rows, columns, squeeze=False)
    axes = grid[:, 0] if budgets else grid.ravel()
    for row, (text, (table, found, sign)) in enumerate(panels.items()):
        short = text if len(text) < 60 else text[:57] + "..."
        if budgets:
            ax = grid[row, 1]
            if text in budgets:
                _seed_lines(ax, budgets[text], "updates", marker="o")
                _gain_side(ax, sign < 0)
                _label(ax, short, "Δ BLEU")
            else:
                ax.set_visible(False)
        ax = axes[row]
        _seed_lines(ax, table, "step")
        _gain_side(ax, sign > 0)
        note = f"\nslope {found.slope:+.3f} [{found.low:+.3f}, {found.high:+.3f}] / 1k" if found else ""
        _label(ax, short + note, "Δ valid NLL (bits)")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    return fig


GAP_COLUMNS = ["claim", "step", "pair", "delta"]


def write_gaps(path: str, panels: dict[str, tuple[pd.DataFrame, Trend | None, int]]) -> None:
    """A page's gaps over training as a TSV (claim, step, pair, delta), which the page across scales and
    `nmtrepro export-claims` read: other scales' curves beside this one's without their trainings."""
    rows = [table.assign(claim=text) for text, (table, _, _) in panels.items()]
    table = pd.concat(rows)[GAP_COLUMNS] if rows else pd.DataFrame(columns=GAP_COLUMNS)
    with atomic_open(path) as handle:
        table.to_csv(handle, sep="\t", index=False)


def read_gaps(path: str) -> dict[str, pd.DataFrame]:
    """`write_gaps`' TSV back: {claim: (step, pair, delta) rows}."""
    try:
        table = pd.read_csv(path, sep="\t")
    except (OSError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: not a gap table ({err})") from err
    if list(table) != GAP_COLUMNS:
        raise InputError(f"{path}: a gap table has the columns {GAP_COLUMNS}, this one {list(table)}")
    return {text: rows.drop(columns="claim") for text, rows in table.groupby("claim", sort=False)}


def scales_gap_figure(gaps: dict[str, dict[str, pd.DataFrame]]):
    """The across-scales page's small multiples ({claim: {scale: `gaps` rows}}): one panel a claim, each
    scale its colour, its seed pairs thin and their mean thick, over the updates of its own training."""
    columns = min(2, len(gaps))
    rows = math.ceil(len(gaps) / columns)
    scales = list(dict.fromkeys(scale for by_scale in gaps.values() for scale in by_scale))
    fig = figure("Δ valid NLL over training at each scale, system − baseline (thin: seed pairs)", None,
                 figsize=(5.6 * columns, 0.8 + 2.8 * rows))
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (text, by_scale) in zip(axes, gaps.items()):
        for scale, table in by_scale.items():
            colour = PALETTE[scales.index(scale) % len(PALETTE)]
            for _, pair in table.groupby("pair"):
                ax.plot(pair["step"], pair["delta"], color=colour, alpha=0.3, linewidth=0.8)
            mean = table.groupby("step")["delta"].mean()
            ax.plot(mean.index, mean.values, color=colour, linewidth=2, label=scale if len(scale) < 40 else scale[:37] + "...")
        ax.axhline(0, color="black", linewidth=0.6)
        _label(ax, text if len(text) < 70 else text[:67] + "...", "Δ valid NLL (bits)")
        ax.legend(fontsize=7)
    for ax in axes[len(gaps):]:
        ax.set_visible(False)
    return fig


def no_curves(scale: str | None = None):
    """The gap figure of a page none of whose claims trained at this scale."""
    fig = figure(None, scale, figsize=(6, 1.2))
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, "no claim on this page trained at this scale: no gap over training", ha="center",
            va="center", fontsize=9)
    return fig
