"""`nmtrepro head-similarity` and `nmtrepro head-table`: how alike the encoder's self-attention heads are.

Paper D, Eq. 14: Sim(G1, G2) = 1/(H1*H2) * sum_i sum_j cos(O_1^i, O_2^j), where O^i is head i's output
(before the output projection) at one token; accumulated over every token of the test set and divided by
the number of tokens (padding excluded), then averaged over the encoder's self-attention layers. As in
Eq. 14, a group compared with itself includes each head's similarity with itself (1); `pairwise` in the
JSON is the mean over distinct heads only. `sentences` holds each test sentence's sum of its tokens' mean
cosines (over every pair of heads, and the layers) and its count of tokens x layers: the statistics from
which `nmtrepro quantity-test` resamples the average by sentence. Heads are assigned to feature groups by a list (head index ->
group name); by default a model's config names them (`head_groups`: paper D's diverse models, whose
groups are sized in heads), else one group makes a plain Transformer report its single Global similarity.
"""
from __future__ import annotations

import pandas as pd
import torch

from ..core.files import InputError, read_json, read_lines, write_json
from ..evaluation.sources import Sources, add_arguments_sources, source_options
from ..models.layers import encoder_attentions, recording_heads
from ..reporting.papers import beside, read_paper_numbers
from ..reporting.render import add_table_arguments, text_cells, write_table
from ..reporting.report import parse_pairs

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "head-similarity": "cosine similarity between encoder self-attention heads",
    "head-table": "table of head similarity within and across groups",
}


def head_cosines(outputs: torch.Tensor, pad: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Sum over non-padding tokens of the (H, H) head-by-head cosine matrix, the token count, and each
    sentence's (sum of its tokens' mean cosine, its tokens): (B, 2).

    outputs (B, H, T, d_head) from one attention layer; pad (B, T) True at padding.
    """
    unit = torch.nn.functional.normalize(outputs.float(), dim=-1)           # (B, H, T, d)
    cos = torch.einsum("bitd,bjtd->btij", unit, unit)                        # (B, T, H, H)
    keep = ~pad
    per_sentence = torch.stack([(cos.mean((2, 3)) * keep).sum(1), keep.sum(1).float()], 1)  # (B, 2)
    return cos[keep].sum(0), int(keep.sum()), per_sentence


def group_similarity(cos: torch.Tensor, groups: list[str]) -> dict[str, dict[str, float]]:
    """Eq. 14 (paper D) for every pair of groups, from the token-averaged (H, H) cosine matrix."""
    if len(groups) != cos.size(0):
        raise InputError(f"head groups name {len(groups)} heads but the model has {cos.size(0)}")
    names = list(dict.fromkeys(groups))
    index = {g: [i for i, name in enumerate(groups) if name == g] for g in names}
    return {g1: {g2: float(cos[index[g1]][:, index[g2]].mean()) for g2 in names} for g1 in names}


@torch.no_grad()
def similarity(model, batches, groups: list[str] | None = None) -> dict:
    """Mean head cosine matrix over all tokens and encoder layers, and Eq. 14 per pair of groups.

    `batches`: the encoder's inputs (net_input dicts: "src" (B, S) and the family's extra inputs); the
    `sentences` statistics (module docstring) come in their order, a row a sentence.
    `groups` defaults to the model's own (`head_groups` of its config, e.g. paper D's feature groups),
    else one group, Global."""
    try:
        layers = encoder_attentions(model)
    except ValueError as err:
        raise InputError(str(err)) from None
    total, tokens, sentences = None, 0, []
    for net_input in batches:
        with recording_heads(layers) as recorded:
            model.encode(**net_input)
        pad = net_input["src"].eq(model.pad)
        batch = torch.zeros(len(pad), 2)
        for out in (out for calls in recorded for out in calls):
            cos, n, per_sentence = head_cosines(out, pad)
            total = cos if total is None else total + cos
            tokens += n
            batch += per_sentence.cpu()
        sentences += batch.tolist()
    if total is None:
        raise InputError("no sentences to measure head similarity on")
    cos = total / tokens
    heads = cos.size(0)
    groups = groups or getattr(model.config, "head_groups", None) or ["Global"] * heads
    off_diagonal = (cos.sum() - cos.diagonal().sum()) / max(heads * (heads - 1), 1)
    return {"groups": group_similarity(cos, groups), "average": float(cos.mean()),
            "pairwise": float(off_diagonal), "heads": heads, "layers": len(layers),
            "tokens": tokens // len(layers), "matrix": cos.tolist(), "sentences": sentences}


def add_arguments_head_similarity(parser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--prepared", required=True, help="prepared dataset folder, for the source vocabulary")
    parser.add_argument("--src-bpe", required=True, help="BPE'd source, one sentence a line")
    add_arguments_sources(parser)
    parser.add_argument("--groups", nargs="+", help="group name of each head, in head order (default: one group)")
    parser.add_argument("--max-tokens", type=int, default=4000, help="source tokens per batch")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", required=True)


def run_head_similarity(args) -> None:
    from ..core import runtime
    from ..core.vocab import Vocab
    from ..training import checkpoint

    device = runtime.setup(args.threads)
    vocab = Vocab.load(f"{args.prepared}/dict.src.txt")
    model = checkpoint.load_model(args.model, device, {"src": vocab}, args.prepared)
    sources = Sources.of_lines(model, read_lines(args.src_bpe), vocab, **source_options(args))
    order = list(sources.batches(args.max_tokens))
    result = similarity(model, (sources.net_input(indices, device) for indices in order), args.groups)
    by_line = [None] * len(sources.sizes)                # the statistics back in the test set's line order
    for line, row in zip((i for indices in order for i in indices), result["sentences"]):
        by_line[line] = row
    write_json(args.out, {**result, "sentences": by_line})


def head_table(results: dict[str, dict]) -> pd.DataFrame:
    """Rows 'LABEL / group', one column per group and 'Average' (paper D Table IV's layout)."""
    rows = {}
    for label, result in results.items():
        for g1, row in result["groups"].items():
            rows[f"{label} / {g1}"] = dict(row)
        rows[f"{label} / Average"] = {"Average": result["average"]}
    return pd.DataFrame.from_dict(rows, orient="index")


def add_arguments_head_table(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=JSON", help="(repeat)")
    parser.add_argument("--paper-numbers", help="TSV of the paper's numbers (row, column, value, note)")
    add_table_arguments(parser)


def run_head_table(args) -> None:
    results = {label: read_json(path) for label, path in parse_pairs(args.system, "--system").items()}
    paper = read_paper_numbers(args.paper_numbers) if args.paper_numbers else None
    write_table(text_cells(beside(head_table(results), paper), digits=3), args.title, args.note, args.out_md,
                args.out_html, args.out_tex)
