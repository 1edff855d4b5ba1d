"""`nmtrepro <command>`: the one entry point that every Snakemake rule calls.

Command `foo-bar` lives in its module as `add_arguments_foo_bar(parser)` and `run_foo_bar(args)`; modules are
imported only when their command runs, so light commands (BLEU, tables) do not pay for torch.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from .core.files import InputError

COMMANDS = {
    "fetch": ("nmtrepro.data.datasets", "materialise a dataset from the registry (embedded or downloaded)"),
    "download": ("nmtrepro.data.download", "fetch one download-manifest entry into the cache, verified and extracted"),
    "tatoeba-splits": ("nmtrepro.data.tatoeba", "cut Tatoeba's Zh-En pairs into the embedded train/valid/test files"),
    "prepare": ("nmtrepro.data.prepare", "tokenize, learn/apply joint BPE, build vocabularies, binarize"),
    "prepare-test": ("nmtrepro.data.prepare", "tokenize and BPE one test split with the learned codes"),
    "prepare-ref": ("nmtrepro.data.prepare", "prepare a test split's further reference (NIST's ref1..ref3) as its first"),
    "train": ("nmtrepro.training.train", "train a model, resuming from the last checkpoint"),
    "average": ("nmtrepro.training.checkpoint", "average the last K checkpoints"),
    "select-checkpoint": ("nmtrepro.evaluation.dev_bleu", "of the last K checkpoints, the one with the best dev BLEU"),
    "decode": ("nmtrepro.evaluation.generate", "beam-search a test set with incremental decoding"),
    "bleu": ("nmtrepro.evaluation.bleu", "score a hypothesis with sacreBLEU and tokenized BLEU"),
    "plan": ("nmtrepro.plan", "training jobs, GPU-hours and disk per table, from the dry-run DAG"),
    "table": ("nmtrepro.reporting.report", "render a results table beside the paper's numbers"),
    "plot-curves": ("nmtrepro.reporting.report", "plot training curves"),
    "claims": ("nmtrepro.reporting.claims", "each paper's claims beside the measured differences, with verdicts"),
    "export-claims": ("nmtrepro.reporting.measured", "copy a run's paired bootstraps, with their provenance, to the workflow's data"),
    "status": ("nmtrepro.reporting.status", "where a run stands: trainings done, running, waiting; claims judged"),
    "across-scales": ("nmtrepro.reporting.across_scales", "claims beside the same claims measured at other scales"),
    "significance": ("nmtrepro.evaluation.significance", "paired bootstrap resampling of a system against its baseline"),
    "length-buckets": ("nmtrepro.analyses.buckets", "BLEU per source-length bucket, system and baseline"),
    "plot-buckets": ("nmtrepro.analyses.buckets", "figure and table of BLEU per length bucket"),
    "plot-ngrams": ("nmtrepro.analyses.ngrams", "figure and table of n-gram precision gaps vs baselines"),
    "examples": ("nmtrepro.analyses.examples", "translations of systems and baselines picked by rule, reference n-grams in bold"),
    "segments": ("nmtrepro.analyses.segments", "average segment length and segmented example outputs of segment models (NPMT)"),
    "speed": ("nmtrepro.analyses.speed", "parameter count, training and decoding speed of one experiment"),
    "speed-table": ("nmtrepro.analyses.speed", "table of size and speed relative to baselines"),
    "head-similarity": ("nmtrepro.analyses.heads", "cosine similarity between encoder self-attention heads"),
    "head-table": ("nmtrepro.analyses.heads", "table of head similarity within and across groups"),
    "probing-data": ("nmtrepro.analyses.probing.commands", "derive SentEval-style probing tasks from PTB trees"),
    "probe": ("nmtrepro.analyses.probing.commands", "probe a frozen encoder on SentEval-format tasks"),
    "probing-table": ("nmtrepro.analyses.probing.commands", "render probing accuracies beside the papers' tables"),
    "contrastive": ("nmtrepro.analyses.contrastive", "LingEval97-style contrastive scoring: accuracy per category and distance"),
    "warm-start": ("nmtrepro.analyses.warm_start", "paper B's warm start: BLEU with the recurrence memory shuffled, where training starts"),
    "warm-start-table": ("nmtrepro.analyses.warm_start", "table of the warm-start diagnostics, a row a seed"),
    "plot-agreement": ("nmtrepro.analyses.agreement", "plot subject-verb agreement accuracy by distance"),
    "parse": ("nmtrepro.data.parse", "parser phrases (paper A, Algorithm 1) as BPE-position spans"),
    "pos": ("nmtrepro.data.pos", "source POS tags (paper D), one per BPE piece: each word's tag copied to its pieces"),
    "gather-parse": ("nmtrepro.data.parse", "concatenate the parse stage's line-range shards and merge their stats"),
    "gather-pos": ("nmtrepro.data.pos", "concatenate the pos stage's line-range shards and merge their stats"),
    "stanza-models": ("nmtrepro.data.stanza_models", "fetch and verify stanza's English models (the stanza parse backend)"),
    "param-count": ("nmtrepro.param_count", "parameter counts of the configured models at a scale (meta device)"),
    "with-gpus": ("nmtrepro.core.gpus", "run a command on N GPUs of this machine that no other job holds"),
}


def huge_pages() -> None:
    """Ask torch to back its large CPU tensors (2 MiB and more) with transparent huge pages, unless the
    environment says otherwise. torch reads the switch once, at its first allocation, so it is set
    before any command imports torch. Where the kernel grants huge pages only on request (`madvise`,
    Debian's default) an update of the `tiny` Base otherwise takes ~3,300 minor page faults on one
    thread, its (rows, V) logits and gradients landing on fresh 4 KiB pages, and ~330 with them
    (docs/measurements.md, "Where a tiny training step goes")."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmtrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    argv = sys.argv[1:] if argv is None else argv
    # Only the chosen command's module is imported: build its parser alone.
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    huge_pages()
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text)
        if name == chosen:
            mod, snake = importlib.import_module(module), name.replace("-", "_")
            getattr(mod, f"add_arguments_{snake}")(cmd)
            cmd.set_defaults(run=getattr(mod, f"run_{snake}"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s | %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    try:
        args.run(args)
    except InputError as err:
        print(f"nmtrepro {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk, a read-only results/: the path and the reason, not a traceback
        where = f"{err.filename}: " if err.filename else ""
        print(f"nmtrepro {args.command}: error: {where}{err.strerror or err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
