from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import TINY, write_copy_corpus
from nmtrepro.core.files import read_lines
from nmtrepro.core.pos import POS_VOCAB
from nmtrepro.models import build_model
from nmtrepro.models.layers import dropout, recording_heads

from nmtrepro.core.vocab import IndexedData, Vocab, save_indexed
from nmtrepro.training import memory
from nmtrepro.training.batching import bucket_length, collate, fixed_rows, fixed_shapes, token_batches
from nmtrepro.training.criterion import label_smoothed_loss, model_loss, output_agreement
from nmtrepro.training.schedule import constant, inverse_sqrt

ROOT = Path(__file__).resolve().parents[1]


def test_label_smoothing_matches_torch_definition():
    torch.manual_seed(0)
    logits, target = torch.randn(7, 11), torch.randint(0, 11, (7,))
    loss, nll = label_smoothed_loss(logits, target, 0.1)
    assert torch.allclose(loss, F.cross_entropy(logits, target, label_smoothing=0.1, reduction="sum"))
    assert torch.allclose(nll, F.cross_entropy(logits, target, reduction="sum"))


def test_label_smoothing_zero_is_plain_nll():
    logits, target = torch.randn(3, 5), torch.tensor([0, 4, 2])
    loss, nll = label_smoothed_loss(logits, target, 0.0)
    assert torch.allclose(loss, nll)


def smoothed_loss_by_autograd(logits, target, epsilon, real):
    """torch's own label-smoothed cross-entropy, in fp32 at least, differentiated by autograd: what the
    hand-written backward of SmoothedCrossEntropy must match."""
    flat = logits.to(torch.promote_types(logits.dtype, torch.float32)).flatten(0, -2)
    loss, nll = (F.cross_entropy(flat, target.flatten(), label_smoothing=smoothing, reduction="none").view(target.shape)
                 for smoothing in (epsilon, 0.0))
    return loss.where(real, 0.0).sum(), nll.where(real, 0.0).sum()


def smoothed_loss_gradients(loss_fn, logits, target, real, epsilon=0.1, weights=(0.7, 1.3)):
    """Values and the logits' gradient of weights[0] * loss + weights[1] * NLL (both outputs carry one)."""
    leaf = logits.detach().clone().requires_grad_()
    loss, nll = loss_fn(leaf, target, epsilon, real)
    (weights[0] * loss + weights[1] * nll).backward()
    return loss.detach(), nll.detach(), leaf.grad


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_smoothed_loss_gradient_is_autograds_with_padding_and_a_gold_token_twice(epsilon):
    torch.manual_seed(0)
    logits, target = torch.randn(3, 4, 9, dtype=torch.float64) * 3, torch.randint(0, 9, (3, 4))
    target[0, :2] = 5
    real = torch.rand(3, 4) > 0.3
    ours = smoothed_loss_gradients(label_smoothed_loss, logits, target, real, epsilon)
    reference = smoothed_loss_gradients(smoothed_loss_by_autograd, logits, target, real, epsilon)
    for a, b in zip(ours, reference):
        assert a.dtype == torch.float64 and torch.allclose(a, b, atol=1e-12)
    assert ours[2][~real].abs().sum() == 0 and ours[2][real].abs().sum() > 0


def test_smoothed_loss_compiled_backward_is_the_eager_one_on_bf16_logits():
    """Compiled, the gold tokens' gradient is a comparison with the vocabulary's indices (fused into the
    one pass), eager a scatter: the two must agree; the loss sums stay fp32 and the gradient is bf16."""
    torch.manual_seed(0)
    logits, target = (torch.randn(2, 5, 40) * 3).bfloat16(), torch.randint(0, 40, (2, 5))
    real = torch.rand(2, 5) > 0.3
    compiled = torch.compile(label_smoothed_loss, dynamic=True, fullgraph=True)
    ours = smoothed_loss_gradients(compiled, logits, target, real)
    eager = smoothed_loss_gradients(label_smoothed_loss, logits, target, real)
    reference = smoothed_loss_gradients(smoothed_loss_by_autograd, logits, target, real)
    assert [t.dtype for t in ours] == [torch.float32, torch.float32, torch.bfloat16]
    for a, b, c in zip(ours, eager, reference):
        assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-3)
        assert torch.allclose(b.float(), c.float(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("padded", [True, False])
def test_smoothed_loss_kernels_are_the_eager_loss(padded):
    """`fast: loss` compiles the two passes over the logits alone, inside the hand-written Function: the
    same sums and gradient as eager, with padding masked or at real positions only (real None)."""
    torch.manual_seed(0)
    logits, target = (torch.randn(2, 5, 40) * 3).bfloat16(), torch.randint(0, 40, (2, 5))
    real = torch.rand(2, 5) > 0.3 if padded else None
    kernels = smoothed_loss_gradients(lambda *args: label_smoothed_loss(*args, kernels=True), logits, target, real)
    eager = smoothed_loss_gradients(label_smoothed_loss, logits, target, real)
    assert [t.dtype for t in kernels] == [torch.float32, torch.float32, torch.bfloat16]
    for a, b in zip(kernels, eager):
        assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_dropout_keeps_one_minus_p_of_the_units_scaled_and_routes_the_gradient_through_them(dtype):
    torch.manual_seed(0)
    x = torch.ones(200_001, dtype=dtype, requires_grad=True)
    y = dropout(x, 0.1, True)
    kept = y != 0
    assert y.dtype == dtype and abs(kept.float().mean().item() - 0.9) < 0.003
    assert torch.allclose(y[kept].float(), torch.tensor(1 / 0.9), rtol=1e-2)
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())          # d(x * mask / (1 - p)) / dx at x = 1 is y
    torch.manual_seed(0)
    assert torch.equal(dropout(x, 0.1, True), y)    # the seed fixes the mask
    assert dropout(x, 0.1, False) is x and dropout(x, 0.0, True) is x


def test_output_agreement_by_hand():
    """Two heads over a 3-token sentence whose last token is padding (Li et al. 2018, Eq. 8 negated).
    Head 1 outputs (1, 0) then (0, 1), head 2 (1, 0) then (0, -1): flattened over the two real tokens
    they are (1, 0, 0, 1) and (1, 0, 0, -1), cosine 0; the padding row (huge) must not count. With the
    two self-similarities (1) the mean over the 2 x 2 pairs is 1/2; a second sentence whose heads are
    equal adds 1; a row without a sentence (a fixed shape's padding) adds nothing."""
    outputs = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [50.0, 50.0]], [[1.0, 0.0], [0.0, -1.0], [-9.0, 3.0]]],
                            [[[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]], [[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]]]])
    pad = torch.tensor([[False, False, True], [False, False, False]])
    assert torch.isclose(output_agreement(outputs, pad, torch.tensor([True, True])), torch.tensor(1.5))
    assert torch.isclose(output_agreement(outputs, pad, torch.tensor([True, False])), torch.tensor(0.5))


def test_disagreement_adds_lambda_times_the_mean_agreement_of_encoder_layers():
    torch.manual_seed(0)
    plain = build_model({**TINY, "src_vocab": 12, "tgt_vocab": 12})
    disreg = build_model({**TINY, "src_vocab": 12, "tgt_vocab": 12, "disagreement": 0.5})
    disreg.load_state_dict(plain.state_dict())      # DisReg adds no weights
    src = torch.tensor([[4, 5, 6, Vocab.eos], [7, 8, Vocab.eos, 0]])
    prev, target = torch.tensor([[1, 4, 5], [1, 6, 0]]), torch.tensor([[4, 5, Vocab.eos], [6, Vocab.eos, 0]])
    base_loss, base_nll = model_loss(plain, {"src": src}, prev, target, 0.1)
    loss, nll = model_loss(disreg, {"src": src}, prev, target, 0.1)
    with recording_heads([layer.self_attn.sublayer for layer in plain.encoder]) as recorded:
        plain.encode(src)
    agreement = torch.stack([output_agreement(calls[0], src.eq(0), torch.ones(2, dtype=torch.bool)) for calls in recorded]).mean()
    assert len(recorded) == TINY["encoder_layers"]
    assert torch.isclose(nll, base_nll) and torch.isclose(loss, base_loss + 0.5 * agreement)
    loss.backward()                                  # the term reaches the encoder's projections
    attentions = [layer.self_attn.sublayer for layer in disreg.encoder]
    assert all(a.q_proj.weight.grad.abs().sum() > 0 and a.head_outputs is None for a in attentions)


def test_inverse_sqrt_schedule_warms_up_then_decays():
    assert inverse_sqrt(1, 1.0, 100) == 0.01
    assert inverse_sqrt(100, 1.0, 100) == 1.0
    assert inverse_sqrt(400, 1.0, 100) == 0.5
    noam_peak = 512 ** -0.5 * 4000 ** -0.5   # Vaswani et al.: d^-0.5 * min(s^-0.5, s * w^-1.5)
    assert abs(inverse_sqrt(8000, noam_peak, 4000) - 512 ** -0.5 * 8000 ** -0.5) < 1e-12


def test_constant_schedule_warms_up_then_stays():
    assert [constant(s, 1.0, 100) for s in (0, 1, 50, 100, 5000)] == [0.01, 0.01, 0.5, 1.0, 1.0]


def test_token_batches_respect_budget_and_cover_every_sentence():
    sizes = [3, 9, 4, 4, 12, 2, 7, 7, 5, 1]
    batches = token_batches(sizes, sizes, max_tokens=16, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(sizes)))
    for b in batches:
        assert len(b) == 1 or max(sizes[i] for i in b) * len(b) <= 16


def test_token_batches_depend_only_on_seed_and_epoch():
    sizes = list(range(1, 40))
    def plan(seed, epoch):
        return list(token_batches(sizes, sizes, 32, seed=seed, epoch=epoch))
    assert plan(1, 2) == plan(1, 2)
    assert plan(1, 2) != plan(1, 3)


def test_collate_pads_and_shifts_target(tmp_path):
    save_indexed(tmp_path / "s.bin", [[5, 6, 2], [7, 2]])
    save_indexed(tmp_path / "t.bin", [[8, 2], [9, 10, 11, 2]])
    b = collate(IndexedData(tmp_path / "s.bin"), IndexedData(tmp_path / "t.bin"), [0, 1])
    assert b.net_input == {"src": b.net_input["src"]}  # a plain Transformer reads the ids only
    assert b.net_input["src"].tolist() == [[5, 6, 2], [7, 2, Vocab.pad]]
    assert b.target.tolist() == [[8, 2, 0, 0], [9, 10, 11, 2]]
    assert b.prev.tolist() == [[1, 8, 0, 0], [1, 9, 10, 11]]
    assert b.tgt_tokens == 6


# -- bucketed shapes (issue 38: a compiled step meets few shapes) ------------------------------------
BUCKETS_TO_256 = [*range(4, 65, 4), *range(72, 129, 8), *range(144, 257, 16)]


def test_bucket_lengths_are_few_and_pad_above_64_by_at_most_an_eighth():
    lengths = np.arange(1, 257)
    buckets = bucket_length(lengths)
    assert sorted(set(buckets.tolist())) == BUCKETS_TO_256 and len(BUCKETS_TO_256) == 32
    assert (buckets >= lengths).all() and (buckets[:64] - lengths[:64] < 4).all()
    assert (buckets[64:] <= 1.125 * lengths[64:]).all()
    assert [bucket_length(n) for n in (1, 4, 5, 64, 65, 257)] == [4, 4, 8, 64, 72, 288]


def corpus_with_extras(tmp_path, n_train=48):
    """Sources of 2..60 words with two-token parser phrases and POS tags for each, and targets of 0.5 to
    1.6 times their source's length (2..60): a batch's two sides fall in different buckets."""
    corpus = write_copy_corpus(tmp_path / "data", n_train=n_train, lengths=(2, 60))
    rng = np.random.default_rng(0)
    src = IndexedData(corpus / "train.src.bin")
    lengths = np.clip((src.sizes * rng.uniform(0.5, 1.6, len(src))).astype(int), 3, 61)
    tgt = IndexedData.of([*rng.integers(4, 12, n - 1), Vocab.eos] for n in lengths)
    extras = {"spans": [[(a, min(a + 2, n - 1)) for a in range(0, n - 1, 2)] + [(n - 1, n)] for n in src.sizes],
              "pos": [torch.tensor([*rng.integers(4, len(POS_VOCAB), n - 1), POS_VOCAB.eos]) for n in src.sizes]}
    return src, tgt, extras


def test_every_bucketed_batch_lands_on_a_bucket_shape_within_the_token_budget(tmp_path):
    """Each side of a bucketed batch is padded to its own longest sentence's bucket, and the longer side's
    bucket times the sentences stays within the budget."""
    src, tgt, extras = corpus_with_extras(tmp_path)
    sides_differ = 0
    for max_tokens in (64, 256, 1000):
        batches = token_batches(src.sizes, tgt.sizes, max_tokens, seed=1, epoch=0, buckets=True)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        for indices in batches:
            batch = collate(src, tgt, indices, extras, bucketed=True)
            src_length, tgt_length = batch.net_input["src"].size(1), batch.target.size(1)
            assert src_length == bucket_length(max(src.sizes[i] for i in indices))
            assert tgt_length == bucket_length(max(tgt.sizes[i] for i in indices))
            assert len(indices) == 1 or len(indices) * max(src_length, tgt_length) <= max_tokens
            sides_differ += src_length != tgt_length
            width = batch.net_input.pop("span_width").size(1)  # the parser phrases' bound, as a shape
            assert all(t.shape[:2] == (len(indices), src_length) for t in batch.net_input.values())
            assert batch.prev.shape == batch.target.shape == (len(indices), tgt_length)
            assert batch.tgt_tokens == sum(tgt.sizes[i] for i in indices)
            spans = batch.net_input["spans"]
            assert width in BUCKETS_TO_256 and (spans[..., 1] - spans[..., 0]).max() <= width < src_length + 8
    assert sides_differ


def test_bucketed_batches_of_wmt_lengths_are_mostly_real_tokens():
    """The planner sorts by the longer side's bucket before the lengths, so that a batch's sentences share
    it: on newstest2012's lengths (words x 1.3 for BPE) at 4,096 tokens in fixed shapes, sorting by
    target length first left 37 % of the padded target positions and 35 % of the source's padding
    (docs/measurements.md, "Padding"); now about a fifth."""
    src, tgt = (IndexedData.of([5] * min(int(len(line.split()) * 1.3), 255) + [Vocab.eos]
                               for line in read_lines(ROOT / "data" / "wmt" / f"newstest2012-{name}.txt.gz"))
                for name in ("src.en", "ref.de"))
    padded = np.zeros(2)
    for indices in token_batches(src.sizes, tgt.sizes, 4096, seed=0, buckets=True):
        batch = collate(src, tgt, indices, bucketed=True, fixed=4096)
        padded += batch.target.numel(), batch.net_input["src"].numel()
    real = np.array([tgt.sizes.sum(), src.sizes.sum()]) / padded
    assert (real > 0.75).all(), real


def test_fixed_shapes_cover_every_batch_the_planner_makes_and_its_halves(tmp_path):
    """CUDA graphs (fast: graphs) replay the shapes of `fixed_shapes`, each recorded once: every batch the
    planner makes, and the halves an out-of-memory retry makes of it, must land on one of them within
    the token budget; the rows without a sentence hold no token that counts."""
    src, tgt, extras = corpus_with_extras(tmp_path, n_train=200)
    for max_tokens in (64, 256, 1000):
        shapes = fixed_shapes(max_tokens, 61)
        full = {(max(1, max_tokens // max(source, target)), source, target) for _, source, target in shapes}
        planned = []
        for indices in token_batches(src.sizes, tgt.sizes, max_tokens, seed=1, epoch=0, buckets=True):
            for part in [indices, *memory.halves(indices)]:
                batch = collate(src, tgt, part, extras, bucketed=True, fixed=max_tokens)
                (rows, source), target = batch.net_input["src"].shape, batch.target.size(1)
                assert (rows, source, target) in shapes and (rows == 1 or rows * max(source, target) <= max_tokens)
                assert batch.net_input.pop("span_width").size(0) == rows
                assert all(t.shape[:2] == (rows, source) for t in batch.net_input.values())
                assert batch.prev.shape == batch.target.shape == (rows, target)
                blank = slice(len(part), None)
                assert batch.target[blank].eq(Vocab.pad).all() and batch.net_input["spans"][blank].eq(0).all()
                assert (batch.net_input["src"][blank, 0] == Vocab.eos).all() and (batch.prev[blank, 0] == Vocab.bos).all()
                assert batch.tgt_tokens == sum(tgt.sizes[i] for i in part)
                assert batch.src_tokens == sum(src.sizes[i] for i in part)
                planned += [(rows, source, target)] if part is indices else []
        assert sum(shape in full for shape in planned) > 0.7 * len(planned)  # most planned batches are full
        assert len(set(planned)) <= 2 * len({shape[1:] for shape in planned})  # few recordings a length pair
    assert fixed_rows(12, 64, 10_000) == 19 and fixed_rows(1, 64, 10_000) == 1 and fixed_rows(1, 300, 64) == 1


FAMILIES = {
    "transformer": {},
    "relative positions, directional": {"rel_pos_clip": 2, "directional": True},
    "disagreement": {"disagreement": 0.5},
    "phrase, n-grams": {"family": "phrase"},
    "phrase, parser": {"family": "phrase", "phrases": "parse"},
    "recurrence": {"family": "recurrence", "steps": 2},
    "recurrence, rnn encoder": {"family": "recurrence", "recurrence": "rnn", "integration": "encoder"},
    "diverse": {"family": "diverse", "heads": 4, "rec_heads": 1, "loc_heads": 1, "syn_heads": 1},
    "diverse, pos factor": {"family": "diverse", "pos_factor": 4},
    "gru_attention": {"family": "gru_attention"},
    "npmt": {"family": "npmt", "max_segment": 3, "reorder_window": 3},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_bucket_padding_changes_no_familys_loss_or_gradient(tmp_path, family):
    """Padding to a bucket's length, and to a fixed shape's rows without a sentence (all but NPMT, which
    stays eager on the fast path), gives the plain batch's loss and gradients."""
    src, tgt, extras = corpus_with_extras(tmp_path, n_train=12)
    spec = {**TINY, **FAMILIES[family], "src_vocab": 20, "tgt_vocab": 20}
    torch.manual_seed(0)
    model = build_model(spec).train()  # dropout 0: the forward is deterministic
    read = {name: values for name, values in extras.items() if name in model.config.extra_inputs}
    results = []
    for bucketed, fixed in [(False, None), (True, None)] + [(True, 10_000)] * (family != "npmt"):
        batch = collate(src, tgt, list(range(12)), read, bucketed=bucketed, fixed=fixed)
        model.zero_grad()
        loss, nll = model_loss(model, batch.net_input, batch.prev, batch.target, 0.1, static=fixed is not None)
        loss.backward()
        results.append((batch.target.shape, loss, nll, [p.grad.clone() for p in model.parameters()]))
    (plain_shape, *plain), *padded_runs = results
    for padded_shape, *padded in padded_runs:
        assert padded_shape[1] > plain_shape[1]  # the test pads something
        torch.testing.assert_close(padded[:2], plain[:2], rtol=1e-5, atol=1e-5)
        # Up to fp32 summation order; a gradient that is zero exactly (+PR's scorer bias before a softmax)
        # is rounding noise on both sides, ~1e-7 on some CPUs.
        for (name, _), a, b in zip(model.named_parameters(), padded[2], plain[2]):
            assert (a - b).norm() <= 1e-5 * b.norm() + 1e-6, name
    assert family == "npmt" or padded_runs[-1][0][0] == 19  # 7 rows without a sentence
