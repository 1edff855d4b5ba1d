"""Training and decoding time of model variants relative to a baseline at equal size, in one run.

Paper A, Table 2: +Max+Attn+TA trains 1.75x and decodes 1.53x slower than Transformer Base; paper B,
Table 1: a 1-layer BiARN trains at 1.24 steps/s where Base does 1.28 (1.03x), 6-layer BiRNN / BiARN
at 1.10 / 1.09 (1.16x / 1.17x); paper D, Table V: +Rec / +Loc / +Syn / +Fusing_Diverse train at 9839
/ 9866 / 9900 / 9811 source tokens/s where Base does 9910 (1.01x / 1.00x / 1.00x / 1.01x) and decode
at 176 / 179 / 181 / 175 where Base does 181 (1.03x / 1.01x / 1.00x / 1.03x). All models are built
at one size of config.yaml (default: the `tiny` scale's `base`) and timed in one run on the same
synthetic batches (lengths like Multi30k's), interleaved batch by batch so that load on a shared
machine hits them alike.

Training: forward + backward of the trainer's loss (label smoothing; DisReg's agreement term) + Adam
step per batch; random POS tags go to the models that read them (paper D's syntax group). Decoding:
encode, then `--steps` incremental steps with a beam of 4 (decode, output layer, log-softmax, top-k,
cache reorder), a fixed number of steps so that untrained models' random EOS do not change the work.
Run from the repo root:

    python bench/variant_speed.py --batches 20 --variant phrase_mean --variant phrase_max_attn_ta
    python bench/variant_speed.py --variant biarn --variant biarn_6_layers --variant birnn_6_layers
    python bench/variant_speed.py --variant rec_diverse --variant loc_diverse --variant syn_diverse \
        --variant fusing_diverse --variant transformer_disreg --variant linguistic_features
"""
from __future__ import annotations

import argparse
import sys
import time

import synthetic
import torch

from nmtrepro.study.config import load, model_options
from nmtrepro.core.pos import POS_VOCAB
from nmtrepro.core.vocab import SPECIALS, Vocab
from nmtrepro.models import build_model
from nmtrepro.models.size import parameter_counts
from nmtrepro.training.criterion import model_loss


def synthetic_batches(n: int, max_tokens: int, vocab: int, seed: int = 0) -> list[tuple]:
    """(src, prev, target, pos) batches of random tokens (synthetic.batch) and source POS tags (paper D's
    syntax group reads them), sentences 8..40 tokens, one length per batch."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        length = int(torch.randint(8, 41, (1,), generator=gen))
        rows = max(1, max_tokens // length)
        src, prev, tgt = synthetic.batch(rows, length, vocab, gen)
        batches.append((src, prev, tgt, torch.randint(len(SPECIALS), len(POS_VOCAB), (rows, length), generator=gen)))
    return batches


def extra_inputs(model, pos) -> dict:
    """What the model's encoder reads besides the tokens (`config.extra_inputs`)."""
    unknown = set(model.config.extra_inputs) - {"pos"}
    if unknown:
        sys.exit(f"{model.config.__class__.__name__} reads {sorted(unknown)}, which this bench does not synthesise")
    return {"pos": pos} if "pos" in model.config.extra_inputs else {}


def train_step(model, optimizer, src, prev, tgt, pos) -> None:
    """One update with the trainer's loss (label smoothing, DisReg's agreement term where asked for)."""
    optimizer.zero_grad(set_to_none=True)
    loss, _ = model_loss(model, {"src": src, **extra_inputs(model, pos)}, prev, tgt, 0.1)
    loss.backward()
    optimizer.step()


@torch.no_grad()
def decode_steps(model, src, pos, beam: int, steps: int) -> None:
    enc = model.encode(src, **extra_inputs(model, pos))
    rows = src.size(0) * beam
    enc = model.reorder_encoder(enc, torch.arange(src.size(0)).repeat_interleave(beam))
    cache, prev = {}, torch.full((rows, 1), Vocab.bos)
    for _ in range(steps):
        lprobs = torch.log_softmax(model.logits(model.decode(prev, enc, cache)[:, -1]), dim=-1)
        tokens = lprobs.topk(beam, dim=-1).indices
        order = torch.arange(rows)          # same amount of reordering work as a real beam
        model.reorder_cache(cache, order)
        prev = tokens[:, :1]


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--baseline", default="transformer_base")
    ap.add_argument("--variant", action="append", required=True,
                    help="a variant to time against the baseline (a key of models; repeatable)")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--decode-batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30, help="decoding steps per batch")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    config, _ = load(args.config, [f"scale={args.scale}"])
    models, optimizers = {}, {}
    for name in [args.baseline, *args.variant]:
        torch.manual_seed(0)
        spec = {**model_options(config, name, f"models.{name}"), "src_vocab": args.vocab, "tgt_vocab": args.vocab}
        models[name] = build_model(spec)
        optimizers[name] = torch.optim.Adam(models[name].parameters(), lr=1e-4)
        print(f"{name}: {parameter_counts(models[name])['total']:,} parameters")
    batches = synthetic_batches(args.batches + 1, args.max_tokens, args.vocab)
    train = {name: 0.0 for name in models}
    for i, batch in enumerate(batches):          # batch 0 warms both models up, untimed
        for name, model in models.items():
            model.train()
            seconds = timed(train_step, model, optimizers[name], *batch)
            train[name] += seconds if i else 0.0
    decode = {name: 0.0 for name in models}
    for i, (src, _, _, pos) in enumerate(batches[:args.decode_batches + 1]):
        rows = max(1, args.max_tokens // (4 * src.size(1)))
        src, pos = src[:rows], pos[:rows]
        for name, model in models.items():
            model.eval()
            seconds = timed(decode_steps, model, src, pos, 4, args.steps)
            decode[name] += seconds if i else 0.0
    base = args.baseline
    for name in models:
        print(f"{name:24s} train {train[name]:7.2f} s ({train[name] / train[base]:.2f}x)   "
              f"decode {decode[name]:7.2f} s ({decode[name] / decode[base]:.2f}x)")


if __name__ == "__main__":
    main()
