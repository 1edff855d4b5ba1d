"""`nmtrepro param-count`: the parameter counts of every model variant in config.yaml at a scale, each
model built on the meta device (the one counter: models.size).

Its default vocabulary is paper A's, PAPER_A_VOCAB: the paper prints its totals, not its vocabulary,
and the totals pin the vocabulary only in part (docs/papers.md#paper-as-vocabulary says how far).
"""
from __future__ import annotations

from ..core.files import write_json
from ..models.size import spec_parameter_counts
from ..study.config import load, model_options

PAPER_A_VOCAB = {"src_vocab": 45_767, "tgt_vocab": 40_000}


def variant_counts(config: dict, vocab: dict, extra: dict | None = None) -> dict[str, dict]:
    """Counts for every model variant of `config` at its scale, with `extra` options added to each."""
    return {name: spec_parameter_counts({**model_options(config, name, f"models.{name}"), **vocab, **(extra or {})})
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
    config, _ = load(args.config, [f"scale={args.scale}"])
    vocab = {"src_vocab": args.src_vocab, "tgt_vocab": args.tgt_vocab}
    counts = variant_counts(config, vocab, {"output_bias": True} if args.output_bias else None)
    for name, c in counts.items():
        print(f"{name:28s} {c['total'] / 1e6:8.2f}M total {c['non_embedding'] / 1e6:8.2f}M non-embedding")
    if args.out:
        write_json(args.out, {"scale": args.scale, **vocab, "output_bias": args.output_bias, "models": counts})
