"""Our decoder's speed beside CTranslate2's on the same weights, one thread, in one run (issue 84).

The model (a model bundle folder, or a model file with --prepared) is exported with `nmtrepro
export-ct2` twice, float32 and int8 weights, and a test set is decoded by our beam search (the `decode`
command's `translate`, fp32, its length-sorted batches of --max-tokens source tokens) and by
CTranslate2 under the same rules (`evaluation.ct2.translate`: our length limit per sentence, which
CTranslate2 takes one per call, so its batches hold the sentences of one limit, at most --max-tokens
tokens). Each decoder gets one thread (torch's intra-op threads, CTranslate2's intra_threads and one
translator); rounds are interleaved and each decoder's fastest round counts, as a shared machine slows
some rounds (the ratio of each round's two times is printed too: a round's decoders share its load). Printed, and written to OUT/ct2_speed.json: sentences/s of each at --beam, CTranslate2
float32's speed over ours, and of the outputs the share identical to ours, at --beam and greedy.
Run from the repository root:

    python bench/ct2_speed.py --model bench/out/ct2/base.pt --prepared results/tiny/prepare/multi30k_en_de \
        --src-bpe results/tiny/prepare/multi30k_en_de/test/test_2016_flickr.src.bpe
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import ctranslate2
import torch

from nmtrepro.core import runtime
from nmtrepro.core.files import read_lines
from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation import ct2
from nmtrepro.evaluation.generate import joined, translate
from nmtrepro.evaluation.options import DEFAULTS
from nmtrepro.evaluation.sources import Sources
from nmtrepro.training import checkpoint

WEIGHTS = {"float32": None, "int8": "int8"}   # CTranslate2 model -> export-ct2's --quantization


def timed(decode) -> tuple[float, list[list[str]]]:
    start = time.perf_counter()
    outputs = decode()
    return time.perf_counter() - start, outputs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model bundle folder, or a model file with --prepared")
    ap.add_argument("--prepared", help="the model file's prepared dataset folder (dict.src.txt, dict.tgt.txt)")
    ap.add_argument("--src-bpe", required=True, help="BPE'd test source, one sentence a line")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--lenpen", type=float, default=DEFAULTS["lenpen"])
    ap.add_argument("--max-tokens", type=int, default=DEFAULTS["max_tokens"], help="source tokens a batch")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds of each decoder, interleaved")
    ap.add_argument("--out", default="bench/out/ct2_speed")
    args = ap.parse_args()

    device = runtime.setup(1, "cpu")
    model_path, vocab_dir = ct2.model_and_vocabularies(args.model, args.prepared)
    out = Path(args.out)
    translators = {name: ctranslate2.Translator(str(ct2.export(model_path, vocab_dir, out / name, quantization)),
                                                device="cpu", inter_threads=1, intra_threads=1)
                   for name, quantization in WEIGHTS.items()}
    model = checkpoint.load_model(model_path, device)
    src_vocab, tgt_vocab = (Vocab.load(Path(vocab_dir) / f"dict.{side}.txt") for side in ("src", "tgt"))
    lines = read_lines(args.src_bpe)
    sources, tokens = Sources.of_lines(model, lines, src_vocab), [line.split() for line in lines]
    limits = {"max_len_a": DEFAULTS["max_len_a"], "max_len_b": DEFAULTS["max_len_b"]}

    def ours(beam: int) -> list[list[str]]:
        return [h.split() for h in joined(translate(model, sources, tgt_vocab, device, args.max_tokens,
                                                    beam=beam, lenpen=args.lenpen, **limits))]

    def theirs(name: str, beam: int) -> list[list[str]]:
        return ct2.translate(translators[name], tokens, beam, args.lenpen, max_tokens=args.max_tokens, **limits)

    decoders = {"ours": ours, **{f"ct2_{name}": (lambda b, n=name: theirs(n, b)) for name in WEIGHTS}}
    seconds, outputs = {name: [] for name in decoders}, {}
    for _ in range(args.rounds):
        for name, decode in decoders.items():
            took, outputs[name] = timed(lambda: decode(args.beam))
            seconds[name].append(took)
            print(f"{name:>12}: {len(lines) / took:6.1f} sentences/s ({took:.1f} s)", flush=True)
    greedy = {name: decode(1) for name, decode in decoders.items()}

    def share(found: dict, name: str) -> float:
        return sum(a == b for a, b in zip(found[name], found["ours"])) / len(lines)

    speed = {name: len(lines) / min(took) for name, took in seconds.items()}
    result = {"sentences": len(lines), "beam": args.beam, "lenpen": args.lenpen, "threads": 1,
              "torch_threads": torch.get_num_threads(), "ctranslate2": ctranslate2.__version__,
              "sentences_per_s": speed, "seconds": seconds,
              "ct2_float32_over_ours": speed["ct2_float32"] / speed["ours"],
              "ct2_int8_over_ours": speed["ct2_int8"] / speed["ours"],
              "ct2_float32_over_ours_by_round": [a / b for a, b in zip(seconds["ours"], seconds["ct2_float32"])],
              "identical_at_beam": {name: share(outputs, name) for name in decoders if name != "ours"},
              "identical_greedy": {name: share(greedy, name) for name in decoders if name != "ours"}}
    (out / "ct2_speed.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{len(lines)} sentences, beam {args.beam}, one thread, fastest of {args.rounds} rounds:")
    for name in decoders:
        print(f"{name:>12}: {speed[name]:6.1f} sentences/s" + ("" if name == "ours" else
              f"  {speed[name] / speed['ours']:.2f}x ours; identical to ours: {result['identical_at_beam'][name]:.1%}"
              f" at beam {args.beam}, {result['identical_greedy'][name]:.1%} greedy"))
    print(f"CTranslate2 float32 over ours round by round (the same load): median "
          f"{statistics.median(result['ct2_float32_over_ours_by_round']):.2f}x, "
          + ", ".join(f"{r:.2f}" for r in result["ct2_float32_over_ours_by_round"]))


if __name__ == "__main__":
    main()
