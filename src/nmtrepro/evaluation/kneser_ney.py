"""An interpolated Kneser-Ney n-gram language model for NPMT's beam search (paper C's "+LM": a 3-gram
model of the English training side, weight lambda2 = 0.2 on its log10 score, as KenLM returns it).

Why not a library: the paper estimated its model with KenLM, whose pip package only queries (its
estimator, lmplz, is a C++ build with Boost); NLTK's `KneserNeyInterpolated` estimates, but each of
its queries scans every stored context (47 ms a query on Multi30k's English side, and beam search asks
millions). So this module computes NLTK's very estimator, interpolated KN with an absolute discount
(0.1 by default, NLTK's) and continuation counts below the top order, with its counts tabled once,
so that a query is a few dictionary look-ups; tests/test_kneser_ney.py checks it against NLTK.

Tokens are any hashable values (NPMT uses target ids); sentences are padded with n-1 `bos` in front
and n-1 `eos` behind, as NLTK's `padded_everygram_pipeline` pads them.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Hashable, Iterable, Sequence

# log10 probability of a word the model never saw (KenLM scores a true <unk> near this, -100).
UNSEEN_LOG10 = -99.0


class KneserNeyLM:
    def __init__(self, sentences: Iterable[Sequence[Hashable]], bos: Hashable, eos: Hashable, order: int = 3,
                 discount: float = 0.1):
        if order < 2:
            raise ValueError(f"a Kneser-Ney model needs order >= 2 (its unigrams are continuation counts), not {order}")
        self.order, self.discount, self.bos, self.eos = order, discount, bos, eos
        # counts[k][context] = Counter of the words that follow `context` (k-1 tokens), k = 1..order
        self.counts = [None] + [defaultdict(Counter) for _ in range(order)]
        for sentence in sentences:
            padded = [bos] * (order - 1) + list(sentence) + [eos] * (order - 1)
            for k in range(1, order + 1):
                for i in range(len(padded) - k + 1):
                    self.counts[k][tuple(padded[i:i + k - 1])][padded[i + k - 1]] += 1
        # Continuation counts from the order above: cont[k][(context, w)] = #distinct u with u+context+w
        # seen; cont_total[k][context] = #distinct (u, w) around it.
        self.cont = [None] + [Counter() for _ in range(order)]
        self.cont_total = [None] + [Counter() for _ in range(order)]
        for k in range(1, order):
            for context, following in self.counts[k + 1].items():
                rest = context[1:]
                self.cont_total[k][rest] += len(following)
                for word in following:
                    self.cont[k][rest, word] += 1
        self._cache: dict = {}

    def prob(self, word: Hashable, context: Sequence[Hashable]) -> float:
        context = tuple(context)[-(self.order - 1):]
        if not context:
            total = self.cont_total[1][()]
            return self.cont[1][(), word] / total if total else 0.0
        following = self.counts[len(context) + 1].get(context)
        if not following:                                     # an unseen context backs off entirely
            return self.prob(word, context[1:])
        if len(context) + 1 == self.order:
            seen, total = following[word], sum(following.values())
        else:
            seen, total = self.cont[len(context) + 1][context, word], self.cont_total[len(context) + 1][context]
        if not total:
            return self.prob(word, context[1:])
        alpha = max(seen - self.discount, 0.0) / total
        gamma = self.discount * len(following) / total
        return alpha + gamma * self.prob(word, context[1:])

    def log10_prob(self, word: Hashable, context: Sequence[Hashable]) -> float:
        key = (tuple(context)[-(self.order - 1):], word)
        if key not in self._cache:
            p = self.prob(word, key[0])
            self._cache[key] = math.log10(p) if p > 0 else UNSEEN_LOG10
        return self._cache[key]

    def log10_prob_of(self, words: Sequence[Hashable], context: Sequence[Hashable]) -> float:
        """log10 p of `words` following `context`, word by word (the context slides along)."""
        history, total = list(context), 0.0
        for word in words:
            total += self.log10_prob(word, history)
            history.append(word)
        return total
