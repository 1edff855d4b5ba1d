"""Host memory of the training data at WMT14 En-Fr scale: resident memory per rank, and an epoch's batching time.

Writes a synthetic prepared dataset of --pairs training pairs in the real binarized format (bench/
synthetic.py: lengths drawn like WMT14 En-Fr after BPE, ~30 tokens a side on average, at most 256 + EOS,
target/source ratio within 1.5) into a temporary folder under --tmp, then starts --ranks processes at
once, as torchrun would. Each builds the `Corpus` (with --annotations, mapping their binarized files
too), plans one epoch's batches (`Corpus.batches`, seed 1), walks its share of them (every --ranks-th
batch, counting target tokens as `Trainer.groups` does) and collates the first --collate of those. Per rank it prints peak RSS, the anonymous (private) and
file-backed (the mapped corpus, shared between ranks through the page cache) peaks, PSS at the end
(shared pages divided between the processes mapping them), and the seconds each phase took. Run from
the repository root:

    python bench/data_memory.py                                  # 36M pairs, 4 ranks; ~5 GB of disk
    python bench/data_memory.py --pairs 2000000 --ranks 2        # quick check
    python bench/data_memory.py --pairs 4500000 --annotations spans pos   # WMT14 En-De with paper A's and D's inputs
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

from synthetic import write_dataset

SRC = Path(__file__).resolve().parents[1] / "src"


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
    from nmtrepro.data.annotations import annotation_paths
    from nmtrepro.training.train import Corpus
    sync = Path(args.data).parent / "sync"
    barrier(sync, "start", args.rank, args.world, args.timeout)
    times, start = {}, time.perf_counter()
    corpus = Corpus(args.data, annotation_paths(args.annotation))
    times["load_s"], start = time.perf_counter() - start, time.perf_counter()
    batches = corpus.batches("train", args.max_tokens, 1, 0)
    times["plan_s"], start = time.perf_counter() - start, time.perf_counter()
    tokens = collated = 0
    for j in range(args.rank, len(batches), args.world):
        indices = batches[j]
        tokens += int(batches.tgt_tokens[j])  # as Trainer.groups counts a batch's target tokens
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


def run_ranks(data: Path, world: int, args) -> list[dict]:
    """Start `world` rank processes at once; their JSON lines."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    shutil.rmtree(data.parent / "sync", ignore_errors=True)
    (data.parent / "sync").mkdir()
    annotations = [a for name in args.annotations for a in ("--annotation", f"{name}={data}")]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--data", str(data), "--rank", str(rank),
                               "--world", str(world), "--max-tokens", str(args.max_tokens),
                               "--collate", str(args.collate), *annotations], env=env, stdout=subprocess.PIPE,
                              text=True)
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
    ap.add_argument("--tmp", default=tempfile.gettempdir(), help="where the temporary folder goes")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a rank may take")
    ap.add_argument("--annotations", nargs="*", default=[], choices=["spans", "pos"],
                    help="source annotations each rank's Corpus maps too (synthetic, binarized as the workflow does)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--annotation", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    work = Path(tempfile.mkdtemp(prefix="data_memory_", dir=args.tmp))
    try:
        start = time.perf_counter()
        write_dataset(work / "corpus", args.pairs, args.vocab, annotations=bool(args.annotations))
        size = sum(f.stat().st_size for f in (work / "corpus").iterdir()) / 2 ** 30
        print(f"{args.pairs:,} pairs, {size:.2f} GiB on disk, written in {time.perf_counter() - start:.0f} s; "
              f"max_tokens {args.max_tokens}, {args.ranks} ranks at once; annotations: "
              f"{', '.join(args.annotations) or 'none'}")
        print("MiB: peak RSS; peak and final anonymous (private) and file-backed (mapped: the corpus and the\n"
              "libraries, shared between processes) RSS; PSS at the end, all ranks alive (shared pages split\n"
              "between their users). Seconds: building the Corpus, planning the epoch, walking the rank's batches.")
        results = run_ranks(work / "corpus", args.ranks, args)
        show(f"{args.pairs:,} pairs", results)
        print(json.dumps({"pairs": args.pairs, "ranks": args.ranks, "per_rank": results}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
