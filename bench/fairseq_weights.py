"""Our trained tiny Transformer as a fairseq checkpoint, so both tools can decode the same weights.

    bench/.venv-fairseq/bin/python bench/fairseq_weights.py OURS.pt TEMPLATE.pt OUT.pt

TEMPLATE.pt is a fairseq checkpoint of the same sizes and dictionaries (the one bench/fairseq_compare.py
has just trained); OUT.pt keeps its configuration, with three changes that make fairseq compute exactly
our function rather than its own variant of it:
- positions: fairseq numbers tokens from padding_idx + 1 and ours from 0, so its sinusoidal table
  would be shifted. OUT uses fairseq's learned positions, filled with our sinusoids at fairseq's indices.
- the decoder's first input: fairseq starts with EOS and ours with BOS. With the tied output layer that
  row cannot be both, so OUT unties it: the input table's EOS row holds our BOS vector (EOS is never fed
  back: a hypothesis that emits it is finished) and the output layer holds our table as it is.
- biases: ours has none on the attention projections and the FFN's output (Neutron); OUT zeroes fairseq's.
fairseq numbers its specials bos=0, pad=1, eos=2, unk=3 and ours pad=0, bos=1, eos=2, unk=3; both read
the remaining symbols from the same dictionary files, in order, so only the first two rows swap.
Runs under bench/.venv-fairseq (fairseq checkpoints pickle its configuration objects).
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import torch

OUR_ROW_OF_FAIRSEQ = {0: 1, 1: 0}  # fairseq bos <- our bos, fairseq pad <- our pad; the rest identical


@functools.cache
def our_layers():
    """Our models/layers.py, loaded by path: it imports only torch, while the package needs modules
    (sacremoses, ...) that the fairseq venv lacks."""
    path = Path(__file__).resolve().parents[1] / "src/nmtrepro/models/layers.py"
    spec = importlib.util.spec_from_file_location("nmtrepro_layers", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def reorder(table: torch.Tensor) -> torch.Tensor:
    """Our embedding rows in fairseq's vocabulary order."""
    order = torch.arange(table.size(0))
    for fairseq_row, our_row in OUR_ROW_OF_FAIRSEQ.items():
        order[fairseq_row] = our_row
    return table[order]


def positions(template: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """A learned-position table of the template's shape holding our sinusoid i at fairseq row padding_idx + 1 + i."""
    table = torch.zeros_like(template)
    table[padding_idx + 1:] = our_layers().sinusoidal_positions(table.size(0) - padding_idx - 1, table.size(1))
    return table


def attention(ours: dict, prefix: str, into: str, out: dict, d: int) -> None:
    k, v = ours[f"{prefix}.kv_proj.weight"].split(d)
    for name, weight in (("q_proj", ours[f"{prefix}.q_proj.weight"]), ("k_proj", k), ("v_proj", v),
                         ("out_proj", ours[f"{prefix}.out_proj.weight"])):
        out[f"{into}.{name}.weight"], out[f"{into}.{name}.bias"] = weight, torch.zeros(d)


def layer_norm(ours: dict, prefix: str, into: str, out: dict) -> None:
    out[f"{into}.weight"], out[f"{into}.bias"] = ours[f"{prefix}.weight"], ours[f"{prefix}.bias"]


def feed_forward(ours: dict, prefix: str, into: str, out: dict, d: int) -> None:
    out[f"{into}.fc1.weight"], out[f"{into}.fc1.bias"] = ours[f"{prefix}.inner.weight"], ours[f"{prefix}.inner.bias"]
    out[f"{into}.fc2.weight"], out[f"{into}.fc2.bias"] = ours[f"{prefix}.outer.weight"], torch.zeros(d)


def convert(ours: dict, spec: dict, template: dict) -> dict:
    """fairseq state dict (its names, its vocabulary order) of our pre-norm Transformer state dict."""
    if not spec.get("pre_norm", True) or spec.get("family") != "transformer" or spec.get("output_bias"):
        sys.exit(f"only the plain pre-norm transformer without output bias converts, not {spec}")
    d, pad = spec["d_model"], 1
    out: dict[str, torch.Tensor] = {}
    src, tgt = reorder(ours["src_embed.table.weight"]), reorder(ours["tgt_embed.table.weight"])
    out["encoder.embed_tokens.weight"] = src
    dec_in = tgt.clone()
    dec_in[2] = ours["tgt_embed.table.weight"][1]  # fairseq's first decoder input (EOS) is our BOS
    out["decoder.embed_tokens.weight"], out["decoder.output_projection.weight"] = dec_in, tgt
    for side in ("encoder", "decoder"):
        out[f"{side}.embed_positions.weight"] = positions(template[f"{side}.embed_positions.weight"], pad)
        layer_norm(ours, f"{side}_norm", f"{side}.layer_norm", out)
    # (our sublayer, fairseq's attention, fairseq's norm before it); decoder layers add cross-attention.
    attentions = {"encoder": [("self_attn", "self_attn", "self_attn_layer_norm")],
                  "decoder": [("self_attn", "self_attn", "self_attn_layer_norm"),
                              ("cross_attn", "encoder_attn", "encoder_attn_layer_norm")]}
    for side, sublayers in attentions.items():
        for i in range(spec[f"{side}_layers"]):
            ours_i, into = f"{side}.{i}", f"{side}.layers.{i}"
            for ours_name, name, norm in sublayers:
                attention(ours, f"{ours_i}.{ours_name}.sublayer", f"{into}.{name}", out, d)
                layer_norm(ours, f"{ours_i}.{ours_name}.norm", f"{into}.{norm}", out)
            feed_forward(ours, f"{ours_i}.ffn.sublayer", into, out, d)
            layer_norm(ours, f"{ours_i}.ffn.norm", f"{into}.final_layer_norm", out)
    for name, value in template.items():  # fairseq's version buffers and the like
        out.setdefault(name, value)
    return out


def main() -> None:
    ours_path, template_path, out_path = sys.argv[1:]
    ours = torch.load(ours_path, map_location="cpu", weights_only=False)
    fairseq = torch.load(template_path, map_location="cpu", weights_only=False)
    model_cfg = fairseq["cfg"]["model"]  # an argparse.Namespace in fairseq 0.12's checkpoints
    model_cfg.encoder_learned_pos = model_cfg.decoder_learned_pos = True
    model_cfg.share_decoder_input_output_embed = False
    # The template's model under the new options: its names and shapes (learned positions, output table).
    from fairseq import tasks
    from omegaconf import OmegaConf
    task = tasks.setup_task(OmegaConf.create(fairseq["cfg"]["task"]))
    template = task.build_model(model_cfg).state_dict()
    state = convert(ours["model"], ours["model_spec"], template)
    unknown, missing = set(state) - set(template), set(template) - set(state)
    if unknown or missing:
        sys.exit(f"names differ from fairseq's: {sorted(unknown)[:5]} not in fairseq, {sorted(missing)[:5]} missing")
    for name, value in state.items():
        if value.shape != template[name].shape:
            sys.exit(f"{name}: ours {tuple(value.shape)}, fairseq {tuple(template[name].shape)}")
    fairseq["model"] = state
    fairseq["last_optimizer_state"] = None
    torch.save(fairseq, out_path)
    print(f"wrote {out_path}: {len(state)} tensors from {ours_path}")


if __name__ == "__main__":
    main()
