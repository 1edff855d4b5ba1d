import pytest
import torch

from conftest import TINY, decode_step_by_step
from nmtrepro.core.files import InputError
from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.models import build_model
from nmtrepro.models.size import parameter_counts


def batch(rows):
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True)


def test_forward_shapes(tiny_model):
    src = batch([[5, 6, 7, 2], [8, 2]])
    prev = batch([[1, 9, 10], [1, 11]])
    assert tiny_model(src, prev).shape == (2, 3, 24)


def test_source_padding_does_not_change_outputs(tiny_model):
    src, prev = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 9, 10]])
    padded = torch.tensor([[5, 6, 2, Vocab.pad, Vocab.pad]])
    assert torch.allclose(tiny_model(src, prev), tiny_model(padded, prev), atol=1e-5)


def test_decoder_is_causal(tiny_model):
    src = torch.tensor([[5, 6, 2]])
    a = tiny_model(src, torch.tensor([[1, 9, 10, 11]]))
    b = tiny_model(src, torch.tensor([[1, 9, 12, 13]]))
    assert torch.allclose(a[:, :2], b[:, :2], atol=1e-5)
    assert not torch.allclose(a[:, 2:], b[:, 2:], atol=1e-5)


def test_incremental_decoding_matches_full_forward(tiny_model):
    src = batch([[5, 6, 7, 2], [8, 2]])
    prev = torch.tensor([[1, 9, 10, 11, 12], [1, 13, 14, 15, 16]])
    enc = tiny_model.encode(src)
    assert torch.allclose(tiny_model.decode(prev, enc), decode_step_by_step(tiny_model, prev, enc), atol=1e-5)


def test_beam_search_with_cache_gives_same_hypotheses_as_without(tiny_model):
    torch.manual_seed(1)
    src = torch.randint(4, 20, (6, 7))
    src[:, -1] = Vocab.eos
    src[3, 4:] = Vocab.pad
    src[3, 3] = Vocab.eos
    cached = beam_search(tiny_model, {"src": src}, beam=4, max_len_b=8)
    plain = beam_search(tiny_model, {"src": src}, beam=4, max_len_b=8, use_cache=False)
    assert cached == plain
    assert any(len(h) > 0 for h in cached)


def test_beam_search_respects_length_limit(tiny_model):
    src = torch.tensor([[5, 6, 2]])
    hyp = beam_search(tiny_model, {"src": src}, beam=3, max_len_a=0.0, max_len_b=4)[0]
    assert len(hyp) <= 4 and Vocab.eos not in hyp


def test_beam_one_equals_greedy(tiny_model):
    src = torch.tensor([[5, 6, 7, 2]])
    enc, tokens = tiny_model.encode(src), [Vocab.bos]
    for _ in range(8):
        nxt = tiny_model.logits(tiny_model.decode(torch.tensor([tokens]), enc))[0, -1]
        nxt[[Vocab.pad, Vocab.bos]] = float("-inf")
        tokens.append(int(nxt.argmax()))
        if tokens[-1] == Vocab.eos:
            break
    greedy = [t for t in tokens[1:] if t != Vocab.eos]
    assert beam_search(tiny_model, {"src": src}, beam=1, max_len_a=0.0, max_len_b=8)[0] == greedy


def test_param_count_matches_paper_base_and_big_without_embeddings():
    # Neutron-style layers (paper A's code): 44.10M (Base) and 176.28M (Big) non-embedding parameters.
    for size, expected in (({}, 44_097_536), ({"d_model": 1024, "ffn": 4096, "heads": 16}, 176_275_456)):
        with torch.device("meta"):
            model = build_model({"family": "transformer", "src_vocab": 1, "tgt_vocab": 1, **size})
        assert parameter_counts(model)["non_embedding"] == expected


def test_unknown_family_and_option_fail_clearly():
    with pytest.raises(InputError, match="unknown model family 'transfomer'"):
        build_model({"family": "transfomer", "src_vocab": 5, "tgt_vocab": 5})
    with pytest.raises(InputError, match="no option"):
        build_model({**TINY, "src_vocab": 5, "tgt_vocab": 5, "d_modle": 3})


def test_post_norm_normalises_every_layer_output_and_decodes_incrementally():
    """pre_norm=False is Vaswani's (and paper A's) LN(x + f(x)): each encoder layer's output is normalised."""
    torch.manual_seed(0)
    model = build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24, "pre_norm": False}).eval()
    src = torch.randint(4, 20, (3, 7))
    out = model.encode(src)["out"]                         # no final LayerNorm: the last layer's LN(x + FFN)
    assert torch.allclose(out.mean(-1), torch.zeros(3, 7), atol=1e-5)
    assert torch.allclose(out.std(-1, unbiased=False), torch.ones(3, 7), atol=1e-3)
    prev = torch.randint(4, 24, (3, 5))
    enc = model.encode(src)
    assert torch.allclose(model.decode(prev, enc), decode_step_by_step(model, prev, enc), atol=1e-5)


def test_cached_position_encodings_equal_fresh_ones_at_every_offset():
    from nmtrepro.models.layers import _sinusoid_table, sinusoidal_positions

    fresh = _sinusoid_table(1200, 15)
    for length, offset in ((3, 0), (1, 7), (300, 900), (5, 1195)):  # the last two grow the cached table
        assert torch.equal(sinusoidal_positions(length, 15, offset), fresh[offset:offset + length])
    a, b = sinusoidal_positions(4, 15, 2), sinusoidal_positions(9, 15, 0)
    assert a.data_ptr() == b[2:].data_ptr()  # slices of one table, not a new computation per call
