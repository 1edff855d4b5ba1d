"""Every training's TensorBoard scalars (training/board.py), read back with TensorBoard's own reader."""
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmtrepro.training import checkpoint
from nmtrepro.training.train import Corpus, Settings, Trainer
from test_train import FAST, MODEL


class Killed(Exception):
    """A SIGKILL: the process ends where it is, nothing saved."""


def trainer(corpus, tmp_path, init=None, name="", **settings):
    return Trainer(Corpus(corpus), MODEL, Settings.from_dict({**FAST, "max_updates": 30, **settings}),
                   tmp_path / f"ckpt{name}", init=init, tensorboard=tmp_path / f"board{name}")


def killed_at(trainer, step):
    """`trainer`, made to die (SIGKILL: nothing saved) at the end of update `step`."""
    original = trainer.update

    def update_then_die(group):
        result = original(group)
        if trainer.step == step:
            raise Killed
        return result

    trainer.update = update_then_die
    return trainer


def scalars(folder):
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_a_killed_and_resumed_training_logs_every_step_of_its_curve_once(copy_corpus, tmp_path):
    first = killed_at(trainer(copy_corpus, tmp_path), 17)     # logged at 15, last checkpoint at 10
    with pytest.raises(Killed):
        first.train()
    first.board.close()
    assert [step for step, _ in scalars(tmp_path / "board")["train/loss"]] == [5, 10, 15]
    resumed = trainer(copy_corpus, tmp_path)
    assert resumed.resume() and resumed.step == 10
    resumed.train()
    logged = scalars(tmp_path / "board")
    for tag, column in (("train/loss", "train_loss"), ("train/nll", "train_nll"), ("valid/nll", "valid_nll"),
                        ("train/lr", "lr")):
        rows = [(row["step"], row[column]) for row in resumed.curve if row.get(column) is not None]
        assert [step for step, _ in logged[tag]] == [step for step, _ in rows], tag     # each step once
        assert all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(logged[tag], rows)), tag
    assert {"train/grad_norm", "train/tgt_tok_s", "train/skipped_updates", "valid/loss"} <= set(logged)


def test_a_run_killed_before_its_first_checkpoint_starts_its_curve_afresh(copy_corpus, tmp_path):
    first = killed_at(trainer(copy_corpus, tmp_path), 7)      # logged at 5, no checkpoint yet
    with pytest.raises(Killed):
        first.train()
    first.board.close()
    again = trainer(copy_corpus, tmp_path, max_updates=10)
    assert not again.resume()
    again.train()
    assert [step for step, _ in scalars(tmp_path / "board")["train/loss"]] == [5, 10]


def test_a_retrained_run_sets_its_old_curve_aside_and_writes_its_settings_as_hparams(copy_corpus, tmp_path):
    old = trainer(copy_corpus, tmp_path, max_updates=10)
    old.train()
    retrained = trainer(copy_corpus, tmp_path, max_updates=10, lr=0.02)
    assert not retrained.resume()
    retrained.train()
    assert [step for step, _ in scalars(tmp_path / "board" / "stale-1")["train/loss"]] == [5, 10]
    assert [step for step, _ in scalars(tmp_path / "board")["train/loss"]] == [5, 10]
    hparams = EventAccumulator(str(tmp_path / "board"))
    hparams.Reload()
    start = hparams.summary_metadata["_hparams_/session_start_info"].plugin_data.content
    assert b"settings.lr" in start and b"model.d_model" in start


def test_a_training_started_from_a_trained_model_logs_its_steps_after_that_models(copy_corpus, tmp_path):
    """Paper B's continued trainings start from their baseline's averaged model: in TensorBoard their
    curve goes on from the baseline's last step (20 here), not from step 0 beside it."""
    baseline = trainer(copy_corpus, tmp_path, max_updates=20)
    baseline.train()
    baseline.write_outputs(tmp_path / "final.pt", tmp_path / "curve.tsv")
    window = checkpoint.final_window(tmp_path / "ckpt", 2, tmp_path / "final.pt")   # steps 10 and 20, as `average`
    checkpoint.save(checkpoint.average([path for _, path in window]), tmp_path / "averaged.pt")
    continued = trainer(copy_corpus, tmp_path, init=tmp_path / "averaged.pt", name="-continued", max_updates=10)
    continued.train()
    assert [step for step, _ in scalars(tmp_path / "board")["train/loss"]] == [5, 10, 15, 20]
    assert [step for step, _ in scalars(tmp_path / "board-continued")["train/loss"]] == [25, 30]
    assert [row["step"] for row in continued.curve if row.get("train_loss") is not None] == [5, 10]  # its own count
