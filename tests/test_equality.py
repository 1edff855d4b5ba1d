"""Whether the fast path trains as the eager step (training/equality.py): the verdict's numbers."""
from __future__ import annotations

import pytest
import torch

from nmtrepro.training.equality import compare


def test_fast_equality_compares_every_update_loss_and_all_the_weights(tmp_path):
    """The largest relative loss difference over the updates, and the difference of all the weights
    together (a tensor apart only in rounding noise names itself, but does not decide); runs that logged
    other updates are an error, not a pass."""
    runs = {path: tmp_path / path for path in ("eager", "fast")}
    weights = {"eager": {"big": torch.ones(100), "noise": torch.full((2,), 1e-3)},
               "fast": {"big": torch.ones(100) * 1.001, "noise": torch.full((2,), -1e-3)}}
    for path, folder in runs.items():
        folder.mkdir()
        loss = {"eager": (2.0, 1.5), "fast": (2.0, 1.503)}[path]
        (folder / "curve.tsv").write_text("step\ttrain_loss\n1\t%s\n2\t%s\n3\t\n" % loss)
        torch.save({"model": weights[path]}, folder / "final.pt")
    row = compare(runs["eager"], runs["fast"])
    assert row["updates"] == 2 and row["loss_rel"] == pytest.approx(0.002)
    assert row["weight_rel"] == pytest.approx((0.01 ** 2 + 2 * 0.002 ** 2) ** 0.5 / (100 + 2e-6) ** 0.5, rel=1e-4)
    assert row["worst_tensor"].startswith("noise 2.0e+00")
    (runs["fast"] / "curve.tsv").write_text("step\ttrain_loss\n1\t2.0\n")
    with pytest.raises(RuntimeError, match=r"updates logged eager \[1, 2\], fast \[1\]"):
        compare(runs["eager"], runs["fast"])
