"""Decoding options: their defaults and their command-line flags, in one place that imports nothing
heavy (the config's resolution and the workflow read them; `decode`, `select-checkpoint` and
`warm-start` parse them)."""
from __future__ import annotations

# beam search (every family) ...
SEARCH = {"beam": 4, "lenpen": 1.0, "max_len_a": 1.2, "max_len_b": 10, "max_tokens": 8000, "precision": "fp32"}
# ... and a segment model's (NPMT): off for every other
SEGMENTS = {"word_bonus": 0.0, "lm_order": 0, "lm_weight": 0.0}
DEFAULTS = {**SEARCH, **SEGMENTS}


def flags(options: dict, keys=SEARCH) -> list[str]:
    """`--beam 4 --lenpen 1.0 ...`: the flags of `options` for each of `keys` (a command's own)."""
    return [arg for key in keys for arg in (f"--{key.replace('_', '-')}", str(options[key]))]
