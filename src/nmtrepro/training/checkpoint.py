"""Checkpoints: atomic saves in a rotating window, loading the latest, and averaging the last K.

A training checkpoint holds everything a resumed run needs to continue as if never stopped (model,
optimizer, data position, RNG state, curve so far). A model file (final, averaged) holds only the
model spec and weights: that is all decoding and analysis need. Both record the digests of the two
vocabularies the model was trained with (`vocab`), so that no command runs it with another's.

Scheduled checkpoints (checkpoint_<step>.pt, every save_every updates and at the end) rotate and are
averaged. A stop signal between them saves interrupted_<step>.pt instead: it is only for resuming, and
the next scheduled save deletes it, so an interrupted run keeps and averages exactly the checkpoints of
an uninterrupted one. A scheduled checkpoint of a shorter budget's window (`keep_steps`) leaves the
rotation as kept_<step>.pt: its weights alone (a third of the file), for averaging, never for resuming.
"""
from __future__ import annotations

import logging
import pickle
import re
from dataclasses import asdict
from pathlib import Path

import torch

from ..core.files import InputError, atomic_open
from ..models import build_model, warm_start_mismatch
from .settings import RERUN_FREE, Settings

log = logging.getLogger("nmtrepro.training.checkpoint")
NAME = re.compile(r"checkpoint_(\d+)\.pt$")
INTERRUPTED = re.compile(r"interrupted_(\d+)\.pt$")
KEPT = re.compile(r"kept_(\d+)\.pt$")
WEIGHTS = ("model_spec", "model", "step", "settings", "vocab")  # what a kept checkpoint holds
STALE = "stale-{}"  # folder inside the checkpoint directory for checkpoints of an earlier, different run


def checkpoints(directory: str | Path, pattern: re.Pattern = NAME) -> list[tuple[int, Path]]:
    """(step, path) of every complete scheduled checkpoint in `directory` (or those `pattern` names), oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := pattern.search(p.name))]
    return sorted(found)


def resumable(directory: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint a run may resume from, oldest first; at the same step an
    interrupted one is the newer (saved after the scheduled one, further into the data)."""
    return sorted(checkpoints(directory) + checkpoints(directory, INTERRUPTED), key=lambda c: (c[0], c[1].name[0]))


def save(obj: dict, path: str | Path) -> None:
    """Write `obj` atomically; a model with a non-finite weight is refused, so that a diverged run
    never replaces a good file."""
    for key, value in obj.get("model", {}).items():
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise InputError(f"refusing to save {path}: weight {key} is not finite (training diverged)")
    with atomic_open(path, "wb") as handle:
        torch.save(obj, handle)


def save_rotating(state: dict, directory: str | Path, step: int, keep_last: int, keep: list[int] = ()) -> Path:
    """Save `state` as checkpoint_<step>.pt, delete the interrupted checkpoints it supersedes and all
    but the newest `keep_last` scheduled ones; those at the steps `keep` names (shorter budgets'
    windows) stay as kept_<step>.pt, their weights alone."""
    path = Path(directory) / f"checkpoint_{step:08d}.pt"
    save(state, path)
    for _, old in checkpoints(directory, INTERRUPTED):
        old.unlink()
    for old_step, old in checkpoints(directory)[:-keep_last]:
        if old_step in keep:
            blob = load(old)
            save({key: blob[key] for key in WEIGHTS if key in blob}, old.with_name(f"kept_{old_step:08d}.pt"))
        old.unlink()
    return path


def save_interrupted(state: dict, directory: str | Path, step: int) -> Path:
    """Save `state` as interrupted_<step>.pt: resumable, but outside the rotation and averaging."""
    path = Path(directory) / f"interrupted_{step:08d}.pt"
    save(state, path)
    return path


def unschedule(path: Path) -> Path:
    """Rename a scheduled checkpoint to an interrupted one (a run's end that a longer run passes through)."""
    step = int(NAME.search(path.name).group(1))
    return path.rename(path.with_name(f"interrupted_{step:08d}.pt"))


def stale_folder(directory: str | Path) -> Path:
    """A new stale-<n> folder inside `directory`, the first n free: where another run's files go."""
    directory = Path(directory)
    n = 1
    while (directory / STALE.format(n)).exists():
        n += 1
    folder = directory / STALE.format(n)
    folder.mkdir()
    return folder


def set_aside(directory: str | Path) -> Path:
    """Move every checkpoint in `directory` into a new stale-<n> folder inside it (kept, not deleted)."""
    folder = stale_folder(directory)
    for _, path in resumable(directory) + checkpoints(directory, KEPT):
        path.rename(folder / path.name)
    return folder


def newest(directory: str | Path) -> tuple[dict | None, Path | None]:
    """The newest checkpoint in `directory` that loads, and its path; (None, None) if there is none.
    An unreadable one (truncated by a crash outside atomic_open) is passed over with a warning."""
    for _, path in reversed(resumable(directory)):
        try:
            return load(path), path
        except InputError as err:
            log.warning("%s; trying the checkpoint before it", err)
    return None, None


def vocab_digests(src_vocab, tgt_vocab) -> dict[str, str]:
    """What a checkpoint or model file records of its vocabularies (`Vocab.digest`)."""
    return {"src": src_vocab.digest, "tgt": tgt_vocab.digest}


def changes(blob: dict, spec: dict, init: dict | None, settings: Settings, vocab: dict | None = None) -> list[str]:
    """What differs between the run that saved the checkpoint `blob` and the run of model `spec`,
    warm-start weights `init`, `settings` and vocabularies `vocab` (`vocab_digests`) ("key: old -> new"):
    a run resumes only its own checkpoints, whatever settings.RERUN_FREE holds aside."""
    found = [f"model: {blob['model_spec']} -> {spec}"] if blob["model_spec"] != spec else []
    if vocab and blob.get("vocab") and blob["vocab"] != vocab:  # a checkpoint from before digests: unknown
        found.append("vocabularies: another prepared dataset (their digests differ)")
    old_init, new_init = blob.get("init") or {}, init or {}
    if old_init.get("sha256") != new_init.get("sha256"):
        found.append(f"warm start: {old_init.get('path')} -> {new_init.get('path')} (other weights)")
    # A checkpoint from before a setting existed ran with that setting's default.
    old, new = {**asdict(Settings()), **blob["settings"]}, asdict(settings)
    found += [f"{key}: {old.get(key)!r} -> {value!r}" for key, value in new.items()
              if key not in RERUN_FREE and old.get(key) != value]
    if blob["step"] > settings.max_updates:
        found.append(f"max_updates: {settings.max_updates} is below the checkpoint's step {blob['step']}")
    return found


def load(path: str | Path, mmap: bool = False) -> dict:
    """A checkpoint or model file; a missing, truncated or corrupt one is an InputError naming it.
    `mmap`: its tensors mapped, not read, for a caller that wants only its small entries (step, settings)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing checkpoint: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as err:
        raise InputError(f"{path} is not a readable checkpoint (truncated or corrupt: {err})") from None


def check_vocabularies(blob: dict, path: str | Path, vocabs: dict, where: str) -> None:
    """Refuse to run the model of `blob` (read from `path`) with vocabularies (side -> Vocab, read from
    `where`) it was not trained with: a model decoded with another dataset's vocabulary runs without error
    and prints fluent nonsense. Sizes are checked always, the digests where the file records them (files
    from before they were recorded: a warning)."""
    recorded = blob.get("vocab")
    for side, vocab in vocabs.items():
        size = blob["model_spec"].get(f"{side}_vocab")
        if size is not None and size != len(vocab):
            raise InputError(f"{path} was trained with a {side} vocabulary of {size} symbols; "
                             f"{where}/dict.{side}.txt has {len(vocab)}: not the model's vocabulary")
        if recorded and recorded[side] != vocab.digest:
            raise InputError(f"{path} was trained with another {side} vocabulary than {where}/dict.{side}.txt "
                             f"(digest {recorded[side][:12]}, the file's {vocab.digest[:12]})")
    if not recorded:
        log.warning("%s records no vocabulary digests (written before they were): %s's vocabularies are "
                    "checked by size only", path, where)


def load_model(path: str | Path, device: str | torch.device = "cpu", vocabs: dict | None = None,
               where: str | Path | None = None):
    """Rebuild a model from a model file (or a training checkpoint) in eval mode; `vocabs` (side -> Vocab,
    read from the folder `where`): the vocabularies it will run with, refused unless they are its own."""
    blob = load(path)
    if vocabs:
        check_vocabularies(blob, path, vocabs, where)
    model = build_model(blob["model_spec"])
    model.load_state_dict(blob["model"])
    return model.to(device).eval()


def warm_start(model: torch.nn.Module, path: str | Path) -> list[str]:
    """Copy a trained model's weights into `model`, whose family may add sublayers (a variant started
    from its trained baseline); returns the names of the tensors that keep the family's initialisation.
    Every tensor of the trained model must exist in `model` with the same shape: a smaller or
    differently sized model is not a warm start."""
    blob = load(path)
    own = model.state_dict()
    mismatch = warm_start_mismatch(own, blob["model"])
    if mismatch:
        raise InputError(f"{path}: cannot warm-start from it: its {mismatch} "
                         f"({blob['model_spec'].get('family')} -> model of another size?)")
    model.load_state_dict(blob["model"], strict=False)
    return [name for name in own if name not in blob["model"]]


def average(paths: list[Path]) -> dict:
    """Element-wise mean of the weights of several checkpoints of one model (Vaswani et al. 2017), oldest
    first. Its `step` is the newest one's: a training started from it (paper B's) logs its steps after
    it in TensorBoard."""
    total, spec, vocab, step = None, None, None, None
    for path in paths:
        blob = load(path)
        step = blob.get("step", step)
        if spec is None:
            spec, total = blob["model_spec"], {k: v.double().clone() for k, v in blob["model"].items()}
            vocab = blob.get("vocab")
            continue
        if blob["model_spec"] != spec or blob.get("vocab") != vocab:
            raise InputError(f"{path} holds a different model than {paths[0]}")
        for key, value in blob["model"].items():
            total[key] += value.double()
    model = {k: (v / len(paths)).to(torch.float32) for k, v in total.items()}
    return {"model_spec": spec, "model": model, "averaged": [str(p) for p in paths],
            **({"vocab": vocab} if vocab else {}), **({"step": step} if step is not None else {})}


def trained_steps(path: str | Path) -> int:
    """The updates that trained the model file `path` (a final or averaged model's `step`; 0 where it
    does not say)."""
    return load(path, mmap=True).get("step", 0)


def final_window(directory: str | Path, last: int, final: str | Path, at: int | None = None) -> list[tuple[int, Path]]:
    """(step, path) of the `last` scheduled checkpoints that end at the final model's step (or at step
    `at` before it: a shorter budget's window, which the training kept: `keep_steps`), `save_every`
    apart as the training saved them, oldest first. The newest K files alone are not enough: with one
    deleted (a corrupt newest checkpoint, say) they would silently come from an earlier stretch."""
    if not Path(directory).is_dir():
        raise InputError(f"{directory}: no such checkpoint folder")
    step, found = load(final, mmap=True)["step"], {**dict(checkpoints(directory, KEPT)), **dict(checkpoints(directory))}
    if at is not None:
        if at > step:
            raise InputError(f"{directory}: a window ending at step {at} lies past the final model's step {step} ({final})")
        step = at
    if step not in found:
        newest = f"its newest is step {max(found)}" if found else "it holds none"
        which = "the final model's step" if at is None else "the budget's step"
        raise InputError(f"{directory} has no checkpoint of {which} {step} ({final}; {newest}): "
                         "train again (delete the final model) to write it")
    every = load(found[step], mmap=True)["settings"]["save_every"]  # average() reads the weights
    wanted = sorted([step, *range((step - 1) // every * every, 0, -every)][:last])
    missing = [s for s in wanted if s not in found]
    if missing or len(wanted) < last:
        raise InputError(f"{directory}: averaging the last {last} checkpoints up to step {step} (every {every}) "
                         f"needs steps {wanted}, and " + (f"{missing} are missing" if missing else
                                                          f"training saved only {len(wanted)}")
                         + " (a deleted checkpoint, or keep_last below average.last): train again to write them")
    return [(s, found[s]) for s in wanted]


def add_arguments_average(parser) -> None:
    parser.add_argument("--checkpoint-dir", required=True, help="training checkpoint directory")
    parser.add_argument("--last", type=int, required=True, help="how many of the newest checkpoints")
    parser.add_argument("--final", required=True, help="the training's final model: the window ends at its step")
    parser.add_argument("--at", type=int, help="end the window at this step instead (a shorter budget's)")
    parser.add_argument("--out", required=True, help="averaged model file")


def run_average(args) -> None:
    window = final_window(args.checkpoint_dir, args.last, args.final, args.at)
    log.info("averaging steps %s", [s for s, _ in window])
    save(average([p for _, p in window]), args.out)
