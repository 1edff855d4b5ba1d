"""Parameter counts of the configured model variants at any scale, built on the meta device.

Counting needs no memory: the models are built on torch's meta device, so paper-size models (even
Transformer Big with a 86k vocabulary) cost nothing to "build". The `param-count` command prints
every variant in config.yaml at a scale with its total and non-embedding parameters.

Paper A's vocabulary. Its totals, 88.1M (Base) and 264.1M (Big), fix the vocabulary only together
with the output layer: with Neutron's layers the non-embedding parts are 44,097,536 and 176,275,456,
so a tied, bias-free output layer needs 85,845..86,039 embedding rows for Base but 85,718..85,814
for Big; no vocabulary gives both. Neutron's classifier has a bias of target-vocabulary size, and
with it (`output_bias`) the two totals pin Vsrc + Vtgt between 85,700 and 85,785 and the target
vocabulary to a window that narrows as the sum grows (Vtgt 30.5k..32.8k at 85,783, 38.2k..46.1k at
85,770): the split itself is not identified. PAPER_A_VOCAB is one member with a plausible split
(joint BPE 32k, English source larger than the 40k German target side); any member reproduces both
totals to 0.1M.
"""
from __future__ import annotations

import torch

from ..core.files import write_json
from ..models import build_model, count_parameters

PAPER_A_VOCAB = {"src_vocab": 45_767, "tgt_vocab": 40_000}


def parameter_counts(spec: dict) -> dict:
    """Total and non-embedding parameter counts of a model spec (family, vocabularies, options)."""
    with torch.device("meta"):
        model = build_model(spec)
    embedding = sum(p.numel() for name, p in model.named_parameters() if name.endswith("embed.table.weight"))
    total = count_parameters(model)
    return {"total": total, "non_embedding": total - embedding}


def variant_counts(config: dict, vocab: dict, extra: dict | None = None) -> dict[str, dict]:
    """Counts for every model variant of `config` at its scale, with `extra` options added to each."""
    from ..config import model_options

    return {name: parameter_counts({**model_options(config, name, f"models.{name}"), **vocab, **(extra or {})})
            for name in config["models"]}


def add_arguments_param_count(parser) -> None:
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--scale", default="paper", help="scale whose model sizes to use")
    parser.add_argument("--src-vocab", type=int, default=PAPER_A_VOCAB["src_vocab"])
    parser.add_argument("--tgt-vocab", type=int, default=PAPER_A_VOCAB["tgt_vocab"])
    parser.add_argument("--output-bias", action="store_true",
                        help="count a bias on the output layer, as Neutron (paper A's code) has")
    parser.add_argument("--out", help="JSON file for the counts")


def run_param_count(args) -> None:
    from ..config import load

    config, _ = load(args.config, [f"scale={args.scale}"])
    vocab = {"src_vocab": args.src_vocab, "tgt_vocab": args.tgt_vocab}
    counts = variant_counts(config, vocab, {"output_bias": True} if args.output_bias else None)
    for name, c in counts.items():
        print(f"{name:28s} {c['total'] / 1e6:8.2f}M total {c['non_embedding'] / 1e6:8.2f}M non-embedding")
    if args.out:
        write_json(args.out, {"scale": args.scale, **vocab, "output_bias": args.output_bias, "models": counts})
