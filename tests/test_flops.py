"""Training FLOPs (training/flops.py): the analytic count of a Transformer update, and torch's count of
any family, which agree for the Transformer and see a family's extra parts."""
from __future__ import annotations

import numpy as np
import pytest

from nmtrepro.models import build_model
from nmtrepro.training.flops import per_target_token, sentence_flops, update_flops


def test_flops_are_six_per_weight_and_token_plus_attention_and_output():
    model_spec = {"family": "transformer", "src_vocab": 10, "tgt_vocab": 10, "d_model": 8, "ffn": 16,
                  "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
    model = build_model(model_spec)
    encoder, decoder = 4 * 8 * 8 + 2 * 8 * 16, 6 * 8 * 8 + 2 * 8 * 16  # attention(s) + FFN weights
    cross_kv = 2 * 8 * 8                                               # the decoder's, over the source
    expected = 6 * ((encoder + cross_kv) * 2 + decoder * 3) + 12 * 8 * (2 * 2 + 3 * 3 + 3 * 2) + 6 * 8 * 10 * 3
    assert update_flops(model, model_spec, [2], [3]) == expected


def test_counted_flops_are_the_analytic_count_for_the_transformer_and_see_a_familys_extra_parts():
    """The counted FLOPs, fitted over the probes, are the analytic count of any lengths for the Transformer
    (whose FLOPs are of the fitted form), and +PR with parser phrases and the BiRNN count their phrase
    layers and GRUs on top of the same Transformer's."""
    base = {"family": "transformer", "src_vocab": 50, "tgt_vocab": 40, "d_model": 16, "ffn": 32, "heads": 2,
            "encoder_layers": 2, "decoder_layers": 1, "dropout": 0.0}
    src, tgt = [5, 17, 40, 3], [7, 13, 51, 3]
    fitted = per_target_token(sentence_flops(base), np.array(src), np.array(tgt))
    assert fitted * sum(tgt) == pytest.approx(update_flops(build_model(base), base, src, tgt), rel=1e-9)
    phrases = sentence_flops({**base, "family": "phrase", "phrases": "parse"})
    recurrence = sentence_flops({**base, "family": "recurrence", "recurrence": "rnn"})
    for extra in (phrases, recurrence):
        assert per_target_token(extra, np.array(src), np.array(tgt)) > 1.1 * fitted
