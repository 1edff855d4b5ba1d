import pytest
import torch

from nmtrepro.training import checkpoint
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.training.train import Corpus, Interrupted, Settings, Trainer

from conftest import TINY, write_copy_corpus
from torch.nn.utils.rnn import pad_sequence

MODEL = {**TINY, "dropout": 0.1}
FAST = dict(max_tokens=64, update_tokens=100, lr=0.01, warmup=10, save_every=10, keep_last=3,
            log_every=5, threads=1)


def run(corpus_dir, ckpt_dir, dropout=0.1, **settings):
    model = {**MODEL, "dropout": dropout}
    trainer = Trainer(Corpus(corpus_dir), model, Settings.from_dict({**FAST, **settings}), ckpt_dir)
    trainer.resume()
    trainer.train()
    return trainer


def test_tiny_model_overfits_a_small_corpus(tmp_path):
    corpus_dir = write_copy_corpus(tmp_path / "data", n_train=12)
    trainer = run(corpus_dir, tmp_path / "ckpt", max_updates=200, dropout=0.0)
    losses = [r["train_loss"] for r in trainer.curve if "train_loss" in r]
    assert losses[-1] < 0.3 * losses[0]
    src, tgt = trainer.corpus.splits["train"]
    hyps = beam_search(trainer.model.eval(), {"src": pad_sequence([src[i] for i in range(12)], batch_first=True)}, beam=2)
    assert sum(h == tgt[i][:-1].tolist() for i, h in enumerate(hyps)) >= 10


def test_killed_run_resumes_to_the_same_weights(copy_corpus, tmp_path):
    straight = run(copy_corpus, tmp_path / "a", max_updates=30)
    first = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30}), tmp_path / "b")
    # A SIGTERM arriving during step 20: the trainer saves and stops, as it does under a real kill.
    original = first.update

    def update_then_signal(group):
        result = original(group)
        if first.step == 20:
            first.stop_signal = 15
        return result

    first.update = update_then_signal
    with pytest.raises(Interrupted):
        first.train()
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "b")] == [10, 20]
    resumed = run(copy_corpus, tmp_path / "b", max_updates=30)
    assert resumed.step == 30
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_resume_refuses_a_different_model(copy_corpus, tmp_path):
    run(copy_corpus, tmp_path / "c", max_updates=10)
    other = Trainer(Corpus(copy_corpus), {**MODEL, "ffn": 48}, Settings.from_dict(FAST), tmp_path / "c")
    with pytest.raises(InputError, match="delete the checkpoint directory"):
        other.resume()


def test_checkpoints_rotate_and_average(copy_corpus, tmp_path):
    run(copy_corpus, tmp_path / "d", max_updates=50, keep_last=3)
    found = checkpoint.checkpoints(tmp_path / "d")
    assert [s for s, _ in found] == [30, 40, 50]
    blobs = [checkpoint.load(p)["model"] for _, p in found]
    avg = checkpoint.average([p for _, p in found])["model"]
    key = next(iter(avg))
    assert torch.allclose(avg[key], sum(b[key] for b in blobs) / 3, atol=1e-6)


def test_unknown_train_setting_is_named():
    with pytest.raises(InputError, match="warmpu"):
        Settings.from_dict({"warmpu": 3})


def test_parser_phrase_model_trains_on_the_parse_stages_spans(copy_corpus, tmp_path):
    from nmtrepro.data.parse import format_spans

    spans_dir = tmp_path / "parse"
    spans_dir.mkdir()
    corpus = Corpus(copy_corpus)
    for split, (src, _) in corpus.splits.items():  # two-token phrases, EOS alone
        lines = [format_spans([(a, min(a + 2, n - 1)) for a in range(0, n - 1, 2)] + [(n - 1, n)])
                 for n in src.sizes]
        (spans_dir / f"{split}.spans").write_text("\n".join(lines) + "\n")
    phrase = {**MODEL, "family": "phrase", "phrases": "parse"}
    trainer = Trainer(Corpus(copy_corpus, spans_dir), phrase, Settings.from_dict({**FAST, "max_updates": 3}),
                      tmp_path / "ckpt")
    trainer.train()
    assert trainer.step == 3 and all(torch.isfinite(p).all() for p in trainer.model.parameters())
    (spans_dir / "valid.spans").write_text("0-1\n")
    with pytest.raises(InputError, match="valid.spans:1: spans end at 1"):
        Corpus(copy_corpus, spans_dir)
