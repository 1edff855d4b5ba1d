"""SentEval-style probing tasks derived deterministically from gold PTB trees, and SentEval's file format.

Each task is a list of `Example(split, label, sentence)`; the file format is SentEval's own
(`data/probing/*.txt`: `split<TAB>label<TAB>sentence`, split in tr/va/te), so the real SentEval files
and ours go through the same reader. Splits come from a hash of (task, sentence): stable across runs,
machines and task order. Perturbation tasks (BShift, CoordInv, SOMO) perturb a hash-chosen half, so
they are balanced by construction; the binary labelled tasks are balanced by down-sampling, as SentEval
does. Class inventories follow Conneau et al. (2018), scaled to 3,914 trees where noted.
"""
from __future__ import annotations

import collections
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from ...core.files import InputError, atomic_open
from ...data.trees import Tree, sentence

SPLITS = ("tr", "va", "te")
SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))  # SentEval's 6 classes
PAST, PRESENT = {"VBD", "VBN"}, {"VBZ", "VBP"}
SINGULAR, PLURAL = {"NN", "NNP"}, {"NNS", "NNPS"}
PUNCT = {".", ",", ":", "``", "''", "-LRB-", "-RRB-", "#", "$"}


@dataclass(frozen=True)
class Example:
    split: str
    label: str
    sentence: str


def _hash(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def split_of(task: str, text: str, dev_share: int = 1, test_share: int = 1, buckets: int = 12) -> str:
    """tr/va/te from a hash: 10/1/1 of 12 like SentEval's 100k/10k/10k."""
    h = _hash("split", task, text) % buckets
    return "te" if h < test_share else "va" if h < test_share + dev_share else "tr"


def _examples(task: str, labelled: list[tuple[str, str]]) -> list[Example]:
    return [Example(split_of(task, s), label, s) for label, s in labelled]


def balance(task: str, labelled: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Down-sample every class to the rarest one's size, keeping the hash-smallest examples."""
    by_label = collections.defaultdict(list)
    for label, s in labelled:
        by_label[label].append((label, s))
    if len(by_label) < 2:
        return []
    size = min(len(v) for v in by_label.values())
    kept = {(l, s) for v in by_label.values() for l, s in sorted(v, key=lambda x: _hash(task, x[1]))[:size]}
    return [x for x in labelled if x in kept]


# --- tree helpers ------------------------------------------------------------------------------

def main_clause(tree: Tree) -> Tree | None:
    """The top S (the root itself, or the first S-like child of a ROOT-less wrapper)."""
    if tree.label.startswith("S"):
        return tree
    return next((c for c in tree.children if c.label.startswith("S")), None)


def head_vp(clause: Tree) -> Tree | None:
    return next((c for c in clause.children if c.label == "VP"), None)


def main_verb_tag(clause: Tree) -> str | None:
    """POS of the first verb of the main clause's VP (the finite verb: auxiliary or lexical)."""
    vp = head_vp(clause)
    while vp is not None:
        verb = next((c for c in vp.children if c.is_leaf and c.label.startswith(("VB", "MD"))), None)
        if verb is not None:
            return verb.label
        vp = head_vp(vp)
    return None


def head_noun_tag(np: Tree) -> str | None:
    """Number-bearing tag of an NP: its last noun child, else recursively its first NP child."""
    nouns = [c.label for c in np.children if c.is_leaf and c.label.startswith("NN")]
    if nouns:
        return nouns[-1]
    inner = next((c for c in np.children if c.label == "NP"), None)
    return head_noun_tag(inner) if inner is not None else None


def subject(clause: Tree) -> Tree | None:
    return next((c for c in clause.children if c.label == "NP" and "SBJ" in c.tags), None)


def direct_object(clause: Tree) -> Tree | None:
    """First tag-less NP complement along the main clause's VP chain."""
    vp = head_vp(clause)
    while vp is not None:
        obj = next((c for c in vp.children if c.label == "NP" and not c.tags), None)
        if obj is not None:
            return obj
        vp = head_vp(vp)
    return None


def number_label(tag: str | None) -> str | None:
    return "NN" if tag in SINGULAR else "NNS" if tag in PLURAL else None


# --- the tasks ---------------------------------------------------------------------------------

def sentlen(trees: list[Tree]) -> list[tuple[str, str]]:
    out = []
    for t in trees:
        n = len(t.words())
        label = next((str(i) for i, (lo, hi) in enumerate(SENTLEN_BINS) if lo <= n <= hi), None)
        if label is not None:
            out.append((label, sentence(t.words())))
    return out


def tree_depth(trees: list[Tree], classes: int = 8) -> list[tuple[str, str]]:
    """Depth classes: the `classes` most frequent depths (SentEval keeps 8 depths, 5..12)."""
    depths = [(t.depth(), sentence(t.words())) for t in trees]
    kept = {d for d, _ in collections.Counter(d for d, _ in depths).most_common(classes)}
    return [(str(d), s) for d, s in depths if d in kept]


def top_constituents(trees: list[Tree], classes: int = 19) -> list[tuple[str, str]]:
    """Children labels of the top S; the `classes` most frequent sequences plus OTHER (SentEval: 19+1)."""
    seqs = []
    for t in trees:
        clause = main_clause(t)
        if clause is not None:
            seqs.append(("_".join(c.label for c in clause.children), sentence(t.words())))
    frequent = {q for q, _ in collections.Counter(q for q, _ in seqs).most_common(classes)}
    return [(q if q in frequent else "OTHER", s) for q, s in seqs]


def _main_clause_labels(trees: list[Tree], label_of) -> list[tuple[str, str]]:
    """(label, sentence) for every tree whose main clause `label_of` gives a label (None: left out)."""
    out = []
    for t in trees:
        clause = main_clause(t)
        label = label_of(clause) if clause is not None else None
        if label:
            out.append((label, sentence(t.words())))
    return out


def _tense_label(clause: Tree) -> str | None:
    tag = main_verb_tag(clause)
    return "PAST" if tag in PAST else "PRES" if tag in PRESENT else None


def _number_of(np: Tree | None) -> str | None:
    return number_label(head_noun_tag(np)) if np is not None else None


def tense(trees: list[Tree]) -> list[tuple[str, str]]:
    return _main_clause_labels(trees, _tense_label)


def subj_num(trees: list[Tree]) -> list[tuple[str, str]]:
    return _main_clause_labels(trees, lambda clause: _number_of(subject(clause)))


def obj_num(trees: list[Tree]) -> list[tuple[str, str]]:
    return _main_clause_labels(trees, lambda clause: _number_of(direct_object(clause)))


def _perturb_half(task: str, text: str) -> bool:
    return _hash("perturb", task, text) % 2 == 1


def bigram_shift(trees: list[Tree]) -> list[tuple[str, str]]:
    """Swap two adjacent non-punctuation words in half the sentences: I(nverted) vs O(riginal)."""
    out = []
    for t in trees:
        leaves = t.leaves()
        words, text = [l.word for l in leaves], sentence(t.words())
        spots = [i for i in range(len(leaves) - 1)
                 if leaves[i].label not in PUNCT and leaves[i + 1].label not in PUNCT
                 and words[i].lower() != words[i + 1].lower()]
        if not spots:
            continue
        if _perturb_half("BShift", text):
            i = random.Random(_hash("BShift", text)).choice(spots)
            words[i], words[i + 1] = words[i + 1], words[i]
            out.append(("I", sentence(words)))
        else:
            out.append(("O", text))
    return out


def coordination_inversion(trees: list[Tree]) -> list[tuple[str, str]]:
    """Top clause `S (,) CC S (.)`: swap the two clauses in half the sentences: I(nverted) vs O."""
    out = []
    for t in trees:
        clause = main_clause(t)
        if clause is None:
            continue
        kids = [c for c in clause.children if not (c.is_leaf and c.label in PUNCT)]
        labels = [c.label for c in kids]
        if len(kids) != 3 or labels[1] != "CC" or not labels[0].startswith("S") or not labels[2].startswith("S"):
            continue
        text = sentence(t.words())
        if _perturb_half("CoordInv", text):
            i, j = clause.children.index(kids[0]), clause.children.index(kids[2])
            order = list(clause.children)
            order[i], order[j] = order[j], order[i]
            out.append(("I", sentence([w for c in order for w in c.words()])))
        else:
            out.append(("O", text))
    return out


def odd_man_out(trees: list[Tree]) -> list[tuple[str, str]]:
    """Replace one noun or verb by the same-POS word next to it in frequency rank: C(hanged) vs O.

    SentEval matches the bigram frequencies of the replacement; 100k words of treebank are too few for
    bigram counts, so the replacement is the neighbouring word in that POS's unigram frequency ranking.
    """
    counts = collections.Counter((l.label, l.word) for t in trees for l in t.leaves()
                                 if l.label.startswith(("NN", "VB")))
    ranked = collections.defaultdict(list)
    for (pos, word), c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][1])):
        ranked[pos].append(word)
    position = {(pos, w): i for pos, words in ranked.items() for i, w in enumerate(words)}
    out = []
    for t in trees:
        leaves = t.leaves()
        words, text = [l.word for l in leaves], sentence(t.words())
        spots = [i for i, l in enumerate(leaves) if (l.label, l.word) in position and len(ranked[l.label]) > 1]
        if not spots:
            continue
        if _perturb_half("SOMO", text):
            i = random.Random(_hash("SOMO", text)).choice(spots)
            pool, rank = ranked[leaves[i].label], position[(leaves[i].label, words[i])]
            words[i] = pool[rank + 1] if rank + 1 < len(pool) else pool[rank - 1]
            out.append(("C", sentence(words)))
        else:
            out.append(("O", text))
    return out


def word_content(trees: list[Tree], vocabulary: int = 30) -> list[tuple[str, str]]:
    """Which of `vocabulary` mid-frequency words the sentence holds (exactly one of them).

    SentEval uses 1,000 words ranked 2k-3k by frequency in 100k sentences; with 3,914 sentences the
    words are the `vocabulary` most frequent lower-case alphabetic words after the top 100.
    """
    sents = [[w.lower() for w in t.words()] for t in trees]
    counts = collections.Counter(w for ws in sents for w in set(ws) if w.isalpha())
    ranked = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    targets = set(ranked[100:100 + vocabulary])
    out = []
    for t, ws in zip(trees, sents):
        hits = targets.intersection(ws)
        if len(hits) == 1:
            out.append((hits.pop(), sentence(t.words())))
    return out


TASKS = {
    "sentence_length": sentlen,
    "word_content": word_content,
    "tree_depth": tree_depth,
    "top_constituents": top_constituents,
    "bigram_shift": bigram_shift,
    "past_present": tense,
    "subj_number": subj_num,
    "obj_number": obj_num,
    "odd_man_out": odd_man_out,
    "coordination_inversion": coordination_inversion,
}  # file names as SentEval's data/probing/<name>.txt (the senteval_<name> downloads), in paper B Table 5's order
BALANCED = {"past_present", "subj_number", "obj_number"}


def derive(trees: list[Tree]) -> dict[str, list[Example]]:
    """Every task's examples, in tree order."""
    out = {}
    for name, fn in TASKS.items():
        labelled = fn(trees)
        out[name] = _examples(name, balance(name, labelled) if name in BALANCED else labelled)
    return out


def write_task(path: str | Path, examples: list[Example]) -> None:
    with atomic_open(path) as handle:
        for ex in examples:
            handle.write(f"{ex.split}\t{ex.label}\t{ex.sentence}\n")


def read_task(path: str | Path) -> list[Example]:
    """Read SentEval's probing format; malformed lines raise InputError naming file and line.

    SentEval's README promises "(at least)" split, label and sentence, the sentence last, and its loader
    reads fields 0, 1 and -1, so fields between label and sentence are skipped the same way here.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing probing task file: {path}")
    out = []
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) < 3 or parts[0] not in SPLITS or not parts[-1].strip():
                raise InputError(f"{path}:{lineno}: expected 'tr|va|te<TAB>label<TAB>sentence', got {line[:80]!r}")
            out.append(Example(parts[0], parts[1], parts[-1]))
    for split in SPLITS:
        if not any(ex.split == split for ex in out):
            raise InputError(f"{path}: no examples in split {split!r}")
    return out


def table_tasks(name: str, analysis: dict) -> list[str]:
    """The tasks probing table `name` shows: its `tasks`, by default all ten (paper B Table 5); a
    misspelt one is named with its key."""
    tasks = analysis.get("tasks", list(TASKS))
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise InputError(f"analyses.{name}.tasks: {unknown} are not SentEval probing tasks ({', '.join(TASKS)})")
    return tasks


def probe_task_files(analyses: dict, experiment: str, tasks_from: str, results) -> list[str]:
    """What an experiment's probe reads: the tasks of every probing table listing it (all ten if none
    does), as SentEval's download records (`tasks_from` "senteval") or the PTB-derived task files
    (`results`: a path under the run's tree)."""
    wanted = {task for name, spec in analyses.items()
              if spec["kind"] == "probing" and any(s["experiment"] == experiment for s in spec["systems"])
              for task in table_tasks(name, spec)}
    tasks = [task for task in TASKS if task in wanted] or list(TASKS)
    if tasks_from == "senteval":
        return [results(f"downloads/senteval_{task}.json") for task in tasks]
    return [results(f"probing/tasks/{task}.txt") for task in tasks]


def classifier_args(options: dict) -> list[str]:
    """The probe command's classifier grid and limits from a scale's `probing.classifier` entry."""
    args = []
    for key in ("nhid", "dropout", "weight_decay"):
        if key in options:
            args += [f"--{key.replace('_', '-')}", *(str(v) for v in options[key])]
    for key in ("max_epochs", "max_examples"):
        if key in options:
            args += [f"--{key.replace('_', '-')}", str(options[key])]
    return args
