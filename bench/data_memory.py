"""Host memory of the training data at WMT14 En-Fr scale: resident memory per rank, and an epoch's batching time.

Writes a synthetic prepared dataset of --pairs training pairs in the real binarized format (lengths
drawn like WMT14 En-Fr after BPE: ~30 tokens a side on average, at most 256 + EOS, target/source
ratio within 1.5) into a temporary folder, then starts --ranks processes at once, as torchrun would.
Each builds the `Corpus`, plans one epoch's batches (`Corpus.batches`, seed 1), walks its share of
them (every --ranks-th batch, counting target tokens as `Trainer.groups` does) and collates the first
--collate of those. Per rank it prints peak RSS, the anonymous (private) and file-backed (the mapped
corpus, shared between ranks through the page cache) peaks, PSS at the end (shared pages divided
between the processes mapping them), and the seconds each phase took.

The code this replaced (each rank loaded all tokens into memory and sorted in Python) is measured on
the same kind of corpus at --old-pairs (smaller: it needs far more memory and time), one rank at a
time, from the package as committed at --old-commit (extracted with `git archive`), with its int32
token files; the current code runs beside it on the same files. The old peak is extrapolated linearly
to --pairs from the two smallest sizes (stated as such in the output). Everything goes into a
temporary folder under --tmp, removed at the end. Run from the repository root:

    python bench/data_memory.py                                  # 36M pairs, 4 ranks; ~5 GB of disk
    python bench/data_memory.py --pairs 2000000 --old-pairs ''   # quick check
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

SRC = Path(__file__).resolve().parents[1] / "src"
# The standard deviation of log(target / source words) on newstest2012+2013 En-De (6,003 pairs).
RATIO_LOG_SD = 0.19


def synthetic_lengths(pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(pairs,) source and target lengths with EOS: log-normal source pieces (mean ~29), target pieces a
    log-normal ratio of them (median 1.1, French runs longer), both kept within prepare's filter (<= 256,
    ratio <= 1.5). The ratio spreads as real WMT's does, which bucketed batching feels: a bucket bounds
    both sides, so the wider the ratio, the more padding (bench/padding.py)."""
    src = np.clip(np.rint(rng.lognormal(3.2, 0.6, pairs)), 1, 256)
    def ratios(n: int) -> np.ndarray:
        return np.exp(rng.normal(np.log(1.1), RATIO_LOG_SD, n))
    ratio = ratios(pairs)
    while (outside := (ratio < 1 / 1.5) | (ratio > 1.5)).any():  # prepare drops them: draw those again
        ratio[outside] = ratios(int(outside.sum()))
    tgt = np.clip(np.rint(src * ratio), 1, 256)
    return src.astype(np.int64) + 1, tgt.astype(np.int64) + 1


def write_side(path: Path, lengths: np.ndarray, vocab: int, dtype, rng: np.random.Generator) -> None:
    """One side's .bin: random ids below `vocab`, each sentence ending in EOS (numpy throughout: 36M
    sentences would take minutes one at a time)."""
    from nmtrepro.core.vocab import save_flat
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = rng.integers(4, vocab, int(offsets[-1]), dtype=np.uint16).astype(dtype, copy=False)
    tokens[offsets[1:] - 1] = 2  # EOS
    save_flat(path, {"tokens": torch.from_numpy(tokens), "offsets": torch.from_numpy(offsets)})


def write_corpus(folder: Path, pairs: int, vocab: int, dtype) -> float:
    """A prepared dataset folder (dictionaries, train and valid splits); returns the train pairs' mean length."""
    from nmtrepro.core.vocab import Vocab, save_indexed
    folder.mkdir(parents=True)
    rng = np.random.default_rng(pairs)
    for side in ("src", "tgt"):
        Vocab([f"w{i}" for i in range(vocab - 4)]).save(folder / f"dict.{side}.txt")
    src, tgt = synthetic_lengths(pairs, rng)
    for side, lengths in (("src", src), ("tgt", tgt)):
        write_side(folder / f"train.{side}.bin", lengths, vocab, dtype, rng)
        save_indexed(folder / f"valid.{side}.bin", [[5] * int(n - 1) + [2] for n in lengths[:1000]])
    return float((src.mean() + tgt.mean()) / 2)


def memory() -> dict[str, int]:
    """This process's memory in KiB, from /proc/self/status."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0])
    return fields


def barrier(folder: Path, name: str, rank: int, world: int, timeout: float) -> None:
    """Wait until every rank has reached `name`: so the ranks work at the same time, as under torchrun,
    and all are alive when PSS splits the shared pages between them. Gives up after `timeout` seconds
    (a rank that died never arrives)."""
    (folder / f"{name}.{rank}").touch()
    deadline = time.monotonic() + timeout
    while len(list(folder.glob(f"{name}.*"))) < world:
        if time.monotonic() > deadline:
            sys.exit(f"rank {rank}: the other ranks never reached {name!r}")
        time.sleep(0.05)


def worker(args) -> None:
    """One rank: build the Corpus, plan an epoch, walk this rank's batches; print a JSON line."""
    peaks, done = {"RssAnon": 0, "RssFile": 0}, threading.Event()

    def sample():
        while not done.wait(0.02):
            now = memory()
            for name in peaks:
                peaks[name] = max(peaks[name], now[name])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    from nmtrepro.training.train import Corpus
    sync = Path(args.data).parent / "sync"
    barrier(sync, "start", args.rank, args.world, args.timeout)
    times, start = {}, time.perf_counter()
    corpus = Corpus(args.data)
    times["load_s"], start = time.perf_counter() - start, time.perf_counter()
    batches = corpus.batches("train", args.max_tokens, 1, 0)
    times["plan_s"], start = time.perf_counter() - start, time.perf_counter()
    tgt_sizes = corpus.splits["train"][1].sizes
    if hasattr(batches, "tgt_tokens"):   # as each version's Trainer.groups counts a batch's target tokens
        def count(j):
            return int(batches.tgt_tokens[j])
    else:
        def count(j):
            return sum(tgt_sizes[i] for i in batches[j])
    tokens = collated = 0
    for j in range(args.rank, len(batches), args.world):
        indices = batches[j]
        tokens += count(j)
        if collated < args.collate:
            corpus.collate("train", indices)
            collated += 1
    times["walk_s"] = time.perf_counter() - start
    done.set()
    sampler.join()
    barrier(sync, "measure", args.rank, args.world, args.timeout)
    now = memory()
    pss = next(int(line.split()[1]) for line in Path("/proc/self/smaps_rollup").read_text().splitlines()
               if line.startswith("Pss:"))
    barrier(sync, "exit", args.rank, args.world, args.timeout)
    mib = {"peak_rss_mib": now["VmHWM"], "peak_anon_mib": max(peaks["RssAnon"], now["RssAnon"]),
           "peak_file_mib": max(peaks["RssFile"], now["RssFile"]), "anon_end_mib": now["RssAnon"],
           "file_end_mib": now["RssFile"], "pss_end_mib": pss}
    print(json.dumps({"rank": args.rank, "batches": len(batches), "tgt_tokens": tokens, "collated": collated,
                      **{name: kib / 1024 for name, kib in mib.items()}, **times}))


def run_ranks(data: Path, world: int, package: Path, args) -> list[dict]:
    """Start `world` rank processes at once on `package`'s code; their JSON lines."""
    env = {**os.environ, "PYTHONPATH": str(package), "OMP_NUM_THREADS": "1"}
    shutil.rmtree(data.parent / "sync", ignore_errors=True)
    (data.parent / "sync").mkdir()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--data", str(data), "--rank", str(rank),
                               "--world", str(world), "--max-tokens", str(args.max_tokens),
                               "--collate", str(args.collate)], env=env, stdout=subprocess.PIPE, text=True)
             for rank in range(world)]
    try:
        outs = [proc.communicate(timeout=args.timeout)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if any(proc.returncode for proc in procs):
        sys.exit(f"a rank failed (exits {[proc.returncode for proc in procs]}) on {data}")
    return [json.loads(out.strip().splitlines()[-1]) for out in outs]


def show(label: str, results: list[dict]) -> None:
    print(f"{label}: {results[0]['batches']:,} batches an epoch")
    print(f"{'rank':>5}{'peak RSS':>10}{'anon':>7}{'/end':>6}{'file':>7}{'/end':>6}{'PSS end':>9}"
          f"{'load s':>8}{'plan s':>8}{'walk s':>8}")
    for r in results:
        print(f"{r['rank']:>5}{r['peak_rss_mib']:>10.0f}{r['peak_anon_mib']:>7.0f}{r['anon_end_mib']:>6.0f}"
              f"{r['peak_file_mib']:>7.0f}{r['file_end_mib']:>6.0f}{r['pss_end_mib']:>9.0f}"
              f"{r['load_s']:>8.1f}{r['plan_s']:>8.1f}{r['walk_s']:>8.1f}")
    print(f"  the host at the end (PSS summed over the ranks): {sum(r['pss_end_mib'] for r in results) / 1024:.1f} GiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=36_000_000)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=4096, help="the paper scale's max_tokens")
    ap.add_argument("--collate", type=int, default=300, help="batches each rank collates")
    ap.add_argument("--vocab", type=int, default=32_000, help="symbols per side (ids up to this)")
    ap.add_argument("--old-pairs", default="1000000,2000000",
                    help="comma-separated corpus sizes for the replaced code ('' skips it)")
    ap.add_argument("--old-commit", default="4d2d73d", help="a commit with the replaced data path")
    ap.add_argument("--tmp", default=tempfile.gettempdir(), help="where the temporary folder goes")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a rank may take")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    sys.path.insert(0, str(SRC))
    work = Path(tempfile.mkdtemp(prefix="data_memory_", dir=args.tmp))
    try:
        start = time.perf_counter()
        mean = write_corpus(work / "corpus", args.pairs, args.vocab, np.uint16)
        size = sum(f.stat().st_size for f in (work / "corpus").iterdir()) / 2 ** 30
        print(f"{args.pairs:,} pairs, mean {mean:.1f} tokens a side, {size:.2f} GiB on disk, written in "
              f"{time.perf_counter() - start:.0f} s; max_tokens {args.max_tokens}, {args.ranks} ranks at once")
        print("MiB: peak RSS; peak and final anonymous (private) and file-backed (mapped: the corpus and the\n"
              "libraries, shared between processes) RSS; PSS at the end, all ranks alive (shared pages split\n"
              "between their users). Seconds: building the Corpus, planning the epoch, walking the rank's batches.")
        results = run_ranks(work / "corpus", args.ranks, SRC, args)
        show(f"current code, {args.pairs:,} pairs", results)
        summary = {"pairs": args.pairs, "ranks": args.ranks, "current": results, "old": {}}
        shutil.rmtree(work / "corpus")
        sizes = [int(n) for n in args.old_pairs.split(",") if n]
        if sizes:
            old = work / "old"
            old.mkdir()
            archive = subprocess.run(["git", "archive", args.old_commit, "src"], check=True,
                                     capture_output=True, cwd=SRC.parent).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            for n in sizes:
                write_corpus(work / f"old_{n}", n, args.vocab, np.int32)  # int32 tokens, as the old prepare wrote
                then = run_ranks(work / f"old_{n}", 1, old / "src", args)
                now = run_ranks(work / f"old_{n}", 1, SRC, args)
                show(f"replaced code ({args.old_commit}), {n:,} pairs, int32 tokens, 1 rank", then)
                show(f"current code on the same files, {n:,} pairs, 1 rank", now)
                summary["old"][n] = {"old": then[0], "current": now[0]}
                shutil.rmtree(work / f"old_{n}")
        if len(sizes) >= 2:
            (n0, n1) = sorted(sizes)[:2]
            p0, p1 = (summary["old"][n]["old"]["peak_rss_mib"] for n in (n0, n1))
            per_pair = (p1 - p0) / (n1 - n0) * 2 ** 20
            estimate = (p0 + (args.pairs - n0) * per_pair / 2 ** 20) / 1024
            print(f"replaced code: {per_pair:.0f} bytes of peak RSS per pair (from {n0:,} and {n1:,}); "
                  f"extrapolated to {args.pairs:,} pairs: ~{estimate:.1f} GiB per rank, "
                  f"~{estimate * args.ranks:.0f} GiB for {args.ranks} ranks (an extrapolation, not a measurement)")
        print(json.dumps(summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
