"""Model registry: a config string names a family, the family's class builds the model.

Every family implements the decoding protocol that training, beam search and the analyses rely on:
  config.extra_inputs -> names of what encode reads besides src, e.g. ("spans",) for parser phrases,
      ("pos",) for POS tags (paper D);
      a batch's `net_input` dict holds "src" and exactly these (each a source annotation of
      `data.annotations`, which reads, makes and batches it), and every caller passes
      encode(**net_input)
  encode(src, **extra_inputs) -> encoder state (a dict of tensors with batch first); it is the only
      step that reads net_input: decoding reorders the encoder state, not the inputs
  decode(prev, enc, cache=None) -> hidden states (B, T, d); with a cache, `prev` holds only the new
      tokens and the cache carries earlier steps (incremental decoding)
  logits(hidden) -> (..., V) unnormalised scores
  reorder_encoder(enc, order) / reorder_cache(cache, order): pick batch rows for beam search
Families register with @register("name") and are built as cls(src_vocab, tgt_vocab, config): the
config is the family's `config_class` (a dataclass of `layers.ModelConfig` or a subclass) holding the
options that config.yaml names. Every module of this package is imported below (as fairseq does), so
a new family is one new file here: no list of families to extend anywhere else, the config schema
included.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import fields

from torch import nn

from ..core.files import InputError

REGISTRY: dict[str, type[nn.Module]] = {}


def register(name: str):
    def wrap(cls):
        REGISTRY[name] = cls
        return cls
    return wrap


def family_class(family: str) -> type[nn.Module]:
    if family not in REGISTRY:
        raise InputError(f"unknown model family {family!r}; known families: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[family]


def option_names(family: str) -> set[str]:
    """The options a family takes: the fields of its config class."""
    return {f.name for f in fields(family_class(family).config_class)}


def configure(spec: dict):
    """The family's config from {family, **options}; unknown option names fail clearly."""
    options = dict(spec)
    family = options.pop("family", None)
    accepted = option_names(family)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InputError(f"model family {family!r} has no option(s) {unknown}; it takes {sorted(accepted)}")
    return family_class(family).config_class(**options)


def build_model(spec: dict) -> nn.Module:
    """Build from a spec {family, src_vocab, tgt_vocab, **options} (what checkpoints store)."""
    options = dict(spec)
    src_vocab, tgt_vocab = options.pop("src_vocab"), options.pop("tgt_vocab")
    return family_class(spec.get("family"))(src_vocab, tgt_vocab, configure(options))


for _module in pkgutil.iter_modules(__path__):  # registers the families
    importlib.import_module(f"{__name__}.{_module.name}")


def warm_start_mismatch(own: dict, trained: dict) -> str | None:
    """Why a model with state dict `own` cannot start from the weights `trained` (a tensor it lacks or
    shapes differently), or None: a variant may add tensors, never drop or resize its baseline's. Either
    may map names to their shapes instead of tensors (the config's check knows shapes only)."""
    def shape(value) -> tuple[int, ...]:
        return tuple(getattr(value, "shape", value))

    for name, value in trained.items():
        if name not in own or shape(own[name]) != shape(value):
            found = "is missing" if name not in own else f"has shape {shape(own[name])}"
            return f"{name} {shape(value)} {found} in the new model"
    return None
