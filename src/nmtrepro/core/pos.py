"""The part-of-speech tag inventory that source-side POS inputs use (paper D's syntax group).

One small fixed vocabulary for every language: the 17 Universal Dependencies POS tags behind the four
specials of `Vocab`, so ids line up with the source ids position by position:
  <pad> 0 pads (the same pad id as the tokens), <s> 1 (unused), </s> 2 the EOS position's tag,
  <unk> 3 any tag outside the inventory, then ADJ 4 ... X 20 (21 ids in all).
`POS_VOCAB.encode(tags_line)` appends the EOS tag as `Vocab.encode` appends EOS to the ids. The `pos`
stage writes the tags (`data.pos`); a model family imports the inventory from here, below every stage.
"""
from __future__ import annotations

from .vocab import Vocab

UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
        "PUNCT", "SCONJ", "SYM", "VERB", "X")
POS_VOCAB = Vocab(UPOS)
