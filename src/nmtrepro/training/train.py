"""Training: Adam + warmup and an inverse-sqrt (or constant) schedule, label smoothing, token batches
with gradient accumulation, rotating checkpoints and exact resume.

A run is a pure function of (data, model spec, settings, the weights it warm-starts from): batches
come from (seed, epoch), dropout from a saved RNG state, so killing a job and running it again gives
the same weights as an uninterrupted run, on CPU. SIGTERM/SIGINT/SIGUSR1 save a checkpoint before
exiting, so a pre-empted cluster job resumes when it is run again. A run resumes only checkpoints of
the same run (model, settings but settings.RERUN_FREE, warm-start weights); others are moved aside
into a stale-<n> folder and training starts afresh.

An update whose loss or gradient is not finite is skipped (counted, as fairseq does); MAX_BAD_IN_ROW
of them in a row stop the job with an error, leaving the last good checkpoint in place. A micro-batch
that runs out of GPU memory is retried as its halves, down to one sentence that is skipped, counted
in the log (memory.py).

An update holds at least update_tokens target tokens (paper A: "at least 25k"), by gradient
accumulation. Under torchrun (several GPUs) every rank walks the same deterministic sequence of batch
groups, each of at least update_tokens / world_size target tokens, and rank r computes group r of
every world_size consecutive ones; DistributedDataParallel sums the gradients, so one update holds at
least update_tokens whatever the GPU count. Only rank 0 validates, saves and logs.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ..core import runtime
from ..core.files import InputError, atomic_open, file_digest
from ..data.annotations import add_annotation_argument, annotation_paths
from ..models import build_model, configure
from ..models.size import parameter_counts
from . import board, checkpoint, memory
from .corpus import Corpus
from .criterion import LossOf, model_loss, valid_loss
from .fast import CompiledLoss, FastPath
from .schedule import SCHEDULES
from .settings import Settings

log = logging.getLogger("nmtrepro.training.train")
CURVE_COLUMNS = ("step", "epoch", "wall_s", "lr", "train_loss", "train_nll",
                 "valid_loss", "valid_nll", "tgt_tok_s", "src_tok_s")
MAX_BAD_IN_ROW = 10  # non-finite updates in a row that mean the run diverged
MIN_LOSS_SCALE = 1e-4  # fp16: a loss scale backed off below this means the run diverged (fairseq's default)


class Interrupted(Exception):
    pass


class Diverged(Exception):
    """Too many non-finite updates in a row."""


def perplexity(bits: float) -> float:
    """2 ** bits, infinite where a float overflows (a huge early loss must not crash the log line)."""
    return 2 ** bits if bits < 1000 else math.inf


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class Trainer:
    """One training run: its model, the step that updates it (`update`: the fast path, gradient
    accumulation, the out-of-memory policy) and the loop that logs, validates and saves it (`train`)."""

    def __init__(self, corpus: Corpus, model_options: dict, settings: Settings, checkpoint_dir: str | Path,
                 shards: int | None = None, init: str | Path | None = None, tensorboard: str | Path | None = None):
        """`shards`: batch groups per update (default: the world size). One process given shards=N
        computes exactly the updates of an N-process run, one after the other (the tests use that).
        `init`: a trained model file to warm-start from (its weights copied, the tensors it lacks
        initialised as the family does), with a fresh optimizer and schedule. `tensorboard`: the run
        folder of its TensorBoard scalars (board.py), written by rank 0."""
        self.corpus, self.settings, self.dir = corpus, settings, Path(checkpoint_dir)
        self.device = runtime.setup(settings.threads, settings.device, settings.cudnn_attention)
        if self.device.type == "cpu":
            runtime.cpu_training_defaults()
        self.precision = runtime.resolve_precision(self.device, settings.precision)
        self.dist = runtime.distributed(self.device)
        self.rank, self.world = self.dist.rank, self.dist.world
        self.shards = shards or self.world
        if self.world > 1 and self.shards != self.world:
            raise InputError(f"{self.world} processes need {self.world} shards per update, not {self.shards}")
        self._build(model_options, init)
        # the micro-batch's padded tokens; max_tokens auto: found at the start of train() or kept by a checkpoint
        self.max_tokens = None if settings.max_tokens == "auto" else settings.max_tokens
        self.step, self.epoch, self.position, self.wall = 0, 0, 0, 0.0
        self.curve: list[dict] = []
        self.window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "src_tokens": 0, "time": 0.0}  # since the last log line
        self.skipped, self.bad_in_row = 0, 0  # non-finite updates: in all, and since the last good one
        self.overflows = 0  # fp16 updates skipped while the loss scaler backed off (not divergence)
        self.oom = {"splits": 0, "skipped": 0}  # out of memory, over all ranks: micro-batches halved, sentences skipped
        self.stop_signal = None
        self.grad_norm = None  # the last applied update's, before clipping (TensorBoard's scalar)
        self.board_dir, self.board = tensorboard, None

    def _build(self, model_options: dict, init: str | Path | None) -> None:
        """The model (warm-started from `init`), the step that trains it (fast.FastPath; its loss under
        DistributedDataParallel on several ranks), Adam and fp16's loss scaler."""
        torch.manual_seed(self.settings.seed)
        self.spec = {"src_vocab": len(self.corpus.src_vocab), "tgt_vocab": len(self.corpus.tgt_vocab), **model_options}
        self.vocab = checkpoint.vocab_digests(self.corpus.src_vocab, self.corpus.tgt_vocab)
        self.model = build_model(self.spec)
        self.init, self.init_steps = None, 0
        if init is not None:
            fresh = checkpoint.warm_start(self.model, init)
            self.init = {"path": str(init), "sha256": file_digest(init)}
            self.init_steps = checkpoint.trained_steps(init)  # TensorBoard logs this training's steps after them
            log.info("warm start from %s: %d tensors keep the family's initialisation%s", init, len(fresh),
                     f" ({', '.join(fresh[:4])}{', ...' if len(fresh) > 4 else ''})" if fresh else "")
        self.model = self.model.to(self.device)
        self.fast = FastPath(LossOf(self.model, self.settings.label_smoothing), self.spec.get("family"),
                             self.settings.fast, self.settings.buckets, self.device)
        self.loss = self.fast.loss
        if self.world > 1:
            torch.manual_seed(self.settings.seed + self.rank)  # same initial weights, different dropout per rank
            self.loss = torch.nn.parallel.DistributedDataParallel(
                self.loss, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                process_group=self.dist.device)
        # fused: one kernel over all parameters (measured on the tiny base on CPU: 1.6 ms a step, 6.8 ms
        # for the per-tensor loop that torch picks on CPU by default).
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.settings.lr, betas=(0.9, 0.98), eps=1e-9,
                                          fused=True)
        self.scaler = runtime.grad_scaler(self.device, self.precision)

    @property
    def compiled(self) -> CompiledLoss | None:
        """The compiled loss where the step is compiled (its shapes and warm calls: tests and benches read them)."""
        return self.fast.compiled

    @property
    def graphs(self) -> bool:
        """Whether the step replays CUDA graphs over batches padded to fixed shapes (fast.py)."""
        return self.fast.graphs

    # -- state --------------------------------------------------------------------------------------
    def state(self) -> dict:
        """The checkpoint; every rank's RNG state goes in it (a collective call under torchrun)."""
        return {"model_spec": self.spec, "vocab": self.vocab, "init": self.init, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(),
                "settings": asdict(self.settings), "max_tokens": self.max_tokens,
                "step": self.step, "epoch": self.epoch, "position": self.position, "wall_s": self.wall,
                "curve": self.curve, "window": self.window, "skipped": self.skipped, "overflows": self.overflows,
                "oom": self.oom, "rng": torch.get_rng_state(), "rank_rng": self._gather(self._rng())}

    def _rng(self) -> dict:
        return {"cpu": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None}

    def _gather(self, obj) -> list:
        if self.world == 1:
            return [obj]
        gathered = [None] * self.world
        torch.distributed.all_gather_object(gathered, obj, group=self.dist.host)
        return gathered

    def _barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier(group=self.dist.host)

    def resume(self) -> bool:
        """Continue from the newest readable checkpoint of this same run; False if there is none.
        Checkpoints of another model or other settings (checkpoint.changes) are moved aside, not resumed."""
        blob, path = checkpoint.newest(self.dir)
        if blob is None:
            return False
        changes = checkpoint.changes(blob, self.spec, self.init, self.settings, self.vocab)
        if changes:
            self._set_aside(changes)
            return False
        self._load(blob)
        if path.name.startswith("checkpoint_") and self.step % self.settings.save_every and not self.finished():
            self._barrier()
            if self.rank == 0:  # the end of a shorter run, off this longer run's schedule
                path = checkpoint.unschedule(path)
            self._barrier()
        log.info("resuming from %s (step %d, epoch %d, batch %d)", path, self.step, self.epoch, self.position)
        return True

    def _set_aside(self, changes: list[str]) -> None:
        """Move the checkpoints of another run (`changes`: how it differs) aside, once every rank has read them."""
        self._barrier()
        if self.rank == 0:
            folder = checkpoint.set_aside(self.dir)
            log.info("the checkpoints in %s belong to another run (%s): moved them to %s; starting afresh",
                     self.dir, "; ".join(changes), folder)
            if self.board_dir is not None:
                board.set_aside(self.board_dir)
        self._barrier()

    def _load(self, blob: dict) -> None:
        """Take up the state of this same run that the checkpoint `blob` holds (`state`)."""
        self.model.load_state_dict(blob["model"])
        self.optimizer.load_state_dict(blob["optimizer"])
        if blob.get("scaler"):  # empty when saved without fp16 (on a GPU with bf16, say)
            self.scaler.load_state_dict(blob["scaler"])
        self.step, self.epoch, self.position = blob["step"], blob["epoch"], blob["position"]
        self.max_tokens = blob.get("max_tokens") or self.max_tokens  # auto: the size the run found, and planned with
        self.wall, self.curve = blob["wall_s"], blob["curve"]
        self.window = {**self.window, **blob["window"]}  # a checkpoint from before src_tokens lacks it
        self.skipped, self.overflows = blob["skipped"], blob.get("overflows", 0)
        self.oom = {**self.oom, **blob.get("oom", {})}  # a checkpoint from before OOM recovery lacks it
        torch.set_rng_state(blob["rng"])
        rank_rng = blob.get("rank_rng") or []
        if len(rank_rng) == self.world:
            torch.set_rng_state(rank_rng[self.rank]["cpu"])
            if rank_rng[self.rank]["cuda"] is not None and self.device.type == "cuda":
                torch.cuda.set_rng_state(rank_rng[self.rank]["cuda"], self.device)

    def save(self, interrupted: bool = False) -> None:
        """A scheduled (rotating) checkpoint, or an interrupted one that only a resume reads."""
        state = self.state()
        if self.rank == 0:
            if interrupted:
                path = checkpoint.save_interrupted(state, self.dir, self.step)
            else:
                path = checkpoint.save_rotating(state, self.dir, self.step, self.settings.keep_last,
                                                     self.settings.keep_steps)
            log.info("saved %s", path)

    # -- loop ---------------------------------------------------------------------------------------
    def train(self) -> None:
        self.model.train()
        log.info("model %s: %s parameters on %s, %s", self.spec.get("family"),
                 f"{parameter_counts(self.model)['total']:,}", self.device, self.precision)
        if self.max_tokens is None:
            self.max_tokens = self._fit_max_tokens()
        if self.board_dir is not None and self.rank == 0:
            self.board = board.Board(self.board_dir, self.step, {"model": self.spec, "settings": asdict(self.settings)},
                                     after=self.init_steps)
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        try:
            self._loop()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            if self.board is not None:
                self.board.close()

    def _loop(self) -> None:
        """Update after update until the run is finished: a log line, and validation and a checkpoint, on
        their schedules; on a stop signal, a checkpoint (where none was just saved) and Interrupted."""
        s = self.settings
        updates = self.updates()
        while not self.finished():
            group, next_position = next(updates)
            start = time.perf_counter()
            result = self.update(group)
            elapsed, stop = self._vote(time.perf_counter() - start)
            self.position = next_position
            self.wall += elapsed
            applied = result is not None  # skipped updates leave the step, window and schedule as they were
            if applied:
                for key, value in zip(("loss", "nll", "tokens", "src_tokens", "time"), (*result, elapsed)):
                    self.window[key] += value
            last = self.finished()
            if ((applied and self.step % s.log_every == 0) or last) and self.rank == 0:
                self._log(self.window)
                self.window = dict.fromkeys(self.window, 0)
            scheduled = (applied and self.step % s.save_every == 0) or last
            if scheduled:
                self.validate_and_save()
            if stop:
                if not scheduled:
                    self.save(interrupted=True)
                raise Interrupted(f"stopped by signal {self.stop_signal} at step {self.step}; run again to resume")

    def validate_and_save(self) -> None:
        """A scheduled checkpoint, after rank 0 validated the model: a row of the curve and a log line."""
        if self.rank == 0:
            loss, nll = self.validate()
            self.curve.append({"step": self.step, "epoch": self.epoch, "wall_s": round(self.wall, 2),
                               "valid_loss": loss, "valid_nll": nll})
            figures = self._diagnostics("valid")
            log.info("step %d | valid loss %.3f | valid nll %.3f | ppl %.2f%s",
                     self.step, loss, nll, perplexity(nll), diagnostics_note(figures))
            self._board({"valid/loss": loss, "valid/nll": nll}, "valid", figures)
        self.save()

    def validate(self) -> tuple[float, float]:
        self.model.eval()
        losses = valid_loss(self.model, self.corpus, self.max_tokens, self.settings.label_smoothing, self.device,
                            self.precision)
        self.model.train()
        return losses

    def finished(self) -> bool:
        s = self.settings
        return self.step >= s.max_updates or (s.max_minutes > 0 and self.wall >= 60 * s.max_minutes)

    def _vote(self, elapsed: float) -> tuple[float, bool]:
        """(the slowest rank's step time, whether any rank got a stop signal): one host collective an
        update. Every rank's max_minutes clock stops together, and all ranks save and stop at the
        same step.

        Every rank decides from the reduced values alone. A signal that lands after the vote stays
        in `stop_signal` for the next update's vote: overwriting it with the vote's "no" lost
        signals that reached every rank during the all_reduce (seen under load).
        """
        if self.world == 1:
            return elapsed, self.stop_signal is not None
        votes = torch.tensor([elapsed, self.stop_signal or 0], dtype=torch.float64)
        torch.distributed.all_reduce(votes, op=torch.distributed.ReduceOp.MAX, group=self.dist.host)
        elapsed, signum = votes.tolist()
        if signum:
            self.stop_signal = int(signum)
        return elapsed, bool(signum)

    def _on_signal(self, signum, frame):
        self.stop_signal = signum

    def updates(self):
        """Yield (this process's batches, next position) per update: of `shards` consecutive groups,
        rank r takes groups r, r + world, ... (all of them in a single process)."""
        groups = self.groups()
        while True:
            chunk = [next(groups) for _ in range(self.shards)]
            yield [b for group, _ in chunk[self.rank::self.world] for b in group], chunk[-1][1]

    def groups(self):
        """Yield (batch-index groups, next position) from the current epoch/position onwards.

        A group takes batches until it holds at least update_tokens / shards target tokens, so an
        update (`shards` groups) holds at least update_tokens, overshooting by less than one batch per
        shard. A group that an epoch's end leaves short goes on with the next epoch's first batches
        (self.epoch then already counts the new epoch): every group is full, and the (epoch, position)
        after a group is still all that a resume needs.
        """
        s = self.settings
        budget = math.ceil(s.update_tokens / self.shards)
        group, tokens = [], 0
        while True:
            batches = self.corpus.batches("train", self.max_tokens, s.seed, self.epoch, s.buckets)
            for bi in range(self.position, len(batches)):
                group.append(batches[bi])
                tokens += int(batches.tgt_tokens[bi])  # counted once per epoch by token_batches
                if tokens >= budget:
                    yield group, bi + 1
                    group, tokens = [], 0
            self.epoch, self.position = self.epoch + 1, 0

    # -- update -------------------------------------------------------------------------------------
    def update(self, group: list) -> tuple[float, float, int, int] | None:
        """One optimizer step over this rank's batches; gradients are normalised by the target tokens
        of all ranks. Returns the loss, NLL, target and source tokens (paper D counts its speed in
        source tokens) summed over all ranks, or None when the
        loss or gradient was not finite and the update was skipped (the same on every rank: both are
        reduced over the ranks), or when every sentence of it ran out of memory.

        The totals and the gradient's norm stay on the device until the update's end and come back
        together: one host sync an update, not one a micro-batch (each `.item()` waits for the GPU to
        drain its queue). The gradient is then scaled once, by 1 / tokens and the clipping factor,
        as clip_grad_norm_ scales the gradient divided by the tokens.
        """
        plan = list(group)  # the micro-batches; one that runs out of memory gives way to its halves
        oom = [0, 0]        # micro-batches split, sentences skipped (memory.give_way)
        while (totals := self._accumulate(plan, oom)) is None:
            pass            # a backward ran out of memory: the update starts again from zero gradients
        if any(oom):
            totals[4:] += torch.tensor(oom, dtype=totals.dtype).to(self.device)
        if self.world > 1:
            torch.distributed.all_reduce(totals, group=self.dist.device)
        self.scaler.unscale_(self.optimizer)  # fp16: the gradients as they were before loss scaling
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        summed_norm = torch.nn.utils.get_total_norm(grads).to(totals)[None]  # DDP averaged the sums over ranks
        loss_sum, nll_sum, tokens, src_tokens, splits, dropped, summed_norm = torch.cat((totals, summed_norm)).tolist()
        self.oom["splits"] += int(splits)
        self.oom["skipped"] += int(dropped)
        if not self._optimizer_step(grads, loss_sum, nll_sum, int(tokens), summed_norm):
            return None
        return loss_sum, nll_sum, int(tokens), int(src_tokens)

    def _optimizer_step(self, grads: list[torch.Tensor], loss_sum: float, nll_sum: float, tokens: int,
                        summed_norm: float) -> bool:
        """Step the optimizer with the summed gradients `grads` divided by the update's `tokens` (and
        clipped), and the schedule with it; False where the update is skipped instead: no sentence of it
        fitted in memory, or its loss or gradient is not finite."""
        s = self.settings
        if tokens == 0:
            log.warning("after step %d: no sentence of the update fitted in memory; update skipped", self.step)
            self.scaler.update()  # fp16: closes the unscale_ above (a scaler allows one per update)
            return False
        scale = self.world / tokens                      # the sum over all ranks / tokens
        norm = summed_norm * scale
        if not (math.isfinite(loss_sum) and math.isfinite(nll_sum) and math.isfinite(norm)):
            self._skip(loss_sum, norm)
            return False
        if s.clip_norm > 0:
            scale *= min(1.0, s.clip_norm / (norm + 1e-6))  # clip_grad_norm_'s factor
        torch._foreach_mul_(grads, scale)
        self.bad_in_row, self.grad_norm = 0, norm
        self.step += 1
        for g in self.optimizer.param_groups:
            g["lr"] = SCHEDULES[s.schedule](self.step, s.lr, s.warmup)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return True

    def _accumulate(self, plan: list, oom: list) -> torch.Tensor | None:
        """Forward and backward over the micro-batches of `plan`, summing their gradients; returns the
        totals (6,): loss, NLL, target and source tokens, and room for the update's OOM counts.

        A micro-batch that runs out of memory gives way to its halves in `plan`, or to nothing when it is
        one sentence, counted in `oom` (memory.give_way). Out of memory in a forward left the gradients
        as they were: the halves run next. In a backward it may have added part of that micro-batch's
        gradient to the sums already: None then asks update() to run the plan again.
        """
        self.fast.gradients.start()
        totals = torch.zeros(6, dtype=torch.float64, device=self.device)
        i = 0
        while i < len(plan):
            # DDP all-reduces the gradients on the last backward of the update only.
            sync = i == len(plan) - 1 or self.world == 1
            failed = self._micro_batch(plan[i], sync, totals)
            if failed is None:
                i += 1
            elif memory.give_way(plan, i, oom, failed, self.step, self.device, self.rank, self.world):
                return None
        self.fast.gradients.finish()
        return totals

    def _micro_batch(self, indices: list[int], sync: bool, totals: torch.Tensor) -> str | None:
        """Forward and backward over one micro-batch, its gradient added to the parameters' and its sums
        to `totals`; None when done, else where it ran out of memory ("forward" or "backward")."""
        phase = "forward"
        try:
            batch = self.corpus.collate("train", indices, self.settings.buckets,
                                        self.fast.fixed(self.max_tokens)).to(self.device)
            with contextlib.nullcontext() if sync else self.loss.no_sync():
                with runtime.autocast(self.device, self.precision):
                    loss, nll = self.loss(batch.net_input, batch.prev, batch.target)
                phase = "backward"
                self.fast.gradients.backward(self.scaler.scale(loss), reduced=sync and self.world > 1)
        except RuntimeError as err:
            if not memory.is_out_of_memory(err):
                raise
            return phase  # leaving the handler frees the attempt's tensors with the exception's frames
        totals[:2] += torch.stack((loss.detach(), nll.detach())).double()
        totals[2] += batch.tgt_tokens
        totals[3] += batch.src_tokens
        return None

    def _skip(self, loss_sum: float, norm) -> None:
        """Drop this update's gradients. Under fp16 a finite loss with an infinite gradient is the loss
        scale overflowing: the scaler halves it and the update is retried on the next batches, as
        fairseq does, counted apart from divergence until the scale falls below MIN_LOSS_SCALE."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.is_enabled():
            self.scaler.update()  # backs off after the overflow that unscale_ found
            if math.isfinite(loss_sum) and self.scaler.get_scale() >= MIN_LOSS_SCALE:
                self.overflows += 1
                log.info("after step %d: fp16 gradient overflow, loss scale lowered to %g (%d overflows)",
                         self.step, self.scaler.get_scale(), self.overflows)
                return
        self.skipped, self.bad_in_row = self.skipped + 1, self.bad_in_row + 1
        log.warning("after step %d: loss %s, gradient norm %s: update skipped (%d in a row, %d in all)",
                    self.step, loss_sum, float(norm), self.bad_in_row, self.skipped)
        if self.bad_in_row >= MAX_BAD_IN_ROW:
            found = checkpoint.resumable(self.dir)
            kept = f"the last good checkpoint is {found[-1][1]}" if found else "no checkpoint was saved yet"
            raise Diverged(f"training diverged: {self.bad_in_row} updates in a row had a non-finite loss or "
                           f"gradient after step {self.step}; {kept} (lower lr, raise warmup or set clip_norm)")

    # -- max_tokens auto ----------------------------------------------------------------------------
    def _fit_max_tokens(self) -> int:
        """max_tokens auto: the micro-batch the GPU's memory holds, the same on every rank
        (memory.auto_max_tokens), probed by `_probe`; at most half a rank's update."""
        src, tgt = self.corpus.splits["train"]
        cap = math.ceil(self.settings.update_tokens / self.shards) // 2
        return memory.auto_max_tokens(self._probe, np.maximum(src.sizes, tgt.sizes), self.settings.buckets,
                                      self.model, self.device, cap, self.dist)

    def _probe(self, indices: list[int], tokens: int) -> None:
        """One eager forward and backward over the sentences `indices`, batched as a training micro-batch
        of `tokens` padded tokens; the gradients and the random state are left as they were."""
        try:
            batch = self.corpus.collate("train", indices, self.settings.buckets, self.fast.fixed(tokens))
            batch = batch.to(self.device)
            with torch.random.fork_rng(devices=[self.device]):
                with runtime.autocast(self.device, self.precision):
                    loss, _ = model_loss(self.model, batch.net_input, batch.prev, batch.target,
                                         self.settings.label_smoothing)
                loss.backward()
        finally:
            self.optimizer.zero_grad(set_to_none=True)

    # -- log ----------------------------------------------------------------------------------------
    def _log(self, window: dict) -> None:
        s, tokens = self.settings, max(window["tokens"], 1)
        loss, nll = window["loss"] / tokens / math.log(2), window["nll"] / tokens / math.log(2)
        speed, src_speed = (window[key] / max(window["time"], 1e-9) for key in ("tokens", "src_tokens"))
        lr = self.optimizer.param_groups[0]["lr"]
        left = (s.max_updates - self.step) * self.wall / max(self.step, 1)
        if s.max_minutes > 0:
            left = min(left, 60 * s.max_minutes - self.wall)
        self.curve.append({"step": self.step, "epoch": self.epoch, "wall_s": round(self.wall, 2), "lr": lr,
                           "train_loss": loss, "train_nll": nll, "tgt_tok_s": round(speed),
                           "src_tok_s": round(src_speed)})
        # On a GPU, the peak memory allocated so far: what a larger max_tokens or model would have to fit.
        peak_gib = torch.cuda.max_memory_allocated(self.device) / 2 ** 30 if self.device.type == "cuda" else None
        peak = f" | peak {peak_gib:.1f} GiB" if peak_gib is not None else ""
        figures = self._diagnostics("train")
        self._board({"train/loss": loss, "train/nll": nll, "train/lr": lr, "train/tgt_tok_s": speed,
                     "train/grad_norm": self.grad_norm, "train/skipped_updates": self.skipped,
                     "gpu/peak_gib": peak_gib}, "train", figures)
        log.info("step %d/%d | epoch %d | loss %.3f | nll %.3f | ppl %.2f | lr %.2e | %.0f tgt tok/s | "
                 "%.0f s trained, ~%.0f s left%s%s%s%s", self.step, s.max_updates, self.epoch + 1, loss, nll,
                 perplexity(nll), lr, speed, self.wall, left, peak, self.fast.warm_note(),
                 self._oom_note(), diagnostics_note(figures))

    def _diagnostics(self, split: str) -> dict[str, float]:
        """The family's own figures since the last call for `split` ("train" or "valid"), from its
        `diagnostics(split)` where it has one (NPMT: the reordering layer's saturation, the pairs it has
        no segmentation for, the segment length); once a log line, as the family counts them afresh after each call."""
        return self.model.diagnostics(split) if hasattr(self.model, "diagnostics") else {}

    def _board(self, values: dict, split: str, figures: dict[str, float]) -> None:
        """The step's `values` and the family's `figures` of `split` as TensorBoard scalars, where it writes them."""
        if self.board is not None:
            self.board.scalars(self.step, {**values, **{f"{split}/{name}": value for name, value in figures.items()}})

    def _oom_note(self) -> str:
        """The log line's out-of-memory counts so far, when there are any."""
        if not any(self.oom.values()):
            return ""
        return (f" | out of memory so far: {self.oom['splits']} micro-batches split in two, "
                f"{self.oom['skipped']} sentences skipped")

    # -- the end of a run ---------------------------------------------------------------------------
    def close(self) -> None:
        """Leave the process groups, every rank together.

        The barrier lets every rank's last collective finish before the groups are destroyed. A gloo
        group freed while its worker thread still releases a collective's Python tensors deadlocks: the
        group's destructor joins the thread holding the GIL, and the thread waits for the GIL. The
        barrier's own work is released on that thread as well, so the groups that DDP's reducer still
        holds are never freed: the training command's ranks leave without a teardown (`leave`).
        """
        if self.world == 1:
            return
        torch.distributed.barrier(group=self.dist.host)
        torch.distributed.destroy_process_group()

    def write_outputs(self, model_path: str | Path, curve_path: str | Path) -> None:
        checkpoint.save({"model_spec": self.spec, "vocab": self.vocab, "model": self.model.state_dict(),
                         "step": self.step, "wall_s": self.wall}, model_path)
        with atomic_open(curve_path) as handle:
            handle.write("\t".join(CURVE_COLUMNS) + "\n")
            for row in self.curve:
                handle.write("\t".join("" if row.get(c) is None else str(row[c]) for c in CURVE_COLUMNS) + "\n")


def diagnostics_note(figures: dict[str, float]) -> str:
    """A family's figures (Trainer._diagnostics) for a log line, as " | name value" each (a count whole)."""
    return "".join(f" | {name.replace('_', ' ')} {value if isinstance(value, int) else f'{value:.3g}'}"
                   for name, value in figures.items())


def add_arguments_train(parser) -> None:
    parser.add_argument("--prepared", required=True, help="prepared dataset folder (results/<scale>/prepare/NAME)")
    parser.add_argument("--model", required=True, help="model spec as JSON: {family, options...}")
    parser.add_argument("--settings", default="{}", help="training settings as JSON (see training/settings.py)")
    parser.add_argument("--checkpoint-dir", required=True, help="rotating checkpoints; kept after a failure")
    add_annotation_argument(parser, "the folder of the binarized train/valid files (<split>.NAME.bin) of a source annotation the model reads")
    parser.add_argument("--threads", type=int, help="CPU threads (overrides the settings' value)")
    parser.add_argument("--init", help="trained model file to warm-start from (fresh optimizer and schedule)")
    parser.add_argument("--tensorboard", help="TensorBoard run folder of this training's scalars (board.py)")
    parser.add_argument("--out", required=True, help="final model file")
    parser.add_argument("--curve", required=True, help="training curve TSV")


def run_train(args) -> None:
    try:
        model_options, settings = json.loads(args.model), Settings.from_dict(json.loads(args.settings))
    except json.JSONDecodeError as err:
        raise InputError(f"--model/--settings is not valid JSON: {err}") from err
    if args.threads:
        settings.threads = args.threads
    annotations = annotation_paths(args.annotation)
    if missing := sorted(set(configure(model_options).extra_inputs) - set(annotations)):
        raise InputError(f"the model reads {', '.join(missing)}: give --annotation NAME=DIR for each")
    trainer = Trainer(Corpus(args.prepared, annotations), model_options, settings,
                      args.checkpoint_dir, init=args.init, tensorboard=args.tensorboard)
    if not trainer.resume():
        log.info("starting %s in %s", f"from {args.init}" if args.init else "from scratch", args.checkpoint_dir)
    try:
        trainer.train()
    except (Interrupted, Diverged) as err:  # every rank stops at the same step: all of them get here
        leave(trainer, f"nmtrepro train: {err}")
    if trainer.skipped:
        log.warning("%d updates were skipped for a non-finite loss or gradient", trainer.skipped)
    if trainer.overflows:
        log.info("%d fp16 updates were skipped while the loss scale backed off", trainer.overflows)
    if any(trainer.oom.values()):
        log.warning("out of memory: %d micro-batches were split in two, %d sentences skipped",
                    trainer.oom["splits"], trainer.oom["skipped"])
    if trainer.rank == 0:
        trainer.write_outputs(args.out, args.curve)
    leave(trainer)


def leave(trainer: Trainer, failure: str | None = None) -> None:
    """End the training command, every rank together (`Trainer.close`): return, or exit with `failure`.

    A rank of a multi-process run then leaves at once (`os._exit`), its logs flushed and everything it
    writes already written, without the interpreter's teardown: there gloo's process groups die in
    their destructors. Seen here: a rank hung for good when the DDP reducer's release freed the last
    group, whose destructor, holding the GIL, joined a worker thread that waited for the GIL to free the
    barrier's tensors (tests/test_distributed.py's SIGUSR1 test); another rank aborted at exit with
    "terminate called without an active exception" (the smoke run)."""
    trainer.close()
    if trainer.world == 1:
        if failure:
            raise SystemExit(failure)
        return
    if failure:
        print(failure, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failure else 0)
