"""Training settings (training/settings.py): one class of defaults, types and rules that the trainer
reads and the workflow checks as it loads, so that a bad setting fails the dry run naming its key."""
from __future__ import annotations

import copy
import re
from dataclasses import asdict
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
import yaml

from nmtrepro.study.config import experiments, load, validate
from nmtrepro.core.files import InputError
from nmtrepro.core.runtime import PRECISIONS
from nmtrepro.training.schedule import SCHEDULES
from nmtrepro.training.settings import Settings

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


@pytest.mark.parametrize("values, message", [
    ({"warmpu": 3}, "train setting warmpu is not defined; known: max_updates, "),
    ({"max_updates": 1.5}, "train setting max_updates = 1.5: expected an integer"),
    ({"save_every": True}, "train setting save_every = True: expected an integer"),
    ({"lr": "fast"}, "train setting lr = 'fast': expected a number"),
    ({"buckets": "yes"}, "train setting buckets = 'yes': expected true or false"),
    ({"precision": "fp8"}, "train setting precision = 'fp8': expected 'fp32' or 'bf16' or 'fp16'"),
    ({"max_tokens": "big"}, "train setting max_tokens = 'big': expected an integer or 'auto'"),
    ({"max_tokens": 0}, "train setting max_tokens = 0: a positive number of tokens, or auto"),
    ({"fast": "graphs"}, "train setting fast = 'graphs': replays a few fixed shapes, so it needs buckets: true"),
])
def test_a_bad_setting_is_named_with_what_it_must_be(values, message):
    with pytest.raises(InputError, match=re.escape(message)):
        Settings.from_dict(values)


def test_settings_read_what_yaml_and_json_give_and_default_the_rest():
    settings = Settings.from_dict({"max_minutes": 0, "lr": 1, "max_tokens": "auto", "fast": "graphs", "buckets": True})
    assert (settings.max_minutes, settings.lr, settings.max_tokens) == (0, 1, "auto")
    assert settings.warmup == Settings().warmup == 8000 and settings.schedule == "inverse_sqrt"


def test_the_schema_describes_the_settings_the_trainer_reads():
    """The schema fills in the defaults the training command is given: the same keys, defaults and
    choices as Settings, whose choices are the schedules and precisions that the trainer runs."""
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))["$defs"]["scale"]["properties"]["train"]
    defaults, kinds = asdict(Settings()), get_type_hints(Settings)
    assert set(schema["properties"]) == set(defaults)
    for key, spec in schema["properties"].items():
        assert spec.get("default", defaults[key]) == defaults[key], key
        assert tuple(spec.get("enum", get_args(kinds[key]))) == get_args(kinds[key]), key
    assert get_args(kinds["schedule"]) == tuple(SCHEDULES) and get_args(kinds["precision"]) == PRECISIONS


def test_a_bad_train_setting_fails_loading_the_config_naming_the_scale_or_the_experiment():
    """A rule between keys the schema cannot see, and a size's override, which it does not type."""
    config = load(REPO / "config.yaml")[0]
    validate(config, SCHEMA)
    graphs = copy.deepcopy(config)
    graphs["scales"]["tiny"]["train"]["fast"] = "graphs"
    with pytest.raises(InputError, match=re.escape("config: scales.tiny.train.fast = 'graphs': replays")):
        experiments({**graphs, "scale": "ci"})
    typo = copy.deepcopy(config)
    typo["scales"]["paper"]["by_size"]["big"]["train"]["buckets"] = "yes"
    with pytest.raises(InputError, match=r"config: experiments\.big_en_de \(scales\.paper\.train with its size's.*\): "
                                         r"train setting buckets = 'yes': expected true or false"):
        experiments({**typo, "scale": "paper"})
