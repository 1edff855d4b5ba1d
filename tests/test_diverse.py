import pytest
import torch

from conftest import TINY, decode_step_by_step
from nmtrepro.core.pos import POS_VOCAB
from nmtrepro.core.vocab import Vocab
from nmtrepro.models import build_model, warm_start_mismatch
from nmtrepro.models.diverse import DiverseConfig, LocalFeatures

# Paper D's Table I at TINY's 2 heads would leave no global head: these run at 4 heads of width 4.
SMALL = {**TINY, "family": "diverse", "heads": 4}
VARIANTS = {
    "rec": {"rec_heads": 1},
    "loc": {"loc_heads": 1},
    "syn": {"syn_heads": 1},
    "fusing": {"rec_heads": 1, "loc_heads": 1, "syn_heads": 1},
    "fusing_post_norm": {"rec_heads": 1, "loc_heads": 1, "syn_heads": 1, "pre_norm": False},
    "linguistic_features": {"pos_factor": 4},
}


def tiny_diverse_model(variant):
    torch.manual_seed(0)
    return build_model({**SMALL, "src_vocab": 20, "tgt_vocab": 24, **VARIANTS[variant]}).eval()


def source():
    """Two sentences of 6 and 3 tokens (EOS last) and their POS tags (EOS tagged, pads 0)."""
    src = torch.tensor([[5, 6, 7, 8, 9, Vocab.eos], [11, 12, Vocab.eos, 0, 0, 0]])
    pos = torch.tensor([[4, 11, 11, 19, 16, POS_VOCAB.eos], [8, 19, POS_VOCAB.eos, 0, 0, 0]])
    return src, pos


@pytest.mark.parametrize("groups, widths", [
    ({"rec_heads": 2}, {"global": 384, "rec": 128}),                 # paper D Table I, Base (8 heads of 64)
    ({"loc_heads": 2}, {"global": 384, "loc": 128}),
    ({"syn_heads": 3}, {"global": 320, "syn": 192}),
    ({"rec_heads": 2, "loc_heads": 2, "syn_heads": 2}, {"global": 128, "rec": 128, "loc": 128, "syn": 128}),
])
def test_group_widths_follow_table_1_and_sum_to_d(groups, widths):
    config = DiverseConfig(**groups)
    assert config.group_widths == widths and sum(widths.values()) == config.d_model


def test_heads_are_named_by_their_group_in_order():
    assert DiverseConfig(rec_heads=2, loc_heads=2, syn_heads=2).head_groups == \
        ["Global"] * 2 + ["Rec"] * 2 + ["Loc"] * 2 + ["Syn"] * 2
    assert DiverseConfig(syn_heads=3).head_groups == ["Global"] * 5 + ["Syn"] * 3
    assert DiverseConfig(pos_factor=64).head_groups == ["Global"] * 8


def test_bad_groups_fail_clearly():
    for options in ({"rec_heads": 4, "loc_heads": 4}, {"syn_heads": -1}, {"conv_width": 4},
                    {"pos_factor": 512}, {"pos_factor": 64, "syn_heads": 1}):
        with pytest.raises(ValueError):
            DiverseConfig(**options)


@pytest.mark.parametrize("variant", VARIANTS)
def test_source_padding_does_not_change_outputs(variant):
    model = tiny_diverse_model(variant)
    src, pos = torch.tensor([[5, 6, 2]]), torch.tensor([[4, 11, POS_VOCAB.eos]])
    prev = torch.tensor([[1, 9, 10]])
    padded, padded_pos = torch.tensor([[5, 6, 2, 0, 0]]), torch.tensor([[4, 11, POS_VOCAB.eos, 0, 0]])
    options = {"pos": pos} if model.config.extra_inputs else {}
    padded_options = {"pos": padded_pos} if model.config.extra_inputs else {}
    assert torch.allclose(model(src, prev, **options), model(padded, prev, **padded_options), atol=1e-5)


def test_the_convolution_never_reads_padding():
    torch.manual_seed(0)
    local = LocalFeatures(4, 5)
    x, pad = torch.randn(1, 6, 4), torch.tensor([[False, False, False, True, True, True]])
    noisy = x.clone()
    noisy[:, 3:] = 100.0
    assert torch.equal(local(x, pad), local(noisy, pad)) and not local(x, pad)[:, 3:].any()


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_matches_full_forward(variant):
    model = tiny_diverse_model(variant)
    src, pos = source()
    enc = model.encode(src, **({"pos": pos} if model.config.extra_inputs else {}))
    prev = torch.tensor([[1, 9, 10, 11, 12], [1, 13, 14, 15, 16]])
    assert torch.allclose(model.decode(prev, enc), decode_step_by_step(model, prev, enc), atol=1e-5)


def test_pos_tags_reach_the_encoder_and_are_required():
    model = tiny_diverse_model("syn")
    assert model.config.extra_inputs == ("pos",)
    src, pos = source()
    other = pos.clone()
    other[0, 1] = 5
    a, b = model.encode(src, pos)["out"], model.encode(src, other)["out"]
    assert not torch.allclose(a[0], b[0]) and torch.allclose(a[1], b[1])
    with pytest.raises(ValueError, match="needs the source POS tags"):
        model.encode(src)


def test_each_positioned_group_adds_eq_1_at_its_own_width_and_tags_as_large_as_words():
    """Under Fusing at tiny's sizes (d 128, four groups of 32) the global and syntax groups each get
    sin and cos of one frequency side by side (Eq. 1 at the group's width: relative, direction-aware
    scores need both), and the syntax group's positions vary along a sentence (a slice of the d-wide
    table gave it the lowest frequencies' cosines, >= 0.93 everywhere up to 40). The POS-tag vectors
    start as large as the word slice they are added to."""
    torch.manual_seed(0)
    model = build_model({**SMALL, "d_model": 128, "ffn": 256, "src_vocab": 20, "tgt_vocab": 24,
                         **VARIANTS["fusing"]}).eval()
    assert model.config.group_widths == {"global": 32, "rec": 32, "loc": 32, "syn": 32}
    src, pos = torch.randint(4, 20, (1, 41)), torch.randint(4, 15, (1, 41))
    full = model.input_representation(src, pos)[0]                      # (41, 128)
    with torch.no_grad():
        model.pos_embed.weight.zero_()
    untagged = model.input_representation(src, pos)[0]
    with torch.no_grad():
        model.src_embed.table.weight.zero_()
    positions = model.input_representation(src, pos)[0]                 # the positions alone
    tags, words = (full - untagged)[:, 96:], (untagged - positions)[:, 96:]
    assert 0.5 < tags.std() / words.std() < 2
    for group in (positions[:, :32], positions[:, 96:]):                # global, syntax
        pairs = group.view(41, 16, 2)
        assert torch.allclose(pairs.pow(2).sum(-1), torch.ones(41, 16), atol=1e-5)  # sin^2 + cos^2
    spread = positions[:, 96:].max(0).values - positions[:, 96:].min(0).values
    assert (spread > 0.5).sum() >= 8                                    # old slice: none of its 32


@pytest.mark.parametrize("variant", ["rec", "fusing"])
def test_a_diverse_model_holds_every_transformer_weight(variant):
    torch.manual_seed(0)
    plain = build_model({**SMALL, "family": "transformer", "src_vocab": 20, "tgt_vocab": 24}).state_dict()
    assert warm_start_mismatch(tiny_diverse_model(variant).state_dict(), plain) is None


def test_linguistic_features_concatenate_the_pos_factor_to_the_word_vector():
    """Sennrich & Haddow: [word vector's first d - N dims; N-wide POS factor] + positions, total d."""
    from nmtrepro.models.layers import sinusoidal_positions

    model = tiny_diverse_model("linguistic_features")
    assert model.config.extra_inputs == ("pos",) and not model.groups
    src, pos = source()
    x = model.src_embed.table(src) * model.src_embed.scale                    # (B, S, 16)
    expected = torch.cat([x[..., :12], model.pos_embed(pos) * model.src_embed.scale], -1) + sinusoidal_positions(6, 16)
    assert torch.allclose(model.input_representation(src, pos), expected, atol=1e-6)


def test_param_count_at_paper_size_counts_the_projections_and_the_group_layers():
    """Paper D's Table II/III #Param at paper size (post-norm, 32K BPE a side, tied softmax): Base holds
    44.10M beside its embeddings (76.86M in all; the paper's 97.35M / 77.9M imply other vocabularies);
    every grouped model adds Eq. 5's d x d projections, then its groups' layers. The paper prints +0.53M
    for Rec and Fusing and 0 for Loc and Syn (Table II), +0.1M / +0.2M (Table III): D_table2_params's note."""
    from nmtrepro.models.size import spec_parameter_counts

    vocab = {"src_vocab": 32000, "tgt_vocab": 32000}
    for size, d, group, base_non_embedding in (({"d_model": 512, "ffn": 2048, "heads": 8}, 512, 128, 44_095_488),
                                               ({"d_model": 1024, "ffn": 4096, "heads": 16}, 1024, 256, 176_271_360)):
        spec = {"family": "transformer", "pre_norm": False, **vocab, **size}
        base = spec_parameter_counts(spec)
        assert base["non_embedding"] == base_non_embedding and base["embedding"] == 64_000 * d
        rec = 2 * 3 * (2 * group * group + 2 * group) + 2 * group * group + group  # BiGRU, [fwd; bwd] -> d_r (Eq. 8-9)
        loc = 5 * group * group + group                                              # width-5 convolution (Eq. 10)
        syn = len(POS_VOCAB) * group                                                 # p_j (Eq. 12)
        heads = group // 64
        for groups, added in (({"rec_heads": heads}, rec), ({"loc_heads": heads}, loc),
                              ({"rec_heads": heads, "loc_heads": heads, "syn_heads": heads}, rec + loc + syn)):
            ours = spec_parameter_counts({**spec, "family": "diverse", **groups})["total"]
            assert ours - base["total"] == d * d + added, groups                    # + Eq. 5's projections
    assert spec_parameter_counts({"family": "diverse", "pos_factor": 10, "pre_norm": False, **vocab})["total"] \
        - 76_863_488 == len(POS_VOCAB) * 10                                         # LinguisticFeatures' factor
