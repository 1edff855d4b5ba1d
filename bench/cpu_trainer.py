"""The CPU trainer before and after a change, side by side in one run: target tokens/s of the `tiny` Base,
its GFLOP/s and their share of the one-thread bf16 matmul peak this script measures, at one thread and at
two; and (`--bleu`) BLEU after the default run's 1,000 updates for both, three seeds, same data order.

"Before" is the code of a git revision (`--before`, checked out in a temporary worktree), "after" this
working tree; each trains with its own tree's `tiny` settings (config.yaml `scales.tiny.train`) and Base
size on the same prepared Multi30k En-De, through its own bench/timed_steps.py (`nmtrepro train`, every
update's end timed). Rounds alternate the two, so that a slow minute of a shared machine hits both.
`nmtrepro` backs large tensors with huge pages from its entry point (cli.huge_pages), which a
bench that imports torch first must ask for in the environment: the after path gets it so.

The FLOPs of a target token are training/flops.py's analytic count at the prepared vocabularies; the peak
is torch's bf16 matmul of two 2048 x 2048 matrices on one thread (and the tiny model's own shapes).

    python bench/cpu_trainer.py [--before REV] [--updates 60] [--rounds 2] [--bleu]
    python bench/cpu_trainer.py --rounds 0 --bleu        # BLEU only

`--bleu` runs the default run's Base En-De (`base_en_de`, three seeds) in each tree with Snakemake into
its own results folder (before: the worktree's; after: a copy of the `prepare` outputs it needs), decoded
as the default run decodes: about 20 minutes of 2 cores after, 30 before.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from nmtrepro.core.vocab import IndexedData, Vocab  # noqa: E402
from nmtrepro.models import build_model  # noqa: E402
from nmtrepro.training.flops import update_flops  # noqa: E402

PREPARED = "results/tiny/prepare/multi30k_en_de"
BASE = ("base_en_de", "base_en_de_seed2", "base_en_de_seed3")


def matmul_peak(shape: tuple[int, int, int], dtype=torch.bfloat16, seconds: float = 1.0) -> float:
    """GFLOP/s of one thread's (m, k) @ (k, n) matmul in `dtype`, the best of three timed stretches."""
    torch.set_num_threads(1)
    m, k, n = shape
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    best = 0.0
    for _ in range(3):
        calls, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            a @ b
            calls += 1
        best = max(best, 2 * m * k * n * calls / (time.perf_counter() - began) / 1e9)
    return best


def tiny_recipe(tree: Path) -> tuple[dict, dict]:
    """(the Base's model spec, the train settings) of `tree`'s config.yaml at tiny."""
    tiny = yaml.safe_load((tree / "config.yaml").read_text())["scales"]["tiny"]
    return {"family": "transformer", **tiny["sizes"]["base"]}, dict(tiny["train"])


def worktree(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev], check=True,
                   capture_output=True)
    return into


def timed_run(tree: Path, threads: int, updates: int, out: Path, huge_pages: bool) -> list:
    """Train the tiny Base `updates` updates with `tree`'s code and settings; each update's (end, tokens)."""
    model, settings = tiny_recipe(tree)
    settings.update(max_updates=updates, threads=threads, save_every=10 * updates, log_every=10)
    steps, ckpt = out / "steps.json", out / "checkpoints"
    shutil.rmtree(ckpt, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(threads)}
    env.pop("THP_MEM_ALLOC_ENABLE", None)
    if huge_pages:
        env["THP_MEM_ALLOC_ENABLE"] = "1"
    subprocess.run([sys.executable, str(tree / "bench/timed_steps.py"), "ours", str(steps), "--",
                    "--prepared", str(ROOT / PREPARED), "--model", json.dumps(model),
                    "--settings", json.dumps(settings), "--checkpoint-dir", str(ckpt),
                    "--out", str(out / "model.pt"), "--curve", str(out / "curve.tsv")],
                   check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(steps.read_text())


def rate(steps: list, skip: int) -> float:
    """Target tokens/s of updates skip+1.. over the wall from the end of update `skip` (timed_steps.py)."""
    return sum(s[1] for s in steps[skip + 1:]) / (steps[-1][0] - steps[skip][0])


def speed(args, trees: dict[str, Path], work: Path, peak: float, flops_per_token: float) -> dict:
    rows = {}
    for threads in args.threads:
        for rnd in range(args.rounds):
            for name, tree in trees.items():
                out = work / f"{name}-t{threads}-r{rnd}"
                out.mkdir(parents=True, exist_ok=True)
                rows.setdefault((name, threads), []).append(
                    rate(timed_run(tree, threads, args.updates, out, name == "after"), args.skip))
    print(f"\ntiny Base, {flops_per_token / 1e6:.2f} MFLOP a target token; one-thread bf16 matmul peak "
          f"{peak:.0f} GFLOP/s; updates {args.skip + 1}..{args.updates}, {args.rounds} rounds interleaved "
          f"(the median's tok/s, the range)")
    print(f"{'path':8} {'threads':>7} {'tgt tok/s':>10} {'range':>13} {'GFLOP/s':>8} {'% peak':>7}")
    table = {}
    for (name, threads), rates in rows.items():
        mid = float(np.median(rates))
        gflops = mid * flops_per_token / 1e9
        table[f"{name} {threads}"] = {"tok_s": mid, "rates": rates, "gflop_s": gflops,
                                      "of_peak": gflops / (peak * threads)}
        print(f"{name:8} {threads:7d} {mid:10.0f} {min(rates):6.0f}-{max(rates):<6.0f} {gflops:8.1f} "
              f"{100 * gflops / (peak * threads):6.1f}%")
    for threads in args.threads:
        print(f"after/before at {threads} thread(s): "
              f"{table[f'after {threads}']['tok_s'] / table[f'before {threads}']['tok_s']:.2f}x")
    return table


def bleu(trees: dict[str, Path], work: Path) -> dict:
    """sacreBLEU of the default run's Base En-De, three seeds, in each tree (its own results folder)."""
    scores = {}
    for name, tree in trees.items():
        run = tree if name == "before" else work / "after-tree"
        if name == "after":
            shutil.copytree(ROOT, run, ignore=shutil.ignore_patterns(".git", ".venv", "results", ".snakemake",
                                                                    "bench/.venv-fairseq"), dirs_exist_ok=True)
        targets = [f"results/tiny/evaluate/{e}/test_2016_flickr.bleu.json" for e in BASE]
        began = time.perf_counter()
        subprocess.run(["snakemake", "--cores", "2", *targets, "--config", "scale=tiny"], check=True, cwd=run,
                       env={**os.environ, "PYTHONPATH": str(run / "src")}, stdout=subprocess.DEVNULL)
        scores[name] = {"wall_s": time.perf_counter() - began, "bleu": [
            json.loads((run / t).read_text())["sacrebleu"]["score"] for t in targets]}
    print("\nBLEU after 1,000 updates (sacreBLEU, test_2016_flickr; seeds 1, 2, 3; mean):")
    for name, row in scores.items():
        print(f"{name:8} " + "  ".join(f"{b:.2f}" for b in row["bleu"])
              + f"   mean {np.mean(row['bleu']):.2f}   ({row['wall_s'] / 60:.0f} min on 2 cores, prepare included)")
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="3aaf6fc", help="git revision of today's path (default: before issue 72)")
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--skip", type=int, default=10, help="updates left out of the rate (start-up, compiles)")
    parser.add_argument("--rounds", type=int, default=2, help="0: BLEU only (with --bleu)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--bleu", action="store_true", help="also BLEU of three seeds after 1,000 updates")
    parser.add_argument("--out", default="bench/out/cpu_trainer.json")
    args = parser.parse_args()
    if not (ROOT / PREPARED / "train.tgt.bin").exists():
        raise SystemExit(f"{PREPARED} is missing: snakemake --cores 2 {PREPARED}/stats.json --config scale=tiny")
    peak = matmul_peak((2048, 2048, 2048))
    shapes = {"ffn [4096x128]x[128x512]": matmul_peak((4096, 128, 512)),
              "output [4096x128]x[128x5781]": matmul_peak((4096, 128, 5781))}
    print(f"one-thread matmul, GFLOP/s: bf16 2048^3 {peak:.0f}, fp32 2048^3 "
          f"{matmul_peak((2048, 2048, 2048), torch.float32):.0f}; bf16 "
          + ", ".join(f"{k} {v:.0f}" for k, v in shapes.items()))
    model, _ = tiny_recipe(ROOT)
    src, tgt = (IndexedData(ROOT / PREPARED / f"train.{side}.bin").sizes for side in ("src", "tgt"))
    spec = {**model, **{f"{side}_vocab": len(Vocab.load(ROOT / PREPARED / f"dict.{side}.txt"))
                        for side in ("src", "tgt")}}
    flops_per_token = update_flops(build_model(spec), spec, src.tolist(), tgt.tolist()) / tgt.sum()
    with tempfile.TemporaryDirectory(prefix="cpu_trainer-") as tmp:
        work = Path(tmp)
        trees = {"before": worktree(args.before, work / "before-tree"), "after": ROOT}
        try:
            result = {"peak_gflop_s": peak, "shapes_gflop_s": shapes, "flops_per_token": flops_per_token,
                      "before": args.before}
            if args.rounds:
                result["speed"] = speed(args, trees, work, peak, flops_per_token)
            if args.bleu:
                result["bleu"] = bleu(trees, work)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees["before"])],
                           capture_output=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
