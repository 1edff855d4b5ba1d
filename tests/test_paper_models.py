"""Every model variant a paper-scale run trains, built at its paper size, takes one real training step on
CPU: a shape, an option or a memory layout that only the paper's sizes reach fails here, not after a
cluster queue."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nmtrepro.study.config import load, model_options
from nmtrepro.core.pos import POS_VOCAB
from nmtrepro.data.parse import pad_spans
from nmtrepro.models import REGISTRY, build_model
from nmtrepro.training.criterion import model_loss
from nmtrepro.training.fast import stays_eager

ROOT = Path(__file__).resolve().parents[1]
VOCAB = {"src_vocab": 1000, "tgt_vocab": 900}  # the embeddings' rows change nothing else


def paper_variants() -> dict[str, dict]:
    """Each distinct resolved model of the paper scale, under its first variant's name."""
    config, _ = load(ROOT / "config.yaml", ["scale=paper"])
    out, seen = {}, set()
    for name in config["models"]:
        options = model_options(config, name, f"models.{name}")
        key = json.dumps(options, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out[name] = options
    return out


VARIANTS = paper_variants()


def batch(extra_inputs) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Two source sentences (one padded) with the inputs the family reads, and their targets."""
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 2], [11, 12, 13, 2, 0, 0, 0]])
    net_input = {"src": src}
    if "spans" in extra_inputs:
        net_input["spans"] = pad_spans([[(0, 2), (2, 5), (5, 6), (6, 7)], [(0, 1), (1, 3), (3, 4)]])
    if "pos" in extra_inputs:
        tags = [POS_VOCAB.index[t] for t in ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN")]
        net_input["pos"] = torch.tensor([tags + [POS_VOCAB.eos], tags[:3] + [POS_VOCAB.eos, 0, 0, 0]])
    target = torch.tensor([[14, 15, 16, 17, 2], [18, 19, 2, 0, 0]])
    prev = torch.cat([torch.full((2, 1), 1), target[:, :-1].masked_fill(target[:, :-1].eq(2), 0)], dim=1)
    return net_input, prev, target


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_paper_size_model_takes_a_training_step_on_cpu(variant):
    """... and every parameter gets a gradient: DistributedDataParallel, which every multi-GPU training
    runs under, fails the second update on a parameter that took none (the smoke run trains only the Big
    models in two processes, so this is where a variant's unused parameter shows)."""
    torch.manual_seed(0)
    model = build_model({**VARIANTS[variant], **VOCAB}).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)  # Adam's state would double the memory
    net_input, prev, target = batch(model.config.extra_inputs)
    loss, nll = model_loss(model, net_input, prev, target, 0.1)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(nll) and loss > 0
    missing = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"{variant}: no gradient for {missing}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    before = next(p for p in model.parameters() if p.grad is not None).detach().clone()
    optimizer.step()
    assert not torch.equal(before, next(p for p in model.parameters() if p.grad is not None))


@pytest.mark.parametrize("variant", sorted(v for v in VARIANTS if not stays_eager(REGISTRY[VARIANTS[v]["family"]])))
def test_a_paper_size_training_step_never_waits_for_the_device(variant):
    """The issue's fast path has no host sync inside the accumulation loop. A step on the meta device,
    whose tensors hold no data, raises at any read that would make the host wait for a GPU's queue:
    `.item()`, `.cpu()`, `nonzero`, a boolean mask. The step is the compiled one's: the static loss and a
    bucketed batch (parser phrases carry their width as a shape). NPMT stays eager and reads its
    lengths once (test_npmt)."""
    with torch.device("meta"):
        model = build_model({**VARIANTS[variant], **VOCAB}).train()
    net_input, prev, target = batch(model.config.extra_inputs)
    if "spans" in net_input:
        net_input["span_width"] = torch.zeros(2, 8, dtype=torch.bool)
    meta = {name: tensor.to("meta") for name, tensor in net_input.items()}
    loss, _ = model_loss(model, meta, prev.to("meta"), target.to("meta"), 0.1, static=True)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
