"""Transformer with source phrase representations (Xu et al. 2020, paper A), every ablation an option.

Phrases are spans of source positions. N-gram phrases (`phrases="ngram"`) are cut here from the
padded batch width; parser phrases (`phrases="parse"`) arrive as `encode(src, spans=...)` (the
config then declares "spans" among its `extra_inputs`, so every caller puts them in net_input). Both
become one gather index (B, P, L) and mask, so the rest of the model is the same for both.

Per level k (0 = embeddings, 1..L-1 = the inputs of the later encoder layers, L = the encoder
output) a phrase builder pools each phrase's token vectors (Eq. 2, `glance` mean or max) and, with
`attentive`, re-weights the tokens by a 2-layer scorer (Eq. 3-5). Every encoder layer first attends
its own level's phrases (Eq. 7-8), then runs the Transformer's self-attention and FFN. Decoder
layers attend the top level or, with `transparent_attention`, a learned mix of all levels (Eq. 6),
between their self-attention and token cross-attention. The phrase memory is built once per
sentence in `encode`, so incremental decoding reorders it with the rest of the encoder state.
With pre-norm layers (the project default) phrases are pooled from the un-normalised layer input,
the paper's "input representation"; the phrase attention's query is normalised as usual.

The paper's text is the default. Where the authors' code (Neutron, github hfxunlp/transformer,
`transformer/LD/` of April 2020) does something else, an option builds the code's form, so that the
code's model is a second row beside the printed one (docs/paper-A-code-forms.md):
  `combiner="residue_ln"`  Eq. 8 as their `ResidueCombiner` (modules/base.py): LN(x + o + net), the
                           attention output added directly, not only through W4 sigmoid(W3[x | o]);
  `token_transparent`      each decoder layer also mixes the *token* memory over the encoder levels
                           (transformer/TA/Encoder.py, read per layer by transformer/LD/Decoder.py);
  `pool_gate="sigmoid"`    attentive pooling as their `ATTNCombiner` (modules/LD.py): sigmoid gates over
                           the token count, the weight left over to the glance, instead of Eq. 4's softmax;
  `pre_norm=False`         (a `ModelConfig` option) post-norm layers, as every layer of theirs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..data.parse import tokens_per_phrase
from . import register
from .layers import ModelConfig, MultiheadAttention, Residual, dropout, xavier_init
from .transformer import DecoderLayer, EncoderLayer, Transformer


@dataclass(frozen=True)
class PhraseConfig(ModelConfig):
    """The Transformer's sizes plus paper A's ablation switches.

    glance: "mean" | "max" (Eq. 2); attentive: attentive pooling (Eq. 3-5, "+Attn");
    transparent_attention: each decoder layer mixes all encoder levels (Eq. 6, "+TA");
    phrases: "ngram" (fixed-length chunks) | "parse" (spans passed to `encode`, "+Parsing Phrase") |
        "token" (every token a phrase of its own: the phrase sublayers with no phrases to pool, a
        diagnostic that tells their cost from the phrase mechanism's);
    combiner: "paper" (Eq. 8 as printed) | "residue_ln" (the authors' ResidueCombiner: LN(x + o + Eq. 8));
    pool_gate: "softmax" (Eq. 4) | "sigmoid" (the authors' ATTNCombiner; needs `attentive`);
    token_transparent: each decoder layer also reads a learned mix of the token levels (the authors' code).
    """
    glance: str = "max"
    attentive: bool = True
    transparent_attention: bool = True
    phrases: str = "ngram"
    combiner: str = "paper"
    pool_gate: str = "softmax"
    token_transparent: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.phrases not in ("ngram", "parse", "token"):
            raise ValueError(f"phrases must be 'ngram', 'parse' or 'token', not {self.phrases!r}")
        if self.combiner not in ("paper", "residue_ln"):
            raise ValueError(f"combiner must be 'paper' or 'residue_ln', not {self.combiner!r}")
        if self.pool_gate not in ("softmax", "sigmoid"):
            raise ValueError(f"pool_gate must be 'softmax' or 'sigmoid', not {self.pool_gate!r}")
        if self.pool_gate != "softmax" and not self.attentive:
            raise ValueError("pool_gate weighs the tokens of attentive pooling: it needs attentive=True")

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        return ("spans",) if self.phrases == "parse" else ()


def ngram_spans(batch: int, seql: int, device=None, ntok: int | None = None) -> torch.Tensor:
    """(B, P, 2) contiguous [start, end) chunks of ntok positions from 0 (default: paper A's
    footnote 2 for this width); the last one is shorter."""
    ntok = ntok or tokens_per_phrase(seql)
    starts = torch.arange(0, seql, ntok, device=device)
    spans = torch.stack([starts, (starts + ntok).clamp(max=seql)], dim=-1)  # (P, 2)
    return spans.expand(batch, -1, -1)


def gather_index(spans: torch.Tensor, pad: torch.Tensor, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Spans (B, P, 2) over a source with padding mask `pad` (B, S) -> index and mask (B, P, L).

    L is `width` where the caller knows a bound on the longest span from the shapes (n-gram chunks, or
    parser phrases in a bucketed batch's "span_width"), else read from the spans: a data-dependent
    size, where a compiled step breaks its graph (training/fast.py).
    Index slots beyond a span point at position 0 and are masked, as are source pads inside a span
    (the last n-gram chunk), so a phrase of pads only is all False.
    """
    lengths = spans[..., 1] - spans[..., 0]                                   # (B, P)
    width = int(lengths.max()) if width is None else width
    offsets = torch.arange(width, device=spans.device)                        # (L,)
    index = spans[..., :1] + offsets                                          # (B, P, L)
    mask = offsets < lengths[..., None]
    index = index.masked_fill(~mask, 0)
    mask &= ~pad.gather(1, index.flatten(1)).view_as(index)
    return index, mask


def gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x (B, S, d), index (B, P, L) -> the phrases' token vectors (B, P, L, d)."""
    b, p, l = index.shape
    return x.gather(1, index.reshape(b, p * l, 1).expand(-1, -1, x.size(-1))).view(b, p, l, -1)


class PhraseBuilder(nn.Module):
    """Phrase vectors from token vectors: a glance (Eq. 2), optionally attentive pooling (Eq. 3-5).

    `gate` "softmax" normalises the scores over the phrase's tokens (Eq. 4); "sigmoid" is the authors'
    ATTNCombiner (Neutron modules/LD.py, built by transformer/LD/AttnEncoder.py): each token gets
    sigmoid(s_i) / n of its n real tokens and the glance the rest, 1 - sum of those. At initialisation the
    gates are near 1/2, so the phrase starts near (mean + glance) / 2, where the softmax starts near the
    mean: with a max glance the code's phrases start halfway between +Mean's and +Max's. Same parameters.
    """

    def __init__(self, d_model: int, glance: str, attentive: bool, gate: str = "softmax"):
        super().__init__()
        if glance not in ("mean", "max"):
            raise ValueError(f"glance must be 'mean' or 'max', not {glance!r}")
        self.glance, self.gate = glance, gate
        # Eq. 3 (paper A): W1 acts on [x_i | glance], W2 maps the hidden layer (width d) to a score.
        self.w1 = nn.Linear(2 * d_model, d_model) if attentive else None
        self.w2 = nn.Linear(d_model, 1) if attentive else None

    def forward(self, x: torch.Tensor, index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, d), index/mask (B, P, L) -> phrases (B, P, d); phrases without tokens are 0."""
        tokens = gather_tokens(x, index)                                      # (B, P, L, d)
        real = mask[..., None]                                                # (B, P, L, 1)
        lowest = torch.finfo(x.dtype).min                                     # not -inf: no NaN
        if self.glance == "max":                                              # Eq. 2, max-over-time
            summary = tokens.masked_fill(~real, lowest).amax(2) * mask.any(-1, keepdim=True)
        else:                                                                 # Eq. 2, mean of real tokens
            summary = (tokens * real).sum(2) / real.sum(2).clamp(min=1)
        if self.w1 is None:
            return summary
        weights = self.token_weights(tokens, summary, mask)                   # (B, P, L)
        phrases = (weights[..., None] * tokens).sum(2)                        # Eq. 5
        if self.gate == "sigmoid":                                            # the gates' leftover to the glance
            phrases = phrases + (1 - weights.sum(-1, keepdim=True)) * summary
        return phrases

    def token_weights(self, tokens, summary, mask):
        """tokens (B, P, L, d), summary (B, P, d) -> the tokens' weights (B, P, L), 0 at pads: p_i summing
        to 1 over real tokens (Eq. 4), or with the sigmoid gate sigmoid(s_i) / n, summing to at most 1."""
        d = tokens.size(-1)
        # Eq. 3: W1[x_i | g] + b1 = W1x x_i + W1g g + b1, without building the concatenation.
        hidden = F.linear(tokens, self.w1.weight[:, :d], self.w1.bias) \
            + F.linear(summary, self.w1.weight[:, d:])[:, :, None]           # (B, P, L, d)
        scores = self.w2(torch.sigmoid(hidden)).squeeze(-1)                   # (B, P, L)
        if self.gate == "sigmoid":
            return torch.sigmoid(scores) * mask / mask.sum(-1, keepdim=True).clamp(min=1)
        lowest = torch.finfo(scores.dtype).min
        return scores.masked_fill(~mask, lowest).softmax(-1) * mask          # Eq. 4, real tokens only


class PhraseAttention(nn.Module):
    """Attentive combination (Eq. 7-8): attend the phrases, then mix the result with the input.

    Returns W4 sigmoid(W3[x | o] + b3) + b4 with o = MHA(x, phrases); the surrounding Residual adds x and
    the layer norm, giving LN(x + W4 ...) post-norm as in the paper. `ResidueCombiner` builds the
    authors' form from the same two parts (`parts`).
    """

    def __init__(self, c: PhraseConfig):
        super().__init__()
        self.attn = MultiheadAttention(c.d_model, c.heads, c.attention_dropout)
        self.w3 = nn.Linear(2 * c.d_model, c.ffn)   # hidden size = FFN size (authors' code)
        self.w4 = nn.Linear(c.ffn, c.d_model)

    def forward(self, x, phrases, phrase_pad, cache=None):
        return self.parts(x, phrases, phrase_pad, cache)[1]

    def parts(self, x, phrases, phrase_pad, cache=None) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, d), phrases (B, P, d), phrase_pad (B, P) True at empty phrases -> o and Eq. 8's output,
        each (B, T, d)."""
        out = self.attn(x, phrases, key_padding_mask=phrase_pad, cache=cache, static_kv=True)  # Eq. 7
        return out, self.w4(torch.sigmoid(self.w3(torch.cat([x, out], dim=-1))))             # Eq. 8


class ResidueCombiner(nn.Module):
    """Eq. 7-8 as the authors' code combines them (`combiner="residue_ln"`; Neutron modules/base.py,
    `ResidueCombiner`, in transformer/LD/Encoder.py and Decoder.py):

        LN(x + o + dropout(W4 sigmoid(W3[x | o] + b3) + b4)),  o = MHA(x, phrases)

    The attention output o reaches the stream directly, not only through the 2-layer network: at
    initialisation the printed form passes far less phrase signal to the stream, and far less gradient
    back to the phrase attention. The layer norm is the combiner's own, after the sum. The authors'
    stack is post-norm, so x there is a layer norm's output already; in a pre-norm stack x is normalised
    first (`in_norm`, as their decoder's layer_normer1 before its combiner) and the result replaces the
    stream, as theirs does. Post-norm, the parameters are the printed form's (same names and shapes).
    """

    def __init__(self, c: PhraseConfig):
        super().__init__()
        self.sublayer, self.norm = PhraseAttention(c), nn.LayerNorm(c.d_model)
        self.in_norm = nn.LayerNorm(c.d_model) if c.pre_norm else None
        self.dropout = c.dropout

    def forward(self, x, phrases, phrase_pad, cache=None):
        if self.in_norm is not None:
            x = self.in_norm(x)
        out, combined = self.sublayer.parts(x, phrases, phrase_pad, cache)
        return self.norm(x + out + dropout(combined, self.dropout, self.training))


def phrase_sublayer(c: PhraseConfig) -> nn.Module:
    """Eq. 7-8 with the residual connection and layer norm around them, in the form `c.combiner` names."""
    return ResidueCombiner(c) if c.combiner == "residue_ln" else Residual(PhraseAttention(c), c)


class PhraseEncoderLayer(EncoderLayer):
    """Phrase attention + combination -> the Transformer encoder layer (self-attention -> FFN)."""

    def __init__(self, config: PhraseConfig):
        super().__init__(config)
        self.phrase_attn = phrase_sublayer(config)

    def forward(self, x, pad, phrases, phrase_pad):
        return super().forward(self.phrase_attn(x, phrases, phrase_pad), pad)


class PhraseDecoderLayer(DecoderLayer):
    """Self-attention -> phrase attention + combination -> token cross-attention -> FFN."""

    def __init__(self, config: PhraseConfig):
        super().__init__(config)
        self.phrase_attn = phrase_sublayer(config)

    def forward(self, x, memory, memory_pad, phrases, phrase_pad, cache=None):
        def part(name):
            return None if cache is None else cache.setdefault(name, {})
        x = self.self_attn(x, None, causal=True, cache=part("self"))
        x = self.phrase_attn(x, phrases, phrase_pad, cache=part("phrase"))
        x = self.cross_attn(x, memory, key_padding_mask=memory_pad, cache=part("cross"), static_kv=True)
        return self.ffn(x)


def mix_levels(levels: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """Transparent attention (Bapna et al. 2018): levels k = 0..L, each (B, N, d), and weights (L+1, L_dec)
    -> (B, L_dec, N, d), decoder layer j reading sum_k softmax_k(weights)[k, j] level_k (Eq. 6)."""
    return torch.einsum("kbnd,kj->bjnd", torch.stack(levels), weights.softmax(dim=0))


@register("phrase")
class PhraseTransformer(Transformer):
    """Transformer + phrase representations; its options are `PhraseConfig`'s."""
    config_class = PhraseConfig
    encoder_layer = PhraseEncoderLayer
    decoder_layer = PhraseDecoderLayer

    def __init__(self, src_vocab: int, tgt_vocab: int, config: PhraseConfig):
        super().__init__(src_vocab, tgt_vocab, config)
        # Levels 0..L: the input of each encoder layer, then the encoder output.
        self.builders = nn.ModuleList(PhraseBuilder(config.d_model, config.glance, config.attentive, config.pool_gate)
                                      for _ in range(config.encoder_layers + 1))
        xavier_init(self.builders)
        # Eq. 6: (L_enc + 1) x L_dec weights, softmax over levels (paper: a 7 x 6 matrix); zeros, so every
        # decoder layer starts from the mean of the levels. The same again for the token levels with
        # `token_transparent` (the authors' code starts both from small uniform draws, with dropout on them).
        levels = (config.encoder_layers + 1, config.decoder_layers)
        self.level_weights = nn.Parameter(torch.zeros(levels)) if config.transparent_attention else None
        self.token_level_weights = nn.Parameter(torch.zeros(levels)) if config.token_transparent else None

    def transparent_weights(self) -> torch.Tensor:
        """(L_enc + 1, L_dec) softmax-normalised weights w_i^j of Eq. 6; columns sum to 1."""
        return self.level_weights.softmax(dim=0)

    def encode(self, src: torch.Tensor, spans: torch.Tensor | None = None,
               span_width: torch.Tensor | None = None) -> dict:
        """src (B, S); spans (B, P, 2) [start, end) source phrases, required with phrases="parse";
        span_width (B, W), optional: W bounds the longest span, read from the shape (training's bucketed
        batches: batching.collate), else the longest span is read from the data.

        With `token_transparent` the state also holds "tokens" (B, L_dec, S, d): decoder layer j's token
        memory, its mix of the token levels (the same levels as the phrases': each encoder layer's input,
        then the encoder output). "out" stays the encoder output."""
        pad = src.eq(self.pad)  # (B, S)
        width = None if span_width is None else span_width.size(1)
        if self.config.phrases != "parse":
            seql = src.size(1)
            ntok = 1 if self.config.phrases == "token" else tokens_per_phrase(seql)
            spans, width = ngram_spans(src.size(0), seql, src.device, ntok), min(ntok, seql)
        elif spans is None:
            raise ValueError("phrases='parse' needs the source phrase spans: encode(src, spans=...)")
        index, mask = gather_index(spans, pad, width)             # (B, P, L)
        phrase_pad = ~mask.any(-1)                                # (B, P) True at empty phrases
        x, tokens, levels = self.src_embed(src), [], []
        for layer, builder in zip(self.encoder, self.builders):
            tokens.append(x)
            levels.append(builder(x, index, mask))                # (B, P, d) from the layer's input
            x = layer(x, pad, levels[-1], phrase_pad)
        tokens.append(self.encoder_norm(x))
        levels.append(self.builders[-1](tokens[-1], index, mask))
        if self.level_weights is None:
            memory = levels[-1][:, None]                          # (B, 1, P, d): every layer reads the top
        else:
            memory = mix_levels(levels, self.level_weights)       # Eq. 6: (B, L_dec, P, d)
        state = {"out": tokens[-1], "pad": pad, "phrases": memory, "phrase_pad": phrase_pad}
        if self.token_level_weights is not None:
            state["tokens"] = mix_levels(tokens, self.token_level_weights)  # (B, L_dec, S, d)
        return state

    def decoder_memory(self, enc: dict, layer: int) -> tuple:
        tokens = enc["out"] if self.token_level_weights is None else enc["tokens"][:, layer]
        phrases = enc["phrases"][:, layer if self.level_weights is not None else 0]
        return tokens, enc["pad"], phrases, enc["phrase_pad"]
