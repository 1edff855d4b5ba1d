"""Training settings (config `scales.<scale>.train`, a model size's and a paper's regime over them): their
defaults, types and the rules between them, in one place that imports nothing heavy.

The workflow reads every training's settings through `Settings` as it loads (study/config.py), so a misspelt
key, a value of the wrong type or a combination that cannot run (`fast: graphs` without `buckets: true`)
fails `snakemake -n`, naming the key, and not the training job after hours of preprocessing; the trainer
reads the same class from the JSON of its `--settings`. The config schema
(workflow/schemas/config.schema.yaml) describes each key for the config's reader and fills in the
defaults that the training command is given; tests/test_settings.py holds its keys and defaults to these.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Literal, Union, get_args, get_origin, get_type_hints

from ..core.files import InputError

AUTO_START = 4096  # max_tokens auto: the papers' micro-batch, the smallest size it picks, and all it takes off a GPU
# Settings a rerun may change and still resume: where and how fast it runs (threads, device, the fast
# path, attention's kernels; threads and kernels change the float summation order, so the weights then
# match an uninterrupted run only closely; device and fast also draw other dropout masks) and
# how long (a longer max_updates or max_minutes extends the run exactly: the schedule does not depend
# on them). A max_updates below the checkpoint's step starts afresh. Every other setting changes
# the weights or the checkpoints kept, so a run with another value is another run.
RERUN_FREE = ("threads", "device", "max_minutes", "max_updates", "fast", "cudnn_attention")

# What a value's type alone does not say: (the key an error names, whether the settings keep the rule,
# what it needs).
RULES = (
    ("max_tokens", lambda s: s.max_tokens == "auto" or s.max_tokens > 0, "a positive number of tokens, or auto"),
    ("fast", lambda s: s.fast != "graphs" or s.buckets, "replays a few fixed shapes, so it needs buckets: true"),
)


@dataclass
class Settings:
    """Training settings; defaults are paper A's. Each field's type is what a value must be (`from_dict`)."""
    max_updates: int = 100_000
    max_minutes: float = 0.0        # also stop after this much training time (0: no limit; not deterministic)
    max_tokens: int | Literal["auto"] = 4096  # padded tokens per forward/backward batch; auto: what the GPU
                                    # holds, at least AUTO_START (memory.py)
    update_tokens: int = 25_000     # accumulate batches until they hold at least this many target tokens
    lr: float = 4.94e-4             # peak learning rate after warmup (Base: 512^-0.5 * 8000^-0.5)
    warmup: int = 8000
    schedule: Literal["inverse_sqrt", "constant"] = "inverse_sqrt"  # after warmup (schedule.SCHEDULES)
    label_smoothing: float = 0.1
    clip_norm: float = 0.0          # 0: no clipping
    save_every: int = 1500
    keep_last: int = 5
    keep_steps: list[int] = field(default_factory=list)  # checkpoints also kept past the rotation: the
                                    # averaging windows of shorter budgets (study/config.py, the scale's `budgets`)
    log_every: int = 100
    seed: int = 1
    threads: int = 0                # 0: torch's default
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # bf16 or fp16: autocast (runtime.resolve_precision)
    buckets: bool = False           # pad training batches to a few lengths (batching.bucket_length): other batches
    fast: Literal["off", "loss", "compile", "graphs"] = "off"  # loss: the loss's passes over the logits compiled,
                                    # the rest eager (a CPU's fastest) | compile: the step compiled once, its shapes
                                    # dynamic | graphs: and replayed as CUDA graphs over fixed shapes, needs buckets
    cudnn_attention: bool = False   # GPU: SDPA may take cuDNN's attention kernels (runtime.cuda_defaults)
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @classmethod
    def from_dict(cls, values: dict, where: str = "train setting ") -> Settings:
        """The settings `values` sets, the others at their defaults. An InputError names the first key
        that is unknown, has a value of another type or breaks a rule (`RULES`), after `where` (the
        config passes the key's path, `config: scales.ci.train.`)."""
        kinds = get_type_hints(cls)
        unknown = sorted(set(values) - set(kinds))
        if unknown:
            raise InputError(f"{where}{unknown[0]} is not defined; known: {', '.join(kinds)}")
        for key, value in values.items():
            if not _fits(value, kinds[key]):
                raise InputError(f"{where}{key} = {value!r}: expected {_describe(kinds[key])}")
        settings = cls(**values)
        for key, holds, needs in RULES:
            if not holds(settings):
                raise InputError(f"{where}{key} = {getattr(settings, key)!r}: {needs}")
        return settings


UNIONS = (Union, types.UnionType)


def _fits(value, kind) -> bool:
    """Whether `value` (as YAML or JSON reads it) is of the field type `kind`: an integer is a number,
    a boolean is no integer."""
    if get_origin(kind) is Literal:
        return isinstance(value, str) and value in get_args(kind)
    if get_origin(kind) in UNIONS:
        return any(_fits(value, option) for option in get_args(kind))
    if get_origin(kind) is list:
        return isinstance(value, list) and all(_fits(item, get_args(kind)[0]) for item in value)
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


def _describe(kind) -> str:
    if get_origin(kind) is Literal:
        return " or ".join(map(repr, get_args(kind)))
    if get_origin(kind) in UNIONS:
        return " or ".join(map(_describe, get_args(kind)))
    if get_origin(kind) is list:
        return f"a list, each {_describe(get_args(kind)[0])}"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[kind]

