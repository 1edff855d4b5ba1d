"""Transformer with a diverse input representation (Chen et al. 2020, paper D), every variant an option.

Only the encoder's input changes. The scaled word vectors X are divided by learned projections into
groups sized in heads (Eq. 5; `rec_heads`, `loc_heads`, `syn_heads`, the global group gets the
remaining heads), each group gets its own feature function (Eq. 6), and the results are concatenated
back to d (Eq. 7) for the unchanged Transformer encoder:
  global (Func_pe): the group plus Eq. 1's sinusoidal positions at the group's own width (below);
  recurrence (Func_Rec, Eq. 8-9): a bidirectional GRU, [forward; backward] projected to the group width;
  local (Func_Loc, Eq. 10-11): a 1-D convolution of width `conv_width` with ReLU, plus the group
      (residual); pads are zeroed before it, so a real token never sees padding;
  syntax (Func_Syn, Eq. 12-13): the group plus its own positions plus a learned POS-tag vector.
Table I's models are rec_heads=2 (+Rec_Diverse, 384/128 at Base), loc_heads=2, syn_heads=3 (320/192),
and 2/2/2 (+Fusing_Diverse, 128 each). Width d / heads per head, so a feature's group is as wide as
the heads the paper gives it and the multi-head attention is unchanged (Sec. IV).

POS tags arrive as `encode(src, pos=...)` when syn_heads > 0 (`extra_inputs`): one tag id per source
position, the tag of a word copied to all its BPE pieces (the prepare stage's `pos` files).

`pos_factor` N > 0 is paper D's LinguisticFeatures baseline instead of the groups (Sennrich & Haddow
2016): the word vector's first d - N dimensions and an N-wide POS-tag embedding are concatenated (total
size d) and the positions added, as input factors are. Of Sennrich & Haddow's factors only the POS tag
is built (the pos stage's); lemmas, subword tags and dependency labels are not.

The projections start as the plain split of the word vector (identity slices): the paper's groups are
parts of the word vector. A group with positions (global, syntax) adds Eq. 1 laid out for its own
width: sin and cos of each frequency side by side, the frequencies spanning the group's width. (A
slice of the d-wide [sines | cosines] table the Transformer adds would give the global group only the
sines of the highest frequencies, from which attention cannot form relative, direction-aware scores,
and the syntax group the cosines of the lowest, nearly constant over a sentence.) The POS-tag vectors
are scaled as the word vectors they join are (std d^-0.5 times sqrt(d)): started at the group's own
std d_s^-0.5 unscaled, they were 5-11 times smaller than the word slice.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..core.pos import POS_VOCAB
from . import register
from .layers import BiRNN, ModelConfig, dropout, sinusoidal_positions, xavier_init
from .transformer import Transformer


GROUP_NAMES = {"global": "Global", "rec": "Rec", "loc": "Loc", "syn": "Syn"}  # paper D, Table IV


def group_positions(length: int, width: int, device=None) -> torch.Tensor:
    """(length, width): Eq. 1 for a group of its own width, pe(j, 2i) = sin(j / 10000^(2i/width)) and
    pe(j, 2i + 1) = cos of the same, for positions j = 0 .. length - 1."""
    freqs = torch.pow(10000.0, -torch.arange(0, width, 2, dtype=torch.float32, device=device) / width)
    angles = torch.arange(length, dtype=torch.float32, device=device)[:, None] * freqs  # (S, ceil(w/2))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :width]


@dataclass(frozen=True)
class DiverseConfig(ModelConfig):
    """The Transformer's sizes plus paper D's groups, each in heads (0: no such group)."""
    rec_heads: int = 0
    loc_heads: int = 0
    syn_heads: int = 0
    conv_width: int = 5
    pos_factor: int = 0  # LinguisticFeatures: width of a POS-tag factor concatenated to the word vector

    def __post_init__(self):
        super().__post_init__()
        features = (self.rec_heads, self.loc_heads, self.syn_heads)
        if not 0 <= self.pos_factor < self.d_model or (self.pos_factor and any(features)):
            raise ValueError(f"pos_factor ({self.pos_factor}) must be 0, or narrower than d_model "
                             f"({self.d_model}) in a model without feature groups (LinguisticFeatures)")
        if min(features) < 0 or sum(features) >= self.heads:
            raise ValueError(f"rec_heads, loc_heads and syn_heads ({features}) must be >= 0 and leave the "
                             f"global group at least one of the {self.heads} heads")
        if self.conv_width < 1 or self.conv_width % 2 == 0:
            raise ValueError(f"conv_width must be odd and positive (a window centred on the token), "
                             f"not {self.conv_width}")

    @property
    def group_widths(self) -> dict[str, int]:
        """Width of each group present, in the order they are concatenated (global first)."""
        d_head = self.d_model // self.heads
        heads = {"global": self.heads - self.rec_heads - self.loc_heads - self.syn_heads,
                 "rec": self.rec_heads, "loc": self.loc_heads, "syn": self.syn_heads}
        return {name: n * d_head for name, n in heads.items() if n}

    @property
    def head_groups(self) -> list[str]:
        """The feature group of each attention head, in head order, as paper D's Table IV names them:
        head h's slice of the input is its group's (the encoder's attention then mixes them)."""
        if self.pos_factor:
            return [GROUP_NAMES["global"]] * self.heads
        d_head = self.d_model // self.heads
        return [GROUP_NAMES[name] for name, width in self.group_widths.items() for _ in range(width // d_head)]

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        return ("pos",) if self.syn_heads or self.pos_factor else ()


class LocalFeatures(nn.Module):
    """Eq. 10: l_j = ReLU(conv([x_{j-m/2} .. x_{j+m/2}])) + x_j, one convolution layer."""

    def __init__(self, width: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(width, width, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """x (B, S, w), pad (B, S) -> (B, S, w); pads are zero on the way in and out."""
        real = (~pad).unsqueeze(-1).to(x.dtype)
        x = x * real
        return (F.relu(self.conv(x.transpose(1, 2)).transpose(1, 2)) + x) * real


@register("diverse")
class DiverseTransformer(Transformer):
    """Transformer whose encoder input is paper D's grouped diverse representation."""
    config_class = DiverseConfig

    def __init__(self, src_vocab: int, tgt_vocab: int, config: DiverseConfig):
        super().__init__(src_vocab, tgt_vocab, config)
        widths = {} if config.pos_factor else config.group_widths
        self.groups = nn.ModuleDict({name: nn.Linear(config.d_model, width, bias=False)
                                     for name, width in widths.items()})               # Eq. 5
        start = 0
        with torch.no_grad():
            for name, width in widths.items():                                           # identity slices
                self.groups[name].weight.copy_(torch.eye(config.d_model)[start:start + width])
                start += width
        self.rec = BiRNN(widths["rec"]) if "rec" in widths else None
        self.loc = LocalFeatures(widths["loc"], config.conv_width) if "loc" in widths else None
        tag_width = widths.get("syn", config.pos_factor)
        self.pos_embed = None
        if tag_width:                            # p_j of Eq. 12 or the POS factor, one vector per POS tag
            self.pos_embed = nn.Embedding(len(POS_VOCAB), tag_width, padding_idx=POS_VOCAB.pad)
            nn.init.normal_(self.pos_embed.weight, std=config.d_model ** -0.5)  # times sqrt(d): as X
            with torch.no_grad():
                self.pos_embed.weight[POS_VOCAB.pad].zero_()
        if self.rec is not None:
            xavier_init(self.rec)

    def input_representation(self, src: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
        """src (B, S) token ids, pos (B, S) tag ids or None -> the encoder input F (B, S, d), Eq. 5-13."""
        pad = src.eq(self.pad)
        x = self.src_embed.table(src) * self.src_embed.scale                            # X (B, S, d)
        if self.pos_embed is not None:
            tags = self.pos_embed(pos) * self.src_embed.scale                            # p_j (B, S, d_s)
        if self.config.pos_factor:                                                       # LinguisticFeatures
            positions = sinusoidal_positions(src.size(1), x.size(-1), device=x.device).to(x)  # Base's (S, d)
            x = torch.cat([x[..., :-self.config.pos_factor], tags], dim=-1) + positions
            return dropout(x, self.config.dropout, self.training)
        features = []
        for name, project in self.groups.items():
            group = project(x)                                                           # X_g (B, S, d_g)
            if name in ("global", "syn"):                                                # Func_pe, Eq. 12
                group = group + group_positions(src.size(1), group.size(-1), device=x.device).to(x)
            if name == "syn":
                group = group + tags
            elif name == "rec":
                group = self.rec(group, pad)[0]                                          # Eq. 8-9
            elif name == "loc":
                group = self.loc(group, pad)                                             # Eq. 10
            features.append(group)
        return dropout(torch.cat(features, dim=-1), self.config.dropout, self.training)  # Eq. 7

    def encode(self, src: torch.Tensor, pos: torch.Tensor | None = None) -> dict:
        """src (B, S); pos (B, S) POS-tag ids aligned with src, required when syn_heads > 0."""
        if self.pos_embed is not None and pos is None:
            raise ValueError("syn_heads or pos_factor > 0 needs the source POS tags: encode(src, pos=...)")
        pad = src.eq(self.pad)
        return {"out": self.encoder_stack(self.input_representation(src, pos), pad), "pad": pad}
