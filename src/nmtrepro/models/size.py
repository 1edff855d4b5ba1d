"""Model size: the one parameter counter (speed, param-count, plan and training all report its numbers).

Embeddings are counted apart because papers report both: paper A's 88.1M for Transformer Base includes
them, the non-embedding count does not depend on the vocabulary. A table shared between embedding
layers (or tied to the output layer) counts once.
"""
from __future__ import annotations

import torch
from torch import nn

from . import build_model


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Total, embedding (every nn.Embedding's table) and non-embedding parameters of `model`."""
    total = sum(p.numel() for p in model.parameters())
    tables = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding)}
    embedding = sum(tables.values())
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def spec_parameter_counts(spec: dict) -> dict[str, int]:
    """`parameter_counts` of the model a spec builds, built on the meta device: no memory, so a
    paper-size model (even Transformer Big with an 86k vocabulary) costs nothing to count."""
    with torch.device("meta"):
        return parameter_counts(build_model(spec))
