"""Checkpoints: atomic saves in a rotating window, loading the latest, and averaging the last K.

A training checkpoint holds everything a resumed run needs to continue as if never stopped (model,
optimizer, data position, RNG state, curve so far). A model file (final, averaged) holds only the
model spec and weights: that is all decoding and analysis need.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import torch

from ..core.files import InputError, atomic_open
from ..models import build_model

log = logging.getLogger("nmtrepro.training.checkpoint")
NAME = re.compile(r"checkpoint_(\d+)\.pt$")


def checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint in `directory`, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := NAME.search(p.name))]
    return sorted(found)


def save(obj: dict, path: str | Path) -> None:
    with atomic_open(path, "wb") as handle:
        torch.save(obj, handle)


def save_rotating(state: dict, directory: str | Path, step: int, keep_last: int) -> Path:
    """Save `state` as checkpoint_<step>.pt and delete all but the newest `keep_last`."""
    path = Path(directory) / f"checkpoint_{step:08d}.pt"
    save(state, path)
    for _, old in checkpoints(directory)[:-keep_last]:
        old.unlink()
    return path


def load(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing checkpoint: {path}")
    return torch.load(path, map_location="cpu", weights_only=False)


def load_model(path: str | Path, device: str | torch.device = "cpu"):
    """Rebuild a model from a model file (or a training checkpoint) in eval mode."""
    blob = load(path)
    model = build_model(blob["model_spec"])
    model.load_state_dict(blob["model"])
    return model.to(device).eval()


def average(paths: list[Path]) -> dict:
    """Element-wise mean of the weights of several checkpoints of one model (Vaswani et al. 2017)."""
    total, spec = None, None
    for path in paths:
        blob = load(path)
        if spec is None:
            spec, total = blob["model_spec"], {k: v.double().clone() for k, v in blob["model"].items()}
            continue
        if blob["model_spec"] != spec:
            raise InputError(f"{path} holds a different model than {paths[0]}")
        for key, value in blob["model"].items():
            total[key] += value.double()
    model = {k: (v / len(paths)).to(torch.float32) for k, v in total.items()}
    return {"model_spec": spec, "model": model, "averaged": [str(p) for p in paths]}


def add_arguments_average(parser) -> None:
    parser.add_argument("--checkpoint-dir", required=True, help="training checkpoint directory")
    parser.add_argument("--last", type=int, required=True, help="how many of the newest checkpoints")
    parser.add_argument("--out", required=True, help="averaged model file")


def run_average(args) -> None:
    found = checkpoints(args.checkpoint_dir)
    if len(found) < args.last:
        raise InputError(f"{args.checkpoint_dir} holds {len(found)} checkpoints; average.last={args.last} "
                         "needs at least that many (raise train.keep_last)")
    chosen = [p for _, p in found[-args.last:]]
    log.info("averaging steps %s", [s for s, _ in found[-args.last:]])
    save(average(chosen), args.out)
