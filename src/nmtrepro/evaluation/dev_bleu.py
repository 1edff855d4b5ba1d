"""`nmtrepro select-checkpoint`: the kept checkpoint with the best dev BLEU, as the model to evaluate.

Paper D validates every 1,000 updates and tests "the model with the highest BLEU score (dev set)".
Training keeps its newest checkpoints (`keep_last`); this decodes the dataset's valid split with each
of the last N, as the test set is decoded (the experiment's beam and length penalty), scores tokenized
BLEU against the valid reference, and writes the best one in `average`'s format (the average of one
checkpoint), so decoding and warm starts read it as they read an average. A tie goes to the later
checkpoint. The candidates are the kept ones, not every checkpoint of the run: keeping 200 would cost
200 model files.
"""
from __future__ import annotations

import logging

from ..core import runtime
from ..core.files import read_lines, write_json
from ..core.text import strip_bpe
from ..core.vocab import Vocab
from ..training import checkpoint
from .metrics import METRICS
from .generate import add_arguments_search, joined, search_options, translate
from .sources import Sources, source_options

log = logging.getLogger("nmtrepro.evaluation.dev_bleu")


def add_arguments_select_checkpoint(parser) -> None:
    parser.add_argument("--checkpoint-dir", required=True, help="training checkpoint directory")
    parser.add_argument("--last", type=int, required=True, help="candidates: the newest N checkpoints")
    parser.add_argument("--final", required=True, help="the training's final model: the candidates end at its step")
    add_arguments_search(parser)
    parser.add_argument("--ref-tok", action="append", required=True,
                        help="the dev set's Moses-tokenized reference (repeat: several references, NIST06's four)")
    parser.add_argument("--scores", required=True, help="JSON: each candidate's step and dev BLEU, the chosen step")
    parser.add_argument("--out", required=True, help="the chosen model file")


def tokenized_bleu(model, sources: Sources, refs: list[list[str]], tgt_vocab: Vocab, device, args) -> float:
    """The model's tokenized BLEU on `sources` against the tokenized references, decoded as `args`'
    search flags say (`add_arguments_search`)."""
    segmented = translate(model, sources, tgt_vocab, device, args.max_tokens, args.precision, **search_options(args))
    metric = METRICS["tok_bleu"]
    return metric.corpus(metric.statistics([strip_bpe(line) for line in joined(segmented)], refs))["score"]


def run_select_checkpoint(args) -> None:
    found = checkpoint.final_window(args.checkpoint_dir, args.last, args.final)
    device = runtime.setup(args.threads)
    src_vocab, tgt_vocab = Vocab.load_pair(args.prepared)
    lines, refs = read_lines(args.src_bpe), [read_lines(path) for path in args.ref_tok]
    scores, sources = {}, None
    for step, path in found:
        model = checkpoint.load_model(path, device, {"src": src_vocab, "tgt": tgt_vocab}, args.prepared)
        if sources is None:  # one run's checkpoints read the same inputs: encoded (and annotated) once
            sources = Sources.of_lines(model, lines, src_vocab, **source_options(args))
        scores[step] = tokenized_bleu(model, sources, refs, tgt_vocab, device, args)
        log.info("step %d: dev BLEU %.2f", step, scores[step])
    step, path = max(found, key=lambda item: (scores[item[0]], item[0]))
    log.info("chose step %d (dev BLEU %.2f)", step, scores[step])
    checkpoint.save(checkpoint.average([path]), args.out)
    write_json(args.scores, {"chosen_step": step, "dev_bleu": {str(s): b for s, b in scores.items()}})
