"""Host memory at scale: binarized corpora are read a batch at a time and an epoch's batches are planned in numpy."""
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from nmtrepro.core.files import InputError
from nmtrepro.core import vocab
from nmtrepro.core.vocab import IndexedData, save_indexed
from nmtrepro.training.batching import token_batches

SENTENCES = [[5, 6, 2], [7, 2], [9, 10, 11, 12, 2], [2]]


def test_a_file_reads_what_loading_it_whole_reads(tmp_path):
    save_indexed(tmp_path / "c.bin", SENTENCES)
    whole = torch.load(tmp_path / "c.bin", weights_only=True)  # the reading before reading by batches
    data = IndexedData(tmp_path / "c.bin")
    assert len(data) == len(SENTENCES) and data.sizes.tolist() == [3, 2, 5, 1]
    for i in range(len(data)):
        expected = whole["tokens"][whole["offsets"][i]:whole["offsets"][i + 1]].long()
        assert data[i].dtype == torch.int64 and torch.equal(data[i], expected)


def test_a_padded_batch_gathers_the_sentences_of_one_at_a_time(tmp_path):
    """IndexedData.padded (one numpy gather, what collate uses) against the sentences read one by one
    and padded, in any order, repeats and uint16 or int32 tokens alike."""
    sentences = SENTENCES + [[70000, 2]]  # an id past uint16: this file stores int32
    for name, corpus in (("uint16", SENTENCES), ("int32", sentences)):
        save_indexed(tmp_path / f"{name}.bin", corpus)
        data = IndexedData(tmp_path / f"{name}.bin")
        for indices in ([0], [2, 0, 3], [1, 1, 2], list(range(len(corpus)))[::-1]):
            expected = torch.nn.utils.rnn.pad_sequence([data[i] for i in indices], batch_first=True, padding_value=0)
            got = data.padded(indices, 0)
            assert got.dtype == torch.int64 and torch.equal(got, expected), (name, indices)


def test_tokens_are_read_a_batch_at_a_time_and_only_the_offsets_mapped(tmp_path):
    """A mapping of the tokens would leave every page an epoch touched in a rank's RSS
    (core/token_store.py); the offsets, all read for the sizes, are mapped alone, for ranks to share."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs Linux's /proc to see mappings")
    save_indexed(tmp_path / "read.bin", [list(range(4, 1004))] * 40)     # 80 kB of tokens, 328 B of offsets
    data = IndexedData(tmp_path / "read.bin")
    assert data[39].tolist() == list(range(4, 1004))
    ranges = [line.split()[0].split("-") for line in maps.read_text().splitlines() if line.endswith("/read.bin")]
    assert [int(end, 16) - int(start, 16) for start, end in ranges] == [4096]


def test_tokens_take_uint16_where_every_id_fits_else_int32(tmp_path):
    save_indexed(tmp_path / "small.bin", [[65535, 2]])
    save_indexed(tmp_path / "large.bin", [[65536, 2]])
    assert IndexedData(tmp_path / "small.bin").dtype == np.uint16
    assert IndexedData(tmp_path / "large.bin").dtype == np.int32
    assert IndexedData(tmp_path / "large.bin")[0].tolist() == [65536, 2]


@pytest.mark.parametrize("corpus", [[], [[]], SENTENCES * 3, SENTENCES + [[70000, 2]] + SENTENCES, [[-1, 2]]])
def test_a_streamed_file_is_byte_for_byte_the_one_built_in_memory(tmp_path, monkeypatch, corpus):
    """save_indexed spools chunks to disk (here of two sequences) and narrows them at the end; the file
    is the one torch.save wrote of the whole corpus flattened in memory, as before it streamed."""
    monkeypatch.setattr(vocab, "_SPOOL", 2)
    save_indexed(tmp_path / "streamed.bin", corpus)
    vocab.save_flat(tmp_path / "whole.bin", vocab.flatten(corpus))
    assert (tmp_path / "streamed.bin").read_bytes() == (tmp_path / "whole.bin").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["streamed.bin", "whole.bin"]  # no spool left


def test_files_with_int32_tokens_still_read(tmp_path):
    # what save_indexed wrote before tokens became uint16
    offsets = torch.tensor([0, 3, 5, 10, 11], dtype=torch.int64)
    torch.save({"tokens": torch.tensor(sum(SENTENCES, []), dtype=torch.int32), "offsets": offsets},
               tmp_path / "old.bin")
    data = IndexedData(tmp_path / "old.bin")
    assert [data[i].tolist() for i in range(len(data))] == SENTENCES


@pytest.mark.parametrize("blob", [b"not a torch file", {"tokens": torch.zeros(3, dtype=torch.int32)},
                                  {"tokens": torch.zeros(3, dtype=torch.int32), "offsets": torch.tensor([0, 2])}])
def test_a_file_that_is_not_a_binarized_corpus_fails_naming_it(tmp_path, blob):
    path = tmp_path / "bad.bin"
    if isinstance(blob, bytes):
        path.write_bytes(blob)
    else:
        torch.save(blob, path)
    with pytest.raises(InputError, match="bad.bin"):
        IndexedData(path)


def reference_batches(src, tgt, max_tokens, seed, epoch):
    """The specification, one sentence at a time (the Python loop the numpy planner replaced)."""
    n = len(src)
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    tiebreak = torch.randperm(n, generator=gen).tolist()
    batches, current, longest = [], [], 0
    for i in sorted(range(n), key=lambda i: (tgt[i], src[i], tiebreak[i])):
        size = max(src[i], tgt[i])
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    batches += [current] if current else []
    return [batches[j] for j in torch.randperm(len(batches), generator=gen).tolist()]


@pytest.mark.parametrize("max_tokens", [1, 16, 100, 4096])
def test_planned_batches_are_the_sentence_by_sentence_batches(max_tokens):
    rng = random.Random(max_tokens)
    for trial in range(20):
        n, longest = rng.randint(1, 400), rng.choice([3, 30, 300])
        src = [rng.randint(1, longest) for _ in range(n)]
        tgt = [rng.randint(1, longest) for _ in range(n)]
        plan = token_batches(np.array(src, np.int32), np.array(tgt, np.int32), max_tokens, seed=trial, epoch=3)
        assert list(plan) == reference_batches(src, tgt, max_tokens, trial, 3)
        assert plan.tgt_tokens.tolist() == [sum(tgt[i] for i in batch) for batch in plan]


def test_planned_batches_cover_every_sentence_once_within_the_budget_per_seed_and_epoch():
    rng = np.random.default_rng(0)
    src = rng.integers(1, 120, 5000).astype(np.int32)
    tgt = rng.integers(1, 120, 5000).astype(np.int32)
    plan = token_batches(src, tgt, 1000, seed=4, epoch=1)
    assert sorted(i for batch in plan for i in batch) == list(range(5000))
    for batch in plan:
        assert len(batch) == 1 or np.maximum(src[batch], tgt[batch]).max() * len(batch) <= 1000
    assert list(token_batches(src, tgt, 1000, seed=4, epoch=1)) == list(plan)
    assert list(token_batches(src, tgt, 1000, seed=4, epoch=2)) != list(plan)
    assert list(token_batches(src, tgt, 1000, seed=5, epoch=1)) != list(plan)


def test_unseeded_batches_keep_length_order_for_decoding():
    sizes = np.array([5, 1, 3, 3, 9, 2], np.int32)
    assert list(token_batches(sizes, None, 6)) == [[1, 5], [2, 3], [0], [4]]
    assert list(token_batches([], None, 6, seed=1)) == []


@pytest.mark.parametrize("corpus", [[], [[]], [[], [7, 2]]])
def test_a_file_of_no_sentences_or_empty_ones_reads(tmp_path, corpus):
    """An empty file stores no tokens' record to read from (its offsets are all it holds)."""
    save_indexed(tmp_path / "empty.bin", corpus)
    data = IndexedData(tmp_path / "empty.bin")
    assert [data[i].tolist() for i in range(len(data))] == corpus
