"""SWAN's loss against a plain seq2seq step on the same batch, and how it grows with the maximum
segment length L and the sentence length, in one run (paper C, issue: "bench SWAN vs seq2seq").

Each cell times forward + backward of one batch of `--tokens` target tokens (sentences of one
length, source as long as target) for NPMT (the loss sums over every segmentation: its segment GRU
runs L+1 steps from every (source position, target start) pair) and for the attention GRU seq2seq
baseline (token cross-entropy), both at the same width and vocabulary, interleaved repetition by
repetition so that load on a shared machine hits them alike. Printed: milliseconds per batch and the
ratio NPMT / seq2seq. Run from the repo root:

    python bench/swan_loss.py                       # d 64, V 4568 (tiny's de-en target vocabulary)
    python bench/swan_loss.py --lengths 10 20 --max-segments 2 6 --repeats 5
"""
from __future__ import annotations

import argparse
import time

import torch

from nmtrepro.core import runtime
from nmtrepro.core.vocab import Vocab
from nmtrepro.models import build_model
from nmtrepro.training.criterion import model_loss


def batch(length: int, tokens: int, vocab: int, seed: int = 0) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    rows = max(1, tokens // length)
    src = torch.randint(4, vocab, (rows, length), generator=gen)
    tgt = torch.randint(4, vocab, (rows, length), generator=gen)
    src[:, -1] = tgt[:, -1] = Vocab.eos
    prev = torch.cat([torch.full((rows, 1), Vocab.bos), tgt[:, :-1]], dim=1)
    return {"src": src}, prev, tgt


def step_ms(model, data, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss, _ = model_loss(model, *data, 0.1)
        loss.backward()
        times.append(1000 * (time.perf_counter() - start))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=4568)
    parser.add_argument("--tokens", type=int, default=1024, help="target tokens per batch")
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--max-segments", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runtime.tune_malloc()  # as the trainer does: glibc's mmap churn alone doubled NPMT's time
    torch.manual_seed(0)
    sizes = {"src_vocab": args.vocab, "tgt_vocab": args.vocab, "d_model": args.d_model, "encoder_layers": 2,
             "decoder_layers": 1, "dropout": 0.0}
    seq2seq = build_model({"family": "gru_attention", **sizes})
    print(f"d {args.d_model}, V {args.vocab}, {args.tokens} target tokens a batch, {args.threads} thread(s), "
          f"median of {args.repeats}: forward + backward")
    print(f"{'length':>6} {'L':>3} {'seq2seq ms':>11} {'NPMT ms':>9} {'NPMT / seq2seq':>15}")
    for length in args.lengths:
        data = batch(length, args.tokens, args.vocab)
        for max_seg in args.max_segments:
            npmt = build_model({"family": "npmt", **sizes, "max_segment": max_seg})
            base, swan = [], []
            for _ in range(args.repeats):                         # interleaved
                base += step_ms(seq2seq, data, 1)
                swan += step_ms(npmt, data, 1)
            b, s = sorted(base)[len(base) // 2], sorted(swan)[len(swan) // 2]
            print(f"{length:>6} {max_seg:>3} {b:>11.1f} {s:>9.1f} {s / b:>15.1f}")


if __name__ == "__main__":
    main()
