"""Training: Adam + inverse-sqrt warmup, label smoothing, token batches with gradient accumulation,
rotating checkpoints and exact resume.

A run is a pure function of (data, model spec, settings): batches come from (seed, epoch), dropout
from a saved RNG state, so killing a job and running it again gives the same weights as an
uninterrupted run, on CPU. SIGTERM/SIGINT save a checkpoint before exiting.
"""
from __future__ import annotations

import json
import logging
import math
import signal
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from . import checkpoint, runtime
from .batching import collate, token_batches
from .criterion import model_loss
from .files import InputError, atomic_open
from .models import build_model, count_parameters
from .schedule import inverse_sqrt
from .vocab import IndexedData, Vocab

log = logging.getLogger("nmtrepro.train")
CURVE_COLUMNS = ("step", "epoch", "wall_s", "lr", "train_loss", "train_nll",
                 "valid_loss", "valid_nll", "tgt_tok_s")


@dataclass
class Settings:
    """Training settings (config `scales.<scale>.train`); defaults are paper A's."""
    max_updates: int = 100_000
    max_minutes: float = 0.0        # also stop after this much training time (0: no limit; not deterministic)
    max_tokens: int = 4096          # padded tokens per forward/backward batch
    update_tokens: int = 25_000     # accumulate batches up to this many target tokens, then update
    lr: float = 7e-4                # peak learning rate, reached after warmup
    warmup: int = 8000
    label_smoothing: float = 0.1
    clip_norm: float = 0.0          # 0: no clipping
    save_every: int = 1500
    keep_last: int = 5
    log_every: int = 100
    seed: int = 1
    threads: int = 0                # 0: torch's default
    precision: str = "fp32"         # fp32 | bf16 (autocast)
    device: str = "auto"

    @classmethod
    def from_dict(cls, values: dict) -> "Settings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(f"unknown train setting(s) {unknown}; known: {sorted(known)}")
        return cls(**values)


class Corpus:
    """The binarized training and validation data of a prepared dataset."""

    def __init__(self, data_dir: str | Path):
        data_dir = Path(data_dir)
        self.src_vocab = Vocab.load(data_dir / "dict.src.txt")
        self.tgt_vocab = Vocab.load(data_dir / "dict.tgt.txt")
        self.splits = {}
        for split in ("train", "valid"):
            src, tgt = IndexedData(data_dir / f"{split}.src.bin"), IndexedData(data_dir / f"{split}.tgt.bin")
            if len(src) != len(tgt):
                raise InputError(f"{data_dir}: {split}.src.bin has {len(src)} sentences, {split}.tgt.bin {len(tgt)}")
            self.splits[split] = (src, tgt)

    def batches(self, split: str, max_tokens: int, seed=None, epoch=0):
        src, tgt = self.splits[split]
        return token_batches(src.sizes, tgt.sizes, max_tokens, seed, epoch)

    def collate(self, split: str, indices):
        return collate(*self.splits[split], indices)


class Interrupted(Exception):
    pass


class Trainer:
    def __init__(self, corpus: Corpus, model_options: dict, settings: Settings, checkpoint_dir: str | Path):
        self.corpus, self.settings, self.dir = corpus, settings, Path(checkpoint_dir)
        self.device = runtime.setup(settings.threads, settings.device)
        self.precision = runtime.resolve_precision(self.device, settings.precision)
        torch.manual_seed(settings.seed)
        self.spec = {"src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab), **model_options}
        self.model = build_model(self.spec).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)
        self.step, self.epoch, self.position, self.wall = 0, 0, 0, 0.0
        self.curve: list[dict] = []
        self.stop_signal = None

    # -- state ----------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"model_spec": self.spec, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "settings": asdict(self.settings),
                "step": self.step, "epoch": self.epoch, "position": self.position, "wall_s": self.wall,
                "curve": self.curve, "rng": torch.get_rng_state()}

    def resume(self) -> bool:
        found = checkpoint.checkpoints(self.dir)
        if not found:
            return False
        step, path = found[-1]
        blob = checkpoint.load(path)
        if blob["model_spec"] != self.spec:
            raise InputError(f"{path} was trained with model {blob['model_spec']}, not {self.spec}; "
                             "delete the checkpoint directory to start over")
        self.model.load_state_dict(blob["model"])
        self.optimizer.load_state_dict(blob["optimizer"])
        self.step, self.epoch, self.position = blob["step"], blob["epoch"], blob["position"]
        self.wall, self.curve = blob["wall_s"], blob["curve"]
        torch.set_rng_state(blob["rng"])
        log.info("resuming from %s (step %d, epoch %d, batch %d)", path, step, self.epoch, self.position)
        return True

    def save(self) -> None:
        path = checkpoint.save_rotating(self.state(), self.dir, self.step, self.settings.keep_last)
        log.info("saved %s", path)

    # -- loop -----------------------------------------------------------------------------------
    def validate(self) -> tuple[float, float]:
        self.model.eval()
        loss = nll = tokens = 0.0
        with torch.no_grad(), runtime.autocast(self.device, self.precision):
            for indices in self.corpus.batches("valid", self.settings.max_tokens):
                batch = self.corpus.collate("valid", indices).to(self.device)
                l, n = model_loss(self.model, batch, self.settings.label_smoothing)
                loss, nll, tokens = loss + l.item(), nll + n.item(), tokens + batch.tgt_tokens
        self.model.train()
        return loss / tokens / math.log(2), nll / tokens / math.log(2)

    def update(self, group: list) -> tuple[float, float, int]:
        """One optimizer step over a group of batches; gradients are normalised by target tokens."""
        s = self.settings
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = nll_sum = 0.0
        tokens = 0
        for indices in group:
            batch = self.corpus.collate("train", indices).to(self.device)
            with runtime.autocast(self.device, self.precision):
                loss, nll = model_loss(self.model, batch, s.label_smoothing)
            loss.backward()
            loss_sum, nll_sum, tokens = loss_sum + loss.item(), nll_sum + nll.item(), tokens + batch.tgt_tokens
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.div_(tokens)
        if s.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.clip_norm)
        self.step += 1
        for g in self.optimizer.param_groups:
            g["lr"] = inverse_sqrt(self.step, s.lr, s.warmup)
        self.optimizer.step()
        return loss_sum, nll_sum, tokens

    def groups(self):
        """Yield (batch-index groups, next position) from the current epoch/position onwards."""
        s = self.settings
        while True:
            batches = self.corpus.batches("train", s.max_tokens, s.seed, self.epoch)
            sizes = [sum(self.corpus.splits["train"][1].sizes[i] for i in b) for b in batches]
            group, tokens = [], 0
            for bi in range(self.position, len(batches)):
                group.append(batches[bi])
                tokens += sizes[bi]
                # Update before the next batch would overshoot the budget (at least one batch each).
                if bi == len(batches) - 1 or tokens + sizes[bi + 1] > s.update_tokens:
                    yield group, bi + 1
                    group, tokens = [], 0
            self.epoch, self.position = self.epoch + 1, 0

    def train(self) -> None:
        s = self.settings
        self.model.train()
        log.info("model %s: %s parameters on %s, %s", self.spec.get("family"),
                 f"{count_parameters(self.model):,}", self.device, self.precision)
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._loop()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum, frame):
        self.stop_signal = signum

    def _loop(self) -> None:
        s = self.settings
        window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "time": 0.0}
        groups = self.groups()
        while not self.finished():
            group, next_position = next(groups)
            start = time.perf_counter()
            loss, nll, tokens = self.update(group)
            elapsed = time.perf_counter() - start
            self.position = next_position
            self.wall += elapsed
            for key, value in zip(("loss", "nll", "tokens", "time"), (loss, nll, tokens, elapsed)):
                window[key] += value
            last = self.finished()
            if self.step % s.log_every == 0 or last:
                self._log(window)
                window = dict.fromkeys(window, 0)
            if self.step % s.save_every == 0 or last:
                valid_loss, valid_nll = self.validate()
                self.curve.append({"step": self.step, "epoch": self.epoch, "wall_s": round(self.wall, 2),
                                   "valid_loss": valid_loss, "valid_nll": valid_nll})
                log.info("step %d | valid loss %.3f | valid nll %.3f | ppl %.2f",
                         self.step, valid_loss, valid_nll, 2 ** valid_nll)
                self.save()
            if self.stop_signal is not None:
                self.save()
                raise Interrupted(f"stopped by signal {self.stop_signal} at step {self.step}; run again to resume")

    def finished(self) -> bool:
        s = self.settings
        return self.step >= s.max_updates or (s.max_minutes > 0 and self.wall >= 60 * s.max_minutes)

    def _log(self, window: dict) -> None:
        s, tokens = self.settings, max(window["tokens"], 1)
        loss, nll = window["loss"] / tokens / math.log(2), window["nll"] / tokens / math.log(2)
        speed = window["tokens"] / max(window["time"], 1e-9)
        lr = self.optimizer.param_groups[0]["lr"]
        left = (s.max_updates - self.step) * self.wall / max(self.step, 1)
        if s.max_minutes > 0:
            left = min(left, 60 * s.max_minutes - self.wall)
        self.curve.append({"step": self.step, "epoch": self.epoch, "wall_s": round(self.wall, 2), "lr": lr,
                           "train_loss": loss, "train_nll": nll, "tgt_tok_s": round(speed)})
        log.info("step %d/%d | epoch %d | loss %.3f | nll %.3f | ppl %.2f | lr %.2e | %.0f tgt tok/s | "
                 "%.0f s trained, ~%.0f s left", self.step, s.max_updates, self.epoch + 1, loss, nll,
                 2 ** nll, lr, speed, self.wall, left)

    def write_outputs(self, model_path: str | Path, curve_path: str | Path) -> None:
        checkpoint.save({"model_spec": self.spec, "model": self.model.state_dict(), "step": self.step,
                         "wall_s": self.wall}, model_path)
        with atomic_open(curve_path) as handle:
            handle.write("\t".join(CURVE_COLUMNS) + "\n")
            for row in self.curve:
                handle.write("\t".join("" if row.get(c) is None else str(row[c]) for c in CURVE_COLUMNS) + "\n")


def add_arguments_train(parser) -> None:
    parser.add_argument("--data", required=True, help="prepared dataset directory (results/prepare/NAME)")
    parser.add_argument("--model", required=True, help="model spec as JSON: {family, options...}")
    parser.add_argument("--settings", default="{}", help="training settings as JSON (see train.Settings)")
    parser.add_argument("--checkpoint-dir", required=True, help="rotating checkpoints; kept after a failure")
    parser.add_argument("--threads", type=int, help="CPU threads (overrides the settings' value)")
    parser.add_argument("--out", required=True, help="final model file")
    parser.add_argument("--curve", required=True, help="training curve TSV")


def run_train(args) -> None:
    try:
        model_options, settings = json.loads(args.model), Settings.from_dict(json.loads(args.settings))
    except json.JSONDecodeError as err:
        raise InputError(f"--model/--settings is not valid JSON: {err}") from err
    if args.threads:
        settings.threads = args.threads
    trainer = Trainer(Corpus(args.data), model_options, settings, args.checkpoint_dir)
    if not trainer.resume():
        log.info("starting from scratch in %s", args.checkpoint_dir)
    try:
        trainer.train()
    except Interrupted as err:
        raise SystemExit(f"nmtrepro train: {err}") from None
    trainer.write_outputs(args.out, args.curve)
