import itertools
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import nmtrepro.models.npmt as npmt_module
from nmtrepro.evaluation.segment_search import greedy
from nmtrepro.models.npmt import LinearLogProbs, SegmentDecoder, chunk_functions, swan_log_likelihood, swan_loss
from nmtrepro.models.rnn_encoder import SoftReordering

END = 1  # `$` in the tiny vocabularies below
TORCH_DIR = str(Path(torch.__file__).parent)


def masked_segments(src_lengths, tgt_lengths, max_seg, seed=0):
    """Random log-probabilities (B, S, T+1, L+1) in SWAN's layout, -inf where j + k > |y|."""
    g = torch.Generator().manual_seed(seed)
    B, S, T = len(src_lengths), max(src_lengths), max(tgt_lengths)
    seg = -torch.rand(B, S, T + 1, max_seg + 1, generator=g, dtype=torch.float64) * 3
    j = torch.arange(T + 1)[:, None]
    k = torch.arange(max_seg + 1)[None]
    beyond = (j + k)[None] > torch.tensor(tgt_lengths)[:, None, None]
    return seg.masked_fill(beyond[:, None], float("-inf"))


def brute_force(seg, n_src, n_tgt, max_seg):
    """log sum over every segmentation of n_tgt tokens into n_src segments of 0..L tokens."""
    terms = []
    for lengths in itertools.product(range(max_seg + 1), repeat=n_src):
        if sum(lengths) != n_tgt:
            continue
        start, total = 0, 0.0
        for t, k in enumerate(lengths):
            total = total + seg[t, start, k]
            start += k
        terms.append(total)
    return torch.logsumexp(torch.stack(terms), 0) if terms else torch.tensor(float("-inf"))


@pytest.mark.parametrize("max_seg", [1, 2, 3])
def test_swan_dp_matches_brute_force_enumeration(max_seg):
    src, tgt = [3, 1, 2, 3, 2], [4, 0, 2, 1, 3]
    seg = masked_segments(src, tgt, max_seg, seed=max_seg)
    log_lik, feasible = swan_log_likelihood(seg, torch.tensor(src), torch.tensor(tgt), max_seg)
    for b, (n, m) in enumerate(zip(src, tgt)):
        expected = brute_force(seg[b], n, m, max_seg)
        assert bool(feasible[b]) == (m <= n * max_seg)
        if feasible[b]:
            assert torch.allclose(log_lik[b], expected, atol=1e-10), (b, n, m)
        else:
            assert log_lik[b] == float("-inf") and expected == float("-inf")


def test_swan_gradient_matches_finite_differences():
    src, tgt = torch.tensor([3, 2]), torch.tensor([3, 2])
    seg = masked_segments([3, 2], [3, 2], 2, seed=5)
    finite = torch.isfinite(seg)
    values = seg[finite].clone().requires_grad_()

    def log_lik(v):
        full = torch.full_like(seg, float("-inf")).masked_scatter(finite, v)
        return swan_log_likelihood(full, src, tgt, 2)[0]

    assert torch.autograd.gradcheck(log_lik, (values,))


@pytest.mark.parametrize("max_seg", [1, 3])
def test_swan_gradient_is_the_enumerations_gradient_with_padded_positions_and_a_pair_without_segmentation(max_seg):
    """The DP's hand-written backward against autograd through `brute_force`: every entry of seg, a
    batch whose sentences stop at different source positions, one of them without a segmentation."""
    src, tgt = [4, 2, 3, 1], [4, 3, 0, 4]                                  # sentence 3: 4 > 1 * max_seg
    seg = masked_segments(src, tgt, max_seg, seed=7).requires_grad_()
    log_lik, feasible = swan_log_likelihood(seg, torch.tensor(src), torch.tensor(tgt), max_seg)
    (ours,) = torch.autograd.grad(swan_loss(log_lik, feasible), seg)
    expected = torch.zeros_like(seg)
    for b, (n, m) in enumerate(zip(src, tgt)):
        if m <= n * max_seg:
            leaf = seg.detach()[b].clone().requires_grad_()
            (-brute_force(leaf, n, m, max_seg)).backward()
            expected[b] = leaf.grad.nan_to_num()                           # -inf entries: no gradient
    assert feasible.tolist() == [True, max_seg >= 2, True, False]
    assert torch.allclose(ours, expected, atol=1e-12)
    assert ours.abs().sum() > 0 and ours[1, 2:].abs().sum() == 0        # positions past |x|: nothing


def tiny_decoder(seed=0, vocab=7, d_source=6, d_hidden=5):
    torch.manual_seed(seed)
    return SegmentDecoder(d_source, d_hidden, vocab, END).double()


def test_infeasible_pair_is_excluded_with_finite_loss_and_gradients():
    decoder, max_seg = tiny_decoder(), 2
    src, tgt = torch.tensor([1, 3, 2]), torch.tensor([4, 4, 3])          # sentence 0: 4 > 1 * 2
    h = torch.randn(3, 3, 6, dtype=torch.float64, requires_grad=True)
    y = torch.randint(2, 7, (3, 4))
    seg = decoder.segment_logprobs(h, y, src, tgt, max_seg)
    log_lik, feasible = swan_log_likelihood(seg, src, tgt, max_seg)
    assert feasible.tolist() == [False, True, True]
    assert log_lik[0] == float("-inf") and torch.isfinite(log_lik[1:]).all()
    loss = swan_loss(log_lik, feasible)
    assert torch.isfinite(loss)
    assert torch.allclose(loss, -log_lik[1:].sum())
    loss.backward()
    grads = [h.grad] + [p.grad for p in decoder.parameters()]
    assert all(torch.isfinite(g).all() for g in grads)
    assert h.grad[1:].abs().sum() > 0
    assert h.grad[0].abs().sum() == 0                                     # the excluded sentence


def test_loss_of_an_all_infeasible_batch_is_zero_not_nan():
    seg = masked_segments([1], [3], 1).requires_grad_()
    log_lik, feasible = swan_log_likelihood(seg, torch.tensor([1]), torch.tensor([3]), 1)
    loss = swan_loss(log_lik, feasible)
    loss.backward()
    assert loss == 0 and torch.isfinite(seg.grad).all()


@pytest.mark.parametrize("layers", [1, 2])
def test_segment_logprobs_match_a_step_by_step_loop_where_a_segmentation_can_use_them(layers):
    """Every (t, j, k) that some segmentation of y uses is scored as a GRU run step by step scores it; the
    others are -inf (never computed), which leaves SWAN's log-likelihood as the whole table gives it."""
    torch.manual_seed(1)
    decoder, max_seg = SegmentDecoder(6, 5, 7, END, layers=layers).double(), 3
    src, tgt = torch.tensor([4, 2, 3, 1]), torch.tensor([5, 2, 7, 4])         # the last has no segmentation
    h = torch.randn(4, 4, 6, dtype=torch.float64)
    y = torch.randint(2, 7, (4, 7))
    seg = decoder.segment_logprobs(h, y, src, tgt, max_seg)
    assert seg.shape == (4, 4, 8, 4)
    full = torch.full_like(seg, float("-inf"))
    for b, t, j, k in itertools.product(range(4), range(4), range(8), range(max_seg + 1)):
        if j + k > tgt[b]:
            continue
        states = list(torch.tanh(decoder.init(h[b, t])).view(layers, 1, 5))
        token, total = END, 0.0
        for m in range(k + 1):
            x = decoder.embed.weight[token][None]
            for i, cell in enumerate(decoder.cells):
                x = states[i] = cell(x, states[i])
            logp = torch.log_softmax(decoder.out(x)[0], -1)
            token = int(y[b, j + m]) if m < k else END
            total = total + logp[token]
        full[b, t, j, k] = total
        used = k == 0 or (t < src[b] and j <= t * max_seg and tgt[b] - j <= (src[b] - t) * max_seg)
        assert torch.allclose(seg[b, t, j, k], total) if used else seg[b, t, j, k] == float("-inf"), (b, t, j, k)
    assert torch.isinf(seg[3, :, :, 1:]).all()
    ours, ok = swan_log_likelihood(seg, src, tgt, max_seg)
    whole, _ = swan_log_likelihood(full, src, tgt, max_seg)
    assert ok.tolist() == [True, True, True, False] and torch.allclose(ours[:3], whole[:3], atol=1e-12)


def test_reordering_output_shape_and_pads_are_zero():
    layer = SoftReordering(4, window=3)
    e = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    h = layer(e, mask)
    assert h.shape == (2, 5, 4)
    assert (h[1, 3:] == 0).all()


def test_reordering_position_zero_sees_only_itself_and_zeros():
    d, tau = 4, 3
    layer = SoftReordering(d, window=tau)
    e = torch.randn(1, 5, d)
    mask = torch.ones(1, 5, dtype=torch.bool)
    h = layer(e, mask)
    w_last = layer.gates.weight[tau - 1, (tau - 1) * d:]                  # w_tau on the e_t slot
    expected = torch.tanh(torch.sigmoid(w_last @ e[0, 0]) * e[0, 0])
    assert torch.allclose(h[0, 0], expected, atol=1e-6)
    e2 = e.clone()
    e2[0, 1:] = torch.randn(4, d)
    assert torch.allclose(layer(e2, mask)[0, 0], h[0, 0])


def test_reordering_window_is_tau_positions_ending_at_t():
    layer = SoftReordering(4, window=3)
    e = torch.randn(1, 6, 4)
    mask = torch.ones(1, 6, dtype=torch.bool)
    h = layer(e, mask)
    inside, outside = e.clone(), e.clone()
    inside[0, 3] += 1.0                                                   # e_{t-tau+1} for t = 5
    outside[0, 2] += 1.0                                                  # e_{t-tau}
    assert not torch.allclose(layer(inside, mask)[0, 5], h[0, 5])
    assert torch.allclose(layer(outside, mask)[0, 5], h[0, 5])


def test_reordering_pads_do_not_change_real_positions():
    layer = SoftReordering(4, window=3)
    e = torch.randn(1, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    garbage = e.clone()
    garbage[0, 4:] = 100 * torch.randn(2, 4)
    assert torch.allclose(layer(e, mask), layer(garbage, mask))


@pytest.mark.parametrize("end_bias", [-1e4, 0.0, 1e4])
def test_greedy_segments_never_exceed_max_length(end_bias):
    decoder, max_seg = tiny_decoder(seed=2), 2
    with torch.no_grad():
        decoder.out.bias[END] = end_bias                                  # -1e4: `$` is never chosen
    src_lengths = torch.tensor([4, 2])
    segments = greedy(decoder, torch.randn(2, 4, 6, dtype=torch.float64), src_lengths, max_seg)
    assert [len(s) for s in segments] == [4, 2]                           # one segment per source word
    lengths = [len(seg) for sentence in segments for seg in sentence]
    assert max(lengths) <= max_seg
    assert all(tok != END for sentence in segments for seg in sentence for tok in seg)
    if end_bias < 0:
        assert set(lengths) == {max_seg}
    if end_bias > 0:
        assert set(lengths) == {0}


def test_greedy_never_emits_banned_tokens():
    decoder, banned = tiny_decoder(seed=3), (0, 2)
    with torch.no_grad():
        decoder.out.bias[list(banned)] = 1e4                              # the argmax unless banned
    segments = greedy(decoder, torch.randn(2, 4, 6, dtype=torch.float64), torch.tensor([4, 3]), 2, banned)
    emitted = {tok for sentence in segments for seg in sentence for tok in seg}
    assert emitted and not emitted & set(banned)


# -- the `npmt` family: training loss, greedy and beam search over segments --------------------------

from nmtrepro.study.config import experiments, load, validate  # noqa: E402
from nmtrepro.core.vocab import Vocab  # noqa: E402
from nmtrepro.evaluation.kneser_ney import LMPLZ_FALLBACK, KneserNeyLM  # noqa: E402
from nmtrepro.models import build_model  # noqa: E402
from nmtrepro.evaluation.segment_search import Hypothesis, merge, translate  # noqa: E402


def npmt(**options):
    torch.manual_seed(0)
    return build_model({"family": "npmt", "src_vocab": 12, "tgt_vocab": 12, "d_model": 16, "encoder_layers": 1,
                        "decoder_layers": 2, "max_segment": 3, "reorder_window": 3, "dropout": 0.0, **options})


def test_npmt_loss_is_swan_nll_without_eos_on_either_side_and_counts_infeasible_pairs():
    """The target's EOS is not emitted and the source's EOS is no input position (the authors strip it):
    sentence 0 has 2 positions, and sentence 1's 4 words exceed its 1 position * 3."""
    model = npmt()
    src = torch.tensor([[5, 6, Vocab.eos], [7, Vocab.eos, Vocab.pad]])
    target = torch.tensor([[8, 9, Vocab.eos, Vocab.pad, Vocab.pad], [8, 9, 10, 11, Vocab.eos]])
    loss, nll = model.sequence_loss({"src": src}, None, target, epsilon=0.1)
    assert loss is nll and torch.isfinite(loss) and model.infeasible_pairs == 1
    assert model.diagnostics("train")["infeasible_pairs_so_far"] == 1  # the training log's count, so far
    enc = model.encode(src)
    y = torch.tensor([[8, 9]])
    seg = model.decoder.segment_logprobs(enc["out"][:1], y, torch.tensor([2]), torch.tensor([2]), 3)
    assert torch.allclose(loss, -brute_force(seg[0], 2, 2, 3))
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


class HostReads(TorchDispatchMode):
    """Counts the ops that make the host wait for a GPU's queue to drain where our code calls them:
    reading a value back (`.item()`, `int(t)`, `bool(t)`) and sizing a result by the data (`nonzero`,
    a boolean mask). On a CPU they cost nothing, so only a count finds them. Not counted: what torch
    reads itself, and `.cpu()` or `.tolist()`, which dispatch nothing here."""
    DATA_SIZED = {"aten::nonzero", "aten::masked_select", "aten::_local_scalar_dense"}
    DISPATCH = ("_dynamo/eval_frame.py", "torch/_compile.py", "utils/_python_dispatch.py", "torch/_ops.py")

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        masks = [a for a in args[1] if isinstance(a, torch.Tensor) and a.dtype == torch.bool] \
            if func.name().startswith("aten::index") and len(args) > 1 and isinstance(args[1], (list, tuple)) else []
        if (func.name() in self.DATA_SIZED or masks) and not self.caller().startswith(TORCH_DIR):
            self.reads.append(func.name())
        return func(*args, **(kwargs or {}))

    def caller(self) -> str:
        """The file of the code that called the op, above the dispatch machinery."""
        frame = sys._getframe(2)
        while frame.f_code.co_filename.endswith(self.DISPATCH):
            frame = frame.f_back
        return frame.f_code.co_filename


def test_npmt_trains_without_reading_the_device_after_its_lengths():
    """The issue's fast path has no host sync inside the accumulation loop. NPMT's step reads its
    lengths to the host once, first (`sequence_loss`); its segment rows, their counts and the
    infeasible pairs were read from the GPU's results (`nonzero`, `.tolist()`, `int`) and are planned
    on the host from those lengths now: forward and backward dispatch none of the reads above."""
    model = npmt()
    src = torch.tensor([[5, 6, 7, 8, Vocab.eos], [7, 5, Vocab.eos, Vocab.pad, Vocab.pad],
                        [9, Vocab.eos, Vocab.pad, Vocab.pad, Vocab.pad]])
    target = torch.tensor([[8, 9, 10, Vocab.eos, Vocab.pad], [8, 9, 10, 11, Vocab.eos], [8, 9, 10, 11, Vocab.eos]])
    with HostReads() as reads:
        loss, _ = model.sequence_loss({"src": src}, None, target, epsilon=0.0)
        loss.backward()
    assert reads.reads == [] and model.infeasible_pairs == 1                # the third: 4 words > 1 x 3
    with HostReads() as reads:
        int(loss.detach())
    assert reads.reads == ["aten::_local_scalar_dense"]                   # what it counts


def test_npmt_overfits_two_pairs_and_decodes_them_greedily_and_by_beam():
    model = npmt(reorder_window=0)
    src = torch.tensor([[5, 6, 7, Vocab.eos], [8, 9, Vocab.eos, Vocab.pad]])
    target = torch.tensor([[10, 11, 4, Vocab.eos], [4, 4, Vocab.eos, Vocab.pad]])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(150):
        optimizer.zero_grad()
        model.sequence_loss({"src": src}, None, target, 0.0)[0].backward()
        optimizer.step()
    model.eval()
    words = [[10, 11, 4], [4, 4]]
    for beam in (1, 4):
        outputs = translate(model, src, beam=beam)
        assert [[tok for seg in segs for tok in seg] for segs in outputs] == words, beam
        assert all(seg for segs in outputs for seg in segs)                  # empty segments are not kept


def test_beam_merges_equal_strings_from_different_segmentations():
    merged = merge([((4, 5), Hypothesis(logp=-1.5, best=-1.5, segments=((4,), (5,)))),
                    ((4,), Hypothesis(logp=-1.0, best=-1.0, segments=((4,),))),
                    ((4, 5), Hypothesis(logp=-2.2, best=-2.2, segments=((4, 5),)))])
    assert set(merged) == {(4, 5), (4,)}
    both = merged[(4, 5)]                                  # [4][5] at -1.5 and [4 5] at -2.2
    assert both.logp == pytest.approx(float(torch.logaddexp(torch.tensor(-1.5), torch.tensor(-2.2))))
    assert both.best == pytest.approx(-1.5) and both.segments == ((4,), (5,))


@torch.no_grad()
def best_by_enumeration(model, src, word_bonus=0.0, lm=None, lm_weight=0.0):
    """The string that maximises Q(y) = log p(y|x) + word_bonus |y| + lm_weight log10 p_lm(y) over every
    string of allowed tokens (not pad, BOS or `$`) that SWAN can emit, p(y|x) by SWAN's exact sum."""
    enc = model.encode(src)
    positions, L = int((~enc["pad"]).sum()), model.config.max_segment
    allowed = [v for v in range(model.decoder.out.out_features) if v not in (Vocab.pad, Vocab.bos, Vocab.eos)]
    strings = [y for n in range(positions * L + 1) for y in itertools.product(allowed, repeat=n)]
    T = positions * L
    y = torch.tensor([list(s) + [Vocab.pad] * (T - len(s)) for s in strings])
    lengths = torch.tensor([len(s) for s in strings])
    h = enc["out"].expand(len(strings), -1, -1)
    seg = model.decoder.segment_logprobs(h, y, torch.full_like(lengths, positions), lengths, L)
    log_lik, _ = swan_log_likelihood(seg.double(), torch.full_like(lengths, positions), lengths, L)
    lm_scores = [lm.log10_prob_of(s, (lm.bos,)) if lm is not None else 0.0 for s in strings]
    q = [float(ll) + word_bonus * len(s) + lm_weight * lm_s for s, ll, lm_s in zip(strings, log_lik, lm_scores)]
    return strings[max(range(len(strings)), key=q.__getitem__)]


@pytest.mark.parametrize("word_bonus, lm_weight", [(0.0, 0.0), (1.2, 0.0), (1.2, 0.2), (0.0, 5.0), (4.0, 0.0)])
def test_unpruned_beam_search_maximises_the_objective_exhaustively(word_bonus, lm_weight):
    """With one-token segments a beam wider than every candidate prunes nothing (the step after the token
    forces `$`), so the search, merging equal strings, must return the exact maximiser of Q."""
    model = npmt(tgt_vocab=6, max_segment=1).eval()
    src = torch.tensor([[7, 9, 8, Vocab.eos]])
    lm = KneserNeyLM([[4, 5, 4], [5, 5], [4, 3, 5, 4], [4, 4]], Vocab.bos, Vocab.eos, discount_fallback=LMPLZ_FALLBACK)
    [segments] = translate(model, src, beam=10**6, word_bonus=word_bonus, lm=lm, lm_weight=lm_weight)
    best = best_by_enumeration(model, src, word_bonus, lm, lm_weight)
    assert sum(segments, ()) == best and len(segments) == len(best)        # one token a segment
    if word_bonus >= 4.0:
        assert len(best) == 3                                               # a large bonus: every position writes


def test_long_segments_the_word_bonus_prefers_survive_a_beam_of_two():
    """Every step scores word 4 at -0.48 and `$` at -0.98 (the others far below), whatever the state. The
    two most likely whole segments are () and (4,), so ranking whole segments by log p keeps only those;
    with the bonus charged inside the expansion the beam writes 4 4 4 at both positions, the best Q."""
    model = npmt(tgt_vocab=6, max_segment=3).eval()
    with torch.no_grad():
        model.decoder.out.weight.zero_()
        model.decoder.out.bias.copy_(torch.tensor([-30.0, -30.0, -0.5, -5.0, 0.0, -5.0]))
    src = torch.tensor([[7, 9, Vocab.eos]])
    [segments] = translate(model, src, beam=2, word_bonus=5.0)
    assert segments == [(4, 4, 4), (4, 4, 4)]
    assert sum(segments, ()) == best_by_enumeration(model, src, word_bonus=5.0)


def test_npmt_config_rejects_bad_options():
    with pytest.raises(ValueError, match="max_segment"):
        npmt(max_segment=0)
    with pytest.raises(ValueError, match="reorder_window"):
        npmt(reorder_window=-1)


def test_the_chunked_log_probs_match_a_linear_then_log_softmax_and_their_gradients():
    """SWAN's log-probabilities at chosen columns in chunks (here 4 rows, not dividing the 11; a column
    twice in a row) against torch's Linear + log_softmax + gather in double precision, value and the
    gradients of x, W and b; and under bf16 autocast, to bf16's precision."""
    torch.manual_seed(0)
    x, weight, bias, grad = (torch.randn(*shape, dtype=torch.float64) for shape in ((11, 5), (7, 5), (7,), (11, 3)))
    columns = torch.randint(0, 7, (11, 3))
    columns[0] = torch.tensor([2, 5, 2])

    def run(log_probs, *tensors):
        leaves = [t.clone().requires_grad_() for t in tensors]
        out = log_probs(*leaves)
        out.backward(grad.to(out.dtype))
        return [out] + [leaf.grad for leaf in leaves]

    ours = run(lambda x, w, b: LinearLogProbs.apply(x, w, b, columns, 4), x, weight, bias)
    reference = run(lambda x, w, b: torch.log_softmax(F.linear(x, w, b), -1).gather(1, columns), x, weight, bias)
    for a, b in zip(ours, reference):
        assert a.dtype == torch.float64 and torch.allclose(a, b, atol=1e-12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = run(lambda x, w, b: LinearLogProbs.apply(x, w, b, columns, 4), x.float(), weight.float(), bias.float())
        reference = run(lambda x, w, b: torch.log_softmax(F.linear(x, w, b).float(), -1).gather(1, columns),
                        x.float(), weight.float(), bias.float())
    for a, b in zip(ours, reference):
        assert a.dtype == torch.float32 and torch.allclose(a, b, rtol=2e-2, atol=2e-2)


def test_the_log_probs_on_their_compiled_path_train_as_the_eager_ones(monkeypatch):
    """The whole LinearLogProbs under bf16 autocast with the compiled chunk functions (a GPU's path,
    forced here; inductor compiles for the CPU), on chunks of two row counts (16 and the last 2: one
    dynamic graph), its backward run from another thread as a GPU's autograd runs it, against eager."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(50, 16), torch.randn(300, 16), torch.randn(300)
    columns = torch.randint(0, 300, (50, 2))

    def gradients():
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = LinearLogProbs.apply(*leaves, columns, 16)
        worker = threading.Thread(target=lambda: out.sum().backward())
        worker.start()
        worker.join()
        return [out] + [leaf.grad for leaf in leaves]

    eager = gradients()
    compiled = chunk_functions(True)
    monkeypatch.setattr(npmt_module, "chunk_functions", lambda on_gpu: compiled)
    for a, b in zip(gradients(), eager):
        assert a is not None and torch.allclose(a, b, rtol=1e-2, atol=1e-3)


def test_the_log_probs_keep_no_rows_by_vocabulary_tensor_for_backward():
    """What autograd saves for the segment decoder's log-probabilities: x, W, b, the columns and the (N,)
    log-normaliser, never the (N, V) logits or softmax that made SWAN's memory grow with the vocabulary."""
    decoder = SegmentDecoder(d_source=4, d_hidden=8, vocab_size=500, end_index=2)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        decoder.log_probs(torch.randn(3, 40, 8), torch.randint(0, 500, (3, 40, 2)))
    assert saved and max(saved) <= 500 * 8 < 120 * 500


def test_paper_c_at_paper_scale_trains_and_decodes_as_its_authors():
    """The LL baseline is plain log-likelihood and its beam ranks by mean log-probability (lenpen 1.0, not
    the Transformers' 0.6); NPMT's gradient is clipped at norm 10 (the authors' `-clip 10`)."""
    root = Path(__file__).resolve().parents[1]
    config, _ = load(root / "config.yaml", ["scale=paper"])
    validate(config, root / "workflow/schemas/config.schema.yaml")
    resolved = experiments(config)
    for name in ("ll_greedy_de_en", "ll_reorder_greedy_de_en"):
        assert resolved[name].train["label_smoothing"] == 0.0, name
    for name in ("ll_beam_de_en", "ll_reorder_beam_de_en"):
        assert resolved[name].decode["lenpen"] == 1.0, name
    for name in ("npmt_greedy_de_en", "npmt_no_reorder_greedy_de_en"):
        assert resolved[name].train["clip_norm"] == 10.0, name


# -- training as the authors do (issue 60) ------------------------------------------------------------
PAIRS = (torch.tensor([[5, 6, 7, Vocab.eos], [7, 5, Vocab.eos, Vocab.pad]]),
         torch.tensor([[8, 9, 10, 11, Vocab.eos], [8, 9, Vocab.eos, Vocab.pad, Vocab.pad]]))


def loss_and_grads(model, seed=0):
    torch.manual_seed(seed)
    model.zero_grad()
    loss, _ = model.sequence_loss({"src": PAIRS[0]}, None, PAIRS[1], epsilon=0.0)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_clean_posteriors_without_dropout_give_the_likelihoods_own_gradient():
    """sum over segments of posterior x d log p(segment) is d log p(y|x) (the EM identity): with no
    dropout to tell the two passes apart, the authors' two-pass form is the plain gradient."""
    plain = loss_and_grads(npmt().double().train())
    clean = loss_and_grads(npmt(clean_posteriors=True).double().train())
    assert torch.equal(plain[0], clean[0])
    for name, grad in plain[1].items():
        torch.testing.assert_close(clean[1][name], grad, rtol=1e-9, atol=1e-12)


def test_clean_posteriors_score_without_dropout_and_differentiate_with_it():
    """The loss is the NLL of the decoder without dropout; the gradient weighs the dropout pass's
    segment scores by the posteriors of the pass without it (the same dropout masks: seeded)."""
    model = npmt(dropout=0.5, clean_posteriors=True).double().train()
    model.encoder.eval()                                   # the encoder's own dropout out of the picture
    loss, grads = loss_and_grads(model, seed=3)
    with torch.no_grad():
        assert torch.equal(loss, model.eval().sequence_loss({"src": PAIRS[0]}, None, PAIRS[1], 0.0)[0])
    model.train().encoder.eval()
    src, target = PAIRS
    y = target.masked_fill(target.eq(Vocab.eos), Vocab.pad)
    rows = (model.encode(src)["out"], y, torch.tensor([3, 2]), torch.tensor([4, 2]), 3)
    with torch.no_grad():
        clean = model.decoder.eval().segment_logprobs(*rows)
    _, _, weights = npmt_module.swan_posteriors(clean.float(), torch.tensor([3, 2]), torch.tensor([4, 2]), 3)
    model.zero_grad()
    torch.manual_seed(3)
    seg = model.decoder.train().segment_logprobs(*rows).float()      # the DP's precision, as the model's
    (-(seg.masked_fill(weights == 0, 0) * weights).sum()).backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-9, atol=1e-12)
    eval_grads = loss_and_grads(npmt(dropout=0.5).double().eval())[1]
    assert not torch.allclose(grads["decoder.out.weight"], eval_grads["decoder.out.weight"])


def test_posteriors_sum_to_the_segments_a_sentence_writes():
    """Each source position writes one segment: the posteriors of a feasible pair sum to its source
    length, and the expected non-empty segments lie between |y| / L and |y|."""
    model = npmt().double().eval()
    src, target = PAIRS
    y = target.masked_fill(target.eq(Vocab.eos), Vocab.pad)
    seg = model.decoder.segment_logprobs(model.encode(src)["out"], y, torch.tensor([3, 2]), torch.tensor([4, 2]), 3)
    _, feasible, weights = npmt_module.swan_posteriors(seg, torch.tensor([3, 2]), torch.tensor([4, 2]), 3)
    assert feasible.all()
    torch.testing.assert_close(weights.sum((1, 2, 3)), torch.tensor([3.0, 2.0], dtype=torch.double))
    nonempty = weights[..., 1:].sum((1, 2, 3))
    assert (nonempty >= torch.tensor([4 / 3, 2 / 3]) - 1e-9).all() and (nonempty <= torch.tensor([4.0, 2.0])).all()


def test_source_embeddings_start_in_the_authors_range_or_pytorchs_normal():
    uniform = npmt(embed_init_range=0.05).encoder.embed.weight
    assert uniform.abs().max() <= 0.05 and uniform[Vocab.pad].eq(0).all()
    assert abs(uniform[Vocab.pad + 1:].std().item() - 0.05 / 3 ** 0.5) < 0.01
    assert 0.7 < npmt().encoder.embed.weight.std().item() < 1.3
    with pytest.raises(ValueError, match="embed_init_range"):
        npmt(embed_init_range=-0.1)


def test_hidden_dropout_sets_the_encoders_inner_and_output_dropout_apart_from_the_embeddings():
    model = npmt(dropout=0.35, hidden_dropout=0.0, encoder_layers=2)
    assert model.encoder.dropout == 0.35 and model.encoder.hidden_dropout == 0.0 and model.encoder.gru.dropout == 0.0
    assert model.decoder.dropout == 0.35
    default = npmt(dropout=0.35, encoder_layers=2)
    assert default.encoder.hidden_dropout == 0.35 and default.encoder.gru.dropout == 0.35
    with pytest.raises(ValueError, match="hidden_dropout"):
        npmt(hidden_dropout=1.0)


def test_diagnostics_report_the_reordering_layers_saturation_and_the_valid_segment_length():
    model = npmt(embed_init_range=0.05).train()
    src, target = PAIRS
    model.sequence_loss({"src": src}, None, target, 0.0)
    e = model.encoder.embed(src) * (src.ne(Vocab.pad) & src.ne(Vocab.eos))[..., None]
    reorder = model.encoder.reorder
    windows = torch.nn.functional.pad(e, (0, 0, 2, 0)).unfold(1, 3, 1).transpose(-1, -2)
    x = (torch.sigmoid(reorder.gates(windows.flatten(-2)))[..., None] * windows).sum(-2)[[0, 0, 0, 1, 1], [0, 1, 2, 0, 1]]
    figures = model.diagnostics("train")
    assert figures["pre_tanh_std"] == pytest.approx(x.std(unbiased=False).item(), rel=1e-4)
    assert figures["tanh_grad"] == pytest.approx((1 - torch.tanh(x) ** 2).mean().item(), rel=1e-4)
    assert figures["tanh_grad"] > 0.99 and model.diagnostics("train") == {}   # small embeddings: no saturation
    model.eval()
    with torch.no_grad():
        model.sequence_loss({"src": src}, None, target, 0.0)
    length = model.diagnostics("valid")["segment_length"]
    assert 1.0 <= length <= 3.0 and model.diagnostics("valid") == {}
    assert npmt(reorder_window=0).diagnostics("train") == {}


@pytest.mark.parametrize("scale", ["gpu", "paper", "smoke"])
def test_npmt_trains_at_a_constant_0001_as_its_authors_where_it_is_tested(scale):
    """Where paper C's NPMT claims are tested (gpu, and paper, which smoke stands for), NPMT trains at
    the paper's constant 0.001 with its authors' initialisation, dropout places and posteriors; the
    LL baseline and gpu's Transformers keep their own recipes."""
    root = Path(__file__).resolve().parents[1]
    config, _ = load(root / "config.yaml", [f"scale={scale}"])
    validate(config, root / "workflow/schemas/config.schema.yaml")
    resolved = experiments(config)
    npmts = [e for e in resolved.values() if e.model["family"] == "npmt"]
    assert npmts
    for exp in npmts:
        assert (exp.train["lr"], exp.train["schedule"]) == (0.001, "constant")
        assert exp.model["embed_init_range"] == 0.05 and exp.model["hidden_dropout"] == 0.0
        assert exp.model["clean_posteriors"] and exp.model["dropout"] == 0.35
    others = [e for e in resolved.values() if e.model["family"] not in ("npmt", "gru_attention")]
    assert all("embed_init_range" not in e.model for e in resolved.values() if e.model["family"] != "npmt")
    if scale == "gpu":
        assert others and all(e.train["schedule"] == "inverse_sqrt" for e in others)
