"""Source annotations: what a family may read beside the source tokens, each defined once, in its data module.

An annotation (parser phrases "spans" for paper A, POS tags "pos" for paper D) is
- made per dataset part by a stage of its own, as results/<scale>/<stage>/<dataset>/<part>.<name> with
  <part>.stats.json beside it (its rule file under workflow/rules/annotations/, its module's COMMANDS;
  `annotate`, the work of its job, which `nmtrepro calibrate` times); its jobs' resources and assumed
  seconds a line are the config's `preprocess.<stage>` and `plan.cpu_seconds_per_line.<stage>`, keyed by
  its `tool` (the schema takes them from here);
- read back aligned with the binarized source (`read`), or made on the fly for lines that no stage saw
  (`make`: probing tasks, contrastive sources);
- for the training splits, binarized once (`binarize`, its rows `ids`) into <part>.<name>.bin, which
  every training rank reads a batch at a time as it reads the source tokens (`binarized`), rather than
  each building the values of millions of sentences in its own memory;
- batched (`pad`), with what a row holding no sentence carries first (`blank_first`) and the shapes a
  bucketed batch adds (`shapes`), and stood in for on the meta device when FLOPs are counted (`stand_in`);
- named under a table by who made it (`note`, from its stats' `stats_key`).

A family names those it reads in `config.extra_inputs`; the corpus, the sources of decoding and the
analyses, the train and decode commands (`--annotation NAME=PATH`), the FLOPs count, the plan and the
table's note all find them here. Every module of this package is looked at for an `ANNOTATION` (as
models/ registers its families), so a new annotation is its module, its rule file, the family that
reads it and the config (docs/organisation.md).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ..core.files import InputError
from ..core.vocab import IndexedData, save_indexed

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "binarize-annotation": "a training split's annotation as the binarized file every training rank reads",
}


def _parse_backend(lang: str, backend: str) -> str:
    return backend


@dataclass(frozen=True)
class Annotation:
    name: str       # the family's input name, the files' extension, NAME in `--annotation NAME=PATH`
    stage: str      # the stage (rule, results folder) that makes it
    read: Callable[[str | Path, Sequence[int] | None], Sequence]  # (file, the source's token counts) -> values
    ids: Callable[[str | Path, Sequence[int] | None], Iterable[Sequence[int]]]  # read's checks, a line at a
    # time: each sentence's values as ints, the rows of the binarized file a training corpus maps
    make: Callable[[Sequence[str], str | None, str, str | None], Sequence]  # (BPE'd lines, lang, backend, stanza dir)
    annotate: Callable[..., dict]  # (BPE'd file, out, lang, backend, batch size, stanza dir) -> its stats, the
    # tool under `stats_key`: a stage job's work over a whole file, which `nmtrepro calibrate` times
    stand_in: Callable[[int, int, str], dict]  # (sentences, source length, device) -> inputs of that shape
    note: str       # how the table's line naming its maker starts, e.g. "Parser phrases: trees made by"
    stats_key: str  # the field of its stats that names the maker
    makers: Mapping[str, str]  # that field's values -> how the note names them
    pad: Callable | None = None  # (values, indices) -> (B, ...) tensor; None: one value a source token, padded as it
    blank_first: int | None = None  # what a row without a sentence holds first (collate's fixed shapes)
    shapes: Callable | None = None  # (its (B, ...) batch, rows) -> further inputs of a bucketed batch
    tool: Callable[[str, str], str] = field(default=_parse_backend)  # (source lang, backend) -> the plan's cost key
    tools: str = "tool"  # what those keys name, for the schema: "tagger (stanza, spacy, jieba)"


@functools.cache
def registry() -> dict[str, Annotation]:
    """Every source annotation by name, in the order of their modules' names."""
    from .. import data

    found = {}
    for info in sorted(pkgutil.iter_modules(data.__path__), key=lambda m: m.name):
        annotation = getattr(importlib.import_module(f"{data.__name__}.{info.name}"), "ANNOTATION", None)
        if isinstance(annotation, Annotation):
            found[annotation.name] = annotation
    return found


def annotation(name: str) -> Annotation:
    if name not in registry():
        raise InputError(f"{name!r} is no source annotation; known: {', '.join(registry())}")
    return registry()[name]


def by_stage(stage: str) -> Annotation:
    return next(a for a in registry().values() if a.stage == stage)


def check_rule_files(stages: Sequence[str]) -> None:
    """Every annotation's stage has its rule file (workflow/rules/annotations/<stage>.smk, `stages` their
    stems), and every such file an annotation."""
    known = {a.stage for a in registry().values()}
    if missing := sorted(known - set(stages)):
        raise InputError(f"workflow/rules/annotations/ has no rule file for the stage(s) {', '.join(missing)} "
                         f"(source annotations of nmtrepro.data)")
    if unknown := sorted(set(stages) - known):
        raise InputError(f"workflow/rules/annotations/{unknown[0]}.smk: no source annotation of nmtrepro.data "
                         f"is made by a stage {unknown[0]!r} (known: {', '.join(sorted(known))})")


def add_annotation_argument(parser, what: str) -> None:
    """`--annotation NAME=PATH` (repeat): where the annotations of the command's source come from."""
    parser.add_argument("--annotation", action="append", default=[], metavar="NAME=PATH",
                        help=f"{what}, NAME one of {', '.join(registry())} (repeat)")


def annotation_paths(specs: Sequence[str]) -> dict[str, str]:
    """{name: path} from `--annotation NAME=PATH` flags: each name known, none twice."""
    paths = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            raise InputError(f"--annotation {spec!r}: expected NAME=PATH")
        annotation(name)
        if name in paths:
            raise InputError(f"--annotation {name} given twice ({paths[name]}, {path})")
        paths[name] = path
    return paths


def binarized_file(folder: str | Path, split: str, name: str) -> Path:
    """Where annotation `name` of a training split is binarized: beside its stage's text file."""
    return Path(folder) / f"{split}.{name}.bin"


def binarize(name: str, text: str | Path, source: str | Path, out: str | Path) -> None:
    """Annotation `name`'s file `text` checked against the binarized source it annotates (`read`'s
    checks, through `ids`) and written as a binarized corpus (`save_indexed`, streamed): memory stays a
    chunk's at any corpus size."""
    save_indexed(out, annotation(name).ids(text, IndexedData(source).sizes))


def binarized(folder: str | Path, split: str, name: str, source: IndexedData) -> IndexedData:
    """Annotation `name` of a training split, read from its binarized file (made by `binarize`, which
    checked it against the source) a batch at a time, as the source's tokens are: every rank on a host
    reads the page cache's one copy."""
    annotation(name)
    path = binarized_file(folder, split, name)
    values = IndexedData(path)
    if len(values) != len(source):
        raise InputError(f"{path}: {len(values)} sentences, the source has {len(source)} "
                         "(binarized from another prepare? re-run binarize-annotation)")
    return values


def add_arguments_binarize_annotation(parser) -> None:
    parser.add_argument("--name", required=True, help="which annotation (its stage's file extension)")
    parser.add_argument("--text", required=True, help="the stage's file of a training split (<part>.<name>)")
    parser.add_argument("--source", required=True, help="the binarized source it annotates (<part>.src.bin)")
    parser.add_argument("--out", required=True, help="the binarized file (<part>.<name>.bin)")


def run_binarize_annotation(args) -> None:
    binarize(args.name, args.text, args.source, args.out)
