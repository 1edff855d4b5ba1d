import pytest
import torch

from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.models import build_model
from nmtrepro.models.size import spec_parameter_counts


def run(model, src, prev):
    return model.logits(model.decode(prev, model.encode(src)))


def gru(**options):
    torch.manual_seed(0)
    spec = {"family": "gru_attention", "src_vocab": 20, "tgt_vocab": 24, "d_model": 16, "encoder_layers": 2,
            "decoder_layers": 2, "dropout": 0.0, **options}
    return build_model(spec).eval()


SRC = torch.tensor([[5, 6, 7, 8, 9, Vocab.eos], [11, 12, Vocab.eos, 0, 0, 0]])


@pytest.mark.parametrize("window", [0, 3])
def test_source_padding_does_not_change_outputs(window):
    model = gru(reorder_window=window)
    prev = torch.tensor([[Vocab.bos, 9, 10]])
    alone = run(model, SRC[1:, :3], prev)
    padded = run(model, SRC[1:], prev)
    assert torch.allclose(alone, padded, atol=1e-5)


@pytest.mark.parametrize("window", [0, 3])
def test_incremental_decoding_equals_full_decoding(window):
    model = gru(reorder_window=window)
    prev = torch.tensor([[Vocab.bos, 9, 10, 11], [Vocab.bos, 12, 13, 14]])
    enc = model.encode(SRC)
    full = model.decode(prev, enc)
    cache = {}
    steps = torch.cat([model.decode(prev[:, i:i + 1], enc, cache) for i in range(prev.size(1))], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)
    cached = beam_search(model, {"src": SRC}, beam=3, max_len_b=6)
    assert cached == beam_search(model, {"src": SRC}, beam=3, max_len_b=6, use_cache=False)


def test_tiny_overfit():
    model = gru().train()
    prev = torch.tensor([[Vocab.bos, 9, 10, 11], [Vocab.bos, 12, 13, 0]])
    target = torch.tensor([[9, 10, 11, Vocab.eos], [12, 13, Vocab.eos, 0]])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(100):
        optimizer.zero_grad()
        logits = run(model, SRC, prev)
        torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=0).backward()
        optimizer.step()
    assert beam_search(model.eval(), {"src": SRC}, beam=2) == [[9, 10, 11], [12, 13]]


def test_paper_sizes_count_what_the_layers_hold():
    """Paper C's LL baseline: 256 units, one GRU layer a side; the reordering layer adds tau * (tau * d) gates."""
    spec = {"family": "gru_attention", "src_vocab": 100, "tgt_vocab": 100, "d_model": 256, "encoder_layers": 1,
            "decoder_layers": 1}
    plain = spec_parameter_counts(spec)["total"]
    gru_layer = lambda d_in, d: 3 * (d_in * d + d * d + 2 * d)                       # noqa: E731
    expected = (100 * 256 + 2 * gru_layer(256, 256)                 # source embeddings, BiGRU
                + 3 * (512 * 256 + 256)                                # memory, bridge, [output; context] -> d
                + 100 * 256 + gru_layer(256, 256) + (256 * 100 + 100))  # target embeddings, GRU, softmax
    assert plain == expected
    assert spec_parameter_counts({**spec, "reorder_window": 6})["total"] - plain == 6 * 6 * 256
