import pytest
import torch

from conftest import TINY, decode_step_by_step
from nmtrepro.core.vocab import Vocab
from nmtrepro.data.parse import flat_spans, pad_spans, tokens_per_phrase
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.models import build_model
from nmtrepro.models.phrase import (PhraseAttention, PhraseBuilder, PhraseConfig, ResidueCombiner, gather_index,
                                    gather_tokens, ngram_spans)
from nmtrepro.models.size import spec_parameter_counts
from nmtrepro.planning.param_count import PAPER_A_VOCAB
from nmtrepro.training.batching import collate
from nmtrepro.training.criterion import model_loss

VARIANTS = {
    "mean": {"glance": "mean", "attentive": False, "transparent_attention": False},
    "max": {"glance": "max", "attentive": False, "transparent_attention": False},
    "max_attn": {"glance": "max", "attentive": True, "transparent_attention": False},
    "max_attn_ta": {"glance": "max", "attentive": True, "transparent_attention": True},
    "max_attn_ta_parse": {"glance": "max", "attentive": True, "transparent_attention": True,
                          "phrases": "parse"},
    # +Max+Attn+TA as the authors' code builds it: all four of its differences from the printed text.
    "code": {"glance": "max", "attentive": True, "transparent_attention": True, "combiner": "residue_ln",
             "token_transparent": True, "pool_gate": "sigmoid", "pre_norm": False},
}
# Each difference of the authors' code alone, over the printed +Max+Attn+TA (the ablation rows).
CODE_FORMS = {"residue_ln": {"combiner": "residue_ln"}, "token_transparent": {"token_transparent": True},
              "sigmoid_gate": {"pool_gate": "sigmoid"}, "post_norm": {"pre_norm": False}}


def tiny_phrase_model(variant, **extra):
    torch.manual_seed(0)
    spec = {**TINY, "family": "phrase", "src_vocab": 20, "tgt_vocab": 24, **VARIANTS[variant], **extra}
    return build_model(spec).eval()


def source():
    """Two sentences of 7 and 4 tokens (EOS last), and parser-like spans tiling each one."""
    src = torch.tensor([[5, 6, 7, 8, 9, 10, Vocab.eos], [11, 12, 13, Vocab.eos, 0, 0, 0]])
    spans = pad_spans([[(0, 2), (2, 6), (6, 7)], [(0, 3), (3, 4)]])
    return src, spans


@pytest.mark.parametrize("seql, ntok, n_phrases, last_real", [(13, 3, 5, 1), (30, 5, 6, 5), (50, 8, 7, 2)])
def test_ngram_segmentation_of_paper_lengths(seql, ntok, n_phrases, last_real):
    # The "13 -> 3x5, 30 -> 5x6, 50 -> 8x7" read as ntok x phrases.
    assert tokens_per_phrase(seql) == ntok
    index, mask = gather_index(ngram_spans(1, seql), torch.zeros(1, seql, dtype=torch.bool))
    assert index.shape == mask.shape == (1, n_phrases, ntok)
    assert index[0, 0].tolist() == list(range(ntok))
    assert mask[0, :-1].all() and mask[0, -1].sum() == last_real


def test_ngram_masks_source_padding_and_fully_padded_chunks():
    pad = torch.tensor([[False] * 13, [False] * 4 + [True] * 9])
    _, mask = gather_index(ngram_spans(2, 13), pad)
    assert mask[1].sum(-1).tolist() == [3, 1, 0, 0, 0]
    assert (~mask.any(-1)).tolist() == [[False] * 5, [False, False, True, True, True]]


def test_token_phrases_are_the_tokens_themselves():
    # phrases="token" (the one-token diagnostic): each position its own phrase, so every pooled
    # phrase vector at the embedding level is that token's own vector.
    model = tiny_phrase_model("max", phrases="token")
    src, _ = source()
    x = model.src_embed(src)
    index, mask = gather_index(ngram_spans(2, src.size(1), ntok=1), src.eq(Vocab.pad))
    assert index.shape == (2, 7, 1) and index[..., 0].tolist() == [list(range(7))] * 2
    assert mask[..., 0].tolist() == (~src.eq(Vocab.pad)).tolist()
    pooled = model.builders[0](x, index, mask)                     # (B, P=S, d)
    assert torch.equal(pooled[0], x[0]) and torch.equal(pooled[1, :4], x[1, :4])


def test_spans_batch_into_phrases_with_missing_ones_zero():
    corpus = [[(0, 2), (2, 6), (6, 7)], [(0, 3), (3, 4)], [(0, 1)]]
    for spans in (corpus, flat_spans(corpus)):  # as decoding reads them, and as a training corpus holds them
        assert pad_spans(spans, [2, 0]).tolist() == [[[0, 1], [0, 0], [0, 0]], [[0, 2], [2, 6], [6, 7]]]
        assert pad_spans(spans, [0, 1]).tolist() == [[[0, 2], [2, 6], [6, 7]], [[0, 3], [3, 4], [0, 0]]]
    assert pad_spans(corpus[:2]).tolist() == pad_spans(flat_spans(corpus[:2])).tolist()


def test_parse_spans_pad_to_empty_masked_phrases():
    src, spans = source()
    index, mask = gather_index(spans, src.eq(Vocab.pad))
    assert index.shape == (2, 3, 4)
    assert index[0, 1].tolist() == [2, 3, 4, 5] and mask[0, 1].all()
    assert mask[1].sum(-1).tolist() == [3, 1, 0]


@pytest.mark.parametrize("glance", ["mean", "max"])
def test_glance_ignores_pads_and_zeroes_empty_phrases(glance):
    builder = PhraseBuilder(4, glance, attentive=False)
    x = torch.tensor([[[1.0, -1, 2, 0], [3, -2, 0, 0], [-5, -5, -5, -5]]])  # third position is padding
    index, mask = gather_index(torch.tensor([[[0, 3], [3, 3]]]), torch.tensor([[False, False, True]]))
    out = builder(x, index, mask)
    expected = [3.0, -1, 2, 0] if glance == "max" else [2.0, -1.5, 1, 0]
    assert out[0, 0].tolist() == expected and out[0, 1].tolist() == [0.0] * 4


def test_attentive_weights_sum_to_one_over_real_tokens_only():
    torch.manual_seed(0)
    builder = PhraseBuilder(8, "max", attentive=True)
    pad = torch.tensor([[False] * 5 + [True] * 3])
    index, mask = gather_index(ngram_spans(1, 8), pad)   # chunks [0, 3) [3, 5)+pad [6, 8) all pad
    tokens = gather_tokens(torch.randn(1, 8, 8), index)
    weights = builder.token_weights(tokens, tokens.amax(2), mask)
    assert torch.allclose(weights.sum(-1), torch.tensor([[1.0, 1.0, 0.0]]))
    assert (weights[~mask] == 0).all() and (weights[mask] > 0).all()


def test_pad_vectors_do_not_leak_into_phrases():
    torch.manual_seed(0)
    builder = PhraseBuilder(8, "max", attentive=True)
    x, pad = torch.randn(1, 6, 8), torch.tensor([[False] * 4 + [True] * 2])
    index, mask = gather_index(ngram_spans(1, 6), pad)
    changed = x.clone()
    changed[0, 4:] = 100.0
    assert torch.equal(builder(x, index, mask), builder(changed, index, mask))


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_and_encoder_state_shapes(variant):
    model = tiny_phrase_model(variant)
    src, spans = source()
    enc = model.encode(src, spans)
    levels = 2 if VARIANTS[variant]["transparent_attention"] else 1
    n_phrases = 3  # n-gram: ntok 3 over width 7; parse: most spans in the batch
    assert enc["phrases"].shape == (2, levels, n_phrases, 16)
    assert enc["phrase_pad"].shape == (2, n_phrases)
    assert model(src, torch.tensor([[1, 9, 10], [1, 11, 12]]), spans=spans).shape == (2, 3, 24)


@pytest.mark.parametrize("variant", ["mean", "max_attn_ta"])
def test_source_padding_does_not_change_outputs(variant):
    model = tiny_phrase_model(variant)
    src, prev = torch.tensor([[5, 6, 7, 8, Vocab.eos]]), torch.tensor([[1, 9, 10]])
    padded = torch.tensor([[5, 6, 7, 8, Vocab.eos, Vocab.pad]])  # same ntok (3), one more pad
    assert torch.allclose(model(src, prev), model(padded, prev), atol=1e-5)


def test_parse_phrases_need_spans():
    with pytest.raises(ValueError, match="spans"):
        tiny_phrase_model("max_attn_ta_parse").encode(source()[0])


def test_transparent_attention_weights_are_7x6_softmax_columns():
    six = build_model({**TINY, "family": "phrase", "src_vocab": 5, "tgt_vocab": 5,
                       "encoder_layers": 6, "decoder_layers": 6})
    assert six.level_weights.shape == (7, 6)
    small = tiny_phrase_model("max_attn_ta")
    with torch.no_grad():
        small.level_weights.normal_()
    weights = small.transparent_weights()
    assert weights.shape == (3, 2) and torch.allclose(weights.sum(0), torch.ones(2))
    assert tiny_phrase_model("max_attn").level_weights is None


def hand_built_combination(**options):
    """A PhraseAttention with d 3, FFN 2, one head, whose weights are small integers and halves: one
    phrase, so the attention output o is that phrase whatever the query."""
    attention = PhraseAttention(PhraseConfig(d_model=3, ffn=2, heads=1, **options)).eval()
    with torch.no_grad():
        attention.attn.q_proj.weight.copy_(torch.eye(3))
        attention.attn.kv_proj.weight.copy_(torch.eye(3).repeat(2, 1))
        attention.attn.out_proj.weight.copy_(torch.eye(3))
        attention.w3.weight.copy_(torch.tensor([[1.0, 0, 0, -1, 0, 0], [0, 2, 0, 0, 1, 0]]))
        attention.w3.bias.copy_(torch.tensor([0.5, -1.0]))
        attention.w4.weight.copy_(torch.tensor([[2.0, -1], [1, 1], [0, 1]]))
        attention.w4.bias.copy_(torch.tensor([0.25, -0.5, 0]))
    return attention


def eq8_by_hand(x, o):
    """W4 sigmoid(W3[x | o] + b3) + b4 with hand_built_combination's weights, for x, o of width 3."""
    hidden = torch.sigmoid(torch.stack([x[0] - o[0] + 0.5, 2 * x[1] + o[1] - 1.0]))
    return torch.stack([2 * hidden[0] - hidden[1] + 0.25, hidden[0] + hidden[1] - 0.5, hidden[1]])


def layer_norm_by_hand(v):
    """LayerNorm at initialisation (weight 1, bias 0, eps 1e-5) of one vector."""
    return (v - v.mean()) / torch.sqrt(v.var(unbiased=False) + 1e-5)


X, PHRASE = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([3.0, 1.0, 0.0])


def test_printed_combination_is_eq8():
    out = hand_built_combination()(X[None, None], PHRASE[None, None], torch.tensor([[False]]))
    assert torch.allclose(out[0, 0], eq8_by_hand(X, PHRASE), atol=1e-6)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_residue_ln_combination_is_the_authors_residue_combiner(pre_norm):
    # Neutron's ResidueCombiner: LN(x + o + Eq. 8); a pre-norm stack normalises x before it.
    combiner = ResidueCombiner(PhraseConfig(d_model=3, ffn=2, heads=1, combiner="residue_ln", pre_norm=pre_norm))
    combiner.sublayer = hand_built_combination()
    out = combiner.eval()(X[None, None], PHRASE[None, None], torch.tensor([[False]]))
    x = layer_norm_by_hand(X) if pre_norm else X
    assert torch.allclose(out[0, 0], layer_norm_by_hand(x + PHRASE + eq8_by_hand(x, PHRASE)), atol=1e-5)


def test_printed_combiner_is_the_default_and_post_norm_residue_ln_has_its_parameters():
    assert PhraseConfig().combiner == "paper"

    def shapes(**options):
        model = tiny_phrase_model("max_attn_ta", **options)
        return [(name, p.shape) for name, p in model.named_parameters()]
    assert shapes(pre_norm=False) == shapes(pre_norm=False, combiner="residue_ln")
    # pre-norm, the combiner's own layer norm comes on top of the one that normalises its input
    extra = dict(shapes(combiner="residue_ln")).keys() - dict(shapes()).keys()
    assert sorted(extra) == [f"{side}.{i}.phrase_attn.in_norm.{w}" for side in ("decoder", "encoder")
                             for i in range(2) for w in ("bias", "weight")]
    with pytest.raises(ValueError, match="combiner"):
        PhraseConfig(combiner="residue")


def test_sigmoid_gate_pooling_is_the_authors_attn_combiner():
    # gates sigmoid(s_i) over the n real tokens, the weight they leave to the max glance; hand-set
    # scorer: hidden = sigmoid(x_i), s_i = hidden_0 - hidden_1.
    builder = PhraseBuilder(2, "max", attentive=True, gate="sigmoid")
    with torch.no_grad():
        builder.w1.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0]]))
        builder.w1.bias.zero_()
        builder.w2.weight.copy_(torch.tensor([[1.0, -1.0]]))
        builder.w2.bias.zero_()
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]]])              # the third position is padding
    index, mask = gather_index(torch.tensor([[[0, 3], [3, 3]]]), torch.tensor([[False, False, True]]))
    out = builder(x, index, mask)
    s = torch.sigmoid(torch.tensor([1.0, 0.0])) - torch.sigmoid(torch.tensor([0.0, 2.0]))
    gates = torch.sigmoid(s) / 2                                          # 2 real tokens
    glance = torch.tensor([1.0, 2.0])                                     # max over the real tokens
    expected = gates[0] * x[0, 0] + gates[1] * x[0, 1] + (1 - gates.sum()) * glance
    assert torch.allclose(out[0, 0], expected, atol=1e-6) and out[0, 1].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="attentive"):
        PhraseConfig(attentive=False, pool_gate="sigmoid")


def encoder_token_levels(model, src):
    """The token levels of a phrase model's encoder: each encoder layer's input, then the encoder output."""
    levels = []
    hooks = [layer.register_forward_pre_hook(lambda _, args: levels.append(args[0])) for layer in model.encoder]
    hooks.append(model.encoder_norm.register_forward_hook(lambda _, args, out: levels.append(out)))
    enc = model.encode(src)
    for hook in hooks:
        hook.remove()
    return enc, levels


def test_token_transparent_attention_mixes_the_token_levels_per_decoder_layer():
    model = tiny_phrase_model("max_attn_ta", token_transparent=True)
    with torch.no_grad():
        model.token_level_weights.normal_()
    enc, levels = encoder_token_levels(model, source()[0])
    assert len(levels) == 3 and enc["tokens"].shape == (2, 2, 7, 16) and torch.equal(enc["out"], levels[-1])
    w = model.token_level_weights
    for j in range(2):                                       # decoder layer j: sum_k softmax_k(w)[k, j] level_k
        expected = sum(torch.exp(w[k, j]) / torch.exp(w[:, j]).sum() * levels[k] for k in range(3))
        assert torch.allclose(enc["tokens"][:, j], expected, atol=1e-5)


def test_decoder_layers_read_their_own_token_mix():
    # all weight on the top level: every decoder layer reads the encoder output, as without the option
    plain, mixed = tiny_phrase_model("max_attn_ta"), tiny_phrase_model("max_attn_ta", token_transparent=True)
    mixed.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():
        mixed.token_level_weights.zero_()[-1] = 50.0
    src, prev = source()[0], torch.tensor([[1, 9, 10], [1, 11, 12]])
    assert torch.allclose(mixed(src, prev), plain(src, prev), atol=1e-5)
    with torch.no_grad():
        mixed.token_level_weights[-1, 1] = -50.0              # the top decoder layer reads the embeddings
    assert not torch.allclose(mixed(src, prev), plain(src, prev), atol=1e-3)


FORMS = [(variant, {}) for variant in VARIANTS] + [("max_attn_ta", extra) for extra in CODE_FORMS.values()]


@pytest.mark.parametrize("variant, extra", FORMS, ids=[*VARIANTS, *CODE_FORMS])
def test_incremental_decoding_matches_full_forward(variant, extra):
    model = tiny_phrase_model(variant, **extra)
    src, spans = source()
    prev = torch.tensor([[1, 9, 10, 11, 12], [1, 13, 14, 15, 16]])
    enc = model.encode(src, spans)
    assert torch.allclose(model.decode(prev, enc), decode_step_by_step(model, prev, enc), atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_beam_search_with_cache_gives_same_hypotheses_as_without(variant):
    model = tiny_phrase_model(variant)
    src, spans = source()
    cached = beam_search(model, {"src": src, "spans": spans}, beam=3, max_len_b=6)
    plain = beam_search(model, {"src": src, "spans": spans}, beam=3, max_len_b=6, use_cache=False)
    assert cached == plain and any(cached)


def test_batches_carry_spans_to_the_model(copy_corpus):
    from nmtrepro.core.vocab import IndexedData

    src, tgt = (IndexedData(copy_corpus / f"train.{side}.bin") for side in ("src", "tgt"))
    spans = [[(0, len(src[i]) - 1), (len(src[i]) - 1, len(src[i]))] for i in range(len(src))]
    model = build_model({**TINY, "family": "phrase", "phrases": "parse", "src_vocab": 16, "tgt_vocab": 16})
    assert model.config.extra_inputs == ("spans",)
    batch = collate(src, tgt, [0, 1, 2], {"spans": spans}).to("cpu")
    assert set(batch.net_input) == {"src", "spans"} and batch.net_input["spans"].shape == (3, 2, 2)
    loss, _ = model_loss(model, batch.net_input, batch.prev, batch.target, 0.1)
    assert torch.isfinite(loss)


def test_param_count_matches_paper_base_and_big():
    # 88.1M and 264.1M: Neutron layers plus a target-vocabulary output bias (docs/papers.md, paper A's vocabulary).
    for size, paper in (({}, 88.1), ({"d_model": 1024, "ffn": 4096, "heads": 16}, 264.1)):
        counts = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, "output_bias": True, **size})
        assert round(counts["total"] / 1e6, 1) == paper


def test_param_count_of_phrase_variants_at_base():
    base = {"family": "phrase", **PAPER_A_VOCAB, "output_bias": True}
    counts = {name: spec_parameter_counts({**base, **options})["total"] for name, options in VARIANTS.items()}
    transformer = spec_parameter_counts({"family": "transformer", **PAPER_A_VOCAB, "output_bias": True})["total"]
    d, ffn = 512, 2048
    # 12 phrase attentions (4d^2) with combinations (W3, W4 with biases, layer norm); 7 scorers.
    assert counts["max"] - transformer == 12 * (4 * d * d + 2 * d * ffn + ffn + ffn * d + d + 2 * d)
    assert counts["max_attn"] - counts["max"] == 7 * (2 * d * d + d + d + 1)
    assert counts["max_attn_ta"] - counts["max_attn"] == 7 * 6   # paper footnote 4
    assert counts["mean"] == counts["max"] and counts["max_attn_ta_parse"] == counts["max_attn_ta"]


def test_phrase_model_learns_a_toy_task():
    torch.manual_seed(0)
    model = build_model({**TINY, "family": "phrase", "src_vocab": 12, "tgt_vocab": 12}).train()
    src = torch.randint(4, 12, (8, 6))
    src[:, -1] = Vocab.eos
    target = src.flip(1).roll(-1, 1)                       # reversed source, EOS last
    prev = torch.cat([torch.full((8, 1), Vocab.bos), target[:, :-1]], dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(src, prev).flatten(0, 1), target.flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
