import math
import random
from fractions import Fraction as F

import pytest

from nmtrepro.evaluation.kneser_ney import LMPLZ_FALLBACK, KneserNeyLM, discounts

# Bigram counts of HAND (sentences padded as <s> .. </s>):
#   <s> a 3, <s> d 2, <s> b 3, a </s> 1, d </s> 1, b </s> 2, a b 1, b c 2, a c 1, d c 1, c </s> 4
#   counts of counts t1..t4 = 5, 3, 2, 1: Y = 5/11, D(1) = 5/11, D(2) = 12/11, D(3+) = 23/11.
# Unigram adjusted counts (distinct left neighbours, <s> included): a 1, d 1, b 2 (<s>, a), c 3 (a, b, d),
#   </s> 4; t1..t4 = 2, 1, 1, 1: Y = 1/2, D(1) = 1/2, D(2) = 1/2, D(3+) = 1; sum 11; the vocabulary is
#   a b c d </s> <unk> (6), gamma() = (1/2 * 2 + 1/2 * 1 + 1 * 2) / 11 = 7/22.
HAND = [["a"], ["d"], ["b"], ["b"], ["a", "b", "c"], ["a", "c"], ["d", "c"], ["b", "c"]]
UNIFORM = F(7, 22) / 6                                                     # gamma() / |V| = 7/132
P1 = {"a": F(1, 22) + UNIFORM, "b": F(3, 22) + UNIFORM, "c": F(2, 11) + UNIFORM, "d": F(1, 22) + UNIFORM,
      "</s>": F(3, 11) + UNIFORM, "never-seen": UNIFORM}


def test_discounts_come_from_counts_of_counts_as_lmplz_estimates_them():
    lm = KneserNeyLM(HAND, "<s>", "</s>", order=2)
    assert lm.discounts[2] == pytest.approx([0, 5 / 11, 12 / 11, 23 / 11])
    assert lm.discounts[1] == pytest.approx([0, 0.5, 0.5, 1.0])
    assert lm.vocab_size == 6


def test_bigram_probabilities_equal_hand_computed_values():
    lm = KneserNeyLM(HAND, "<s>", "</s>", order=2)
    for word, p in P1.items():
        assert lm.prob(word, []) == pytest.approx(float(p)), word
    assert sum(P1.values()) == 1                                           # the exact fractions
    # after b: b c 2, b </s> 2 (sum 4), gamma(b) = D(2) * 2 / 4 = 6/11
    assert lm.prob("c", ["b"]) == pytest.approx(float((2 - F(12, 11)) / 4 + F(6, 11) * P1["c"]))   # 43/121
    assert lm.prob("a", ["b"]) == pytest.approx(float(F(6, 11) * P1["a"]))
    assert lm.prob("never-seen", ["b"]) == pytest.approx(float(F(6, 11) * UNIFORM))
    # after <s>: a 3, d 2, b 3 (sum 8), gamma(<s>) = (D(2) + 2 D(3+)) / 8 = 29/44; <s> a keeps its raw count
    assert lm.prob("a", ["<s>"]) == pytest.approx(float((3 - F(23, 11)) / 8 + F(29, 44) * P1["a"]))
    assert lm.prob("c", ["never-seen"]) == pytest.approx(float(P1["c"]))  # an unseen context backs off fully


def test_lower_orders_count_left_extensions_except_after_bos():
    lm = KneserNeyLM([["a", "b"], ["c", "b"], ["c", "b"], ["a", "b"], ["b"]] * 2 + [["b", "a"]], "<s>", "</s>",
                     order=3, discount_fallback=LMPLZ_FALLBACK)
    assert lm.adjusted[2][("a", "b")] == 1 and lm.adjusted[2][("c", "b")] == 1   # both only after <s>
    assert lm.adjusted[2][("<s>", "c")] == 4 and lm.adjusted[2][("b", "</s>")] == 3   # raw / a, c, <s> before
    assert lm.adjusted[3][("<s>", "c", "b")] == 4                                    # the top order: raw


def random_corpus(seed=0):
    """Zipf-distributed words, so that every order has n-grams seen once, twice and three times."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(300)]
    return [rng.choices(words, weights, k=rng.randint(1, 9)) for _ in range(400)]


@pytest.mark.parametrize("order", [2, 3])
def test_every_context_gives_a_distribution_over_the_vocabulary(order):
    sentences = random_corpus(order)
    lm = KneserNeyLM(sentences, "<s>", "</s>", order=order)
    words = sorted({w for s in sentences for w in s}) + ["</s>", "<unk>"]     # bos is never predicted
    for context in (["<s>"], ["<s>", "w0"], ["w0", "w1", "w0"], ["zz", "w0"], ["zz", "yy", "xx"], sentences[0]):
        assert sum(lm.prob(w, context) for w in words) == pytest.approx(1.0, abs=1e-12), context


def test_log10_of_a_segment_adds_up():
    lm = KneserNeyLM(random_corpus(), "<s>", "</s>")
    a, b, c = "w0", "w1", "w2"
    whole = lm.log10_prob_of([a, b, c], ["<s>", "<s>"])
    parts = lm.log10_prob(a, ["<s>", "<s>"]) + lm.log10_prob(b, ["<s>", a]) + lm.log10_prob(c, [a, b])
    assert whole == pytest.approx(parts) and whole == pytest.approx(math.log10(
        lm.prob(a, ["<s>"]) * lm.prob(b, ["<s>", a]) * lm.prob(c, [a, b])))


def test_a_corpus_too_small_for_the_closed_form_fails_unless_given_fallback_discounts():
    with pytest.raises(ValueError, match="cannot estimate Kneser-Ney discounts for 1-grams.*discount_fallback"):
        KneserNeyLM([["a", "b", "c"]], "<s>", "</s>")
    assert discounts([1, 1], 2, LMPLZ_FALLBACK) == (0.0, *LMPLZ_FALLBACK)


def test_order_below_two_is_refused():
    with pytest.raises(ValueError, match="order >= 2"):
        KneserNeyLM([["a"]], "<s>", "</s>", order=1)
