import csv
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from conftest import TINY
from nmtrepro.core.vocab import Vocab
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.models import build_model
from nmtrepro.models.layers import run_bidirectional
from nmtrepro.models.recurrence import RecurrenceConfig, RecurrenceDecoderLayer
from nmtrepro.models.size import spec_parameter_counts
from nmtrepro.planning.param_count import PAPER_A_VOCAB

VARIANTS = {
    "birnn": {"recurrence": "rnn"},
    "birnn_3_layers": {"recurrence": "rnn", "rec_layers": 3},
    "biarn": {"recurrence": "arn", "steps": 3},
    "biarn_2_layers": {"recurrence": "arn", "steps": 4, "rec_layers": 2},
    "biarn_steps_J": {"recurrence": "arn", "steps": "J"},
    "gated_top": {"integration": "gated", "steps": 2},
    "gated_all": {"integration": "gated", "to_decoder": "all", "steps": 2},
    "stack_all": {"to_decoder": "all", "steps": 2},
    "multi_column": {"recurrence": "rnn", "integration": "encoder"},
    "post_norm": {"steps": 2, "pre_norm": False},
}


def tiny_recurrence_model(variant, **extra):
    torch.manual_seed(0)
    return build_model({**TINY, "family": "recurrence", "src_vocab": 20, "tgt_vocab": 24,
                        **VARIANTS[variant], **extra}).eval()


def source():
    """Two sentences of 6 and 3 tokens (EOS last), the second padded."""
    return torch.tensor([[5, 6, 7, 8, 9, Vocab.eos], [11, 12, Vocab.eos, 0, 0, 0]])


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_and_encoder_state_shapes(variant):
    model = tiny_recurrence_model(variant)
    src, prev = source(), torch.tensor([[1, 9, 10], [1, 11, 12]])
    enc = model.encode(src)
    steps = model.config.steps
    length = src.size(1) if model.config.recurrence == "rnn" or steps == "J" else steps
    assert enc["out"].shape == (2, 6, 16) and enc["rec"].shape == (2, length, 16)
    assert enc["rec_pad"].shape == (2, length)
    assert model(src, prev).shape == (2, 3, 24)


@pytest.mark.parametrize("steps", [1, 4, 8])
def test_arn_runs_exactly_T_steps_whatever_the_source_length(steps):
    model = tiny_recurrence_model("biarn", steps=steps)
    for width in (3, 11):
        enc = model.encode(torch.randint(4, 20, (2, width)))
        assert enc["rec"].shape[1] == steps and not enc["rec_pad"].any()


def test_arn_with_J_steps_masks_each_sentence_beyond_its_length():
    model = tiny_recurrence_model("biarn_steps_J")
    enc = model.encode(source())
    assert torch.equal(enc["rec_pad"], source().eq(Vocab.pad))


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("start", ["zeros", "given"])
def test_the_bidirectional_gru_computes_what_packing_computes(layers, start):
    """`run_bidirectional` runs each direction over the padded batch (no host read of the lengths):
    outputs and gradients are those of nn.GRU over the packed real positions, and zero at pads; a row
    of padding only (graphs' fixed_rows) gives zeros."""
    torch.manual_seed(0)
    gru = nn.GRU(6, 5, num_layers=layers, batch_first=True, bidirectional=True).double()
    x = torch.randn(5, 7, 6, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([7, 3, 1, 5, 0])
    pad = torch.arange(7) >= lengths[:, None]
    h0 = torch.randn(2 * layers, 5, 5, dtype=torch.float64) if start == "given" else None
    packed = pack_padded_sequence(x, lengths.clamp(min=1), batch_first=True, enforce_sorted=False)
    reference = pad_packed_sequence(gru(packed, h0)[0], batch_first=True, total_length=7)[0]
    reference = reference * (lengths > 0)[:, None, None]
    out = run_bidirectional(gru, x, pad, h0)
    assert torch.allclose(out, reference, atol=1e-12) and not out[pad].any()
    weights = torch.randn_like(out)
    expected = torch.autograd.grad((reference * weights).sum(), [x, *gru.parameters()])
    got = torch.autograd.grad((out * weights).sum(), [x, *gru.parameters()])
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(expected, got))


@pytest.mark.parametrize("variant", VARIANTS)
def test_source_padding_does_not_change_outputs(variant):
    model = tiny_recurrence_model(variant)
    src, prev = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 9, 10]])
    padded = torch.tensor([[5, 6, 2, Vocab.pad, Vocab.pad]])
    assert torch.allclose(model(src, prev), model(padded, prev), atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_matches_full_forward(variant):
    model = tiny_recurrence_model(variant)
    src, prev = source(), torch.tensor([[1, 9, 10, 11, 12], [1, 13, 14, 15, 16]])
    enc = model.encode(src)
    full, cache = model.decode(prev, enc), {}
    steps = [model.decode(prev[:, t:t + 1], enc, cache) for t in range(prev.size(1))]
    assert torch.allclose(full, torch.cat(steps, dim=1), atol=1e-5)


@pytest.mark.parametrize("variant", ["birnn", "biarn_steps_J", "gated_all", "multi_column"])
def test_beam_search_with_cache_gives_same_hypotheses_as_without(variant):
    model = tiny_recurrence_model(variant)
    with torch.no_grad():                                  # an untrained model would end every hypothesis at once
        model.tgt_embed.table.weight[Vocab.eos] = 0
    src = torch.randint(4, 20, (6, 7))
    src[:, -1] = Vocab.eos
    src[3, 3], src[3, 4:] = Vocab.eos, Vocab.pad
    cached = beam_search(model, {"src": src}, beam=3, max_len_b=6)
    plain = beam_search(model, {"src": src}, beam=3, max_len_b=6, use_cache=False)
    assert cached == plain and any(cached)


@pytest.mark.parametrize("variant, fed", [("biarn", [1]), ("stack_all", [0, 1]), ("gated_top", [1]),
                                          ("gated_all", [0, 1]), ("multi_column", [])])
def test_recurrence_reaches_the_top_or_every_decoder_layer(variant, fed):
    model = tiny_recurrence_model(variant)
    assert [i for i, layer in enumerate(model.decoder) if isinstance(layer, RecurrenceDecoderLayer)] == fed


def test_gate_values_lie_strictly_between_zero_and_one():
    layer = tiny_recurrence_model("gated_top").decoder[-1]
    d, r = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    lam = layer.gate_values(d, r)
    assert lam.shape == (2, 5, 16) and bool(((lam > 0) & (lam < 1)).all())


def test_bad_options_fail_clearly():
    for options, message in (({"recurrence": "lstm"}, "recurrence must be"), ({"steps": 0}, "steps must be"),
                             ({"steps": "K"}, "steps must be"), ({"rec_layers": 0}, "rec_layers"),
                             ({"integration": "encoder"}, "needs recurrence='rnn'"),
                             ({"to_decoder": "bottom"}, "to_decoder must be")):
        with pytest.raises(ValueError, match=message):
            RecurrenceConfig(**options)


def test_the_recurrence_model_holds_every_transformer_weight():
    from nmtrepro.models import warm_start_mismatch

    torch.manual_seed(0)
    base = build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24}).state_dict()
    for variant in VARIANTS:
        if variant != "post_norm":
            assert warm_start_mismatch(tiny_recurrence_model(variant).state_dict(), base) is None, variant


@pytest.mark.parametrize("pre_norm", [True, False])
def test_multi_column_model_starts_as_the_transformer_it_is_initialised_from(pre_norm):
    """Its [H_e; H_r] -> d projection starts as [I; 0] with no norm after it, so the warm start holds."""
    torch.manual_seed(0)
    base = build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24, "pre_norm": pre_norm}).eval()
    with torch.no_grad():                                  # a trained encoder's norms are not the identity
        for module in base.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5), module.bias.normal_()
    model = tiny_recurrence_model("multi_column", pre_norm=pre_norm)
    model.load_state_dict(base.state_dict(), strict=False)
    src, prev = source(), torch.tensor([[1, 9, 10], [1, 11, 12]])
    assert torch.allclose(model(src, prev), base(src, prev), atol=1e-5)


def test_a_zero_started_stack_starts_as_the_transformer_it_is_initialised_from():
    """zero_start: the stacked sublayer's output projection starts at zero, so the warm-started BiARN
    (pre-norm) computes its baseline's outputs; without it the random sublayer changes them."""
    torch.manual_seed(0)
    base = build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24}).eval()
    src, prev = source(), torch.tensor([[1, 9, 10], [1, 11, 12]])
    for zero_start in (True, False):
        model = tiny_recurrence_model("biarn", zero_start=zero_start)
        model.load_state_dict(base.state_dict(), strict=False)
        assert torch.allclose(model(src, prev), base(src, prev), atol=1e-5) == zero_start


def test_warm_start_diagnostics_shuffle_the_memory_and_rebuild_the_start(tmp_path):
    """The shuffled model decodes each sentence with its neighbour's recurrence memory (the source
    attention's memory untouched); the start is the baseline's weights with the new parts drawn from
    the training's seed, the same on every call."""
    from nmtrepro.analyses.warm_start import shuffled_memory, started
    from nmtrepro.training import checkpoint

    model, src = tiny_recurrence_model("biarn"), source()
    plain = model.encode(src)
    shuffled = shuffled_memory(tiny_recurrence_model("biarn")).encode(src)
    assert torch.equal(shuffled["rec"], plain["rec"].roll(1, 0)) and torch.equal(shuffled["out"], plain["out"])
    torch.manual_seed(5)
    base = build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24})
    checkpoint.save({"model_spec": {**TINY, "src_vocab": 20, "tgt_vocab": 24}, "model": base.state_dict()},
                    tmp_path / "base.pt")
    spec = {**TINY, "family": "recurrence", "src_vocab": 20, "tgt_vocab": 24, **VARIANTS["biarn"]}
    first, again = (started(spec, tmp_path / "base.pt", seed=3).state_dict() for _ in range(2))
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert all(torch.equal(first[k], v) for k, v in base.state_dict().items())


def test_multi_column_rnn_layers_have_no_ffn_and_the_recurrence_encoders_do():
    """Paper B names "six RNN layers" for Chen et al.'s encoder; Eq. 8's FFN belongs to its own."""
    assert all(layer.ffn is None for layer in tiny_recurrence_model("multi_column", rec_layers=6).recurrence)
    assert all(layer.ffn is not None for layer in tiny_recurrence_model("birnn_3_layers").recurrence)


def test_param_count_of_one_layer_biarn_at_paper_sizes():
    """Ours adds 8.93M to Base and 35.7M to Big; the paper prints +9.4M and +69.4M (the report explains)."""
    for size in ({}, {"d_model": 1024, "ffn": 4096, "heads": 16}):
        d, ffn = size.get("d_model", 512), size.get("ffn", 2048)
        base = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, **size})["total"]
        ours = spec_parameter_counts({"family": "recurrence", **PAPER_A_VOCAB, **size})["total"]
        gru = 3 * (2 * d * d + 2 * d)                       # one direction: input and hidden gates, two biases
        arn = 2 * (gru + 4 * d * d) + 2 * d * d + d         # two directions, their attentions, [fwd; bwd] -> d
        layer = arn + d * ffn + ffn + ffn * d + 2 * (2 * d)  # + FFN and two layer norms
        decoder = 4 * d * d + 2 * d                          # the top decoder layer's attention of H_r + norm
        assert ours - base == layer + decoder + 2 * d        # + the recurrence stack's final norm (pre-norm)


@pytest.mark.parametrize("analysis", ["B_table3_params", "B_table3_params_zh_en"])
def test_table3_vocabularies_give_the_papers_transformer_sizes(analysis):
    """Paper B's Table 3 prints Base and Big with each task's vocabulary: 88.0M and 264.1M on En-De,
    107.9M and 303.9M on Zh-En; the vocabulary sizes behind them must give all four."""
    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/papers/B.yaml").read_text())
    spec = config["analyses"][analysis]
    vocab = {key: spec["paper_size"][key] for key in ("src_vocab", "tgt_vocab")}
    papers = {row["row"]: float(row["value"]) for row in csv.DictReader(
        (Path(__file__).resolve().parents[1] / spec["paper_numbers"]).open(), delimiter="\t")}
    for row, size in (("Transformer Base", {}), ("Transformer Big", {"d_model": 1024, "ffn": 4096, "heads": 16})):
        ours = spec_parameter_counts({"family": "transformer", **vocab, **size})["total"] / 1e6
        assert round(ours, 1) == papers[row], row


def test_recurrence_model_learns_a_toy_task():
    torch.manual_seed(0)
    model = build_model({**TINY, "family": "recurrence", "steps": 4, "src_vocab": 12, "tgt_vocab": 12}).train()
    src = torch.randint(4, 12, (8, 6))
    src[:, -1] = Vocab.eos
    target = src.flip(1).roll(-1, 1)                       # reversed source, EOS last
    prev = torch.cat([torch.full((8, 1), Vocab.bos), target[:, :-1]], dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(src, prev).flatten(0, 1), target.flatten())
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1
