import copy
import shutil

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from conftest import TINY, binarize_annotations, write_copy_corpus
from nmtrepro.core.files import InputError
from nmtrepro.core.vocab import Vocab
from nmtrepro.data.annotations import binarize
from nmtrepro.evaluation.generate import beam_search
from nmtrepro.training import checkpoint
from nmtrepro.training.criterion import model_loss
from nmtrepro.training.train import Corpus, Interrupted, Settings, Trainer

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
    src_batch = pad_sequence([src[i] for i in range(12)], batch_first=True).to(trainer.device)  # a GPU where one is
    hyps = beam_search(trainer.model.eval(), {"src": src_batch}, beam=2)
    assert sum(h == tgt[i][:-1].tolist() for i, h in enumerate(hyps)) >= 10


def test_the_curve_logs_training_speed_in_target_and_source_tokens(copy_corpus, tmp_path):
    """Paper D's Table V counts training speed in source tokens/s: every log row has both, in the ratio
    of the source and target tokens the window trained on."""
    trainer = run(copy_corpus, tmp_path / "ckpt", max_updates=10)
    src, tgt = trainer.corpus.splits["train"]
    ratio = sum(len(s) for s in src) / sum(len(t) for t in tgt)   # every pair is seen about equally often
    logged = [row for row in trainer.curve if "tgt_tok_s" in row]
    assert logged and all(row["src_tok_s"] > 0 for row in logged)
    assert abs(sum(r["src_tok_s"] for r in logged) / sum(r["tgt_tok_s"] for r in logged) - ratio) < 0.2 * ratio


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


def interrupt_at(trainer, step, signum=15):
    """Make `trainer` get a stop signal during update `step`, as under a real kill."""
    original = trainer.update

    def update_then_signal(group):
        result = original(group)
        if trainer.step == step:
            trainer.stop_signal = signum
        return result

    trainer.update = update_then_signal
    return trainer


def assert_same_weights(a, b):
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(x, y), name


def test_a_different_model_starts_afresh_beside_the_old_checkpoints(copy_corpus, tmp_path, caplog):
    run(copy_corpus, tmp_path / "c", max_updates=10)
    other = Trainer(Corpus(copy_corpus), {**MODEL, "ffn": 48}, Settings.from_dict(FAST), tmp_path / "c")
    with caplog.at_level("INFO"):
        assert not other.resume()
    assert "model" in caplog.text and "stale-1" in caplog.text
    assert checkpoint.checkpoints(tmp_path / "c") == []
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "c" / "stale-1")] == [10]


def test_a_stale_runs_kept_windows_move_aside_with_its_checkpoints(copy_corpus, tmp_path):
    """A budget's kept weights (kept_<step>.pt) belong to their run: a retrained run must never average
    them into its own window."""
    run(copy_corpus, tmp_path / "k", max_updates=40, keep_last=1, keep_steps=[20])
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "k", checkpoint.KEPT)] == [20]
    other = Trainer(Corpus(copy_corpus), {**MODEL, "ffn": 48}, Settings.from_dict({**FAST, "max_updates": 40}),
                    tmp_path / "k")
    assert not other.resume()
    assert checkpoint.checkpoints(tmp_path / "k", checkpoint.KEPT) == []
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "k" / "stale-1", checkpoint.KEPT)] == [20]


@pytest.mark.parametrize("change", [{"lr": 0.02}, {"seed": 2}, {"keep_last": 2}])
def test_changed_training_settings_start_afresh(copy_corpus, tmp_path, caplog, change):
    run(copy_corpus, tmp_path / "old", max_updates=20)
    fresh = run(copy_corpus, tmp_path / "fresh", max_updates=20, **change)
    with caplog.at_level("INFO"):
        rerun = run(copy_corpus, tmp_path / "old", max_updates=20, **change)
    assert f"{next(iter(change))}:" in caplog.text and "stale-1" in caplog.text
    assert_same_weights(fresh, rerun)
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "old" / "stale-1")] == [10, 20]


def test_a_run_on_another_vocabulary_of_the_same_size_starts_afresh_and_its_models_record_theirs(copy_corpus, tmp_path):
    trained = run(copy_corpus, tmp_path / "ckpt", max_updates=10)
    trained.write_outputs(tmp_path / "final.pt", tmp_path / "curve.tsv")
    vocab = Vocab.load(copy_corpus / "dict.src.txt")
    assert checkpoint.load(tmp_path / "final.pt")["vocab"]["src"] == vocab.digest
    Vocab(reversed(vocab.symbols[4:])).save(copy_corpus / "dict.src.txt")   # same symbols, other ids
    other = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 10}), tmp_path / "ckpt")
    assert not other.resume() and (tmp_path / "ckpt" / "stale-1").is_dir()


def test_more_updates_or_other_threads_or_kernels_resume(copy_corpus, tmp_path):
    straight = run(copy_corpus, tmp_path / "a", max_updates=30)
    run(copy_corpus, tmp_path / "b", max_updates=25)
    other_threads = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "threads": 2}), tmp_path / "b")
    assert other_threads.resume() and other_threads.step == 25  # same run, other summation order
    extended = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30, "max_minutes": 9.0,
                                                                       "cudnn_attention": True}), tmp_path / "b")
    assert extended.resume() and extended.step == 25
    extended.train()
    assert_same_weights(straight, extended)
    assert checkpoint.resumable(tmp_path / "b") == [(s, tmp_path / "b" / p.name)
                                                    for s, p in checkpoint.checkpoints(tmp_path / "a")]


def test_another_schedule_is_another_run_but_a_checkpoint_older_than_the_setting_resumes(copy_corpus, tmp_path):
    """A checkpoint saved before `schedule` existed ran the default schedule: it resumes under it, and
    a run asking for another schedule moves it aside."""
    run(copy_corpus, tmp_path / "a", max_updates=20)
    newest = checkpoint.checkpoints(tmp_path / "a")[-1][1]
    blob = torch.load(newest, weights_only=False)
    del blob["settings"]["schedule"]
    torch.save(blob, newest)
    assert Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30}), tmp_path / "a").resume()
    other = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30, "schedule": "constant"}),
                    tmp_path / "a")
    assert not other.resume() and checkpoint.checkpoints(tmp_path / "a") == []
    with pytest.raises(InputError, match="schedule = 'cosine'"):
        Settings.from_dict({**FAST, "schedule": "cosine"})


def test_fewer_updates_than_the_newest_checkpoint_start_afresh(copy_corpus, tmp_path):
    run(copy_corpus, tmp_path / "a", max_updates=30)
    shorter = run(copy_corpus, tmp_path / "a", max_updates=20)
    assert_same_weights(run(copy_corpus, tmp_path / "b", max_updates=20), shorter)


@pytest.mark.parametrize("stop_at", [23, 45])
def test_an_interrupted_run_keeps_and_averages_the_scheduled_checkpoints(copy_corpus, tmp_path, stop_at):
    straight = run(copy_corpus, tmp_path / "a", max_updates=50)
    first = interrupt_at(Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 50}),
                                 tmp_path / "b"), stop_at)
    with pytest.raises(Interrupted):
        first.train()
    resumed = run(copy_corpus, tmp_path / "b", max_updates=50)
    assert_same_weights(straight, resumed)
    steps = [s for s, _ in checkpoint.checkpoints(tmp_path / "b")]
    assert steps == [s for s, _ in checkpoint.checkpoints(tmp_path / "a")] == [30, 40, 50]
    assert list((tmp_path / "b").glob("*interrupted*")) == []
    deterministic = ("step", "epoch", "lr", "train_loss", "train_nll", "valid_loss", "valid_nll")
    assert [[row.get(k) for k in deterministic] for row in resumed.curve] == \
        [[row.get(k) for k in deterministic] for row in straight.curve]


def test_a_truncated_newest_checkpoint_falls_back_to_the_one_before(copy_corpus, tmp_path, caplog):
    straight = run(copy_corpus, tmp_path / "a", max_updates=30)
    run(copy_corpus, tmp_path / "b", max_updates=20)
    newest = checkpoint.checkpoints(tmp_path / "b")[-1][1]
    newest.write_bytes(newest.read_bytes()[:1000])
    with pytest.raises(InputError, match=newest.name):
        checkpoint.load(newest)
    with caplog.at_level("WARNING"):
        resumed = run(copy_corpus, tmp_path / "b", max_updates=30)
    assert str(newest) in caplog.text
    assert_same_weights(straight, resumed)


def poison(trainer, updates, where="loss"):
    """Make the loss (or only its gradient) NaN in the chosen updates, counted from 1, skipped ones too."""
    loss_of, update, count = trainer.loss, trainer.update, [0]

    def counted(group):
        count[0] += 1
        return update(group)

    def poisoned(*args):
        loss, nll = loss_of(*args)
        if count[0] in updates:
            if where == "loss":
                return loss * float("nan"), nll
            loss.register_hook(lambda grad: grad * float("nan"))
        return loss, nll

    trainer.update, trainer.loss = counted, poisoned
    return trainer


@pytest.mark.parametrize("clip_norm", [0.0, 0.05, 100.0])
def test_the_optimizer_steps_on_the_mean_token_gradient_clipped(copy_corpus, tmp_path, clip_norm):
    """An update hands the optimizer the gradient summed over its micro-batches, divided by its target
    tokens and clipped by clip_grad_norm_ (0.05 clips this tiny model's first update; 100 does not)."""
    trainer = Trainer(Corpus(copy_corpus), {**MODEL, "dropout": 0.0},
                      Settings.from_dict({**FAST, "clip_norm": clip_norm}), tmp_path / "d")
    reference = copy.deepcopy(trainer.model)
    group, _ = next(trainer.updates())
    tokens = 0
    for indices in group:
        batch = trainer.corpus.collate("train", indices)
        loss, _ = model_loss(reference, batch.net_input, batch.prev, batch.target, trainer.settings.label_smoothing)
        loss.backward()
        tokens += batch.tgt_tokens
    for p in reference.parameters():
        p.grad /= tokens
    norm = float(torch.nn.utils.get_total_norm([p.grad for p in reference.parameters()]))
    if clip_norm:
        torch.nn.utils.clip_grad_norm_(reference.parameters(), clip_norm)
    stepped = []
    trainer.optimizer.step = lambda *a, **k: stepped.append([p.grad.clone() for p in trainer.model.parameters()])
    assert trainer.update(group) is not None and len(stepped) == 1
    assert (clip_norm == 0.05) == (norm > clip_norm > 0)                   # which runs clip
    for ours, theirs in zip(stepped[0], (p.grad for p in reference.parameters())):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_a_few_non_finite_updates_are_skipped_and_counted(copy_corpus, tmp_path, where):
    trainer = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30}), tmp_path / "d")
    poison(trainer, {5, 12, 13}, where).train()
    assert trainer.step == 30 and trainer.skipped == 3
    for _, path in checkpoint.checkpoints(tmp_path / "d"):
        assert all(torch.isfinite(v).all() for v in checkpoint.load(path)["model"].values())


def test_divergence_stops_the_job_and_keeps_the_last_good_checkpoint(copy_corpus, tmp_path):
    from nmtrepro.training.train import Diverged

    trainer = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30}), tmp_path / "e")
    with pytest.raises(Diverged, match="in a row.*checkpoint_00000010.pt"):
        poison(trainer, set(range(15, 100))).train()
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "e")] == [10]


def test_a_non_finite_model_is_never_saved(tmp_path):
    with pytest.raises(InputError, match="not finite"):
        checkpoint.save({"model_spec": {}, "model": {"w": torch.tensor([1.0, float("inf")])}}, tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()


def test_logging_a_huge_loss_does_not_overflow(copy_corpus, tmp_path):
    trainer = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict(FAST), tmp_path / "f")
    trainer._log({"loss": 1e6, "nll": 1e6, "tokens": 1, "src_tokens": 1, "time": 1.0})
    assert trainer.curve[-1]["train_nll"] > 1e5


def test_checkpoints_rotate_and_average(copy_corpus, tmp_path):
    run(copy_corpus, tmp_path / "d", max_updates=50, keep_last=3)
    found = checkpoint.checkpoints(tmp_path / "d")
    assert [s for s, _ in found] == [30, 40, 50]
    blobs = [checkpoint.load(p)["model"] for _, p in found]
    avg = checkpoint.average([p for _, p in found])["model"]
    key = next(iter(avg))
    assert torch.allclose(avg[key], sum(b[key] for b in blobs) / 3, atol=1e-6)


def test_average_takes_the_window_that_ends_at_the_final_step_or_names_the_gap(copy_corpus, tmp_path, capsys):
    """A deleted checkpoint (the natural fix for a corrupt newest one) must not shift the averaged window
    to an earlier stretch of training: the command averages exactly the K ending at the final model's
    step, or stops naming the gap."""
    from nmtrepro import cli

    trainer = run(copy_corpus, tmp_path / "d", max_updates=50, keep_last=3)
    trainer.write_outputs(tmp_path / "final.pt", tmp_path / "curve.tsv")
    found = dict(checkpoint.checkpoints(tmp_path / "d"))

    def average(last: int, directory=tmp_path / "d") -> int:
        return cli.main(["average", "--checkpoint-dir", str(directory), "--last", str(last),
                         "--final", str(tmp_path / "final.pt"), "--out", str(tmp_path / f"avg{last}.pt")])

    assert average(2) == 0 and checkpoint.load(tmp_path / "avg2.pt")["averaged"] == [str(found[40]), str(found[50])]
    found[40].unlink()
    assert average(2) == 2 and "needs steps [40, 50], and [40] are missing" in capsys.readouterr().err
    assert average(1) == 0  # the final step's own
    found[50].unlink()
    assert average(1) == 2 and "no checkpoint of the final model's step 50" in capsys.readouterr().err
    assert average(1, tmp_path / "nowhere") == 2 and "nowhere: no such checkpoint folder" in capsys.readouterr().err


def test_a_longer_training_keeps_the_window_of_a_shorter_budget_which_is_that_budgets_own(copy_corpus, tmp_path):
    """The inverse-sqrt schedule does not depend on max_updates, so the window that a training of 60
    updates keeps at 30 (`keep_steps`, budgets.py) averages to the model a training of 30 updates
    averages; past the rotation only the kept steps survive, as their weights alone."""
    from nmtrepro import cli

    def averaged(directory, max_updates, at=None, **settings):
        trainer = run(copy_corpus, directory, max_updates=max_updates, keep_last=2, **settings)
        final = directory / "final.pt"
        trainer.write_outputs(final, directory / "curve.tsv")
        out = directory / f"avg{at}.pt"
        assert cli.main(["average", "--checkpoint-dir", str(directory), "--last", "2", "--final", str(final),
                         "--out", str(out)] + (["--at", str(at)] if at else [])) == 0
        return checkpoint.load(out)["model"]

    short = averaged(tmp_path / "short", 30)
    long = averaged(tmp_path / "long", 60, at=30, keep_steps=[20, 30])
    assert [s for s, _ in checkpoint.checkpoints(tmp_path / "long")] == [50, 60]
    kept = checkpoint.checkpoints(tmp_path / "long", checkpoint.KEPT)
    assert [s for s, _ in kept] == [20, 30] and set(checkpoint.load(kept[0][1])) == set(checkpoint.WEIGHTS)
    for key, value in short.items():
        assert torch.equal(value, long[key]), key
    assert cli.main(["average", "--checkpoint-dir", str(tmp_path / "long"), "--last", "2", "--final",
                     str(tmp_path / "long/final.pt"), "--at", "40", "--out", str(tmp_path / "x.pt")]) == 2


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
    trainer = Trainer(Corpus(copy_corpus, {"spans": binarize_annotations(spans_dir, copy_corpus, "spans")}), phrase,
                      Settings.from_dict({**FAST, "max_updates": 3}), tmp_path / "ckpt")
    trainer.train()
    assert trainer.step == 3 and all(torch.isfinite(p).all() for p in trainer.model.parameters())
    (spans_dir / "valid.spans").write_text("0-1\n")
    with pytest.raises(InputError, match="valid.spans:1: spans end at 1"):
        binarize("spans", spans_dir / "valid.spans", copy_corpus / "valid.src.bin", spans_dir / "valid.spans.bin")
    shutil.copy(spans_dir / "train.spans.bin", spans_dir / "valid.spans.bin")  # another split's: too many lines
    with pytest.raises(InputError, match="valid.spans.bin: 64 sentences, the source has 8"):
        Corpus(copy_corpus, {"spans": spans_dir})


@pytest.mark.parametrize("variant", [{"family": "phrase"}, {"family": "recurrence", "steps": 2},
                                     {"family": "recurrence", "recurrence": "rnn", "integration": "encoder"}])
def test_a_variant_warm_starts_from_its_trained_baseline(copy_corpus, tmp_path, variant):
    base = run(copy_corpus, tmp_path / "base", max_updates=10)
    base.write_outputs(tmp_path / "base.pt", tmp_path / "base.tsv")
    options = {**MODEL, **variant}
    scratch = Trainer(Corpus(copy_corpus), options, Settings.from_dict(FAST), tmp_path / "scratch")
    warm = Trainer(Corpus(copy_corpus), options, Settings.from_dict(FAST), tmp_path / "warm", init=tmp_path / "base.pt")
    trained, fresh, own = base.model.state_dict(), scratch.model.state_dict(), warm.model.state_dict()
    assert own.keys() == fresh.keys() and set(trained) < set(own)
    for name, value in own.items():  # the baseline's tensors copied, the new ones as the family makes them
        assert torch.equal(value, trained[name] if name in trained else fresh[name]), name
    assert warm.step == 0 and not warm.optimizer.state


def test_a_warm_start_needs_a_model_of_the_same_size(copy_corpus, tmp_path):
    base = run(copy_corpus, tmp_path / "base", max_updates=2)
    base.write_outputs(tmp_path / "base.pt", tmp_path / "base.tsv")
    with pytest.raises(InputError, match=r"base.pt: cannot warm-start.*ffn|base.pt: cannot warm-start.*shape"):
        Trainer(Corpus(copy_corpus), {**MODEL, "ffn": 48}, Settings.from_dict(FAST), tmp_path / "w",
                init=tmp_path / "base.pt")


def test_a_continuation_from_other_weights_starts_afresh(copy_corpus, tmp_path, caplog):
    for seed in (1, 2):
        base = run(copy_corpus, tmp_path / f"base{seed}", max_updates=2, seed=seed)
        base.write_outputs(tmp_path / f"base{seed}.pt", tmp_path / "base.tsv")
    first = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 10}), tmp_path / "c",
                    init=tmp_path / "base1.pt")
    first.train()
    same = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 20}), tmp_path / "c",
                   init=tmp_path / "base1.pt")
    assert same.resume() and same.step == 10
    other = Trainer(Corpus(copy_corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 20}), tmp_path / "c",
                    init=tmp_path / "base2.pt")
    with caplog.at_level("INFO"):
        assert not other.resume()
    assert "warm start" in caplog.text and "stale-1" in caplog.text


def test_select_checkpoint_keeps_the_one_with_the_best_dev_bleu(tmp_path):
    """Paper D evaluates the checkpoint with the best dev BLEU, not the last: a newer checkpoint holding
    an untrained model is passed over for the trained one that translates the dev set best."""
    from nmtrepro import cli
    from nmtrepro.core.files import read_json
    from nmtrepro.core.vocab import Vocab
    from nmtrepro.models import build_model

    corpus_dir = write_copy_corpus(tmp_path / "data", n_train=12)
    trainer = run(corpus_dir, tmp_path / "ckpt", max_updates=200, dropout=0.0, save_every=50, keep_last=2)
    newest = checkpoint.load(checkpoint.checkpoints(tmp_path / "ckpt")[-1][1])
    torch.manual_seed(1)
    untrained = {**newest, "model": build_model(newest["model_spec"]).state_dict()}
    checkpoint.save(untrained, tmp_path / "ckpt" / "checkpoint_00000250.pt")
    vocab, (src, tgt) = Vocab.load(corpus_dir / "dict.src.txt"), trainer.corpus.splits["train"]
    (tmp_path / "dev.bpe").write_text("".join(vocab.decode(src[i]) + "\n" for i in range(12)))
    (tmp_path / "dev.tok").write_text("".join(vocab.decode(tgt[i]) + "\n" for i in range(12)))
    checkpoint.save({**untrained, "step": 250}, tmp_path / "final.pt")  # the training's end, as far as it knows
    cli.main(["select-checkpoint", "--checkpoint-dir", str(tmp_path / "ckpt"), "--last", "3", "--final",
              str(tmp_path / "final.pt"), "--prepared", str(corpus_dir), "--src-bpe", str(tmp_path / "dev.bpe"), "--ref-tok",
              str(tmp_path / "dev.tok"), "--beam", "2", "--scores", str(tmp_path / "scores.json"),
              "--out", str(tmp_path / "chosen.pt")])
    scores = read_json(tmp_path / "scores.json")
    assert set(scores["dev_bleu"]) == {"150", "200", "250"} and scores["chosen_step"] != 250
    assert scores["dev_bleu"][str(scores["chosen_step"])] == max(scores["dev_bleu"].values()) > scores["dev_bleu"]["250"]
    chosen = checkpoint.load(tmp_path / "chosen.pt")["model"]
    expected = checkpoint.load(tmp_path / "ckpt" / f"checkpoint_{scores['chosen_step']:08d}.pt")["model"]
    assert all(torch.equal(chosen[k], expected[k].float()) for k in expected)


def test_npmts_log_lines_carry_its_diagnostics(copy_corpus, tmp_path, caplog):
    """NPMT's training log adds the reordering layer's saturation to each step line and the average
    segment length to each validation line (`NPMT.diagnostics`); other families add nothing."""
    model = {**MODEL, "family": "npmt", "max_segment": 3, "reorder_window": 3, "embed_init_range": 0.05}
    settings = Settings.from_dict({**FAST, "max_updates": 10})
    with caplog.at_level("INFO"):
        Trainer(Corpus(copy_corpus), model, settings, tmp_path / "ckpt").train()
    steps = [r.message for r in caplog.records if r.message.startswith("step 5/10")]
    valid = [r.message for r in caplog.records if r.message.startswith("step 10 | valid")]
    assert steps and "| pre tanh std 0.0" in steps[0] and "| tanh grad 0.99" in steps[0]
    assert valid and "| segment length " in valid[0]
    caplog.clear()
    with caplog.at_level("INFO"):
        run(copy_corpus, tmp_path / "transformer", max_updates=5)
    assert "tanh" not in caplog.text and "segment length" not in caplog.text
