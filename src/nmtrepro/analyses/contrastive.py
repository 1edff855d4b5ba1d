"""Contrastive translation pairs (Sennrich 2017, LingEval97): does the model prefer the reference?

Each triple holds a source, its correct translation and a contrastive one with a single inserted
error. The model force-scores both targets (sum of log-probabilities of the target BPE pieces and
EOS); it is right when the correct target scores strictly higher, so a tie counts as wrong.
Accuracy is reported per error category and, for errors with a distance, per distance bin with the
binning of LingEval97's evaluate.py (each distance 1..15 alone, everything else as ">15").

Two inputs: the real `lingeval97.json` (full scale, distances from the test set itself) and the
embedded DistilLingEval folders (one category per folder, no distances: for subject-verb agreement
we measure them on the English source with a dependency parse, see nmtrepro.analyses.agreement).
"""
from __future__ import annotations

import gzip
import json
import logging
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..core import runtime
from ..core.files import InputError, read_json, read_lines, require_file, write_json
from ..core.text import BPE, tokenize
from ..core.vocab import Vocab
from ..data.datasets import verified
from ..evaluation.sources import Sources, add_arguments_sources, source_options
from ..training import checkpoint
from ..training.batching import pad_sequences, token_batches
from .lingeval import DISTANCE_BINS, DISTIL_FILES, SUBJ_VERB, UNKNOWN, distance_bin

log = logging.getLogger("nmtrepro.analyses.contrastive")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "contrastive": "LingEval97-style contrastive scoring: accuracy per category and distance",
}


@dataclass(frozen=True)
class Triple:
    source: str
    correct: str
    incorrect: str
    category: str
    distance: int | str | None = None   # words between the agreeing pair; None when not defined


def read_lingeval97(path, max_per_category: int | None = None) -> list[Triple]:
    """Triples from lingeval97.json: one per entry of each sentence's `errors` list, in file order."""
    path = require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of sentences at the top level")
    triples, seen = [], defaultdict(int)
    for i, sentence in enumerate(data):
        for key in ("source", "reference", "errors"):
            if key not in sentence:
                raise InputError(f"{path}: sentence {i} lacks key {key!r}")
        for j, error in enumerate(sentence["errors"]):
            if "type" not in error or "contrastive" not in error:
                raise InputError(f"{path}: sentence {i}, error {j} needs 'type' and 'contrastive'")
            category = error["type"]
            if max_per_category is not None and seen[category] >= max_per_category:
                continue
            seen[category] += 1
            triples.append(Triple(sentence["source"], sentence["reference"], error["contrastive"],
                                  category, error.get("distance")))
    return triples


def read_distil_set(directory, max_lines: int | None = None) -> list[Triple]:
    """A DistilLingEval folder <set>/{src.en,tgt.correct.de,tgt.incorrect.de}.gz; the category is
    the folder name. Files are checked against the data folder's SHA256SUMS."""
    directory = Path(directory)
    files = [read_lines(verified(directory / name))
             for name in DISTIL_FILES]
    if len({len(f) for f in files}) != 1:
        raise InputError(f"{directory}: src/correct/incorrect differ in line count {[len(f) for f in files]}")
    rows = list(zip(*files))[:max_lines]
    return [Triple(src, good, bad, directory.name) for src, good, bad in rows]


@torch.no_grad()
def force_score(model, sources: Sources, targets: list[list[list[int]]], max_tokens: int,
                device="cpu") -> list[list[float]]:
    """Sum of log p(target piece | prefix, source) over the ids (EOS included) of each of the
    targets of each source; scores[i][j] belongs to targets[i][j]. A source is encoded once for all
    of its targets; batches are cut by length like decoding's."""
    scores: list[list[float]] = [[] for _ in sources.ids]
    longest = [max(len(t) for t in alternatives) * len(alternatives) for alternatives in targets]
    for indices in token_batches(sources.sizes, longest, max_tokens):
        rows = [(b, t) for b, i in enumerate(indices) for t in targets[i]]
        tgt = pad_sequences([torch.tensor(t) for _, t in rows]).to(device)                  # (R, T)
        prev = torch.cat([torch.full_like(tgt[:, :1], Vocab.bos), tgt[:, :-1]], dim=1)
        enc = model.encode(**sources.net_input(indices, device))                            # B sources
        enc = model.reorder_encoder(enc, torch.tensor([b for b, _ in rows], device=device))
        hidden = model.decode(prev, enc)                                                    # (R, T, d)
        real = tgt.ne(Vocab.pad)
        # Only real positions go through the output layer (padding can be a large share here).
        lprobs = F.log_softmax(model.logits(hidden[real]).float(), -1)                      # (N, V)
        gold = torch.zeros(tgt.shape, device=lprobs.device)
        gold[real] = lprobs.gather(-1, tgt[real][:, None]).squeeze(-1)
        for (b, _), score in zip(rows, gold.sum(1).tolist()):                               # (R,)
            scores[indices[b]].append(score)
    return scores


def judge(correct_ids: list[int], incorrect_ids: list[int], correct_score: float,
          incorrect_score: float) -> bool:
    """Right when the correct target scores strictly higher. Targets that are the same id sequence
    (the inserted error vanished in preprocessing) are a tie whatever float noise says: wrong."""
    return correct_ids != incorrect_ids and correct_score > incorrect_score


def _counts(correct: int, total: int) -> dict:
    return {"correct": correct, "total": total, "accuracy": correct / total if total else None}


def tally(triples: list[Triple], right: list[bool]) -> dict:
    """Accuracy overall, per category and per (category, distance bin), with counts."""
    by_cat, by_bin = defaultdict(lambda: [0, 0]), defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for triple, ok in zip(triples, right, strict=True):
        for cell in [by_cat[triple.category]] + (
                [] if triple.distance is None else [by_bin[triple.category][_bin_or_unknown(triple.distance)]]):
            cell[0] += ok
            cell[1] += 1
    order = DISTANCE_BINS + [UNKNOWN]
    return {
        "total": _counts(sum(right), len(right)),
        "categories": {c: _counts(*v) for c, v in sorted(by_cat.items())},
        "distance_bins": {c: {b: _counts(*bins[b]) for b in order if b in bins}
                          for c, bins in sorted(by_bin.items())},
    }


def _bin_or_unknown(distance) -> str:
    return UNKNOWN if distance == UNKNOWN else distance_bin(distance)


class Preprocessor:
    """The experiment's test pipeline: Moses tokenization, its BPE codes, its vocabularies.

    `source_options` go to `Sources.of_lines`: how a parser-phrase model's sources get their phrases."""

    def __init__(self, prepared_dir, src_lang: str = "en", tgt_lang: str = "de", **source_options):
        prepared_dir = Path(prepared_dir)
        self.bpe = BPE(prepared_dir / "bpe.codes")
        self.src_vocab = Vocab.load(prepared_dir / "dict.src.txt")
        self.tgt_vocab = Vocab.load(prepared_dir / "dict.tgt.txt")
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.source_options = source_options

    def sources(self, model, lines: list[str]) -> Sources:
        """The source sentences as `model` reads them (ids plus its family's extra inputs)."""
        return Sources.of_lines(model, self.bpe(tokenize(lines, self.src_lang)), self.src_vocab,
                                **self.source_options)

    def target(self, lines: list[str]) -> list[list[int]]:
        return [self.tgt_vocab.encode(line) for line in self.bpe(tokenize(lines, self.tgt_lang))]


def evaluate(model, prep: Preprocessor, triples: list[Triple], max_tokens: int, device="cpu") -> list[bool]:
    """Score every triple's two targets against its source; True where the model prefers the correct one."""
    sources = prep.sources(model, [t.source for t in triples])
    good, bad = prep.target([t.correct for t in triples]), prep.target([t.incorrect for t in triples])
    scores = force_score(model, sources, [[g, b] for g, b in zip(good, bad)], max_tokens, device)
    return [judge(g, b, *score) for g, b, score in zip(good, bad, scores)]


def with_parsed_distances(triples: list[Triple], backend: str) -> list[Triple]:
    """Give DistilLingEval subject-verb triples the distance we measure on the English source."""
    try:
        from ..data import nlp  # lazy: the parser is heavy and only this path needs it
    except ImportError as err:
        raise InputError(f"measuring subject-verb distance needs nmtrepro.data.nlp ({err}); "
                         "or score without distances: --parser none") from None
    from .agreement import subject_verb_distance

    agreement = [i for i, t in enumerate(triples) if t.category.startswith(SUBJ_VERB)]
    words = tokenize([triples[i].source for i in agreement], "en")
    parses = nlp.analyse(words, backend=backend)
    out = list(triples)
    for i, parse in zip(agreement, parses):
        distance = subject_verb_distance(parse)
        out[i] = replace(triples[i], distance=UNKNOWN if distance is None else distance)
    return out


def add_arguments_contrastive(parser) -> None:
    parser.add_argument("--model", required=True, help="model file (final or averaged), En->De")
    parser.add_argument("--prepared", required=True, help="the experiment's prepared dataset folder")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--distil-set", action="append", metavar="DIR",
                        help="a DistilLingEval folder (repeat); the folder name is the category")
    source.add_argument("--lingeval97", metavar="JSON", help="the real lingeval97.json (distances included)")
    source.add_argument("--lingeval97-download", metavar="RECORD",
                        help="the `nmtrepro download` record of lingeval97.json (the paper-scale workflow)")
    parser.add_argument("--max-per-set", type=int, help="score only the first N triples of each category")
    parser.add_argument("--parser", default="spacy", choices=["spacy", "stanza", "auto", "none"],
                        help="dependency parser measuring subject-verb distance on DistilLingEval ('none': skip)")
    parser.add_argument("--max-tokens", type=int, default=4000, help="padded tokens per batch")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", required=True, help="JSON: accuracy per category and per distance bin")
    add_arguments_sources(parser, files=False)


def run_contrastive(args) -> None:
    device = runtime.setup(args.threads)
    if args.lingeval97_download:
        args.lingeval97 = read_json(args.lingeval97_download)["archive"]
    if args.lingeval97:
        triples = read_lingeval97(args.lingeval97, args.max_per_set)
        distances = "lingeval97.json (the test set's own subject-verb distances, in German words)"
    else:
        triples = [t for d in args.distil_set for t in read_distil_set(d, args.max_per_set)]
        if args.parser == "none":
            distances = None
        else:
            triples = with_parsed_distances(triples, args.parser)
            distances = (f"measured by nmtrepro on the English source with the offline {args.parser} "
                         "dependency parser (not LingEval97's own distances); see nmtrepro.analyses.agreement")
    if not triples:
        raise InputError("no contrastive triples to score")
    preprocessor = Preprocessor(args.prepared, **source_options(args))
    model = checkpoint.load_model(args.model, device, {"src": preprocessor.src_vocab, "tgt": preprocessor.tgt_vocab},
                                  args.prepared)
    right = evaluate(model, preprocessor, triples, args.max_tokens, device)
    result = tally(triples, right)
    log.info("accuracy %.4f over %d triples", result["total"]["accuracy"], len(triples))
    write_json(args.out, {"model": args.model, "test_set": args.lingeval97 or args.distil_set,
                          "max_per_set": args.max_per_set, "distances": distances,
                          "parser": None if args.lingeval97 else args.parser,
                          "tie_rule": "correct must score strictly higher; ties count as wrong", **result})
