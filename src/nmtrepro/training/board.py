"""TensorBoard scalars of one training, as fairseq's `--tensorboard-logdir` and OpenNMT-py's
`--tensorboard` write them, so that seeds, variants and their baselines can be followed live side by side
(`tensorboard --logdir results/<scale>/tensorboard`).

A training writes into its own run folder (`nmtrepro train --tensorboard DIR`, the workflow's
results/<scale>/tensorboard/<experiment>): the curve TSV's numbers at the steps it logs them (losses in
bits a target token, the learning rate, target tokens/s, validation), the update's gradient norm,
skipped updates, a GPU's peak memory and the family's own diagnostics, and once, at a fresh start, the
model options and train settings as hparams (TensorBoard's HParams tab filters runs by them).

A training started from a trained model (paper B's, `init`) logs its steps after that model's, so that
in TensorBoard it continues its baseline's curve rather than starting again at step 0 beside it.
A resumed training continues its curve: the writer purges whatever the killed run wrote past the step of
the checkpoint it resumes from, so every step appears once. A retrained one (its checkpoints set aside as
another run's, checkpoint.set_aside) moves its old events into a stale-<n> folder of the run folder, as
the checkpoints move, and starts a new curve. Only rank 0 writes.
"""
from __future__ import annotations

from pathlib import Path

from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from .checkpoint import stale_folder


def set_aside(folder: str | Path) -> None:
    """Move the event files of `folder` into its next free stale-<n> folder (another run's curve)."""
    folder = Path(folder)
    events = sorted(folder.glob("events.out.tfevents.*"))
    if not events:
        return
    stale = stale_folder(folder)
    for path in events:
        path.rename(stale / path.name)


def flat(options: dict, prefix: str = "") -> dict:
    """Nested options as TensorBoard's hparams take them: scalars and strings, keys joined by dots."""
    out = {}
    for key, value in options.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return out


class Board:
    """The run folder's writer: `scalars(step, {name: value})`; `close()` at the end."""

    def __init__(self, folder: str | Path, step: int, options: dict, after: int = 0):
        """`step`: the checkpoint's step a resumed run starts from, 0 for a fresh start; events past it
        are purged (a run killed before its first checkpoint leaves some too). A fresh start writes
        `options`, the model's and the settings', as hparams. `after`: the steps of the model the
        training started from, which its own steps are logged after (step s at `after` + s)."""
        self.after = after
        self.writer = SummaryWriter(str(folder), purge_step=after + step + 1)
        if step == 0:
            for summary in hparams(flat(options), {"valid/nll": 0.0}):
                self.writer.file_writer.add_summary(summary)

    def scalars(self, step: int, values: dict) -> None:
        for name, value in values.items():
            if value is not None:
                self.writer.add_scalar(name, value, self.after + step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
