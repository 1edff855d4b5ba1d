"""How each data stage grows with the corpus: CPU seconds a line, peak RSS and the growth exponent per stage.

Repeats a real parallel text (Multi30k En-De's training set, data/multi30k, 29k pairs, ~12 words a
sentence) to each --lines size and runs every data stage's own command on it, one process each, as the
workflow does: `prepare` (Moses tokenization, joint BPE, vocabularies, binarization; --workers 1, so
that the figures are one core's), `parse` and `pos` over the BPE'd training source, their `gather-*`,
`binarize-annotation` of the spans and the tags, and the training data load (bench/data_memory.py's
rank: the `Corpus` with both annotations mapped, an epoch planned, its first 100 batches collated).

The parser and the tagger themselves are replaced by stand-ins (a tree of three-word phrases, NOUN
for every word) run through the stages' own code: their cost is a constant a sentence that does not
depend on the corpus (parse --stats records it, sentences_per_second), while what this measures is the
stage around them, which must neither grow in memory nor more than linearly in time.

Per stage and size it prints CPU seconds (user + system of the stage's processes, from wait4, as
/usr/bin/time counts them), microseconds a line, peak RSS (the largest process's, as /usr/bin/time's
maxresident) and peak anonymous RSS (sampled from /proc every 20 ms: RSS less the mapped files,
whose clean pages the kernel may drop), then each stage's growth exponent (the slope of log CPU
seconds over log lines: 1 is linear) and its peak RSS at the largest size over that at the smallest.
Run from the repository root:

    python bench/data_scaling.py                          # 30k, 300k and 1M lines
    python bench/data_scaling.py --lines 30000 300000     # what fits ~10 minutes of a shared 2-core machine
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = {"src": ROOT / "data/multi30k/train.en.gz", "tgt": ROOT / "data/multi30k/train.de.gz"}
VALID = 1000  # valid pairs, the same at every size


def stand_in_stage(argv: list[str]) -> None:
    """Run `nmtrepro <argv>` with the parser and tagger replaced by stand-ins (the module docstring)."""
    from nmtrepro import cli
    from nmtrepro.data import parse, pos
    from nmtrepro.data.trees import from_nested

    def trees(sentences, backend, batch_size=64, stanza_models=None):
        return [from_nested(("S", [("NP", [("NN", [w]) for w in words[k:k + 3]]) for k in range(0, len(words), 3)]))
                if (words := line.split()) else None for line in sentences]

    parse.constituency = trees
    pos.pos_tags = lambda sentences, backend, batch_size=64, stanza_models=None: [
        ["NOUN"] * len(line.split()) for line in sentences]
    sys.exit(cli.main(argv))


def repeated(path: Path, lines: int, skip: int = 0) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        text = handle.read().splitlines()
    return list(itertools.islice(itertools.cycle(text), skip, skip + lines))


def write_corpus(folder: Path, lines: int) -> None:
    """The fetched dataset prepare reads: `lines` training pairs cycling through the real text, and
    VALID pairs after the first `lines` (so that valid repeats training lines, as at any size)."""
    folder.mkdir(parents=True)
    for side, path in TEXT.items():
        with open(folder / f"train.{side}", "w", encoding="utf-8") as out:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                text = handle.read().splitlines()
            for start in range(0, lines, len(text)):
                out.writelines(line + "\n" for line in text[:min(len(text), lines - start)])
        with open(folder / f"valid.{side}", "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in repeated(path, VALID, skip=7))


def anon_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("RssAnon:")), 0)


def measured(command: list[str], log: Path) -> dict:
    """Run one stage's command; its CPU seconds, peak RSS and sampled peak anonymous RSS (MiB) and wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(command, env=env, stdout=err, stderr=subprocess.STDOUT)
    peak, done = [0], threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], anon_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    if proc.returncode:
        sys.exit(f"{' '.join(command[:4])} ... failed (exit {proc.returncode}); its log: {log}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.perf_counter() - start,
            "peak_rss_mib": usage.ru_maxrss / 1024, "peak_anon_mib": peak[0] / 1024}


def stages(data: Path, prepared: Path, annotated: Path, merges: int) -> dict[str, list[str]]:
    """Each stage's command line, in the order they run (the annotation stages with stand-ins)."""
    nmtrepro = [sys.executable, "-m", "nmtrepro.cli"]
    stand_in = [sys.executable, __file__, "--stand-in", "--"]
    commands = {"prepare": [*nmtrepro, "prepare", "--data-dir", str(data), "--out-dir", str(prepared),
                            "--src-lang", "en", "--tgt-lang", "de", "--bpe-merges", str(merges), "--max-len", "250",
                            "--max-ratio", "3", "--workers", "1"]}
    for stage, name, extra in (("parse", "spans", []), ("pos", "pos", ["--lang", "en"])):
        for split in ("train", "valid"):
            part = annotated / f"{split}.part.{name}"
            stats = annotated / f"{split}.part.stats.json"
            run = [stage, "--src-bpe", str(prepared / f"{split}.src.bpe"), *extra, "--backend", "spacy",
                   "--out", str(part), "--stats", str(stats)]
            gather = [f"gather-{stage}", "--parts", str(part), "--part-stats", str(stats),
                      "--out", str(annotated / f"{split}.{name}"), "--stats", str(annotated / f"{split}.{name}.json")]
            binarize = ["binarize-annotation", "--name", name, "--text", str(annotated / f"{split}.{name}"),
                        "--source", str(prepared / f"{split}.src.bin"),
                        "--out", str(annotated / f"{split}.{name}.bin")]
            suffix = "" if split == "train" else " (valid)"
            commands[f"{stage}{suffix}"] = [*stand_in, *run]
            commands[f"gather-{stage}{suffix}"] = [*nmtrepro, *gather]
            commands[f"binarize {name}{suffix}"] = [*nmtrepro, *binarize]
    commands["training data load"] = [sys.executable, str(ROOT / "bench/data_memory.py"), "--worker", "--data",
                                      str(prepared), "--max-tokens", "4096", "--collate", "100",
                                      "--annotation", f"spans={annotated}", "--annotation", f"pos={annotated}"]
    return commands


def exponent(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) over log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(v, 1e-9)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[30_000, 300_000, 1_000_000])
    ap.add_argument("--merges", type=int, default=8000, help="BPE merges (Multi30k's ~18k word types)")
    ap.add_argument("--tmp", default=tempfile.gettempdir(), help="where the temporary folder goes")
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--stand-in", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("argv", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stand_in:
        return stand_in_stage(args.argv)
    work = Path(tempfile.mkdtemp(prefix="data_scaling_", dir=args.tmp))
    results: dict[str, dict[int, dict]] = {}
    try:
        for lines in args.lines:
            folder = work / str(lines)
            write_corpus(folder / "data", lines)
            for sub in ("annotated", "logs", "sync"):  # sync: data_memory's rank meets its (absent) peers there
                (folder / sub).mkdir()
            for stage, command in stages(folder / "data", folder / "prepared", folder / "annotated",
                                         args.merges).items():
                figures = measured(command, folder / "logs" / f"{stage.replace(' ', '_')}.log")
                results.setdefault(stage, {})[lines] = figures
                print(f"{lines:>9,} lines  {stage:<24}{figures['cpu_s']:>9.1f} CPU s{figures['wall_s']:>8.1f} s"
                      f"{figures['peak_rss_mib']:>8.0f} MiB peak RSS{figures['peak_anon_mib']:>7.0f} anon", flush=True)
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sizes = args.lines
    print(f"\n{'stage':<24}" + "".join(f"{f'µs/line @{n:,}':>20}" for n in sizes)
          + "".join(f"{f'RSS MiB @{n:,}':>20}" for n in sizes)
          + f"{'anon MiB @' + format(sizes[0], ','):>20}{'@' + format(sizes[-1], ','):>11}{'time exp':>10}"
          f"{'RSS x':>7}{'anon x':>8}")
    for stage, by_size in results.items():
        if stage.endswith("(valid)"):  # the same 1,000 lines at every size: what the load reads beside train
            continue
        per_line = [by_size[n]["cpu_s"] / n * 1e6 for n in sizes]
        rss = [by_size[n]["peak_rss_mib"] for n in sizes]
        growth = exponent(sizes, [by_size[n]["cpu_s"] for n in sizes]) if len(sizes) > 1 else float("nan")
        anon = [by_size[n]["peak_anon_mib"] for n in (sizes[0], sizes[-1])]
        print(f"{stage:<24}" + "".join(f"{v:>20.1f}" for v in per_line) + "".join(f"{v:>20.0f}" for v in rss)
              + f"{anon[0]:>20.0f}{anon[1]:>11.0f}{growth:>10.2f}{rss[-1] / rss[0]:>7.2f}{anon[1] / anon[0]:>8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"lines": sizes, "stages": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
