"""Preparation recipes: turn a download's raw files into the split files a dataset entry names.

Most datasets need none (their splits are files inside the archives). IWSLT14 De-En is defined by
the preparation paper C's authors' data/prepare-iwslt14.sh (posenhuang/NPMT, Ranzato et al.'s MIXER
prepareData.sh) applies to the TED archive, so the same steps are written here as a function: strip
the TED tags, Moses-tokenize (with XML escaping, as tokenizer.perl does by default), clean like Moses'
clean-corpus-n.perl (ratio 1.5, 1-50 tokens; fairseq's later examples/translation script keeps
1-175), lowercase, take every 23rd training pair as validation, and concatenate five
dev/test sets as test. On the official archive this gives 153,348 / 6,969 / 6,750 pairs (Ranzato et
al.'s split). Its output is tokenized (`Recipe.tokenized`): `prepare` must not run Moses over it again,
which would split the escapes it wrote (`&apos;s` -> `& apos ; s`).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, NamedTuple

from ..core.files import InputError, read_lines, write_lines
from ..core.text import tokenize

_TAG_LINES = ("<url>", "<talkid>", "<keywords>")                             # grep -v
_TAG_STRIP = re.compile(r"</?title>|</?description>")                        # sed -e 's/<title>//g' ...
_SEG_OPEN, _SEG_CLOSE = re.compile(r'<seg id="[0-9]*">\s*'), re.compile(r"\s*</seg>\s*")
IWSLT14_TEST = ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
                "IWSLT14.TED.tst2012")


def _read(path: Path) -> list[str]:
    if not path.is_file():
        raise InputError(f"IWSLT14 recipe: missing {path} (is the archive fairseq's de-en.tgz?)")
    return read_lines(path)


def iwslt_train_text(lines: list[str]) -> list[str]:
    """The talk text of a train.tags file: metadata lines dropped, title/description tags removed."""
    return [_TAG_STRIP.sub("", line) for line in lines if not any(tag in line for tag in _TAG_LINES)]


def iwslt_segments(lines: list[str]) -> list[str]:
    """The <seg> texts of an IWSLT dev/test XML file, with the typographic apostrophe made plain."""
    return [_SEG_CLOSE.sub("", _SEG_OPEN.sub("", line)).replace("\u2019", "'") for line in lines
            if "<seg id" in line]


def _normalise(line: str) -> str:
    return re.sub(r"\s+", " ", line.replace("|", "")).strip()


def clean_corpus(src: list[str], tgt: list[str], ratio: float, min_len: int, max_len: int):
    """Moses clean-corpus-n.perl: whitespace normalised, pairs out of the length or ratio bounds dropped."""
    kept_src, kept_tgt = [], []
    for s, t in zip(src, tgt, strict=True):
        s, t = _normalise(s), _normalise(t)
        ns, nt = len(s.split()), len(t.split())
        if s and t and min_len <= ns <= max_len and min_len <= nt <= max_len and ns / nt <= ratio and nt / ns <= ratio:
            kept_src.append(s)
            kept_tgt.append(t)
    return kept_src, kept_tgt


def prepare_iwslt14(folders: dict[str, Path], out: Path, src: str = "de", tgt: str = "en") -> None:
    """Write out/{train,valid,test}.{de,en} from the extracted de-en.tgz (download `iwslt14_de_en`)."""
    orig = folders["iwslt14_de_en"] / f"{src}-{tgt}"
    tokens = {lang: tokenize(iwslt_train_text(_read(orig / f"train.tags.{src}-{tgt}.{lang}")), lang,
                             escape=True) for lang in (src, tgt)}
    if len(tokens[src]) != len(tokens[tgt]):
        raise InputError(f"IWSLT14 recipe: train.tags sides differ after tag removal "
                         f"({len(tokens[src])} vs {len(tokens[tgt])} lines)")
    clean = dict(zip((src, tgt), clean_corpus(tokens[src], tokens[tgt], ratio=1.5, min_len=1, max_len=50)))
    for lang in (src, tgt):
        lowered = [line.lower() for line in clean[lang]]
        write_lines(out / f"valid.{lang}", [line for i, line in enumerate(lowered, 1) if i % 23 == 0])
        write_lines(out / f"train.{lang}", [line for i, line in enumerate(lowered, 1) if i % 23 != 0])
        test = []
        for name in IWSLT14_TEST:
            test += iwslt_segments(_read(orig / f"{name}.{src}-{tgt}.{lang}.xml"))
        write_lines(out / f"test.{lang}", [line.lower() for line in tokenize(test, lang, escape=True)])


class Recipe(NamedTuple):
    """A recipe (download folders, out folder) and whether it writes Moses-tokenized text: the fetched
    dataset's manifest records it, and `prepare` then only splits on spaces."""
    run: Callable[[dict[str, Path], Path], None]
    tokenized: bool


RECIPES = {"iwslt14": Recipe(prepare_iwslt14, tokenized=True)}
