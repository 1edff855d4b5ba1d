"""What the workflow's parse and its light jobs import: a Snakemake run parses the workflow once and every
dry run, cluster job and test does again, and a light job (a table, a claims page, a significance test)
is mostly its imports. torch costs ~1.5 s, torch._dynamo (which the meta device's first Python kernel
imports) ~1.2 s more, scipy.stats ~1 s."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmtrepro.study import config_checks, meta_models
from nmtrepro.core.files import InputError

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "scipy.stats")

RESOLVE = f"""
import sys
from nmtrepro.study.config import experiments, load, validate
from nmtrepro.data.annotations import registry
for scale in ("ci", "paper"):
    config, _ = load({str(REPO / "config.yaml")!r}, [f"scale={{scale}}"])
    validate(config, {str(REPO / "workflow/schemas/config.schema.yaml")!r})
    for experiment in experiments(config).values():
        experiment.annotations
registry()
import nmtrepro.analyses, nmtrepro.analyses.lingeval, nmtrepro.reporting.claims, nmtrepro.reporting.report
import nmtrepro.reporting.across_scales, nmtrepro.reporting.landing
import nmtrepro.evaluation.significance
print(" ".join(name for name in {HEAVY!r} if name in sys.modules))
"""


def loaded_after(code: str, cache: Path) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


def test_the_parse_and_the_light_commands_import_no_torch_once_the_model_checks_are_cached(tmp_path):
    assert loaded_after(RESOLVE, tmp_path) == "torch"   # the first resolves build the models on the meta device
    assert loaded_after(RESOLVE, tmp_path) == ""        # every later one reads their shapes from the cache


def test_a_refused_model_is_refused_again_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    options = {"family": "transformer", "d_model": 30, "ffn": 64, "heads": 4, "encoder_layers": 1,
               "decoder_layers": 1, "dropout": 0.1}
    for _ in range(2):
        meta_models.meta_shapes.cache_clear()
        with pytest.raises(InputError, match="config: models.odd: .*divisible"):
            config_checks.buildable("odd", options)
    assert len(list(tmp_path.rglob("*.json"))) == 1


def test_an_edited_source_is_a_new_cache_key(tmp_path, monkeypatch):
    """The key covers the package's sources and any module of it loaded from elsewhere (a user's family)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    before = meta_models._sources_digest()
    plugin = tmp_path / "plugin.py"
    plugin.write_text("X = 1\n")
    module = type(sys)("nmtrepro.data.plugin_for_the_key")
    module.__file__ = str(plugin)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert meta_models._sources_digest() != before
