"""LingEval97's error categories and distance bins, shared by contrastive scoring and the agreement figure.

Kept apart from both so that `contrastive` (which measures distances with `agreement`) and `agreement`
(which plots the bins) import them without importing each other.
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


def distance_bin(distance) -> str | None:
    """The evaluate.py bin of a distance: "0".."15", ">15", or None when the error has no distance."""
    if distance is None:
        return None
    if isinstance(distance, bool):
        raise InputError(f"distance must be a number, got {distance!r}")
    return _DISTANCE_TO_BIN.get(distance, ">15")
