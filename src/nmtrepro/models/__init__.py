"""Model registry: a config string names a family, the family's class builds the model.

Every family implements the decoding protocol that training and beam search rely on:
  encode(src) -> encoder state (a dict of tensors with batch first)
  decode(prev, enc, cache=None) -> hidden states (B, T, d); with a cache, `prev` holds only the new
      tokens and the cache carries earlier steps (incremental decoding)
  logits(hidden) -> (..., V) unnormalised scores
  reorder_encoder(enc, order) / reorder_cache(cache, order): pick batch rows for beam search
Families register with @register("name"); options come from config as keyword arguments. Every module
of this package is imported below (as fairseq does), so a new family is one new file here: no list of
families to extend anywhere else, the config schema included.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from torch import nn

from ..core.files import InputError

REGISTRY: dict[str, type[nn.Module]] = {}


def register(name: str):
    def wrap(cls):
        REGISTRY[name] = cls
        return cls
    return wrap


def build_model(spec: dict) -> nn.Module:
    """Build from a spec {family, src_vocab, tgt_vocab, **options}; unknown names fail clearly."""
    spec = dict(spec)
    family = spec.pop("family", None)
    if family not in REGISTRY:
        raise InputError(f"unknown model family {family!r}; known families: {', '.join(sorted(REGISTRY))}")
    cls = REGISTRY[family]
    accepted = set(inspect.signature(cls).parameters)
    unknown = sorted(set(spec) - accepted)
    if unknown:
        raise InputError(f"model family {family!r} has no option(s) {unknown}; it takes {sorted(accepted)}")
    return cls(**spec)


for _module in pkgutil.iter_modules(__path__):  # registers the families
    importlib.import_module(f"{__name__}.{_module.name}")
