"""The configured models as the workflow's parse needs them, without torch: each family's options, and
each model's weight shapes and extra inputs, built once on the meta device and kept in the user's cache.

A Snakemake run parses the workflow once, and so does every dry run, cluster job and test: torch's import
(~1.5 s) and the meta device's first op of a Python kernel (torch._dynamo's import, ~1.2 s) were half
of each parse, which resolves the same few dozen models every time.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path

from ..core.files import write_json


def extra_inputs(options: dict) -> list[str]:
    """What the model of these (buildable) options reads beside the source (its config's `extra_inputs`)."""
    return meta_shapes(json.dumps(options, sort_keys=True))["inputs"]


@functools.cache
def family_options() -> dict[str, list[str]]:
    """The option names of each model family (models.REGISTRY's config classes), cached as builds are."""
    def read() -> dict[str, list[str]]:
        from ..models import REGISTRY, option_names

        return {family: sorted(option_names(family)) for family in REGISTRY}

    return cached("families", read)


@functools.lru_cache(maxsize=None)
def meta_shapes(options: str) -> dict:
    """{"shapes": {weight: shape}, "inputs": its config's `extra_inputs`} of the model that these options
    (JSON) build on the meta device, or {"error": why} where its family refuses them (a ValueError)."""
    def build() -> dict:
        import torch

        from ..models import build_model, configure

        spec = json.loads(options)
        try:
            with torch.device("meta"):
                model = build_model({**spec, "src_vocab": 8, "tgt_vocab": 8})
        except ValueError as err:
            return {"error": str(err)}
        return {"shapes": {name: list(value.shape) for name, value in model.state_dict().items()},
                "inputs": list(configure(spec).extra_inputs)}

    return cached(options, build)


def cached(key: str, compute):
    """`compute()` (JSON), kept in the user's cache (`$XDG_CACHE_HOME`, else ~/.cache) under `key`, torch's
    version and the sources (`_sources_digest`), so that a change to a family (or to anything it
    imports) computes afresh."""
    digest = hashlib.sha256(f"{_sources_digest()}|{importlib.metadata.version('torch')}|{key}".encode())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = root / "nmtrepro" / "config-checks" / f"{digest.hexdigest()[:32]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, value)
    except OSError:  # a read-only home: the next parse computes again
        pass
    return value


def _sources_digest() -> str:
    """The package's sources, with any module of it loaded from elsewhere and any folder added to a
    registry's path (a user's own family or annotation, as tests/test_annotations.py registers one)."""
    import nmtrepro.data

    files = set(_package_files())
    files |= {Path(module.__file__) for name, module in list(sys.modules.items())
              if name.startswith("nmtrepro.") and getattr(module, "__file__", None)}
    for folder in nmtrepro.data.__path__:
        files |= set(Path(folder).glob("*.py"))
    return _digest(tuple(sorted(files)))


@functools.cache
def _package_files() -> tuple[Path, ...]:
    """The package's own sources, listed once a process (the walk costs ~1 ms, and a parse asks ~70 times)."""
    return tuple(Path(__file__).parents[1].rglob("*.py"))


@functools.lru_cache(maxsize=None)
def _digest(files: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()
