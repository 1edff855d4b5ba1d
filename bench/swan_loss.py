"""SWAN's loss against a plain seq2seq step on the same batch, and how it grows with the maximum
segment length L and the sentence length, in one run (paper C, issue: "bench SWAN vs seq2seq"); with
`--corpus`, on the sentence lengths of a real parallel corpus batched as the trainer batches them.

Each cell times forward + backward of one batch of `--tokens` target tokens (sentences of one
length, source as long as target) for NPMT (the loss sums over every segmentation: its segment GRU
runs L+1 steps from every (source position, target start) pair) and for the attention GRU seq2seq
baseline (token cross-entropy), both at the same width and vocabulary, interleaved repetition by
repetition so that load on a shared machine hits them alike. Printed: milliseconds per batch and the
ratio NPMT / seq2seq, and NPMT's target tokens a second. Run from the repo root:

    python bench/swan_loss.py                       # d 64, V 4568 (tiny's de-en target vocabulary)
    python bench/swan_loss.py --lengths 10 20 --max-segments 2 6 --repeats 5
    python bench/swan_loss.py --corpus data/iwslt14/test.de.gz data/iwslt14/test.en.gz --lengths --max-segments 6
    python bench/swan_loss.py --device cuda --precision bf16 --d-model 256 --decoder-layers 2 --vocab 22822 \
        --tokens 800 --corpus data/iwslt14/test.de.gz data/iwslt14/test.en.gz --lengths --max-segments 6  # paper C

`--profile FILE` then runs NPMT's last timed pass once more under torch's profiler and writes where it
goes to FILE: the share of its wall time the GPU was busy, the GPU's time by kind of kernel, the host's
time in each part of the forward (`PARTS`), in the DP's and the normaliser's backward (`BACKWARD_PARTS`)
and in the rest of the pass (backward, mostly), and the ops that took the most host and GPU time
(nmtrepro.training.profiling.summarise): what to make faster, measured before anyone optimises it.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import time

import numpy as np
import synthetic
import torch

from nmtrepro.core import runtime
from nmtrepro.core.vocab import Vocab
from nmtrepro.models import build_model, npmt
from nmtrepro.training.batching import collate, token_batches
from nmtrepro.training.criterion import model_loss
from nmtrepro.training.profiling import profiler, summarise


def batch(length: int, tokens: int, vocab: int) -> tuple:
    """One batch of `tokens` target tokens in sentences of `length`, source as long as target."""
    src, prev, tgt = synthetic.batch(max(1, tokens // length), length, vocab, torch.Generator().manual_seed(0))
    return {"src": src}, prev, tgt


def corpus_batches(src_file: str, tgt_file: str, tokens: int, vocab: int, count: int) -> list[tuple]:
    """`count` batches spread over the trainer's token batches (`token_batches`, `collate`: at most
    `tokens` padded tokens a side) of a corpus's sentence lengths (words + EOS, paper C's 1-50 words
    kept), random token ids; the padding, which SWAN's work depends on, is the real batches'."""
    src_len, tgt_len = synthetic.corpus_lengths(src_file), synthetic.corpus_lengths(tgt_file)
    keep = (src_len > 1) & (src_len <= 51) & (tgt_len > 1) & (tgt_len <= 51)
    rng = np.random.default_rng(0)
    src, tgt = (synthetic.sentences(side[keep], vocab, rng) for side in (src_len, tgt_len))
    plan = token_batches(src.sizes, tgt.sizes, tokens, seed=0)
    picked = [collate(src, tgt, plan[i]) for i in range(0, len(plan), max(1, len(plan) // count))[:count]]
    return [(batch.net_input, batch.prev, batch.target) for batch in picked]


# The parts of NPMT's forward whose host time a profile reports: the source encoder, the segment decoder
# (the GRU steps and the normaliser of every segment a segmentation can use) and SWAN's dynamic program.
PARTS = {"encoder": (npmt.NPMT, "encode"), "segment decoder": (npmt.SegmentDecoder, "segment_logprobs"),
         "dynamic program": (npmt, "swan_log_likelihood")}


@contextlib.contextmanager
def labelled_parts():
    """While it lasts, each of PARTS runs inside a profiler range named "npmt <part>"."""
    originals = {part: getattr(owner, name) for part, (owner, name) in PARTS.items()}

    def labelled(part, function):
        @functools.wraps(function)
        def run(*args, **kwargs):
            with torch.profiler.record_function(f"npmt {part}"):
                return function(*args, **kwargs)
        return run

    try:
        for part, (owner, name) in PARTS.items():
            setattr(owner, name, labelled(part, originals[part]))
        yield
    finally:
        for part, (owner, name) in PARTS.items():
            setattr(owner, name, originals[part])


# The backward's autograd nodes whose host time a profile reports: SWAN's DP and the segment decoder's
# normaliser are one node each (npmt.ForwardAlgorithm, npmt.LinearLogProbs).
BACKWARD_PARTS = {"dynamic program": "ForwardAlgorithmBackward", "normaliser": "LinearLogProbsBackward"}


def host_by_part(profiled, wall_ms: float, batches: int) -> str:
    """The host's milliseconds a batch in each labelled part of the forward, in the DP's and the
    normaliser's backward, and in the rest of the pass; and the autograd nodes a batch, each of which
    the host runs one by one in backward."""
    def spent(names: dict) -> dict:
        return {part: sum(e.cpu_time_total for e in profiled.events() if e.name == name) / 1000 / batches
                for part, name in names.items()}

    forward = spent({part: f"npmt {part}" for part in PARTS})
    backward = spent(BACKWARD_PARTS)
    rest = wall_ms / batches - sum(forward.values()) - sum(backward.values())
    nodes = sum(e.name.startswith("autograd::engine::evaluate_function") for e in profiled.events()) / batches
    return ("the host's time a batch: " + ", ".join(f"{part} {ms:.1f} ms" for part, ms in forward.items())
            + " (forward); " + ", ".join(f"{part} {ms:.1f} ms" for part, ms in backward.items())
            + f" (backward); the rest of the pass, backward mostly, {rest:.1f} ms; {nodes:.0f} autograd nodes a batch")


def pass_ms(model, batches: list[tuple], precision: str) -> float:
    """Forward + backward of every batch once, in milliseconds, the GPU's work waited for."""
    device = next(model.parameters()).device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for data in batches:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss, _ = model_loss(model, *data, 0.1)
        loss.backward()
    sync()
    return 1000 * (time.perf_counter() - start)


def to_device(data: tuple, device: torch.device) -> tuple:
    net_input, prev, target = data
    return {"src": net_input["src"].to(device)}, prev.to(device), target.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=4568)
    parser.add_argument("--tokens", type=int, default=1024, help="target tokens per batch")
    parser.add_argument("--lengths", type=int, nargs="*", default=[10, 20, 40])
    parser.add_argument("--corpus", nargs=2, metavar=("SOURCE", "TARGET"),
                        help="also time batches with the sentence lengths of these (gzipped) files")
    parser.add_argument("--batches", type=int, default=4, help="corpus batches timed in a repetition")
    parser.add_argument("--max-segments", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--decoder-layers", type=int, default=1, help="NPMT's segment GRU layers (paper C: 2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast")
    parser.add_argument("--profile", metavar="FILE", help="profile NPMT's last pass once more; its summary to FILE")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    runtime.tune_malloc()  # as the trainer does: glibc's mmap churn alone doubled NPMT's time
    torch.manual_seed(0)
    sizes = {"src_vocab": args.vocab, "tgt_vocab": args.vocab, "d_model": args.d_model, "encoder_layers": 2,
             "dropout": 0.0}
    seq2seq = build_model({"family": "gru_attention", **sizes, "decoder_layers": 1}).to(device)
    print(f"d {args.d_model}, V {args.vocab}, {args.tokens} target tokens a batch, {args.device} {args.precision}, "
          f"{args.threads} thread(s), median of {args.repeats}: forward + backward")
    print(f"{'length':>6} {'L':>3} {'seq2seq ms':>11} {'NPMT ms':>9} {'NPMT / seq2seq':>15} {'NPMT tok/s':>11} "
          f"{'peak GiB':>9}")
    cases = [(str(length), [batch(length, args.tokens, args.vocab)]) for length in args.lengths]
    if args.corpus:
        cases.append(("corpus", corpus_batches(*args.corpus, args.tokens, args.vocab, args.batches)))
    for label, batches in cases:
        batches = [to_device(data, device) for data in batches]
        targets = sum(int(target.ne(Vocab.pad).sum()) for _, _, target in batches)
        for max_seg in args.max_segments:
            model = build_model({"family": "npmt", **sizes, "decoder_layers": args.decoder_layers,
                                 "max_segment": max_seg}).to(device)
            if device.type == "cuda":  # warm up (allocator, cuDNN, compiled kernels); peak of what follows
                pass_ms(seq2seq, batches, args.precision), pass_ms(model, batches, args.precision)
                torch.cuda.reset_peak_memory_stats()
            base, swan = [], []
            for _ in range(args.repeats):                         # interleaved
                base.append(pass_ms(seq2seq, batches, args.precision))
                swan.append(pass_ms(model, batches, args.precision))
            b, s = sorted(base)[len(base) // 2], sorted(swan)[len(swan) // 2]
            peak = f"{torch.cuda.max_memory_allocated() / 2 ** 30:.1f}" if device.type == "cuda" else "-"
            print(f"{label:>6} {max_seg:>3} {b:>11.1f} {s:>9.1f} {s / b:>15.1f} {1000 * targets / s:>11.0f} {peak:>9}")
    if args.profile:
        with labelled_parts(), profiler(device.type == "cuda") as profiled:
            ms = pass_ms(model, batches, args.precision)
        what = f"NPMT forward + backward, {len(batches)} {label} batches, L {max_seg}"
        text, _ = summarise(profiled, ms / 1000, what, per=(len(batches), "a batch"),
                            detail=host_by_part(profiled, ms, len(batches)))
        with open(args.profile, "w") as handle:
            handle.write(text + "\n")
        print(f"profile of the last NPMT pass: {args.profile}")


if __name__ == "__main__":
    main()
