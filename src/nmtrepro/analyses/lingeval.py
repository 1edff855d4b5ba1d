"""LingEval97's error categories and distance bins, shared by contrastive scoring and the agreement figure,
and the files and arguments of the pairs a scale scores (the workflow's, read while it is parsed).

Kept apart from both so that `contrastive` (which measures distances with `agreement`) and `agreement`
(which plots the bins) import them without importing each other, and so that the workflow's parse
does not import torch with `contrastive`.
"""
from __future__ import annotations

from ..core.files import InputError

# LingEval97 evaluate.py: 0 is its own bin, 1..15 one bin each, any other distance is ">15".
# Its lookup table holds the int keys 0..15 and the string "0" only, so a string "3" lands in ">15"
# there too; we keep that so that our numbers match the original script on the same file.
DISTANCE_BINS = ["0"] + [str(i) for i in range(1, 16)] + [">15"]
_DISTANCE_TO_BIN = {0: "0", "0": "0", **{i: str(i) for i in range(1, 16)}}
UNKNOWN = "unknown"   # our own bin: no subject found by the parser (DistilLingEval only)
SUBJ_VERB = "subj_verb_agreement"
# A DistilLingEval set's files, in its folder: the sources, the correct and the incorrect targets.
DISTIL_FILES = ("src.en.gz", "tgt.correct.de.gz", "tgt.incorrect.de.gz")


def distance_bin(distance) -> str | None:
    """The evaluate.py bin of a distance: "0".."15", ">15", or None when the error has no distance."""
    if distance is None:
        return None
    if isinstance(distance, bool):
        raise InputError(f"distance must be a number, got {distance!r}")
    return _DISTANCE_TO_BIN.get(distance, ">15")


def pair_files(pairs: dict, results) -> list[str]:
    """What the contrastive rule reads for a scale's `contrastive` (`results`: a path under the run's
    tree): LingEval97's download record, its json as given, or each DistilLingEval set's three files."""
    if "download" in pairs:
        return [results(f"downloads/{pairs['download']}.json")]
    if "lingeval97" in pairs:
        return [pairs["lingeval97"]]
    return [f"{pairs['distil_dir']}/{name}/{file}" for name in pairs["sets"] for file in DISTIL_FILES]


def pair_args(pairs: dict, results) -> list[str]:
    """The command's arguments for the same pairs (`pair_files`), their cap per set and batch size."""
    if "download" in pairs:
        args = ["--lingeval97-download", results(f"downloads/{pairs['download']}.json")]
    elif "lingeval97" in pairs:
        args = ["--lingeval97", pairs["lingeval97"]]
    else:
        args = [a for name in pairs["sets"] for a in ("--distil-set", f"{pairs['distil_dir']}/{name}")]
        args += ["--parser", pairs["parser"]]
    if "max_per_set" in pairs:
        args += ["--max-per-set", str(pairs["max_per_set"])]
    return args + ["--max-tokens", str(pairs["max_tokens"])]
