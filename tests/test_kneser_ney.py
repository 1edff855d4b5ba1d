import math
import random

import pytest
from nltk.lm import KneserNeyInterpolated
from nltk.lm.preprocessing import padded_everygram_pipeline

from nmtrepro.evaluation.kneser_ney import UNSEEN_LOG10, KneserNeyLM


def corpus(seed=0):
    rng = random.Random(seed)
    return [[rng.choice("abcdefg") for _ in range(rng.randint(1, 7))] for _ in range(60)]


@pytest.mark.parametrize("order", [2, 3, 4])
def test_probabilities_equal_nltks_interpolated_kneser_ney(order):
    sentences = corpus(order)
    train, vocab = padded_everygram_pipeline(order, sentences)
    reference = KneserNeyInterpolated(order)
    reference.fit(train, vocab)
    ours = KneserNeyLM(sentences, "<s>", "</s>", order=order)
    queries = [s + ["</s>"] for s in sentences[:15]] + [["g", "a", "a", "g", "b", "</s>"]]  # unseen n-grams too
    for sentence in queries:
        history = ["<s>"] * (order - 1)
        for word in sentence:
            assert ours.prob(word, history) == pytest.approx(reference.score(word, history[1 - order:]), abs=1e-12)
            history.append(word)


def test_distribution_sums_to_one_and_log10_of_a_segment_adds_up():
    sentences = corpus()
    lm = KneserNeyLM(sentences, "<s>", "</s>")
    words = sorted({w for s in sentences for w in s}) + ["<s>", "</s>"]   # KN gives "<s>" continuation mass
    for context in (["<s>", "<s>"], ["a", "b"], ["zz", "a"], ["zz", "yy"]):
        # nearly 1: NLTK's estimator (ours is the same) weighs lower orders by raw type counts, not quite
        # the continuation totals, so a distribution is off by a fraction of the discount
        assert sum(lm.prob(w, context) for w in words) == pytest.approx(1.0, abs=1e-3)
    whole = lm.log10_prob_of(["a", "b", "c"], ["<s>", "<s>"])
    parts = lm.log10_prob("a", ["<s>", "<s>"]) + lm.log10_prob("b", ["<s>", "a"]) + lm.log10_prob("c", ["a", "b"])
    assert whole == pytest.approx(parts) and whole == pytest.approx(math.log10(
        lm.prob("a", ["<s>", "<s>"]) * lm.prob("b", ["<s>", "a"]) * lm.prob("c", ["a", "b"])))
    assert lm.log10_prob("never-seen", ["a", "b"]) == UNSEEN_LOG10


def test_order_below_two_is_refused():
    with pytest.raises(ValueError, match="order >= 2"):
        KneserNeyLM([["a"]], "<s>", "</s>", order=1)
