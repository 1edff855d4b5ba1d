"""SentEval's probing classifier: an MLP with one Sigmoid hidden layer (or logistic regression),
hyper-parameters tuned on dev, Adam, early stopping on dev accuracy (Conneau et al. 2018, Sec. 3).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Grid:
    nhid: tuple[int, ...] = (50, 100, 200)      # 0 = logistic regression (WordContent)
    dropout: tuple[float, ...] = (0.0, 0.1, 0.2)
    weight_decay: tuple[float, ...] = (0.0, 1e-5, 1e-4, 1e-3)
    max_epochs: int = 200
    patience: int = 5                           # epochs without dev gain before stopping (SentEval: tenacity 5)
    batch_size: int = 256
    lr: float = 1e-3


class GatedSum(nn.Module):
    """Paper B's probe of a model with two encoders: g = sigmoid(W[s_1; s_2] + b), g s_1 + (1 - g) s_2,
    the gate learned with the classifier (the NMT model has no such gate to reuse)."""

    def __init__(self, dim: int):
        super().__init__()
        self.gate = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, 2, d) -> (N, d)."""
        g = torch.sigmoid(self.gate(x.flatten(1)))
        return g * x[:, 0] + (1 - g) * x[:, 1]


def build(shape: tuple[int, ...], classes: int, nhid: int, dropout: float) -> nn.Module:
    """A classifier of sentence vectors of `shape`: (d,), or (2, d) for two encoders' vectors."""
    dim = shape[-1]
    if nhid == 0:
        head = nn.Linear(dim, classes)
    else:
        head = nn.Sequential(nn.Linear(dim, nhid), nn.Dropout(dropout), nn.Sigmoid(), nn.Linear(nhid, classes))
    if len(shape) == 1:
        return head
    if shape[0] != 2:
        raise ValueError(f"sentence vectors of shape {shape}: one or two per sentence are supported")
    return nn.Sequential(GatedSum(dim), head)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return correct(model, x, y).float().mean().item() if len(y) else 0.0


def correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(N,) whether the classifier gets each example right."""
    model.eval()
    with torch.no_grad():
        return model(x).argmax(-1) == y


def fit(x_tr, y_tr, x_va, y_va, classes: int, nhid: int, dropout: float, weight_decay: float,
        grid: Grid, seed: int = 1) -> tuple[nn.Module, float]:
    """Train one configuration; return the model at its best dev epoch and that dev accuracy."""
    torch.manual_seed(seed)
    model = build(tuple(x_tr.shape[1:]), classes, nhid, dropout)
    opt = torch.optim.Adam(model.parameters(), lr=grid.lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    best, best_state, stale = -1.0, None, 0
    for _ in range(grid.max_epochs):
        model.train()
        for idx in torch.randperm(len(y_tr), generator=gen).split(grid.batch_size):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx]).backward()
            opt.step()
        dev = accuracy(model, x_va, y_va)
        if dev > best:
            best, best_state, stale = dev, {k: v.clone() for k, v in model.state_dict().items()}, 0
        else:
            stale += 1
            if stale >= grid.patience:
                break
    model.load_state_dict(best_state)
    return model, best


def probe(features: dict[str, torch.Tensor], labels: dict[str, list[str]], grid: Grid,
          logistic: bool = False) -> dict:
    """Tune on dev over the grid, report test accuracy of the best dev configuration.

    features[split]: (N, d) or (N, 2, d) float tensors (see `build`); labels[split]: class names; splits tr/va/te.
    """
    names = sorted(set(labels["tr"]))
    index = {n: i for i, n in enumerate(names)}
    keep = {s: [i for i, l in enumerate(labels[s]) if l in index] for s in ("tr", "va", "te")}
    x = {s: features[s][keep[s]] for s in keep}
    y = {s: torch.tensor([index[labels[s][i]] for i in keep[s]], dtype=torch.long) for s in keep}
    configs = itertools.product((0,) if logistic else grid.nhid, (0.0,) if logistic else grid.dropout,
                                grid.weight_decay)
    best = None
    for nhid, dropout, wd in configs:
        model, dev = fit(x["tr"], y["tr"], x["va"], y["va"], len(names), nhid, dropout, wd, grid)
        if best is None or dev > best[0]:
            best = (dev, model, {"nhid": nhid, "dropout": dropout, "weight_decay": wd})
    dev, model, params = best
    right = correct(model, x["te"], y["te"])
    # each test example's outcome: a claim on the accuracy resamples them (analyses/quantity_test.py)
    return {"dev": dev, "test": accuracy(model, x["te"], y["te"]), "classes": len(names),
            "n": {s: len(y[s]) for s in y}, "params": params, "correct": right.int().tolist()}
