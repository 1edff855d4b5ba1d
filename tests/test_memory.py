"""Out of memory in a micro-batch (issue 38): retried as halves, skipped at one sentence, counted; an
update's gradient stays the sum over the sentences that fitted. The OOM is injected on the CPU."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from conftest import TINY
from nmtrepro.core.files import InputError
from nmtrepro.core.runtime import Distributed
from nmtrepro.training import memory
from nmtrepro.training.train import Corpus, Settings, Trainer

SETTINGS = dict(max_tokens=64, update_tokens=100, lr=0.01, warmup=10, save_every=100, keep_last=1,
                log_every=1, threads=1, device="cpu")


def trainer(corpus_dir, tmp_path, name, **settings):
    return Trainer(Corpus(corpus_dir), TINY, Settings.from_dict({**SETTINGS, **settings}), tmp_path / name)


def out_of_memory(trainer, too_big, phase="forward"):
    """Make `trainer` run out of memory on the micro-batches for which `too_big(their sentence ids)` holds: in
    the forward, or in the backward after one parameter's gradient was added (at the second parameter
    autograd reaches, whatever its order)."""
    loss_of, failing, reached = trainer.loss, [False], [0]

    def raise_in_backward(grad):
        reached[0] += failing[0]
        if reached[0] == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return grad

    for p in trainer.model.parameters():
        p.register_hook(raise_in_backward)

    def loss(*args):
        failing[0], reached[0] = too_big(sentences[0]), 0
        if failing[0] and phase == "forward":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return loss_of(*args)

    collate, sentences = trainer.corpus.collate, [[]]

    def collate_noting(split, indices, *args):  # the injected loss tells the micro-batches by their sentences
        if split == "train":
            sentences[0] = list(indices)
        return collate(split, indices, *args)

    trainer.loss, trainer.corpus.collate = loss, collate_noting
    return trainer


def first_update(trainer, drop=()):
    """The first update's result and the gradients it stepped with; `drop`: sentences taken out first."""
    gradients, step = {}, trainer.optimizer.step

    def record(*args, **kwargs):
        gradients.update({n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None})
        return step(*args, **kwargs)

    trainer.optimizer.step = record
    group, _ = next(trainer.updates())
    result = trainer.update([[i for i in batch if i not in drop] for batch in group])
    return result, gradients


def assert_same_update(a, b):
    (result_a, grads_a), (result_b, grads_b) = a, b
    assert result_a[2:] == result_b[2:]                       # the same target and source tokens
    assert result_a[:2] == pytest.approx(result_b[:2], rel=1e-6)
    assert grads_a.keys() == grads_b.keys()
    for name, grad in grads_a.items():
        torch.testing.assert_close(grad, grads_b[name], rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("fast", ["off", "graphs"])
@pytest.mark.parametrize("phase", ["forward", "backward"])
def test_a_micro_batch_out_of_memory_runs_as_halves_with_the_unsplit_gradient(copy_corpus, tmp_path, monkeypatch,
                                                                                phase, fast):
    """A backward that runs out of memory has added part of its gradient already: the update must
    start again, or that part would count twice. On `fast: graphs` (the step traced by aot_eager here)
    a failed backward adds nothing to the sums (fast.GradientSums adds what autograd.grad returns), and
    its retry must still give the unsplit gradient."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, backend, mode: compile_(model, backend="aot_eager"))
    path = dict(fast=fast, buckets=fast == "graphs")
    whole = first_update(trainer(copy_corpus, tmp_path, "whole", **path))
    halved = out_of_memory(trainer(copy_corpus, tmp_path, "halved", **path), lambda ids: len(ids) > 3, phase)
    assert_same_update(first_update(halved), whole)
    assert halved.oom["splits"] >= 2 and halved.oom["skipped"] == 0 and halved.step == 1


def test_a_sentence_that_never_fits_is_skipped_and_counted_in_the_log(copy_corpus, tmp_path, caplog):
    reference = trainer(copy_corpus, tmp_path, "reference")
    group, _ = next(reference.updates())
    longest = max((i for batch in group for i in batch), key=lambda i: reference.corpus.splits["train"][1].sizes[i])
    never_fits = lambda ids: longest in ids  # noqa: E731
    skipping = out_of_memory(trainer(copy_corpus, tmp_path, "skipping"), never_fits, "backward")
    with caplog.at_level("INFO"):
        assert_same_update(first_update(skipping), first_update(reference, drop={longest}))
    assert skipping.oom["skipped"] == 1 and skipping.oom["splits"] >= 1
    assert f"single sentence (#{longest}): skipped" in caplog.text
    logged = out_of_memory(trainer(copy_corpus, tmp_path, "logged", max_updates=1), never_fits, "backward")
    with caplog.at_level("INFO"):
        logged.train()
    assert logged.oom == skipping.oom
    assert (f"out of memory so far: {logged.oom['splits']} micro-batches split in two, 1 sentences skipped"
            in caplog.text)


def test_an_update_of_which_nothing_fits_is_skipped_without_a_step(copy_corpus, tmp_path, caplog):
    nothing = out_of_memory(trainer(copy_corpus, tmp_path, "nothing"), lambda ids: True)
    group, _ = next(nothing.updates())
    with caplog.at_level("WARNING"):
        assert nothing.update(group) is None
    assert nothing.step == 0 and nothing.oom["skipped"] == sum(map(len, group))
    assert "no sentence of the update fitted in memory" in caplog.text


def test_other_errors_are_not_taken_for_out_of_memory(copy_corpus, tmp_path):
    assert memory.is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not memory.is_out_of_memory(RuntimeError("shape mismatch"))
    broken = trainer(copy_corpus, tmp_path, "broken")

    def loss(*args):
        raise RuntimeError("shape mismatch")

    broken.loss = loss
    with pytest.raises(RuntimeError, match="shape mismatch"):
        broken.update(next(broken.updates())[0])


def test_data_parallel_ranks_split_only_their_local_micro_batches(copy_corpus, tmp_path):
    """Under DDP the last micro-batch's backward all-reduces the gradients: a rank cannot retry it in
    lock-step with the others, so it stops the job; the micro-batches before it (no_sync) split."""
    group, _ = next(trainer(copy_corpus, tmp_path, "plan").updates())
    for failing, outcome in ((group[0], "splits"), (group[-1], "stops")):
        ranked = out_of_memory(trainer(copy_corpus, tmp_path, outcome), lambda ids, f=failing: ids == f)
        ranked.world = 2  # one process playing rank 0 of two: _accumulate's decisions, no collectives
        ranked.loss.no_sync = contextlib.nullcontext
        plan = list(group)
        if outcome == "splits":
            assert ranked._accumulate(plan, oom := [0, 0]) is not None
            assert oom == [1, 0] and plan == memory.halves(group[0]) + group[1:]
        else:
            with pytest.raises(memory.UnrecoverableOutOfMemory, match="cannot retry it in lock-step"):
                ranked._accumulate(plan, [0, 0])


# -- max_tokens auto: the micro-batch the card's memory holds ---------------------------------------
def test_fit_tokens_fills_the_budget_from_a_line_through_two_probes():
    line = lambda tokens: 10**9 + 10**5 * tokens                          # noqa: E731  (bytes at a size)
    assert memory.fit_tokens(line, 3e9, cap=100_000) == 19_968           # (3e9 - 1e9) / 1e5, down to 256s
    assert memory.fit_tokens(line, 3e9, cap=12_500) == 12_288            # at most half an update
    assert memory.fit_tokens(line, 3e9, cap=1_000) == memory.AUTO_START  # never below the papers' size
    assert memory.fit_tokens(line, 1e9, cap=100_000) == memory.AUTO_START  # the start does not fit either


def test_fit_tokens_shrinks_where_the_line_promised_too_much():
    probed = []

    def curved(tokens):  # attention's memory grows faster than the line through two small probes
        probed.append(tokens)
        return None if tokens > 30_000 else 10**9 + 10**5 * tokens + tokens ** 2
    found = memory.fit_tokens(curved, 6e9, cap=100_000)
    assert curved(found) <= 6e9 and found > 2 * memory.AUTO_START and len(probed) > 3
    assert memory.fit_tokens(lambda tokens: None if tokens > 5000 else tokens, 1e12, cap=100_000) == 4096


def test_max_tokens_auto_fills_a_gpus_free_memory_less_adams_with_probes_of_the_longest_sentences(monkeypatch):
    """auto_max_tokens on a GPU simulated on the CPU (its memory figures given): every probe is a micro-batch of
    the longest sentences of its size, and the size found fills 90% of the free memory less Adam's moments."""
    peak = [0]
    for name, value in (("mem_get_info", lambda device: (10 * 2 ** 30, 16 * 2 ** 30)), ("empty_cache", lambda: None),
                        ("memory_allocated", lambda device: 0), ("reset_peak_memory_stats", lambda device: None),
                        ("max_memory_allocated", lambda device: peak[0]), ("get_device_name", lambda device: "GPU")):
        monkeypatch.setattr(torch.cuda, name, value)
    lengths, probed = np.arange(1, 201), []

    def probe(sentences, tokens):
        probed.append((tokens, sentences))
        peak[0] = 10 ** 5 * tokens                                       # bytes
    model = torch.nn.Linear(1000, 1000)                                  # 1,001,000 parameters: 8 MB of Adam
    found = memory.auto_max_tokens(probe, lengths, False, model, torch.device("cuda"), 10 ** 6, Distributed())
    assert found == int((0.9 * 10 * 2 ** 30 - 8 * 1_001_000) / 10 ** 5) // 256 * 256 == 96_512
    assert [tokens for tokens, _ in probed] == [4096, 8192, found]
    assert all(sentences == memory.probe_sentences(lengths, tokens, False) for tokens, sentences in probed)


def test_max_tokens_auto_is_found_once_and_kept_by_the_checkpoints(copy_corpus, tmp_path, caplog, monkeypatch):
    with pytest.raises(InputError, match="max_tokens = 'big'"):
        Settings.from_dict({"max_tokens": "big"})
    with caplog.at_level("INFO"):
        first = trainer(copy_corpus, tmp_path, "run", max_tokens="auto", max_updates=3, save_every=3)
        first.train()
    assert first.max_tokens == memory.AUTO_START and "no GPU memory to size from on cpu" in caplog.text
    monkeypatch.setattr(Trainer, "_fit_max_tokens", lambda self: 96)   # as if on a GPU: another size
    fresh = trainer(copy_corpus, tmp_path, "other", max_tokens="auto", max_updates=3)
    fresh.train()
    assert fresh.max_tokens == 96
    monkeypatch.setattr(Trainer, "_fit_max_tokens", lambda self: pytest.fail("a resume sized the batches again"))
    again = trainer(copy_corpus, tmp_path, "run", max_tokens="auto", max_updates=5, save_every=3)
    assert again.resume() and again.max_tokens == memory.AUTO_START
    again.train()
    assert again.step == 5


def test_a_probe_takes_the_longest_sentences_that_fill_its_tokens():
    lengths = np.array([5, 30, 12, 30, 700, 9])
    assert memory.probe_sentences(lengths, 256, buckets=False) == [1, 3, 2, 5, 0, 1, 3, 2]     # 8 x 30 tokens
    assert memory.probe_sentences(lengths, 256, buckets=True) == [1, 3, 2, 5, 0, 1, 3, 2]      # bucket 32: 8 rows
    assert memory.probe_sentences(lengths, 64, buckets=False) == [0] * 8                       # at most 64 / 8 long
    assert memory.probe_sentences(lengths, 8192, buckets=False) == [4, 1, 3, 2, 5, 0, 4, 1, 3, 2, 5]  # 8192 // 700
