"""The fast path (issue 38): the same training as the eager step, and checkpoints that move between them.

The compiled test builds one graph of a tiny Transformer on the CPU (inductor and a C compiler: about
a minute on two busy cores); it is marked `compile` and plain `pytest -q` runs it.
"""
from __future__ import annotations

import shutil

import pytest
import torch
from torch._dynamo.utils import counters

from conftest import TINY, write_copy_corpus
from nmtrepro.core.files import InputError
from nmtrepro.models import build_model
from nmtrepro.training import checkpoint
from nmtrepro.training.batching import collate
from nmtrepro.training.criterion import model_loss
from nmtrepro.training.fast import CompiledLoss
from nmtrepro.training.settings import RERUN_FREE
from nmtrepro.training.train import Corpus, LossOf, Settings, Trainer

NEEDS_CC = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="inductor needs a C compiler")

SETTINGS = dict(max_tokens=64, update_tokens=100, lr=0.01, warmup=10, save_every=3, keep_last=5, log_every=1,
                threads=1, device="cpu")


def trainer(corpus, directory, model=TINY, **settings):
    return Trainer(Corpus(corpus), model, Settings.from_dict({**SETTINGS, **settings}), directory)


def test_a_fast_setting_that_cannot_run_is_named():
    with pytest.raises(InputError, match="fast = 'jit'"):
        Settings.from_dict({"fast": "jit", "buckets": True})
    assert "fast" in RERUN_FREE and "buckets" not in RERUN_FREE  # buckets plan other batches: another run


def test_cuda_graphs_need_bucketed_batches():
    with pytest.raises(InputError, match="fast = 'graphs'.*buckets: true"):
        Settings.from_dict({"fast": "graphs"})
    Settings.from_dict({"fast": "graphs", "buckets": True})


def overwrite_gradients_like_replays(model: torch.nn.Module, monkeypatch) -> None:
    """What CUDA graphs do to a backward's gradients, on the CPU: they live in the graph's memory pool,
    which the next replay overwrites; here the next compiled call fills them with NaN first. A trainer
    that kept them (as .grad, say) past its micro-batch trains on NaN."""
    pool = []
    for p in model.parameters():
        p.register_hook(lambda grad: pool.append(grad.untyped_storage()))  # the tensor autograd gets
    forward = CompiledLoss.forward

    def replay(self, *args):
        for storage in pool:
            storage.fill_(255)  # every byte 0xff: NaN in every float
        pool.clear()
        return forward(self, *args)
    monkeypatch.setattr(CompiledLoss, "forward", replay)


def test_the_graphs_path_pads_fixed_shapes_and_trains_as_the_eager_one(tmp_path, monkeypatch, caplog):
    """`fast: graphs` on the CPU: the compiled step (traced by aot_eager here, as inductor would, in
    seconds) over batches padded to fixed shapes, gradients summed over several micro-batches into
    buffers of their own while each backward's own gradients are overwritten as a replay would: the
    eager run's losses and weights, with the same buckets."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, backend, mode: compile_(model, backend="aot_eager"))
    torch._dynamo.reset()
    corpus, runs, shapes = write_copy_corpus(tmp_path, lengths=(2, 30)), {}, set()
    for path, fast in (("eager", "off"), ("fast", "graphs")):
        with caplog.at_level("INFO"):
            runs[path] = run = trainer(corpus, tmp_path / path, max_updates=4, buckets=True, fast=fast,
                                       max_tokens=200, update_tokens=300)
        if path == "fast":
            overwrite_gradients_like_replays(run.model, monkeypatch)
        collate_ = run.corpus.collate

        def noting(split, indices, *args, collate_=collate_):
            batch = collate_(split, indices, *args)
            if split == "train":
                shapes.add((len(indices), *batch.target.shape))
            return batch
        run.corpus.collate = noting
        with caplog.at_level("INFO"):
            run.train()
    assert runs["fast"].graphs and "padded to fixed shapes" in caplog.text
    compiled = runs["fast"].compiled          # on a CPU no CUDA graphs: a shape's first call alone is warm
    assert 1 < len(compiled.shapes) == compiled.warm_calls < sum(compiled.shapes.values())
    assert f"micro-batches on new shapes ({len(compiled.shapes)} shapes so far)" in caplog.text
    assert any(rows > sentences for sentences, rows, _ in shapes)        # rows without a sentence were added
    assert all(p.grad is not None for p in runs["fast"].model.parameters())
    assert losses(runs["fast"]) == pytest.approx(losses(runs["eager"]), rel=1e-5)
    assert_close_weights(runs["fast"].model.state_dict(), runs["eager"].model.state_dict())
    source_per_target = [[row["src_tok_s"] / row["tgt_tok_s"] for row in run.curve if row.get("tgt_tok_s")]
                         for run in runs.values()]                     # the blank rows' EOS is not a source token
    assert source_per_target[0] and source_per_target[0] == pytest.approx(source_per_target[1], rel=1e-9)


def test_with_cuda_graphs_a_shape_is_warm_until_its_third_call():
    """Graph trees warm a shape up, then record it: the rates of the updates holding those two calls are
    not the run's (the trainer's log and the GPU benches leave them out)."""
    class Sums(torch.nn.Module):
        static = False

        def forward(self, net_input, prev, target):
            return net_input["src"].sum(), prev.sum() + target.sum()
    compiled = CompiledLoss(Sums(), backend="eager", cuda_graphs=True)   # eager: no graphs on a CPU
    for rows in (2, 2, 2, 4, 2, 4, 4):
        batch = torch.ones(rows, 3)
        compiled({"src": batch}, batch, batch)
    assert compiled.warm_calls == 4 and len(compiled.shapes) == 2


def test_a_step_that_breaks_into_graphs_says_where_once(tmp_path, caplog):
    """The BiRNN's GRU is not traced: the step runs as graphs with the RNN eager between them,
    and the log names each reason once, not on every new shape; the Base's step breaks nowhere."""
    corpus = Corpus(write_copy_corpus(tmp_path, lengths=(2, 30)))
    train = corpus.splits["train"]
    by_length = sorted(range(len(train[0])), key=lambda i: len(train[0][i]))
    notes = {}
    for options in ({"family": "recurrence", "recurrence": "rnn"}, {}):
        torch._dynamo.reset()
        counters.clear()
        caplog.clear()
        model = build_model({**TINY, **options, "encoder_layers": 1, "decoder_layers": 1,
                             "src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab)})
        fast = CompiledLoss(LossOf(model, 0.1), backend="aot_eager")
        with caplog.at_level("INFO", logger="nmtrepro.training.fast"):
            for picked in (by_length[:8], by_length[-8:], by_length[:8]):
                batch = collate(*train, picked)
                fast(batch.net_input, batch.prev, batch.target)
        notes[options.get("family", "transformer")] = [r.message for r in caplog.records if "breaks" in r.message]
    assert notes["transformer"] == []
    assert len(notes["recurrence"]) == len(set(notes["recurrence"])) >= 1
    assert any("GRU" in note for note in notes["recurrence"]), notes


def test_npmt_stays_eager_on_the_fast_path_and_says_why(copy_corpus, tmp_path, caplog):
    npmt = {"family": "npmt", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "max_segment": 3,
            "reorder_window": 3, "dropout": 0.0}
    with caplog.at_level("INFO"):
        eager = trainer(copy_corpus, tmp_path / "npmt", npmt, fast="compile")
    assert isinstance(eager.loss, LossOf) and not eager.loss.static
    assert "npmt family stays eager" in caplog.text


@pytest.mark.parametrize("options", [{}, {"disagreement": 0.5}])
def test_the_static_loss_masks_padding_to_the_same_sums(copy_corpus, options):
    """The compiled step's loss projects every position and masks the padding: the same sums as
    projecting the real positions only."""
    corpus = Corpus(copy_corpus)
    torch.manual_seed(0)
    model = build_model({**TINY, **options, "src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab)})
    batch = collate(*corpus.splits["train"], list(range(16)), bucketed=True)
    picked, static = (torch.stack(model_loss(model, batch.net_input, batch.prev, batch.target, 0.1, static=s))
                      for s in (False, True))
    assert batch.target.eq(model.pad).any()
    torch.testing.assert_close(static, picked, rtol=1e-6, atol=1e-5)


def losses(run: Trainer) -> dict:
    return {row["step"]: row["train_loss"] for row in run.curve if "train_loss" in row}


def assert_close_weights(a: dict, b: dict):
    for name, value in a.items():
        torch.testing.assert_close(value, b[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.compile
@NEEDS_CC
def test_the_compiled_step_trains_as_the_eager_one_and_their_checkpoints_resume_on_each_other(copy_corpus, tmp_path):
    """Eager: 9 updates, checkpoints at 3, 6, 9. Fast: resumes the eager checkpoint at 3 and runs to 6 (its
    losses and weights those of the eager updates 4-6); eager again: resumes the fast checkpoint at 6 and
    runs to 9 (the eager run's weights). Dropout off: the paths then differ by float rounding only.
    The fast updates' batches differ in sentences and lengths, and the step compiles once for all."""
    torch._dynamo.reset()
    counters.clear()
    eager = trainer(copy_corpus, tmp_path / "eager", max_updates=9)
    eager.train()
    saved = dict(checkpoint.checkpoints(tmp_path / "eager"))
    (tmp_path / "fast").mkdir()
    shutil.copy(saved[3], tmp_path / "fast")

    fast = trainer(copy_corpus, tmp_path / "fast", max_updates=6, fast="compile")
    assert isinstance(fast.loss, CompiledLoss)
    assert fast.resume() and fast.step == 3
    fast.train()
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "fast")] == [3, 6]
    assert counters["stats"]["unique_graphs"] == 1
    assert losses(fast) == pytest.approx({s: v for s, v in losses(eager).items() if s <= 6}, rel=1e-5)
    assert_close_weights(fast.model.state_dict(), checkpoint.load(saved[6])["model"])

    back = trainer(copy_corpus, tmp_path / "fast", max_updates=9)
    assert back.resume() and back.step == 6
    back.train()
    assert_close_weights(back.model.state_dict(), eager.model.state_dict())
    assert losses(back) == pytest.approx(losses(eager), rel=1e-5)


@pytest.mark.compile
@NEEDS_CC
def test_the_phrase_model_compiles_whole_and_computes_the_eager_loss(tmp_path):
    """+PR's n-gram phrases take their width from the batch's shape, not from the data: on an H200 its
    compiled step broke in two at the longest span's `.item()` (docs/measurements.md). Batches of two widths
    (phrases of 3 and of 4 or more tokens) run without a graph break and as the eager loss. The graph
    is traced as the trainer's (forward and backward, dynamic shapes) but not turned into code: inductor
    took 155 s on 2 cores with a cold cache; the test above runs it, and bench/fast_equality.py runs +PR's."""
    torch._dynamo.reset()
    counters.clear()
    corpus = Corpus(write_copy_corpus(tmp_path, lengths=(2, 30)))
    torch.manual_seed(0)
    options = {**TINY, "family": "phrase", "glance": "max", "attentive": True, "transparent_attention": True,
               "encoder_layers": 1, "decoder_layers": 1}
    model = build_model({**options, "src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab)})
    eager, fast = LossOf(model, 0.1), CompiledLoss(LossOf(model, 0.1), backend="aot_eager")
    eager.static = True
    train = corpus.splits["train"]
    by_length = sorted(range(len(train[0])), key=lambda i: len(train[0][i]))
    widths = set()
    for picked in (by_length[:8], by_length[-8:]):
        batch = collate(*train, picked)
        widths.add(batch.net_input["src"].size(1))
        torch.testing.assert_close(torch.stack(fast(batch.net_input, batch.prev, batch.target)),
                                   torch.stack(eager(batch.net_input, batch.prev, batch.target)), rtol=1e-5, atol=1e-4)
    assert max(widths) > 18 >= min(widths)                          # 3 tokens a phrase, and more
    assert not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.compile
@NEEDS_CC
def test_the_parser_phrase_model_compiles_whole_over_bucketed_batches(tmp_path):
    """+PR with parser phrases (paper A's main model) read its longest phrase from the data, and its
    compiled step broke there. A bucketed batch carries a bound on it as a shape (`span_width`): batches
    whose longest phrases fall in two buckets run without a graph break and as the eager loss."""
    torch._dynamo.reset()
    counters.clear()
    corpus = Corpus(write_copy_corpus(tmp_path, lengths=(14, 30)))
    train = corpus.splits["train"]
    torch.manual_seed(0)
    options = {**TINY, "family": "phrase", "phrases": "parse", "encoder_layers": 1, "decoder_layers": 1}
    model = build_model({**options, "src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab)})
    eager, fast = LossOf(model, 0.1), CompiledLoss(LossOf(model, 0.1), backend="aot_eager")
    eager.static = True

    def phrases(n, longest):  # a first phrase of `longest` tokens, then pairs, then EOS alone
        return [(0, longest)] + [(a, min(a + 2, n - 1)) for a in range(longest, n - 1, 2)] + [(n - 1, n)]
    widths = set()
    for longest, picked in ((3, list(range(8))), (12, list(range(8, 16)))):
        spans = {i: phrases(len(train[0][i]), longest) for i in picked}
        batch = collate(*train, picked, {"spans": spans}, bucketed=True)
        widths.add(batch.net_input["span_width"].size(1))
        torch.testing.assert_close(torch.stack(fast(batch.net_input, batch.prev, batch.target)),
                                   torch.stack(eager(batch.net_input, batch.prev, batch.target)), rtol=1e-5, atol=1e-4)
    assert widths == {4, 12}
    assert not counters["graph_break"], dict(counters["graph_break"])
