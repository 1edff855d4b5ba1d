"""`nmtrepro <command>`: the one entry point that every Snakemake rule calls.

Command `foo-bar` lives in its module as `add_arguments_foo_bar(parser)` and `run_foo_bar(args)`; modules are
imported only when their command runs, so light commands (BLEU, tables) do not pay for torch. The modules
of data/ and analyses/ declare their own commands (`COMMANDS = {"foo-bar": "help"}`), read here without
importing them: a source annotation's stage or an analysis kind is its module, with no line in this file.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import logging
import os
import re
import sys
from pathlib import Path

from .core.files import InputError
from .forks.client import run_through_server

COMMANDS = {
    "train": ("nmtrepro.training.train", "train a model, resuming from the last checkpoint"),
    "average": ("nmtrepro.training.checkpoint", "average the last K checkpoints"),
    "select-checkpoint": ("nmtrepro.evaluation.dev_bleu", "of the last K checkpoints, the one with the best dev BLEU"),
    "decode": ("nmtrepro.evaluation.generate", "beam-search a test set with incremental decoding"),
    "translate": ("nmtrepro.evaluation.translate", "translate raw text with a model bundle, a line for a line"),
    "bundle": ("nmtrepro.evaluation.bundle", "a model's folder that translates alone: weights, vocabularies, BPE, settings"),
    "export-ct2": ("nmtrepro.evaluation.ct2", "a standard Transformer as a CTranslate2 model folder"),
    "bleu": ("nmtrepro.evaluation.bleu", "score a hypothesis in every metric: sacreBLEU, tokenized BLEU, chrF, chrF++, TER"),
    "plan": ("nmtrepro.planning.plan", "training jobs, GPU-hours and disk per table, from the dry-run DAG"),
    "calibrate": ("nmtrepro.planning.calibrate", "time every CPU stage on a sample of the scale's data here, for plan and the shards"),
    "table": ("nmtrepro.reporting.report", "render a results table beside the paper's numbers"),
    "plot-curves": ("nmtrepro.reporting.report", "plot training curves"),
    "claims": ("nmtrepro.reporting.claims", "each paper's claims beside the measured differences, with verdicts"),
    "export-claims": ("nmtrepro.reporting.measured", "copy a run's paired bootstraps, with their provenance, to the workflow's data"),
    "status": ("nmtrepro.reporting.status", "where a run stands: trainings done, running, waiting; claims judged"),
    "landing": ("nmtrepro.reporting.landing", "a claims page in brief (its reading, its verdicts) for the report's first screen"),
    "across-scales": ("nmtrepro.reporting.across_scales", "claims beside the same claims measured at other scales"),
    "significance": ("nmtrepro.evaluation.significance", "paired bootstrap resampling of a system against its baseline"),
    "param-count": ("nmtrepro.planning.param_count", "parameter counts of the configured models at a scale (meta device)"),
    "with-gpus": ("nmtrepro.core.gpus", "run a command on N GPUs of this machine that no other job holds"),
}


DECLARING = ("nmtrepro.data", "nmtrepro.analyses")  # packages whose modules declare their commands
_DECLARED = re.compile(r"^COMMANDS = (\{.*?\})$", re.M | re.S)  # a module's literal, up to the "}" ending a line


def declared_commands() -> dict[str, tuple[str, str]]:
    """The `COMMANDS` literals of the DECLARING packages' modules: name -> (module, help), as COMMANDS
    holds the others. Read from the sources, so that no module is imported but the one whose command runs."""
    found = {}
    for package in DECLARING:
        for root in map(Path, importlib.import_module(package).__path__):
            for path in sorted(root.rglob("*.py")):
                if literal := _DECLARED.search(path.read_text(encoding="utf-8")):
                    parts = path.relative_to(root).with_suffix("").parts
                    module = ".".join([package, *parts]).removesuffix(".__init__")
                    found.update({name: (module, text) for name, text in ast.literal_eval(literal[1]).items()})
    return found


def huge_pages() -> None:
    """Ask torch to back its large CPU tensors (2 MiB and more) with transparent huge pages, unless the
    environment says otherwise. torch reads the switch once, at its first allocation, so it is set
    before any command imports torch. Where the kernel grants huge pages only on request (`madvise`,
    Debian's default) an update of the `tiny` Base otherwise takes ~3,300 minor page faults on one
    thread, its (rows, V) logits and gradients landing on fresh 4 KiB pages, and ~330 with them
    (docs/measurements.md, "Where a tiny training step goes")."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def main(argv: list[str] | None = None) -> int:
    """Run a command: `argv`, or as a program the command line, handed to the run's fork server where
    there is one (forks/server.py)."""
    huge_pages()
    if argv is None:
        argv = sys.argv[1:]
        if (code := run_through_server(argv)) is not None:
            return code
    parser = argparse.ArgumentParser(prog="nmtrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    # Only the chosen command's module is imported: build its parser alone.
    chosen = argv[0] if argv else None
    table = COMMANDS if chosen in COMMANDS else {**COMMANDS, **declared_commands()}
    for name, (module, help_text) in table.items():
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
