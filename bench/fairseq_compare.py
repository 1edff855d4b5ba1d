"""Speed beside fairseq: training target tokens/s (and, for the tiny baseline, decoding sentences/s), one run.

Two setups. `--setup tiny` (the default) is the tiny baseline on the CPU, described first. `--setup
paper` (issue 38) is a paper-size model on one GPU: see paper_setup() below and bench/README.md.

Both tools get the same data (our prepared Multi30k En-De, exported to fairseq's binary format with our
own dictionaries, so vocabularies and sentences are identical), the same model size (config.yaml
scales.tiny sizes.base, pre-norm, tied decoder embeddings), the same batches (max_tokens, one batch per
update), the same 2 threads and the same malloc settings. fairseq is never a project dependency: it lives
in bench/.venv-fairseq, which this script creates when absent (~5 min of compiling; fairseq-fixed
0.12.3.1, because plain fairseq 0.12.2 does not import on Python 3.11). Run from the repo root:

    nice -n 19 python bench/fairseq_compare.py                  # 10 warm-up + 100 timed updates
    nice -n 19 python bench/fairseq_compare.py --updates 10     # quick check

Training tokens/s: target tokens of the timed updates / wall time from the end of the last warm-up update
to the end of the last one (bench/timed_steps.py wraps each tool's update function). Decoding: the
same weights in both, so the same hypotheses are written and speeds compare the searches: our trained
model, decoded by ours (with and without the incremental cache) and, converted by
bench/fairseq_weights.py, by fairseq-generate; each tool's own timer over test_2016_flickr, beam 4. The
bench counts the hypotheses identical to ours. Everything printed goes to speeds.json too (ratios
included).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import yaml
from synthetic import write_dataset

from nmtrepro.core.text import BPE
from nmtrepro.core.vocab import IndexedData, Vocab
from nmtrepro.models import build_model
from nmtrepro.training.batching import token_batches
from nmtrepro.training.flops import peak_tflops, update_flops
from nmtrepro.training.profiling import TRIES, head
from nmtrepro.training.rates import AUTO, kernel_bound, training_speed

DATASET, SPLIT = "multi30k_en_de", "test_2016_flickr"
VENV = Path("bench/.venv-fairseq")
FAIRSEQ_PINS = (["torch==2.13.0", "setuptools", "wheel", "cython", "numpy"],
                ["--no-build-isolation", "torch==2.13.0", "fairseq-fixed==0.12.3.1"])
# cpu-facts.md: glibc re-mmaps the logits every step otherwise (ours also sets these with mallopt).
MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000", "MALLOC_TOP_PAD_": "1000000000"}


def sh(*cmd, env=None, log=None) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    if log is None:
        subprocess.run(list(map(str, cmd)), check=True, env=env)
        return
    with open(log, "w") as handle:
        done = subprocess.run(list(map(str, cmd)), env=env, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}); see {log}:\n" + Path(log).read_text()[-3000:])


def ensure_venv() -> None:
    """Create bench/.venv-fairseq with pinned fairseq-fixed, unless it already works."""
    python = VENV / "bin/python"
    if python.exists() and subprocess.run([python, "-c", "import fairseq_cli.train"],
                                          capture_output=True).returncode == 0:
        return
    print(f"creating {VENV} (fairseq-fixed compiles for ~5 min)", flush=True)
    sh(sys.executable, "-m", "venv", VENV)
    for pins in FAIRSEQ_PINS:
        sh(python, "-m", "pip", "install", "-q", *pins)


def export_text(prepared: Path, text: Path, test: bool = True) -> None:
    """Write our binarized train/valid splits back as BPE'd text and, with `test`, the test split with
    its BPE'd reference."""
    text.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid"):
        for side in ("src", "tgt"):
            vocab, data = Vocab.load(prepared / f"dict.{side}.txt"), IndexedData(prepared / f"{split}.{side}.bin")
            lines = (vocab.decode(data[i]) for i in range(len(data)))  # decode() drops the final EOS
            (text / f"{split}.{side}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if not test:
        return
    test = prepared / "test" / SPLIT
    (text / "test.src").write_text(Path(f"{test}.src.bpe").read_text(encoding="utf-8"), encoding="utf-8")
    refs = Path(f"{test}.ref.tok").read_text(encoding="utf-8").splitlines()
    (text / "test.tgt").write_text("".join(line + "\n" for line in BPE(prepared / "bpe.codes")(refs)),
                                   encoding="utf-8")


def check_same_data(prepared: Path, preprocess_log: Path) -> None:
    """fairseq-preprocess must see exactly our sentences and tokens (EOS included in both), none of them unknown."""
    seen = {(side, split): (int(n), int(t.replace(",", "")), float(unk)) for side, split, n, t, unk in re.findall(
        r"\[(src|tgt)\] \S+/text/(train|valid)\.\w+: (\d+) sents, ([\d,]+) tokens, ([\d.]+)% replaced",
        preprocess_log.read_text())}
    for split in ("train", "valid"):
        for side in ("src", "tgt"):
            sizes = IndexedData(prepared / f"{split}.{side}.bin").sizes
            expected = (len(sizes), int(sizes.sum()), 0.0)
            if seen.get((side, split)) != expected:
                sys.exit(f"{preprocess_log}: {split}.{side} is {seen.get((side, split))}, ours {expected}")


def binarize(prepared: Path, out: Path, python, threads: int, env: dict, test: bool = True) -> Path:
    """out/fairseq-bin: our prepared splits (and, with `test`, the test set) exported to BPE'd text and
    binarized by fairseq-preprocess with our own dictionaries, once; checked to hold our sentences."""
    data_bin, splits = out / "fairseq-bin", ["train", "valid"] + ["test"] * test
    if not (data_bin / f"{splits[-1]}.src-tgt.tgt.idx").exists():
        export_text(prepared, out / "text", test)
        sh(python, "-m", "fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
           *[arg for split in splits for arg in (f"--{split}pref", out / "text" / split)],
           "--srcdict", prepared / "dict.src.txt", "--tgtdict", prepared / "dict.tgt.txt",
           "--destdir", data_bin, "--workers", threads, env=env, log=out / "fairseq-preprocess.log")
    check_same_data(prepared, out / "fairseq-preprocess.log")
    return data_bin


def fairseq_train_args(size: dict, train: dict) -> list:
    """fairseq-train's flags for our Transformer of `size` trained as `train` says (one batch an update
    unless train["update_freq"]): the same model, optimizer, schedule, loss and batches, no validation."""
    d, ffn, heads = size["d_model"], size["ffn"], size["heads"]
    return ["--arch", "transformer", "--share-decoder-input-output-embed",
            "--encoder-embed-dim", d, "--encoder-ffn-embed-dim", ffn, "--encoder-attention-heads", heads,
            "--encoder-layers", size["encoder_layers"], "--decoder-embed-dim", d, "--decoder-ffn-embed-dim", ffn,
            "--decoder-attention-heads", heads, "--decoder-layers", size["decoder_layers"],
            *(["--encoder-normalize-before", "--decoder-normalize-before"] if size.get("pre_norm", True) else []),
            "--dropout", size["dropout"], "--attention-dropout", size.get("attention_dropout", 0),
            "--activation-dropout", size.get("activation_dropout", 0), "--clip-norm", train.get("clip_norm", 0),
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", train.get("label_smoothing", 0.1),
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-9",
            "--lr", train["lr"], "--lr-scheduler", "inverse_sqrt", "--warmup-updates", train["warmup"],
            "--warmup-init-lr", "0", "--max-tokens", train["max_tokens"], "--update-freq", train.get("update_freq", 1),
            "--required-batch-size-multiple", "1", "--max-update", train["max_updates"], "--seed", "1",
            "--disable-validation", "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "10"]


def fairseq_hypotheses(generate_log: str, sentences: int) -> list[str]:
    """fairseq-generate's best hypotheses (its H- lines, BPE removed, tokenized) in input order."""
    found = dict((int(i), text) for i, text in re.findall(r"^H-(\d+)\t\S+\t(.*)$", generate_log, flags=re.M))
    if len(found) != sentences:
        sys.exit(f"fairseq-generate wrote {len(found)} hypotheses for {sentences} sentences")
    return [found[i] for i in range(sentences)]


def tiny_setup(args) -> None:
    """The tiny baseline on the CPU, training and decoding (the module docstring)."""
    total = args.warmup_updates + args.updates
    config = yaml.safe_load(open("config.yaml"))
    tiny = config["scales"]["tiny"]
    size, train, decode = tiny["sizes"]["base"], tiny["train"], tiny["decode"]
    if train["update_tokens"] != 1:
        sys.exit("this bench assumes one batch per update (update_tokens: 1), as fairseq's --update-freq 1")
    out = Path(args.out).resolve()
    prepared, test = Path(f"results/tiny/prepare/{DATASET}"), f"results/tiny/prepare/{DATASET}/test/{SPLIT}"
    sh("snakemake", "--cores", args.threads, f"{prepared}/stats.json", f"{test}.src.bpe")
    ensure_venv()
    fairseq_bin = VENV.resolve() / "bin"

    threads = str(args.threads)
    env = {**os.environ, **MALLOC, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")]))}

    data_bin = binarize(prepared, out, fairseq_bin / "python", args.threads, env)  # the same data

    # -- training: same model, batches, optimizer, schedule, threads -----------------------------------
    model = {"family": "transformer", **size}
    settings = {**train, "max_updates": total, "save_every": 10**9, "keep_last": 1, "log_every": 10,
                "threads": args.threads, "precision": "fp32"}
    ours = out / "ours"
    subprocess.run(["rm", "-rf", ours, out / "fairseq"], check=True)
    timer = Path(__file__).with_name("timed_steps.py").resolve()
    sh(sys.executable, timer, "ours", out / "ours.steps.json", "--", "--prepared", prepared,
       "--model", json.dumps(model), "--settings", json.dumps(settings), "--checkpoint-dir", ours / "checkpoints",
       "--out", ours / "final.pt", "--curve", ours / "curve.tsv", env=env, log=out / "ours.train.log")
    sh(fairseq_bin / "python", timer, "fairseq", out / "fairseq.steps.json", "--", data_bin,
       *fairseq_train_args(size, {**train, "max_updates": total}), "--cpu", "--num-workers", "0",
       "--save-dir", out / "fairseq", env=env, log=out / "fairseq.train.log")

    # -- decoding the same weights: our model, and the same model converted to a fairseq checkpoint ------
    search = ["--beam", decode["beam"], "--lenpen", decode["lenpen"], "--max-len-a", decode["max_len_a"],
              "--max-len-b", decode["max_len_b"], "--max-tokens", decode["max_tokens"]]
    decoded = Path(args.decode_model).resolve() if args.decode_model else ours / "final.pt"
    for name, flags in (("cached", []), ("uncached", ["--no-cache"])):
        sh(sys.executable, "-m", "nmtrepro.cli", "decode", "--model", decoded, "--prepared", prepared,
           "--src-bpe", f"{test}.src.bpe", "--tgt-lang", "de", *search, "--threads", threads, *flags,
           "--out", ours / f"hyp.{name}", "--out-tok", ours / f"hyp.{name}.tok", "--stats", ours / f"decode.{name}.json",
           env=env, log=out / f"ours.decode.{name}.log")
    # fairseq 0.12 checkpoints pickle an argparse.Namespace, which torch>=2.6 refuses by default.
    fairseq_env = {**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    converted = out / "fairseq/ours_converted.pt"
    sh(fairseq_bin / "python", Path(__file__).with_name("fairseq_weights.py").resolve(), decoded,
       out / "fairseq/checkpoint_last.pt", converted, env=fairseq_env, log=out / "fairseq.convert.log")
    sh(fairseq_bin / "fairseq-generate", data_bin, "--path", converted, "--gen-subset", "test", *search,
       "--cpu", "--num-workers", "0", "--required-batch-size-multiple", "1", "--remove-bpe",
       env=fairseq_env, log=out / "fairseq.generate.log")

    # -- report -------------------------------------------------------------------------------------
    rows = {tool: training_speed(out / f"{tool}.steps.json", args.warmup_updates, args.updates)
            for tool in ("ours", "fairseq")}
    decoding = {f"ours_{name}": json.loads((ours / f"decode.{name}.json").read_text()) for name in ("cached", "uncached")}
    generate_log = (out / "fairseq.generate.log").read_text()
    summary = re.search(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s",
                        generate_log)
    sentences, tokens, seconds, _ = (float(g.replace(",", "")) for g in summary.groups())
    decoding["fairseq"] = {"sentences": int(sentences), "seconds": seconds, "target_tokens": tokens}
    hypotheses = {name: (ours / f"hyp.{name[5:]}.tok").read_text(encoding="utf-8").splitlines()
                  for name in ("ours_cached", "ours_uncached")}
    hypotheses["fairseq"] = fairseq_hypotheses(generate_log, int(sentences))
    for name, row in decoding.items():
        row.update(sentences_per_s=row["sentences"] / row["seconds"], tokens_per_s=row["target_tokens"] / row["seconds"],
                   same_as_ours_cached=sum(a == b for a, b in zip(hypotheses[name], hypotheses["ours_cached"])))
    rows["decoding"] = decoding
    rows["ratios"] = {"train_tok_s": rows["ours"]["train_tok_s"] / rows["fairseq"]["train_tok_s"],
                      "train_tok_s_median": rows["ours"]["train_tok_s_median"] / rows["fairseq"]["train_tok_s_median"],
                      "decode_sentences_per_s": decoding["ours_cached"]["sentences_per_s"] / decoding["fairseq"]["sentences_per_s"],
                      "decode_tokens_per_s": decoding["ours_cached"]["tokens_per_s"] / decoding["fairseq"]["tokens_per_s"],
                      "cached_over_uncached": decoding["ours_cached"]["sentences_per_s"] / decoding["ours_uncached"]["sentences_per_s"]}

    print(f"\nTiny baseline vs fairseq-fixed 0.12.3.1: d={size['d_model']}, ffn={size['ffn']}, {size['heads']} heads, "
          f"{size['encoder_layers']}+{size['decoder_layers']} layers, max_tokens {train['max_tokens']}, "
          f"{args.threads} threads, fp32; training over updates {args.warmup_updates + 1}..{total}")
    print(f"{'':28}{'ours':>12}{'fairseq':>12}{'ours/fairseq':>14}")
    for key, label in (("train_tok_s", "training target tok/s"), ("train_tok_s_median", "  median of 10-update runs"),
                       ("train_tok_s_best", "  fastest 10-update run")):
        a, b = rows["ours"][key], rows["fairseq"][key]
        print(f"{label:28}{a:12.1f}{b:12.1f}{a / b:14.2f}")
    print(f"{'(timed target tokens)':28}{rows['ours']['train_tokens']:12d}{rows['fairseq']['train_tokens']:12d}")
    print(f"{'RSS after the last (MiB)':28}{rows['ours']['rss_mib_last']:12.0f}{rows['fairseq']['rss_mib_last']:12.0f}")
    print(f"\nDecoding {decoded} ({SPLIT}, beam {decode['beam']}, lenpen {decode['lenpen']}); fairseq "
          f"decodes them converted (bench/fairseq_weights.py):")
    print(f"{'':28}{'sentences/s':>12}{'tokens/s':>12}{'same hyps':>14}")
    for name, row in decoding.items():
        print(f"{name:28}{row['sentences_per_s']:12.1f}{row['tokens_per_s']:12.1f}"
              f"{row['same_as_ours_cached']:>8}/{row['sentences']}")
    print("ratios: " + ", ".join(f"{key} {value:.2f}" for key, value in rows["ratios"].items()))
    print('What differs between the two besides: docs/measurements.md, "Beside fairseq on the CPU"')
    (out / "speeds.json").write_text(json.dumps(rows, indent=1))

# Our step: eager, or a fast path (training/fast.py); CUDA graphs replay the bucketed batches' fixed shapes.
# graphs_auto: the same with the micro-batch the card's memory holds (max_tokens auto: fewer, larger
# micro-batches for the same update), which the paper scale may take if it is faster. graphs_cudnn: with
# cuDNN's attention kernels allowed (the trainer turns them off: they plan every new shape).
PATHS = {"eager": {}, "compile": {"fast": "compile"}, "graphs": {"fast": "graphs", "buckets": True},
         "graphs_auto": {"fast": "graphs", "buckets": True, "max_tokens": "auto"},
         "graphs_cudnn": {"fast": "graphs", "buckets": True, "cudnn_attention": True}}


def paper_setup(args) -> None:
    """A paper-size Transformer trained by ours and by fairseq on one device (issue 38's peer on a GPU).

    Data: bench/synthetic.py's prepared dataset (the paper's vocabulary, WMT-like lengths,
    random tokens), exported to text and binarized by fairseq-preprocess with our dictionaries, checked as
    in the tiny setup. Model and training: `--scale`'s `--size` and its train settings (the paper's
    post-norm Base: Adam, inverse-sqrt warmup, label smoothing 0.1), both tools at --max-tokens per
    micro-batch and about the same tokens an update: ours accumulates until update_tokens target tokens,
    fairseq takes --update-freq micro-batches, that count planned from our own batches. Precision: ours
    bf16 autocast (the paper scale's setting); fairseq --fp16 (its standard GPU recipe: fairseq 0.12's
    --bf16 means a TPU; the tensor cores run fp16 and bf16 at one rate). Ours runs once per --paths
    entry (eager, compile, graphs), fairseq once; each is timed over the same window of updates
    (timed_steps.py), and the first --warmup-updates hold the compile. MFU: the analytic FLOPs of a
    target token of this training set (flops.update_flops) times tok/s, over the card's
    peak. `--profile N`: N more updates of each under torch's profiler (<tool>.steps.profile.txt).
    """
    total = args.warmup_updates + args.updates
    runs_for = total + args.profile * TRIES  # a profiled window that met a new shape is profiled again
    config = yaml.safe_load(open("config.yaml"))
    scale = config["scales"][args.scale]
    size = scale["sizes"][args.size]
    train = {**scale["train"], "max_updates": runs_for, "save_every": 10**9, "keep_last": 1, "log_every": 10,
             "device": args.device, "precision": args.precision, "max_tokens": args.max_tokens or scale["train"]["max_tokens"]}
    out = Path(args.out).resolve()
    prepared = out / "prepared"
    if not (prepared / "valid.tgt.bin").exists():
        subprocess.run(["rm", "-rf", prepared], check=True)
        write_dataset(prepared, args.pairs, args.vocab, short=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()),
                                                                     os.environ.get("PYTHONPATH")]))}
    peer = not args.without_fairseq  # fairseq trains beside ours
    fairseq_python = args.fairseq_python
    if peer:
        if not fairseq_python:
            ensure_venv()
            fairseq_python = str(VENV.resolve() / "bin/python")
        data_bin = binarize(prepared, out, fairseq_python, args.threads, env, test=False)

    src, tgt = (IndexedData(prepared / f"train.{side}.bin").sizes for side in ("src", "tgt"))
    batches = token_batches(src, tgt, train["max_tokens"], seed=1)
    per_batch = float(np.mean(batches.tgt_tokens))
    update_freq = max(1, round(train["update_tokens"] / per_batch)) if train["update_tokens"] > 1 else 1
    timer = Path(__file__).with_name("timed_steps.py").resolve()
    model = {"family": "transformer", **size}
    spec = {**model, **{f"{side}_vocab": len(Vocab.load(prepared / f"dict.{side}.txt")) for side in ("src", "tgt")}}
    flops_per_token = update_flops(build_model(spec), spec, src.tolist(), tgt.tolist()) / tgt.sum()
    peak = peak_tflops(torch.device(args.device), None)
    profile = ["--profile", f"{total}:{args.profile}"] if args.profile else []
    tools = []
    device = ["--cpu"] if args.device == "cpu" else (["--fp16"] if args.precision != "fp32" else [])
    runs = {f"ours_{path}": [sys.executable, timer, "ours", out / f"ours_{path}.steps.json", *profile, "--",
                             "--prepared", prepared,
                             "--model", json.dumps(model), "--settings", json.dumps({**train, **PATHS[path]}),
                             "--checkpoint-dir", out / f"ours_{path}/checkpoints", "--out", out / f"ours_{path}/final.pt",
                             "--curve", out / f"ours_{path}/curve.tsv"] for path in args.paths.split(",")}
    if peer:
        runs["fairseq"] = [fairseq_python, timer, "fairseq", out / "fairseq.steps.json", *profile, "--", data_bin,
                           *fairseq_train_args(size, {**train, "update_freq": update_freq}), *device, "--no-save",
                           "--save-dir", out / "fairseq"]
    for name, command in runs.items():
        subprocess.run(["rm", "-rf", out / name], check=True)
        try:  # one that fails (a first run on a new machine) leaves the others measured
            sh(*command, env=env, log=out / f"{name}.train.log")
            tools.append(name)
        except SystemExit as failed:
            print(f"{name} did not train. {failed}", flush=True)
            steps = out / f"{name}.steps.json"
            if steps.exists() and len(json.loads(steps.read_text())) >= total:  # it failed after the window
                tools.append(name)
        if (out / f"{name}.steps.profile.txt").exists():
            print(f"({name})", head(out / f"{name}.steps.profile.txt"), flush=True)
        if found := AUTO.search((out / f"{name}.train.log").read_text(errors="replace")):
            print(f"{name}: max_tokens auto found {found.group(1)} tokens a micro-batch", flush=True)

    rows = {tool: training_speed(out / f"{tool}.steps.json", args.warmup_updates, args.updates) for tool in tools}
    for tool in tools:
        rows[tool]["mfu"] = rows[tool]["train_tok_s"] * flops_per_token / (peak * 1e12) if peak else None
        steady = rows[tool]["steady_tok_s"]
        rows[tool]["steady_mfu"] = steady * flops_per_token / (peak * 1e12) if peak and steady else None
    against = "fairseq" if "fairseq" in tools else tools[0] if tools else None   # ours alone: its first path
    reference = rows[against]["train_tok_s"] if against else None
    rows["ratios"] = {f"{tool}/{against}{kind}": rows[tool][key] / rows[against][key] for tool in tools if reference
                      for kind, key in (("", "train_tok_s"), (" steady", "steady_tok_s"))
                      if rows[tool][key] and rows[against][key]}
    gpu = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"\n{args.scale}/{args.size} Transformer on {gpu}, ours"
          + (" against fairseq-fixed 0.12.3.1" if peer else "") + f": {size}; "
          f"{train['max_tokens']}-token micro-batches ({per_batch:.0f} target tokens each), an update: ours "
          + (f"until {train['update_tokens']} target tokens" if train["update_tokens"] > 1 else "one micro-batch")
          + (f", fairseq --update-freq {update_freq}" if peer else "") + f"; ours {train['precision']}"
          + (f", fairseq {' '.join(device) or 'fp32'}" if peer else "")
          + f"; updates {args.warmup_updates + 1}..{total}; MFU at {flops_per_token / 1e6:.0f} MFLOP a target token"
          + (f", {peak:g} TFLOP/s peak" if peak else ""))
    print(f"{'':16}{'tgt tok/s':>12}{'median 10':>12}{'MFU':>8}{'steady':>16}{'MFU':>8}{'tok/update':>12}"
          f"{'GPU peak GiB':>14}{'vs ' + str(against):>20}")
    percent = lambda mfu: f"{100 * mfu:7.1f}%" if mfu else f"{'n/a':>8}"  # noqa: E731
    for tool in tools:
        r = rows[tool]
        steady = f"{r['steady_tok_s']:,.0f} ({r['steady_updates']})" if r["steady_tok_s"] else "none"
        print(f"{tool:16}{r['train_tok_s']:12,.0f}{r['train_tok_s_median']:12,.0f}{percent(r['mfu'])}{steady:>16}"
              f"{percent(r['steady_mfu'])}{r['tokens_per_update']:12,.0f}"
              f"{r['gpu_peak_gib']:14.1f}" + (f"{r['train_tok_s'] / reference:19.2f}x" if reference else f"{'n/a':>20}"))
    print("steady: the window's updates (their count) in which no micro-batch compiled, warmed up or recorded "
          "a new shape")
    kernels = {tool: kernel_bound(out / f"{tool}.steps.profile.json", rows[tool]["steady_tok_s"]) for tool in tools
               if (out / f"{tool}.steps.profile.json").exists()}
    kernels = {tool: k for tool, k in kernels.items() if k["kernel_ms"]}  # a CPU run records no kernels
    if kernels:
        print(f"\n{'profiled':16}{'updates':>10}{'kernels ms':>12}{'kernel-bound':>14}{'steady/that':>13}  "
              "the GPU's ms an update by kind")
        for tool, k in kernels.items():
            share = f"{100 * k['steady_share']:12.0f}%" if k["steady_share"] else f"{'n/a':>13}"
            print(f"{tool:16}{k['updates']:>10}{k['kernel_ms']:12.1f}{k['kernel_bound_tok_s']:14,.0f}{share}  "
                  + ", ".join(f"{kind} {ms:.1f}" for kind, ms in k["kinds_ms"].items()))
        print("kernel-bound: the profiled updates' target tokens over their kernels' time (the union of their "
              "intervals): the rate if the GPU never waited on the host; steady/that: how near the steady rate "
              "comes to it, without the profiler's own cost on the host")
        rows["kernels"] = kernels
    (out / "speeds.json").write_text(json.dumps({**rows, "update_freq": update_freq, "gpu": gpu,
                                                 "flops_per_target_token": flops_per_token}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", default="tiny", choices=["tiny", "paper"],
                    help="tiny: the tiny baseline on the CPU (training and decoding); paper: a paper-size "
                         "model's training on --device (issue 38)")
    ap.add_argument("--updates", type=int, default=100, help="timed updates")
    ap.add_argument("--warmup-updates", type=int, default=10, help="untimed updates before them (>= 1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="default bench/out/fairseq_compare (tiny), bench/out/fairseq_compare_paper")
    ap.add_argument("--decode-model", help="tiny: a trained model of ours to decode, e.g. results/tiny/train/base_en_de/"
                    "averaged.pt from the default run (default: the one this bench trains, which after a "
                    "few hundred updates writes near-random text that runs into the length limits)")
    paper = ap.add_argument_group("--setup paper")
    paper.add_argument("--device", default="cuda")
    paper.add_argument("--scale", default="paper", help="config.yaml scale whose sizes and train settings to use")
    paper.add_argument("--size", default="base")
    paper.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    paper.add_argument("--max-tokens", type=int, help="micro-batch tokens (default: the scale's)")
    paper.add_argument("--pairs", type=int, default=60000, help="synthetic training pairs")
    paper.add_argument("--vocab", type=int, default=37000)
    paper.add_argument("--paths", default="eager,compile,graphs", help=f"our step's paths: {', '.join(PATHS)}")
    paper.add_argument("--without-fairseq", action="store_true", help="ours alone: its paths side by side")
    paper.add_argument("--profile", type=int, default=0,
                       help="updates after the timed ones to run under torch's profiler (timed_steps.py)")
    paper.add_argument("--fairseq-python", help="a Python that imports fairseq (default: bench/.venv-fairseq's, "
                       "made when absent; on the GPU machine python3 with bench/device_fairseq.sh's unpacked)")
    args = ap.parse_args()
    if args.warmup_updates < 1 or args.updates < 1:
        sys.exit("--warmup-updates and --updates must be at least 1: timing starts at the end of an update")
    if not set(args.paths.split(",")) <= set(PATHS):
        sys.exit(f"--paths {args.paths}: known paths are {', '.join(PATHS)}")
    args.out = args.out or ("bench/out/fairseq_compare" if args.setup == "tiny" else "bench/out/fairseq_compare_paper")
    (tiny_setup if args.setup == "tiny" else paper_setup)(args)


if __name__ == "__main__":
    main()
