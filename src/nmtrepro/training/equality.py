"""Whether the fast path trains as the eager step: two trainings of one experiment from the same seed and
batches, `fast: off` and a fast path, compared by their update losses and final weights.

On a GPU in bf16 the two differ by rounding, and the rounding compounds over the updates, so the verdict
is the largest relative difference of the update losses and that of all the weights together
(||fast - eager|| / ||eager||), against a tolerance of the precision. The tensor that differs most is
named for information only: a weight whose gradient is zero in exact arithmetic (a bias before a
softmax, as in +PR's attentive pooling) gets rounding noise for a gradient on both paths, which Adam
scales to full-size, unrelated steps. bench/fast_equality.py runs the trainings on the device in question.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from . import checkpoint


def losses(curve: Path) -> dict[int, float]:
    """Update -> training loss, from a run's curve.tsv (the updates that logged one)."""
    with open(curve) as handle:
        return {int(row["step"]): float(row["train_loss"]) for row in csv.DictReader(handle, delimiter="\t")
                if row.get("train_loss")}


def compare(eager: Path, fast: Path) -> dict:
    """Largest relative differences between two run folders' (curve.tsv, final.pt) update losses and
    weights; runs that logged other updates are an error, not a pass."""
    a_loss, b_loss = losses(eager / "curve.tsv"), losses(fast / "curve.tsv")
    if not a_loss or a_loss.keys() != b_loss.keys():
        raise RuntimeError(f"updates logged eager {sorted(a_loss)}, fast {sorted(b_loss)}")
    loss = max(abs(b_loss[s] - a_loss[s]) / abs(a_loss[s]) for s in a_loss)
    a, b = (checkpoint.load(run / "final.pt")["model"] for run in (eager, fast))
    names = [name for name, value in a.items() if value.is_floating_point()]
    diff = {name: (b[name].float() - a[name].float()).norm().item() for name in names}
    size = {name: a[name].float().norm().item() for name in names}
    worst = max(names, key=lambda name: diff[name] / max(size[name], 1e-12))
    return {"updates": len(a_loss), "loss_rel": loss,
            "weight_rel": math.sqrt(sum(d * d for d in diff.values()) / sum(n * n for n in size.values())),
            "worst_tensor": f"{worst} {diff[worst] / max(size[worst], 1e-12):.1e}"}
