"""An interpolated modified Kneser-Ney n-gram language model for NPMT's beam search (paper C's "+LM": a
3-gram model of the English training side, weight lambda2 = 0.2 on its log10 score, as KenLM returns it).

Why not a library: the paper estimated its model with KenLM, whose pip package only queries (its
estimator, lmplz, is a C++ build with Boost), and NLTK's `KneserNeyInterpolated` is another estimator
(one absolute discount of 0.1). So this module estimates as lmplz does (Heafield et al. 2013, Chen &
Goodman 1998), with no pruning:

- sentences are `bos w1 .. wn eos`; the highest order keeps raw counts, and so does a lower-order
  n-gram that starts with `bos`; any other lower-order n-gram counts its distinct left extensions
  (the adjusted count a);
- each order n has three discounts from its counts of adjusted counts t_1..t_4 (Chen & Goodman's
  Eq. 26): Y = t_1 / (t_1 + 2 t_2), D(k) = k - (k+1) Y t_{k+1} / t_k for k = 1, 2 and 3+;
- p(w|c) = (a(cw) - D(a(cw))) / sum_x a(cx) + gamma(c) p(w|c'), gamma(c) = sum_k D(k) N_k(c) /
  sum_x a(cx), with N_k(c) the words after c with adjusted count k (3: 3 or more); a context never
  seen backs off with weight 1; unigrams interpolate with the uniform distribution over the vocabulary,
  which counts an unknown word (<unk>) and the sentence end but not `bos`.

Where the closed form fails (a t_k of 0, or a D(k) outside [0, k]: tiny corpora), lmplz stops unless
given --discount_fallback, and so does this class unless given `discount_fallback`.
Tokens are any hashable values (NPMT uses target ids). tests/test_kneser_ney.py checks hand-computed
values.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Hashable, Iterable, Sequence

# log10 of a probability of 0, which only a context whose every discount is 0 can give (KenLM's
# <s> carries the same stand-in, -99, in an ARPA file).
UNSEEN_LOG10 = -99.0
# lmplz's --discount_fallback defaults, for D(1), D(2), D(3+).
LMPLZ_FALLBACK = (0.5, 1.0, 1.5)


def discounts(adjusted: Iterable[int], order: int, fallback: Sequence[float] | None = None) -> tuple[float, ...]:
    """(0, D(1), D(2), D(3+)) of one order from its adjusted counts (Chen & Goodman's Eq. 26)."""
    t = Counter(count for count in adjusted if count <= 4)
    if all(t[k] for k in (1, 2, 3)):
        y = t[1] / (t[1] + 2 * t[2])
        amounts = tuple(k - (k + 1) * y * t[k + 1] / t[k] for k in (1, 2, 3))
        if all(0 <= d <= k for k, d in enumerate(amounts, 1)):
            return (0.0, *amounts)
    if fallback is None:
        raise ValueError(f"cannot estimate Kneser-Ney discounts for {order}-grams from counts of adjusted counts "
                         f"t1..t4 = {[t[k] for k in (1, 2, 3, 4)]} (a tiny corpus?); give discount_fallback, "
                         f"as lmplz --discount_fallback")
    return (0.0, *fallback)


class KneserNeyLM:
    def __init__(self, sentences: Iterable[Sequence[Hashable]], bos: Hashable, eos: Hashable, order: int = 3,
                 discount_fallback: Sequence[float] | None = None):
        if order < 2:
            raise ValueError(f"a Kneser-Ney model needs order >= 2 (its unigrams are continuation counts), not {order}")
        self.order, self.bos, self.eos = order, bos, eos
        raw = [Counter() for _ in range(order + 1)]               # raw[k][k-gram]
        for sentence in sentences:
            padded = (bos, *sentence, eos)
            for k in range(1, order + 1):
                for i in range(len(padded) - k + 1):
                    raw[k][padded[i:i + k]] += 1
        # adjusted[k][k-gram] = a; a lower-order n-gram never starts with bos after position 0, so every
        # (k+1)-gram is one left extension of its suffix
        self.adjusted = [Counter() for _ in range(order + 1)]
        self.adjusted[order] = raw[order]
        for k in range(1, order):
            self.adjusted[k].update({gram: count for gram, count in raw[k].items() if gram[0] == bos and k > 1})
            self.adjusted[k].update(gram[1:] for gram in raw[k + 1])
        self.vocab_size = len(self.adjusted[1]) + 1               # + <unk>; bos has no unigram
        self.discounts = [()] + [discounts(self.adjusted[k].values(), k, discount_fallback)
                                 for k in range(1, order + 1)]
        # total[k][context] = sum_x a(context x); gamma[k][context] = its interpolation weight
        self.total = [defaultdict(int) for _ in range(order + 1)]
        self.gamma = [defaultdict(float) for _ in range(order + 1)]
        for k in range(1, order + 1):
            for gram, count in self.adjusted[k].items():
                self.total[k][gram[:-1]] += count
                self.gamma[k][gram[:-1]] += self.discounts[k][min(count, 3)]
            for context, total in self.total[k].items():
                self.gamma[k][context] /= total
        self._cache: dict = {}

    def prob(self, word: Hashable, context: Sequence[Hashable]) -> float:
        """p(word | the last order-1 tokens of context), interpolated from the uniform distribution up."""
        context = tuple(context)[max(0, len(context) - self.order + 1):]
        p = 1.0 / self.vocab_size
        for k in range(1, len(context) + 2):
            history = context[len(context) - k + 1:]
            total = self.total[k].get(history)
            if total:                                             # an unseen context backs off with weight 1
                count = self.adjusted[k].get(history + (word,), 0)
                p = (count - self.discounts[k][min(count, 3)]) / total + self.gamma[k][history] * p
        return p

    def log10_prob(self, word: Hashable, context: Sequence[Hashable]) -> float:
        key = (tuple(context)[max(0, len(context) - self.order + 1):], word)
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
