"""Our standard Transformer as a CTranslate2 model (`export-ct2`), and CTranslate2 decoding as ours decodes.

As CTranslate2's own converters (`converters/fairseq.py`, `opennmt_py.py`) do, the export fills a
`TransformerSpec` from the checkpoint's tensors by name and registers the two vocabularies; the names
are one table, `WEIGHTS`. What makes CTranslate2 compute exactly our function:
- embeddings are scaled by sqrt(d) (`scale_embeddings`), and the position encodings are our own
  sinusoids, given as a table (rows 0.., as ours count positions from 0; CTranslate2 would otherwise
  build its own, and fairseq's table starts past the padding index);
- the output layer is the target embedding (tied; `optimize` stores it once), plus Neutron's
  output bias where the model has one;
- pre-norm stacks end in a layer norm, post-norm ones do not (CTranslate2's `pre_norm` means both);
- CTranslate2 fuses Q, K and V of a self-attention into one projection, and K and V of a
  cross-attention, as our `kv_proj` already does (K rows first): the rows are concatenated;
- layer norms use torch's epsilon; the FFN is ReLU, its inner layer biased, its outer one not;
- the source ends in EOS (`add_source_eos`), and the decoder starts from <s> as `beam_search` does
  (fairseq starts from </s>; its converter says so with `decoder_start_token`);
- the vocabularies are our symbols in index order, specials first (<pad> <s> </s> <unk>).

Refused: every family but the plain `transformer` (the others change the encoder, the decoder or the
search), and the plain one with relative positions or DiSAN's masks, which CTranslate2 cannot express.
`translate` decodes with CTranslate2 under `beam_search`'s rules (the same length limit per sentence,
EOS allowed at once, padding and <s> never produced), so its greedy outputs equal ours.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from ..core.files import InputError, atomic_dir, require_file
from ..core.vocab import Vocab
from ..models import configure
from ..models.layers import ModelConfig, sinusoidal_positions
from ..training import checkpoint
from .generate import max_lengths
from .options import DEFAULTS

log = logging.getLogger("nmtrepro.evaluation.ct2")

FAMILY = "transformer"
# Options of the plain family that CTranslate2 cannot run, and why.
UNSUPPORTED = {
    "rel_pos_clip": "relative positions beside the sinusoids (CTranslate2 has one or the other, and "
                    "one table for every head)",
    "directional": "DiSAN's directional attention masks",
}
LAYER_NORM_EPS = 1e-5      # torch's nn.LayerNorm default, which every norm of ours uses
MAX_POSITIONS = 1024       # rows of the position table: CTranslate2 refuses longer inputs or outputs
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16")

# Where each of our weights goes: CTranslate2's variable path within a layer -> our state-dict names
# within it, their rows concatenated where CTranslate2 fuses projections.
ENCODER_LAYER = {
    "self_attention.layer_norm.gamma": ("self_attn.norm.weight",),
    "self_attention.layer_norm.beta": ("self_attn.norm.bias",),
    "self_attention.linear.0.weight": ("self_attn.sublayer.q_proj.weight", "self_attn.sublayer.kv_proj.weight"),
    "self_attention.linear.1.weight": ("self_attn.sublayer.out_proj.weight",),
    "ffn.layer_norm.gamma": ("ffn.norm.weight",),
    "ffn.layer_norm.beta": ("ffn.norm.bias",),
    "ffn.linear_0.weight": ("ffn.sublayer.inner.weight",),
    "ffn.linear_0.bias": ("ffn.sublayer.inner.bias",),
    "ffn.linear_1.weight": ("ffn.sublayer.outer.weight",),
}
DECODER_LAYER = {
    **ENCODER_LAYER,
    "attention.layer_norm.gamma": ("cross_attn.norm.weight",),
    "attention.layer_norm.beta": ("cross_attn.norm.bias",),
    "attention.linear.0.weight": ("cross_attn.sublayer.q_proj.weight",),
    "attention.linear.1.weight": ("cross_attn.sublayer.kv_proj.weight",),
    "attention.linear.2.weight": ("cross_attn.sublayer.out_proj.weight",),
}
WEIGHTS = {
    "encoder.embeddings.0.weight": ("src_embed.table.weight",),
    "decoder.embeddings.weight": ("tgt_embed.table.weight",),
    "decoder.projection.weight": ("tgt_embed.table.weight",),    # the tied output layer
    "decoder.projection.bias": ("output_bias",),                 # where the model has one
    "encoder.layer_norm.gamma": ("encoder_norm.weight",),        # pre-norm only
    "encoder.layer_norm.beta": ("encoder_norm.bias",),
    "decoder.layer_norm.gamma": ("decoder_norm.weight",),
    "decoder.layer_norm.beta": ("decoder_norm.bias",),
    "encoder.layer.{i}": ENCODER_LAYER,                          # our encoder.{i}
    "decoder.layer.{i}": DECODER_LAYER,                          # our decoder.{i}
}


def refusal(spec: dict) -> str | None:
    """Why a model of `spec` (a model file's "model_spec") cannot be exported, or None."""
    family = spec.get("family")
    if family != FAMILY:
        return (f"model family {family!r} cannot be exported to CTranslate2: only the standard Transformer "
                f"(family {FAMILY!r}, Base or Big, pre- or post-norm) can")
    for option, what in UNSUPPORTED.items():
        if spec.get(option):
            return f"option {option}={spec[option]!r} ({what}) cannot be exported to CTranslate2"
    return None


def name_table(config: ModelConfig) -> dict[str, tuple[str, ...]]:
    """`WEIGHTS` spelled out for a model of `config`: CTranslate2 variable path -> our state-dict names."""
    table = {}
    for path, ours in WEIGHTS.items():
        if isinstance(ours, dict):
            side = path.split(".")[0]
            for i in range(getattr(config, f"{side}_layers")):
                table.update({f"{path.format(i=i)}.{theirs}": tuple(f"{side}.{i}.{name}" for name in names)
                              for theirs, names in ours.items()})
        else:
            table[path] = ours
    if not config.output_bias:
        del table["decoder.projection.bias"]
    if not config.pre_norm:
        table = {path: ours for path, ours in table.items() if path.split(".")[1] != "layer_norm"}  # final norms
    return table


def _set(obj, path: str, value) -> None:
    """Set the variable at a dotted path of a spec, list indices as numbers ("layer.0.linear.1.weight")."""
    *parents, last = path.split(".")
    for part in parents:
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    setattr(obj, last, value)


def transformer_spec(spec: dict, weights: dict[str, torch.Tensor], src_vocab: Vocab, tgt_vocab: Vocab):
    """CTranslate2's TransformerSpec holding our weights: every weight of ours has its place there, and
    `validate` finds every place filled. `spec` is a model file's "model_spec" that `refusal` passes, and
    the vocabularies the ones `checkpoint.check_vocabularies` found to be the model's."""
    import ctranslate2

    config = configure({key: value for key, value in spec.items() if key not in ("src_vocab", "tgt_vocab")})
    out = ctranslate2.specs.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers), config.heads, pre_norm=config.pre_norm,
        activation=ctranslate2.specs.Activation.RELU)
    table = name_table(config)
    if missing := sorted({name for names in table.values() for name in names} - set(weights)):
        raise InputError(f"the model file lacks weights of its family: {missing[:5]}")
    if unused := sorted(set(weights) - {name for names in table.values() for name in names}):
        raise InputError(f"weights with no place in CTranslate2's Transformer: {unused[:5]}")
    for path, names in table.items():
        _set(out, path, torch.cat([weights[name] for name in names]).float().numpy())
    positions = sinusoidal_positions(MAX_POSITIONS, config.d_model).clone().numpy()  # not the shared table
    for stack in (out.encoder, out.decoder):
        stack.scale_embeddings = True     # x sqrt(d)
        stack.position_encodings.encodings = positions
    out.config.layer_norm_epsilon = LAYER_NORM_EPS
    out.config.decoder_start_token = tgt_vocab.symbols[Vocab.bos]
    out.config.add_source_eos = True
    out.register_source_vocabulary(src_vocab.symbols)
    out.register_target_vocabulary(tgt_vocab.symbols)
    return out


def export(model_path: str | Path, vocab_dir: str | Path, out: str | Path, quantization: str | None = None) -> Path:
    """Write the CTranslate2 model of a model file and its dictionaries to the folder `out`, atomically
    (built beside it, renamed onto it); `quantization` as CTranslate2's converters take it. Dictionaries
    that are not the model's (their sizes, or the digests the model file records) are refused."""
    blob = checkpoint.load(model_path)
    spec = blob["model_spec"]
    if (reason := refusal(spec)) is not None:
        raise InputError(f"{model_path}: {reason}")
    src_vocab, tgt_vocab = Vocab.load_pair(vocab_dir)
    checkpoint.check_vocabularies(blob, model_path, {"src": src_vocab, "tgt": tgt_vocab}, vocab_dir)
    model = transformer_spec(spec, blob["model"], src_vocab, tgt_vocab)
    model.validate()
    model.optimize(quantization=quantization)
    out = Path(out)
    with atomic_dir(out) as staging:
        model.save(str(staging))
    return out


def model_and_vocabularies(model: str | Path, prepared: str | Path | None) -> tuple[Path, Path]:
    """(model file, folder of its dict.src.txt and dict.tgt.txt) from `--model` (a bundle folder or a
    model file) and `--prepared` (the dataset's prepared folder, for a model file)."""
    model = Path(model)
    if model.is_dir():
        return require_file(model / "model.pt"), Path(prepared or model)
    if prepared is None:
        raise InputError(f"{model} is a model file: give --prepared, the folder of its dict.src.txt and "
                         "dict.tgt.txt (or --model a bundle folder)")
    return require_file(model), Path(prepared)


def translate(translator, sources: list[list[str]], beam: int = DEFAULTS["beam"], lenpen: float = DEFAULTS["lenpen"],
              max_len_a: float = DEFAULTS["max_len_a"], max_len_b: int = DEFAULTS["max_len_b"],
              max_tokens: int = DEFAULTS["max_tokens"]) -> list[list[str]]:
    """Each source's best output (tokens, EOS dropped) from a `ctranslate2.Translator`, under
    `beam_search`'s rules: a sentence's length limit is ours (CTranslate2 takes one a call, so sentences
    go in groups of one limit), an empty output is allowed, <pad> and <s> are never produced."""
    limits = max_lengths(torch.tensor([len(s) + 1 for s in sources]), max_len_a, max_len_b).tolist()  # + EOS
    out: list[list[str] | None] = [None] * len(sources)
    for limit in sorted(set(limits)):
        group = [i for i, n in enumerate(limits) if n == limit]
        results = translator.translate_batch(
            [sources[i] for i in group], beam_size=beam, length_penalty=lenpen, max_decoding_length=limit,
            min_decoding_length=0, max_input_length=0, suppress_sequences=[["<pad>"], ["<s>"]],
            max_batch_size=max_tokens, batch_type="tokens")
        for i, result in zip(group, results):
            out[i] = result.hypotheses[0]
    return out


def add_arguments_export_ct2(parser) -> None:
    parser.add_argument("--model", required=True, help="model bundle folder (model.pt, dict.src.txt, dict.tgt.txt) "
                                                       "or a model file with --prepared")
    parser.add_argument("--prepared", help="folder of the model file's dict.src.txt and dict.tgt.txt")
    parser.add_argument("--out", required=True, help="CTranslate2 model folder to write")
    parser.add_argument("--quantization", choices=QUANTIZATIONS, help="weight type (default: float32)")


def run_export_ct2(args) -> None:
    model, vocab_dir = model_and_vocabularies(args.model, args.prepared)
    out = export(model, vocab_dir, args.out, args.quantization)
    log.info("wrote %s (%s weights) from %s", out, args.quantization or "float32", model)
