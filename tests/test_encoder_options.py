"""Papers B and D's encoder baselines as options of every family: relative positions (Shaw et al. 2018,
`rel_pos_clip`) and DiSAN's directional masks (Shen et al. 2018, `directional`)."""
import math

import pytest
import torch

from conftest import TINY, decode_step_by_step
from nmtrepro.core.vocab import Vocab
from nmtrepro.models import build_model, warm_start_mismatch
from nmtrepro.models.layers import ModelConfig, MultiheadAttention, directional_mask, relative_positions
from nmtrepro.models.phrase import PhraseConfig
from nmtrepro.models.size import parameter_counts, spec_parameter_counts
from nmtrepro.planning.param_count import PAPER_A_VOCAB
from nmtrepro.training.criterion import model_loss

OPTIONS = {
    "rel_pos": {"rel_pos_clip": 2},
    "rel_pos_shared": {"rel_pos_clip": 2, "rel_pos_shared": True},
    "directional": {"directional": True},
    "both": {"rel_pos_clip": 2, "directional": True},
}


def tiny_model(options, pre_norm=True, **extra):
    torch.manual_seed(0)
    return build_model({**TINY, "src_vocab": 20, "tgt_vocab": 24, "pre_norm": pre_norm, **options, **extra}).eval()


def padded_source():
    """Sentences of 6, 3 and 1 tokens (EOS last), padded to 6."""
    return torch.tensor([[5, 6, 7, 8, 9, Vocab.eos], [10, 11, Vocab.eos, 0, 0, 0], [Vocab.eos, 0, 0, 0, 0, 0]])


def test_relative_position_index_is_the_clipped_distance_plus_k():
    expected = torch.tensor([[2, 3, 4, 4, 4],
                             [1, 2, 3, 4, 4],
                             [0, 1, 2, 3, 4],
                             [0, 0, 1, 2, 3],
                             [0, 0, 0, 1, 2]])
    assert torch.equal(relative_positions(5, 5, 2), expected)


@pytest.mark.parametrize("pre_norm", [True, False])
def test_zeroed_relative_tables_give_the_plain_models_output(pre_norm):
    """The explicit attention path (the value term is no SDPA input) matches SDPA when a^K = a^V = 0."""
    plain = tiny_model({}, pre_norm)
    relative = tiny_model({"rel_pos_clip": 2}, pre_norm)
    missing, unexpected = relative.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all(name.endswith(("rel_k", "rel_v")) for name in missing)
    with torch.no_grad():
        for name, table in relative.named_parameters():
            if name.endswith(("rel_k", "rel_v")):
                table.zero_()
    src, prev = padded_source(), torch.tensor([[1, 9, 10], [1, 11, 12], [1, 13, 14]])
    real = src.ne(Vocab.pad)
    assert torch.allclose(relative.encode(src)["out"][real], plain.encode(src)["out"][real], atol=1e-5)
    assert torch.allclose(relative(src, prev), plain(src, prev), atol=1e-5)


def test_relative_attention_follows_shaws_formula_by_hand():
    """One head, d = 2, k = 1, by the formula:
    e_ij = q_i.(k_j + a^K_clip(j-i)) / sqrt(d), z_i = sum_j alpha_ij (v_j + a^V_clip(j-i))."""
    torch.manual_seed(3)
    attn = MultiheadAttention(2, 1, rel_clip=1).eval()
    x = torch.randn(1, 4, 2)
    with torch.no_grad():
        out = attn(x, None)
        q, kv = attn.q_proj(x)[0], attn.kv_proj(x)[0]
        k, v = kv[:, :2], kv[:, 2:]
        a_k, a_v = attn.rel_k[0], attn.rel_v[0]                # (3, 2): rows for j - i = -1, 0, +1
        z = []
        for i in range(4):
            rows = [min(max(j - i, -1), 1) + 1 for j in range(4)]
            e = torch.stack([q[i] @ (k[j] + a_k[rows[j]]) / math.sqrt(2) for j in range(4)])
            alpha = e.softmax(0)
            z.append(sum(alpha[j] * (v[j] + a_v[rows[j]]) for j in range(4)))
        expected = attn.out_proj(torch.stack(z))
    assert torch.allclose(out[0], expected, atol=1e-6)


def test_directional_masks_never_leave_a_row_empty():
    """Forward heads' first token, backward heads' last real token, length-1 sentences and padding
    rows attend to themselves; every other row keeps exactly its earlier (or later) real tokens."""
    src = padded_source()
    pad = src.eq(Vocab.pad)
    mask = directional_mask(4, src.size(1), ~pad[:, None, None, :])   # (B, H, S, S)
    assert mask.shape == (3, 4, 6, 6) and bool(mask.any(-1).all())
    eye = torch.eye(6, dtype=torch.bool)
    ones, first, last = torch.ones(6, 6, dtype=torch.bool), torch.arange(6) == 0, torch.arange(6) == 5
    assert torch.equal(mask[0, 0], torch.tril(ones, -1) | (eye & first))   # forward head, full sentence
    assert torch.equal(mask[0, 3], torch.triu(ones, 1) | (eye & last))     # backward head
    assert torch.equal(mask[1, 2, 2], eye[2])                         # backward head, last real token
    assert torch.equal(mask[2, :, 0], eye[0].expand(4, -1))           # a one-token sentence: itself, every head
    assert not bool((mask[1, :, :3] & pad[1]).any())                  # real rows never see padding
    for options in OPTIONS.values():
        out = tiny_model(options, heads=4).encode(src)["out"]
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("rel_pos_clip", [0, 2])
def test_forward_heads_ignore_later_tokens_and_backward_heads_earlier_ones(rel_pos_clip):
    """Changing token 3 leaves the first layer's forward head unchanged at positions 0-3 and its
    backward head at positions 4-5 (seen through the head_outputs hook the head analysis uses)."""
    model = tiny_model({"directional": True, "rel_pos_clip": rel_pos_clip})
    attn = model.encoder[0].self_attn.sublayer
    heads = []
    for token in (8, 15):
        attn.head_outputs = []
        model.encode(torch.tensor([[5, 6, 7, token, 9, Vocab.eos]]))
        heads.append(attn.head_outputs[0][0])                          # (H, S, d_head)
    attn.head_outputs = None
    before, after = heads
    assert torch.allclose(before[0, :3], after[0, :3]) and not torch.allclose(before[0, 4:], after[0, 4:])
    assert torch.allclose(before[1, 4:], after[1, 4:]) and not torch.allclose(before[1, :3], after[1, :3])


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("variant", OPTIONS)
def test_source_padding_does_not_change_outputs(variant, pre_norm):
    model = tiny_model(OPTIONS[variant], pre_norm)
    src, prev = torch.tensor([[5, 6, 7, Vocab.eos]]), torch.tensor([[1, 9, 10]])
    padded = torch.tensor([[5, 6, 7, Vocab.eos, Vocab.pad, Vocab.pad]])
    assert torch.allclose(model(src, prev), model(padded, prev), atol=1e-5)


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("variant", OPTIONS)
def test_loss_and_gradients_stay_finite_with_padding_in_training(variant, pre_norm):
    model = tiny_model(OPTIONS[variant], pre_norm, dropout=0.1, attention_dropout=0.1).train()
    src = padded_source()
    prev = torch.tensor([[1, 9, 10, 11], [1, 12, 13, 0], [1, 14, 0, 0]])
    target = torch.tensor([[9, 10, 11, 2], [12, 13, 2, 0], [14, 2, 0, 0]])
    loss, _ = model_loss(model, {"src": src}, prev, target, 0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    if "rel_pos_clip" in OPTIONS[variant]:
        assert model.encoder[0].self_attn.sublayer.rel_v.grad.abs().sum() > 0


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("variant", OPTIONS)
def test_incremental_decoding_matches_full_forward(variant, pre_norm):
    model = tiny_model(OPTIONS[variant], pre_norm)
    prev = torch.tensor([[1, 9, 10, 11, 12], [1, 13, 14, 15, 16], [1, 17, 18, 19, 20]])
    enc = model.encode(padded_source())
    assert torch.allclose(model.decode(prev, enc), decode_step_by_step(model, prev, enc), atol=1e-5)


@pytest.mark.parametrize("family", ["transformer", "phrase"])
def test_the_variants_hold_every_plain_transformer_weight(family):
    plain = tiny_model({}).state_dict()
    for options in OPTIONS.values():
        variant = tiny_model(options, family=family).state_dict()
        assert warm_start_mismatch(variant, plain) is None, options


def test_relative_positions_add_key_and_value_tables_per_layer_and_head():
    """k = 16 at Base: 6 layers x 8 heads x 2 tables x 33 rows x 64 = 202,752 model (non-embedding) parameters."""
    plain = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB})
    relative = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, "rel_pos_clip": 16})
    directional = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, "directional": True})
    assert relative["non_embedding"] - plain["non_embedding"] == 6 * 8 * 2 * (2 * 16 + 1) * 64 == 202_752
    assert relative["embedding"] == plain["embedding"] and directional == plain
    tiny = parameter_counts(tiny_model({"rel_pos_clip": 2}))["total"] - parameter_counts(tiny_model({}))["total"]
    assert tiny == 2 * 2 * 2 * 5 * 8


def test_shared_relative_tables_are_one_pair_per_layer_read_by_every_head():
    """Shaw et al. share a^K and a^V across heads (paper D's Rel_PE): 6 layers x 2 tables x 33 x 64 =
    25,344 parameters at Base, and the output of per-head tables that all hold the shared one."""
    plain = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB})["total"]
    shared = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, "rel_pos_clip": 16,
                                    "rel_pos_shared": True})["total"]
    assert shared - plain == 6 * 2 * (2 * 16 + 1) * 64 == 25_344
    one, per_head = tiny_model(OPTIONS["rel_pos_shared"]), tiny_model(OPTIONS["rel_pos"])
    state = {name: (value.expand_as(per_head.state_dict()[name]) if name.endswith(("rel_k", "rel_v")) else value)
             for name, value in one.state_dict().items()}
    per_head.load_state_dict(state)
    src, prev = padded_source(), torch.tensor([[1, 9, 10]] * 3)
    assert torch.allclose(one(src, prev), per_head(src, prev), atol=1e-6)


def test_bad_encoder_options_fail_clearly():
    with pytest.raises(ValueError, match="rel_pos_clip"):
        ModelConfig(rel_pos_clip=-1)
    with pytest.raises(ValueError, match="even number of heads"):
        ModelConfig(d_model=12, heads=3, directional=True)
    with pytest.raises(ValueError, match="needs rel_pos_clip > 0"):
        ModelConfig(rel_pos_shared=True)
    with pytest.raises(ValueError, match="rel_pos_clip"):
        PhraseConfig(rel_pos_clip=-1)                                  # the subclass runs the base checks too
    with pytest.raises(ValueError, match="encoder self-attention"):
        MultiheadAttention(16, 2, rel_clip=2)(torch.randn(1, 3, 16), None, cache={})
